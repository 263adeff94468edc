/**
 * A console session stands for a person as they stand now (docs/operations.md, "The console"): every
 * request asks the authenticator's `current()`, so a revoked token or a disabled account ends the
 * session and a role change applies at the next request. The store keeps hashes only, and ended
 * sessions do not pile up. Tested through the session routes and `operatorAuth`, with an authenticator
 * of a few accounts that the test changes as an administrator would.
 */
import type { AddressInfo } from 'node:net';
import test, { type ExecutionContext } from 'ava';
import { createSessionRouter } from '../../api/admin-session.ts';
import {
  createHttpApp,
  createMetricsRegistry,
  createReadiness,
  createRouter,
  routesOf,
  useEach,
} from '../../api/http.ts';
import { operatorAuth, operatorOf } from '../../api/operator-auth.ts';
import { CONSOLE_SESSIONS, ConsoleSessions } from '../../application/console-sessions.ts';
import type { OperatorAuthenticator, OperatorPrincipal } from '../../application/operator-principal.ts';
import { createLogger } from '../../cli/logger.ts';
import { manualClock } from '../../domain/clock.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

const { createServer } = process.getBuiltinModule('node:http');

/** Accounts an administrator changes: a token per person, revocable; roles changeable; accounts disabled. */
function accounts() {
  const people = new Map<string, OperatorPrincipal & { enabled: boolean; revoked: boolean }>([
    [
      'ana',
      {
        operator_id: 'ana',
        name: 'Ana',
        role: 'operator',
        token_id: 'tok-ana',
        enabled: true,
        revoked: false,
      },
    ],
    [
      'bo',
      { operator_id: 'bo', name: 'Bo', role: 'auditor', token_id: 'tok-bo', enabled: true, revoked: false },
    ],
  ]);
  const principal = ({
    enabled: _e,
    revoked: _r,
    ...p
  }: OperatorPrincipal & { enabled: boolean; revoked: boolean }) => p;
  const authenticator: OperatorAuthenticator = {
    async authenticate(token) {
      const person = people.get(token.replace(/^token-of-/, ''));
      return person?.enabled && !person.revoked ? principal(person) : undefined;
    },
    async current(p) {
      const person = people.get(p.operator_id);
      return person?.enabled && !person.revoked && person.token_id === p.token_id
        ? principal(person)
        : undefined;
    },
  };
  return { people, authenticator };
}

async function startApp(t: ExecutionContext) {
  const clock = manualClock('2026-03-01T09:00:00.000Z');
  const { people, authenticator } = accounts();
  const store = openSqliteReadStore(':memory:');
  t.teardown(() => store.close());
  const sessions = await ConsoleSessions.open(store, authenticator, clock, {
    absoluteMs: 8 * 3_600_000,
    idleMs: 30 * 60_000,
  });
  const app = createHttpApp({
    logger: createLogger('warn', { write: () => {} }),
    registry: createMetricsRegistry(),
    readiness: createReadiness(),
    role: 'all',
  });
  app.use(routesOf(createSessionRouter({ operators: authenticator, sessions, clock })));
  // A route behind operatorAuth that answers whom it let in.
  const probe = createRouter({ prefix: '/admin/v1/whoami' });
  useEach(probe, operatorAuth(authenticator, sessions));
  probe.get('/', (ctx) => {
    ctx.body = operatorOf(ctx);
  });
  app.use(routesOf(probe));
  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const signIn = async (who: string) => {
    const res = await fetch(`${base}/admin/v1/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: `token-of-${who}` }),
    });
    t.is(res.status, 201);
    const body = (await res.json()) as { csrf_token: string };
    return { cookie: res.headers.getSetCookie()[0].split(';')[0], csrf: body.csrf_token };
  };
  const get = (cookie: string, path = '/admin/v1/whoami') => fetch(`${base}${path}`, { headers: { cookie } });
  const stored = async () => (await store.collection(CONSOLE_SESSIONS)).find({});
  return { people, clock, signIn, get, stored };
}

test("a revoked token or a disabled account ends the person's sessions at their next request", async (t) => {
  const app = await startApp(t);
  const ana = await app.signIn('ana');
  const bo = await app.signIn('bo');
  t.is((await app.get(ana.cookie)).status, 200);
  t.is((await app.get(bo.cookie)).status, 200);

  const person = (id: string) => app.people.get(id) as { revoked: boolean; enabled: boolean };
  person('ana').revoked = true;
  person('bo').enabled = false;
  for (const cookie of [ana.cookie, bo.cookie]) {
    t.is((await app.get(cookie)).status, 401);
    t.is(
      ((await (await app.get(cookie, '/admin/v1/session')).json()) as { operator: unknown }).operator,
      null,
    );
  }
  // Ended for good: the session is gone from the store, so re-enabling the account does not revive it.
  t.deepEqual(await app.stored(), []);
  person('bo').enabled = true;
  t.is((await app.get(bo.cookie)).status, 401);
});

test('a role changed meanwhile applies at the next request of a session', async (t) => {
  const app = await startApp(t);
  const ana = await app.signIn('ana');
  t.is(((await (await app.get(ana.cookie)).json()) as OperatorPrincipal).role, 'operator');
  (app.people.get('ana') as OperatorPrincipal).role = 'auditor';
  t.deepEqual(await (await app.get(ana.cookie)).json(), {
    operator_id: 'ana',
    name: 'Ana',
    role: 'auditor',
    token_id: 'tok-ana',
  });
  const session = (await (await app.get(ana.cookie, '/admin/v1/session')).json()) as { operator: unknown };
  t.deepEqual(session.operator, { operator_id: 'ana', name: 'Ana', role: 'auditor', token_id: 'tok-ana' });
});

test('the store keeps hashes of the session id and CSRF token only, and drops ended sessions at the next sign-in', async (t) => {
  const app = await startApp(t);
  const first = await app.signIn('ana');
  await app.signIn('bo');
  const text = JSON.stringify(await app.stored());
  t.false(text.includes(first.cookie.split('=')[1]), 'no session id');
  t.false(text.includes(first.csrf), 'no CSRF token');
  t.is((await app.stored()).length, 2);

  app.clock.advance(31 * 60_000);
  await app.signIn('ana');
  t.is((await app.stored()).length, 1, 'the two idle ones are gone');
});
