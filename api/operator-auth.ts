/** The operator token guards `/platform` and `/admin`; compared in constant time. */
import type { Next } from 'koa';
import { matchesSecret } from '../application/credentials.ts';
import { type AppContext, HttpProblem } from './http.ts';

export function bearerToken(ctx: AppContext): string | undefined {
  const header = ctx.get('Authorization');
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

export function operatorAuth(operatorToken: string) {
  const isOperatorToken = matchesSecret(operatorToken);
  return async function requireOperator(ctx: AppContext, next: Next): Promise<void> {
    const token = bearerToken(ctx);
    if (token === undefined || !isOperatorToken(token)) {
      throw new HttpProblem(401, {
        code: 'unauthorized',
        detail:
          token === undefined
            ? 'send the operator token as Authorization: Bearer <token>'
            : 'invalid operator token',
        headers: { 'WWW-Authenticate': 'Bearer realm="pds-operator"' },
      });
    }
    await next();
  };
}
