/**
 * Operator tokens guard `/platform` and `/admin`: the request's person, with their role, goes into
 * `ctx.state.operator` (docs/operations.md, "Accounts and roles"). Where console sessions are given,
 * a request without `Authorization` may come with the console's session cookie instead
 * (docs/operations.md, "The console").
 */
import type { Next } from 'koa';
import type { ConsoleSessions } from '../application/console-sessions.ts';
import {
  isBootstrap,
  type OperatorAuthenticator,
  type OperatorPrincipal,
  operatorActor,
} from '../application/operator-principal.ts';
import type { Actor } from '../eventstore/port.ts';
import { sessionIdOf, sessionOf } from './console-session.ts';
import { type AppContext, HttpProblem } from './http.ts';

export function bearerToken(ctx: AppContext): string | undefined {
  const header = ctx.get('Authorization');
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

type OperatorState = { operator?: OperatorPrincipal };

/**
 * A bearer token (the CLI, integrations) or, with `sessions`, the console's session cookie: the
 * session's person as `current()` says they stand now, and a write needs its CSRF token. A request
 * with an `Authorization` header is judged by that header alone.
 */
export function operatorAuth(operators: OperatorAuthenticator, sessions?: ConsoleSessions) {
  return async function requireOperator(ctx: AppContext, next: Next): Promise<void> {
    const sessionId = sessions && !ctx.get('Authorization') ? sessionIdOf(ctx) : undefined;
    if (sessions && sessionId !== undefined) {
      (ctx.state as OperatorState).operator = (await sessionOf(ctx, sessions, sessionId)).operator;
      ctx.state.consoleSession = true;
      await next();
      return;
    }
    const token = bearerToken(ctx);
    const principal = token === undefined ? undefined : await operators.authenticate(token);
    if (principal === undefined) {
      throw new HttpProblem(401, {
        code: 'unauthorized',
        detail:
          token === undefined
            ? 'send an operator token as Authorization: Bearer <token>'
            : 'invalid operator token',
        headers: { 'WWW-Authenticate': 'Bearer realm="pds-operator"' },
      });
    }
    (ctx.state as OperatorState).operator = principal;
    await next();
  };
}

/** The person `operatorAuth` let in. */
export function operatorOf(ctx: AppContext): OperatorPrincipal {
  const principal = (ctx.state as OperatorState).operator;
  if (!principal) throw new Error('operatorOf: the route is not behind operatorAuth');
  return principal;
}

/** The actor of the events this request causes. */
export function requestActor(ctx: AppContext): Actor {
  return operatorActor(operatorOf(ctx));
}

/**
 * Whose `Idempotency-Key` space a request uses: each person's own, so one person's retry never
 * replays another's answer (docs/write-side.md, "Idempotency"). The bootstrap token keeps the key
 * space all operators shared before there were accounts.
 */
export function personalKeySpace(api: 'operator' | 'platform') {
  return (ctx: AppContext): string => {
    const person = operatorOf(ctx);
    return isBootstrap(person) ? api : `${api}:${person.operator_id}`;
  };
}
