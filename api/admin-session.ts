/**
 * `/admin/v1/session`: the console's sign-in (an operator token exchanged for a session cookie), who
 * is signed in (and the session's CSRF token again, for a page reload), and sign-out, which ends the
 * session on the server (docs/operations.md, "The console"; docs/write-side.md, "Console sessions").
 */
import type Router from '@koa/router';
import { z } from 'zod';
import type { ConsoleSession, ConsoleSessions } from '../application/console-sessions.ts';
import type { OperatorAuthenticator } from '../application/operator-principal.ts';
import type { Clock } from '../domain/clock.ts';
import { ADMIN_BASE } from './admin-support.ts';
import {
  clearedSessionCookie,
  sessionCookie,
  sessionEnded,
  sessionIdOf,
  sessionOf,
} from './console-session.ts';
import { type AppState, createRouter, HttpProblem, securityHeaders, useEach } from './http.ts';
import { parseBody } from './validation.ts';
import { jsonBody } from './write-support.ts';

export interface SessionRouteDeps {
  operators: OperatorAuthenticator;
  sessions: ConsoleSessions;
  clock: Clock;
}

export const SESSION_PATH = `${ADMIN_BASE}/session`;

/** A bearer token's characters (RFC 6750): anything else is no token, and a 422 names the field. */
const signInBody = z.strictObject({
  token: z
    .string()
    .max(1024)
    .regex(/^[A-Za-z0-9\-._~+/]+=*$/, 'expected a bearer token: A-Z a-z 0-9 - . _ ~ + / then = padding'),
});

/** What the console learns of its session: never the session id, which stays in the cookie. */
function answer(session: ConsoleSession) {
  const { operator } = session;
  return {
    operator: { id: operator.operator_id, name: operator.name, role: operator.role },
    csrf_token: session.csrf_token,
    expires_at: session.expires_at.toISOString(),
    idle_expires_at: session.idle_expires_at.toISOString(),
  };
}

export function createSessionRouter(deps: SessionRouteDeps): Router<AppState> {
  const { operators, sessions, clock } = deps;
  const router = createRouter({ prefix: SESSION_PATH });
  // The answers carry the CSRF token: the admin API's headers, no-store among them.
  useEach(router, securityHeaders, jsonBody());

  // Sign-in. A failure says only that the token was refused, as a bearer token's does, and stores nothing.
  router.post('/', async (ctx) => {
    const { token } = parseBody(ctx, signInBody);
    const operator = await operators.authenticate(token);
    if (operator === undefined) {
      throw new HttpProblem(401, {
        code: 'unauthorized',
        detail: 'invalid operator token',
        headers: { 'WWW-Authenticate': 'Bearer realm="pds-operator"' },
      });
    }
    // The browser's earlier session, if any, ends: a session id is never carried across a sign-in.
    const earlier = sessionIdOf(ctx);
    if (earlier !== undefined) await sessions.end(earlier);
    const session = await sessions.start(operator);
    ctx.set('Set-Cookie', sessionCookie(ctx, session.id, session.expires_at, clock.now()));
    ctx.set('Location', SESSION_PATH);
    ctx.status = 201;
    ctx.body = answer(session);
  });

  // Who is signed in: nobody is an answer too (the page asks as it loads, signed in or not), and a
  // cookie naming no live session is cleared.
  router.get('/', async (ctx) => {
    const id = sessionIdOf(ctx);
    const session = id === undefined ? undefined : await sessions.resume(id);
    if (session !== undefined) {
      ctx.body = answer(session);
      return;
    }
    if (id !== undefined) ctx.set('Set-Cookie', clearedSessionCookie(ctx));
    ctx.body = { operator: null, csrf_token: null, expires_at: null, idle_expires_at: null };
  });

  // Sign-out: the session ends on the server, so the cookie is refused even if a copy of it survives.
  router.delete('/', async (ctx) => {
    const id = sessionIdOf(ctx);
    if (id === undefined) throw sessionEnded(ctx);
    await sessionOf(ctx, sessions, id); // 401 without a live session, 403 without its CSRF token
    await sessions.end(id);
    ctx.set('Set-Cookie', clearedSessionCookie(ctx));
    ctx.status = 204;
  });

  return router;
}
