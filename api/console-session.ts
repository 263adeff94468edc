/**
 * The console session as HTTP carries it (docs/operations.md, "The console"): the session id in a
 * cookie no page script can read (HttpOnly), sent only to `/admin` and only by this site's own pages
 * (SameSite=Strict), over TLS only when the browser came over TLS (Secure); every write a cookie
 * authenticates carries the session's CSRF token in `X-CSRF-Token`.
 */
import type { ConsoleSession, ConsoleSessions } from '../application/console-sessions.ts';
import { type AppContext, HttpProblem } from './http.ts';

export const SESSION_COOKIE = 'pds_console_session';
export const CSRF_HEADER = 'X-CSRF-Token';
/** The admin API, where the console's calls go; the page itself, `/console`, needs no credential. */
const COOKIE_PATH = '/admin';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Whether the browser reached the service over TLS: on a TLS socket, or through a proxy that ended
 * TLS and says so (`X-Forwarded-Proto: https`, `Forwarded: proto=https`; the first hop's, the
 * browser's). The header decides only whether the cookie is marked Secure, which a client can only
 * ask of its own cookie: a client lying here harms itself alone, so no proxy needs to be trusted.
 */
export function overTls(ctx: AppContext): boolean {
  // The app trusts no proxy (`app.proxy` is off), so `ctx.secure` means a TLS socket.
  if (ctx.secure) return true;
  const forwarded = ctx.get('X-Forwarded-Proto').split(',')[0].trim().toLowerCase();
  if (forwarded === 'https') return true;
  const first = ctx.get('Forwarded').split(',')[0];
  return /(?:^|;)\s*proto\s*=\s*"?https"?\s*(?:;|$)/i.test(first);
}

function cookie(ctx: AppContext, value: string, maxAgeSeconds: number, expires: Date): string {
  return [
    `${SESSION_COOKIE}=${value}`,
    `Path=${COOKIE_PATH}`,
    // Browsers go by Max-Age; Expires is for those that know only it.
    `Max-Age=${maxAgeSeconds}`,
    `Expires=${expires.toUTCString()}`,
    'HttpOnly',
    'SameSite=Strict',
    ...(overTls(ctx) ? ['Secure'] : []),
  ].join('; ');
}

/** `Set-Cookie` for a session id that lives until `expiresAt` (the session's absolute end). */
export function sessionCookie(ctx: AppContext, id: string, expiresAt: Date, now: Date): string {
  const seconds = Math.max(0, Math.floor((expiresAt.getTime() - now.getTime()) / 1000));
  return cookie(ctx, id, seconds, expiresAt);
}

/** `Set-Cookie` that makes the browser drop the session cookie. */
export function clearedSessionCookie(ctx: AppContext): string {
  return cookie(ctx, '', 0, new Date(0));
}

/** The session id the request's cookie holds, if any. */
export function sessionIdOf(ctx: AppContext): string | undefined {
  const header = ctx.get('Cookie');
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export const sessionEnded = (ctx: AppContext) =>
  new HttpProblem(401, {
    code: 'unauthorized',
    detail: 'the console session has ended (signed out, expired or no longer valid): sign in again',
    headers: { 'Set-Cookie': clearedSessionCookie(ctx), 'WWW-Authenticate': 'Bearer realm="pds-operator"' },
  });

/**
 * The live session the request's cookie names; 401 (the cookie cleared) when it names none, and 403
 * `csrf_token_invalid` for a write (POST, PUT, PATCH, DELETE) without the session's CSRF token.
 */
export async function sessionOf(
  ctx: AppContext,
  sessions: ConsoleSessions,
  id: string,
): Promise<ConsoleSession> {
  const session = await sessions.resume(id);
  if (session === undefined) throw sessionEnded(ctx);
  if (!SAFE_METHODS.has(ctx.method) && !session.acceptsCsrf(ctx.get(CSRF_HEADER))) {
    throw new HttpProblem(403, {
      code: 'csrf_token_invalid',
      detail: `a write with the console's session needs the session's CSRF token in ${CSRF_HEADER}`,
    });
  }
  return session;
}
