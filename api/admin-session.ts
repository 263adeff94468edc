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
import { isoDateTime } from '../domain/schemas.ts';
import { person, personOf } from './admin-operators.ts';
import { mountPublicAdminRoutes, type PublicAdminRoute, publicAdminRoute } from './admin-route-table.ts';
import { ADMIN_BASE } from './admin-support.ts';
import {
  CSRF_HEADER,
  clearedSessionCookie,
  SESSION_COOKIE,
  sessionCookie,
  sessionEnded,
  sessionIdOf,
  sessionOf,
} from './console-session.ts';
import { type AppState, createRouter, HttpProblem, securityHeaders, useEach } from './http.ts';
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
const consoleSession = z
  .object({
    operator: person,
    csrf_token: z
      .string()
      .describe(`Send it as \`${CSRF_HEADER}\` with every write the cookie authenticates.`),
    expires_at: isoDateTime.describe('When the session ends, however much it is used.'),
    idle_expires_at: isoDateTime.describe('When it ends unless used before.'),
  })
  .meta({ id: 'ConsoleSession' });
const noConsoleSession = z
  .object({ operator: z.null(), csrf_token: z.null(), expires_at: z.null(), idle_expires_at: z.null() })
  .meta({ id: 'NoConsoleSession' });

function answer(session: ConsoleSession): z.output<typeof consoleSession> {
  return {
    operator: personOf(session.operator),
    csrf_token: session.csrf_token,
    expires_at: session.expires_at.toISOString(),
    idle_expires_at: session.idle_expires_at.toISOString(),
  };
}

const setCookie = (description: string, required: boolean) => ({
  'Set-Cookie': { description: `\`${SESSION_COOKIE}\`: ${description}`, required },
});

/** Sign-in, who is signed in, sign-out: one table for their routes and the admin API's document. */
export function sessionRoutes(deps: SessionRouteDeps): PublicAdminRoute[] {
  const { operators, sessions, clock } = deps;
  // A failure says only that the token was refused, as a bearer token's does, and stores nothing.
  const signIn = publicAdminRoute({
    method: 'post',
    path: '/session',
    operationId: 'signIn',
    summary: 'Sign in to the console: an operator token for a session cookie',
    description:
      'The token goes out this once; the session comes back as an HttpOnly, SameSite=Strict cookie ' +
      '(Secure over TLS), and any session the browser had ends. A refused token is 401, whatever was wrong with it.',
    body: signInBody,
    response: {
      status: 201,
      description: 'The session: the person and its CSRF token.',
      schema: consoleSession,
      headers: {
        ...setCookie('the new session id (HttpOnly, SameSite=Strict, Path=/admin).', true),
        Location: { description: `\`${SESSION_PATH}\`.`, required: true },
      },
    },
    problems: [401],
    async handler(ctx, { body }) {
      const operator = await operators.authenticate(body.token);
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
    },
  });

  // Nobody signed in is an answer too (the page asks as it loads, signed in or not), and a cookie
  // naming no live session is cleared.
  const current = publicAdminRoute({
    method: 'get',
    path: '/session',
    operationId: 'getSession',
    summary: 'Who is signed in to the console',
    description:
      "The browser's live session (the person as they stand now, the CSRF token again, for a page " +
      'reload), or every field `null` without one.',
    session: 'optional',
    response: {
      status: 200,
      description: 'The session, or none.',
      schema: z.union([consoleSession, noConsoleSession]),
      headers: setCookie('cleared when the cookie names no live session.', false),
    },
    problems: [],
    async handler(ctx) {
      const id = sessionIdOf(ctx);
      const session = id === undefined ? undefined : await sessions.resume(id);
      if (session !== undefined) {
        ctx.body = answer(session);
        return;
      }
      if (id !== undefined) ctx.set('Set-Cookie', clearedSessionCookie(ctx));
      ctx.body = { operator: null, csrf_token: null, expires_at: null, idle_expires_at: null };
    },
  });

  // The session ends on the server, so the cookie is refused even if a copy of it survives.
  const signOut = publicAdminRoute({
    method: 'delete',
    path: '/session',
    operationId: 'signOut',
    summary: 'Sign out of the console',
    description:
      `The session ends on the server. 401 without a live session; 403 \`csrf_token_invalid\` without ` +
      `its CSRF token in \`${CSRF_HEADER}\`.`,
    session: 'required',
    response: {
      status: 204,
      description: 'Signed out.',
      headers: setCookie('cleared.', true),
    },
    problems: [401, 403],
    async handler(ctx) {
      const id = sessionIdOf(ctx);
      if (id === undefined) throw sessionEnded(ctx);
      await sessionOf(ctx, sessions, id); // 401 without a live session, 403 without its CSRF token
      await sessions.end(id);
      ctx.set('Set-Cookie', clearedSessionCookie(ctx));
      ctx.status = 204;
    },
  });

  return [signIn, current, signOut];
}

export function createSessionRouter(
  deps: SessionRouteDeps,
  routes: readonly PublicAdminRoute[] = sessionRoutes(deps),
): Router<AppState> {
  const router = createRouter({ prefix: SESSION_PATH });
  // The answers carry the CSRF token: the admin API's headers, no-store among them.
  useEach(router, securityHeaders, jsonBody());
  mountPublicAdminRoutes(router, routes);
  return router;
}
