/**
 * Operator accounts on a real service (docs/operations.md, "Accounts and roles"): an admin creates an
 * account whose token, shown once, works as soon as the answer arrives and names its person; tokens
 * expire by the service's clock, rotate and are revoked; a disabled account is refused at once; emails
 * are unique; every answer matches the admin API's OpenAPI document, and no token, hash or email is
 * logged or stored in plaintext.
 */
import test, { type ExecutionContext } from 'ava';
import { hashApiKey, OPERATOR_TOKEN_PATTERN } from '../../application/credentials.ts';
import { manualClock } from '../../domain/clock.ts';
import type { ReadStore } from '../../projections/read-store.ts';
import { type Json, problem } from '../support/admin-answers.ts';
import { startService, type TestService } from '../support/service.ts';

const A = '/admin/v1';
const DAY = 86_400_000;
const START = '2026-03-01T10:00:00.000Z';

/** An admin API call with `token`, its answer checked against the admin API's OpenAPI document. */
async function as(s: TestService, token: string, method: string, url: string, body?: unknown, headers = {}) {
  return s.partnerCall<Json>(A, method, url, token, body, headers);
}

/** Creates an account as the bootstrap admin; its token and record. */
async function createAccount(t: ExecutionContext, s: TestService, body: Json) {
  const res = await as(s, s.token, 'POST', '/operators', body);
  t.is(res.status, 201, JSON.stringify(res.body));
  return { operator: res.body.operator as Json, token: res.body.operator_token as string, answer: res };
}

const meStatus = async (s: TestService, token: string) =>
  (await fetch(`${s.base}${A}/me`, { headers: { authorization: `Bearer ${token}` } })).status;

test('an admin creates an account: its token is shown once, works at once and names the person', async (t) => {
  const clock = manualClock(START);
  const s = await startService(t, { clock });
  const { operator, token, answer } = await createAccount(t, s, {
    name: '  Ana Lee ',
    email: ' Ana.Lee@Example.COM ',
    role: 'auditor',
  });
  t.regex(token, OPERATOR_TOKEN_PATTERN);
  t.is(answer.headers.get('location'), `${A}/operators/${operator.operator_id}`);
  t.like(operator, { name: 'Ana Lee', email: 'ana.lee@example.com', role: 'auditor', enabled: true });
  t.deepEqual(operator.tokens, [
    {
      token_id: operator.tokens[0].token_id,
      token_prefix: token.slice(0, 11),
      status: 'active',
      issued_at: START,
      expires_at: new Date(Date.parse(START) + 90 * DAY).toISOString(),
      revoked_at: null,
    },
  ]);

  // Who am I: the person, by the token the answer showed (no wait, no retry).
  const me = await as(s, token, 'GET', '/me');
  t.deepEqual(me.body, {
    operator: {
      operator_id: operator.operator_id,
      name: 'Ana Lee',
      role: 'auditor',
      token_id: operator.tokens[0].token_id,
    },
  });
  const bootstrap = (await as(s, s.token, 'GET', '/me')).body.operator;
  t.like(bootstrap, { operator_id: 'bootstrap', name: 'bootstrap token', role: 'admin' });
  // A fingerprint of the token, never the token: a session it opened ends when it is replaced.
  t.regex(bootstrap.token_id, /^bootstrap:[0-9a-f]{16}$/);

  // The account's events name their actor; the token is stored as its hash only.
  const inspect = await s.openStore();
  const stream = await inspect.readStream(`operator-${operator.operator_id}`);
  t.deepEqual(
    stream.map((e) => [e.type, e.metadata.actor]),
    [
      ['OperatorAccountCreated', { type: 'operator', id: 'bootstrap' }],
      ['OperatorTokenIssued', { type: 'operator', id: 'bootstrap' }],
    ],
  );
  t.is((stream[1].data as Json).token_hash, hashApiKey(token));
  const everything = JSON.stringify(await inspect.readAll({ maxCount: 10_000 }));
  t.false(everything.includes(token), 'the token is in no event');
  t.false(s.logs().includes(token), 'the token is never logged');
  t.false(s.logs().toLowerCase().includes('ana.lee@example.com'), 'the email is never logged');

  // The account as an admin sees it, never a token or its hash.
  const shown = await as(s, s.token, 'GET', `/operators/${operator.operator_id}`);
  t.is(shown.headers.get('etag'), '"1"');
  t.deepEqual(shown.body.operator, operator);
  t.false(JSON.stringify(shown.body).includes(hashApiKey(token)));
});

test('tokens expire by the clock, rotate and are revoked; each change holds from its answer on', async (t) => {
  const clock = manualClock(START);
  const s = await startService(t, { clock });
  const { operator, token: first } = await createAccount(t, s, {
    name: 'Sam Ortiz',
    email: 'sam@example.com',
    role: 'operator',
    expires_in_days: 2,
  });
  const id = operator.operator_id as string;
  const firstId = operator.tokens[0].token_id as string;
  t.is(operator.tokens[0].expires_at, '2026-03-03T10:00:00.000Z');

  const issued = await as(s, s.token, 'POST', `/operators/${id}/tokens`, {
    expires_at: '2026-03-31T10:00:00Z',
  });
  t.is(issued.status, 201);
  const second = issued.body.operator_token as string;
  t.like(issued.body.token, { status: 'active', expires_at: '2026-03-31T10:00:00.000Z' });
  t.is(await meStatus(s, second), 200);

  // Past its expiry the first token is refused, and listed as expired.
  clock.advance(2 * DAY);
  t.is(await meStatus(s, first), 401);
  t.is(await meStatus(s, second), 200);
  const tokens = await as(s, s.token, 'GET', `/operators/${id}/tokens`);
  t.deepEqual(
    tokens.body.tokens.map((k: Json) => [k.token_id, k.status]),
    [
      [firstId, 'expired'],
      [issued.body.token.token_id, 'active'],
    ],
  );

  // Rotation: a new token works and the old one is refused, both as the answer arrives.
  const rotated = await as(
    s,
    s.token,
    'POST',
    `/operators/${id}/tokens/${issued.body.token.token_id}/rotate`,
    {},
  );
  t.is(rotated.status, 201, JSON.stringify(rotated.body));
  t.is(rotated.body.revoked_token_id, issued.body.token.token_id);
  const third = rotated.body.operator_token as string;
  t.not(third, second);
  t.is(await meStatus(s, second), 401);
  t.is(await meStatus(s, third), 200);
  t.is(rotated.body.token.expires_at, new Date(clock.now().getTime() + 90 * DAY).toISOString());

  // Revocation.
  const revoked = await as(s, s.token, 'DELETE', `/operators/${id}/tokens/${rotated.body.token.token_id}`);
  t.like(revoked.body.token, { status: 'revoked', revoked_at: clock.now().toISOString() });
  t.is(await meStatus(s, third), 401);
  await problem(
    t,
    await s.call('DELETE', `${A}/operators/${id}/tokens/${rotated.body.token.token_id}`),
    409,
    'token_revoked',
  );
  await problem(t, await s.call('DELETE', `${A}/operators/${id}/tokens/tok_unknown`), 404, 'token_not_found');

  // Expiry bounds: not both ways, not past 365 days, not in the past.
  const refusals: [Json, string][] = [
    [{ expires_in_days: 3, expires_at: '2026-04-01T00:00:00Z' }, 'validation_failed'],
    [{ expires_in_days: 366 }, 'validation_failed'],
    [{ expires_at: '2027-06-01T00:00:00Z' }, 'invalid_expiry'],
    [{ expires_at: '2026-01-01T00:00:00Z' }, 'invalid_expiry'],
    [{ expires_in_days: 1, note: 'x' }, 'validation_failed'],
  ];
  const inspect = await s.openStore();
  for (const [body, code] of refusals) {
    const before = await inspect.headPosition();
    const res = await as(s, s.token, 'POST', `/operators/${id}/tokens`, body);
    t.is(res.status, 422, JSON.stringify(body));
    t.is(res.body.code, code, JSON.stringify(res.body));
    t.is(await inspect.headPosition(), before, 'a refusal appends nothing');
  }
});

test('disabling refuses every token of the account at once; enabling brings them back; roles apply at once', async (t) => {
  const s = await startService(t);
  const { operator, token } = await createAccount(t, s, {
    name: 'Kim',
    email: 'kim@example.com',
    role: 'auditor',
  });
  const id = operator.operator_id as string;
  const write = () =>
    s.call('PUT', '/platform/v1/brands/7', { name: 'Kiva' }, { authorization: `Bearer ${token}` });

  await problem(t, await write(), 403, 'insufficient_role');
  const promoted = await as(s, s.token, 'PATCH', `/operators/${id}`, { role: 'operator' });
  t.is(promoted.body.operator.role, 'operator');
  t.is((await write()).status, 201, 'the new role holds at the next request');

  const disabled = await as(s, s.token, 'PATCH', `/operators/${id}`, { enabled: false });
  t.false(disabled.body.operator.enabled);
  t.is(await meStatus(s, token), 401);
  await problem(t, await s.call('POST', `${A}/operators/${id}/tokens`, {}), 409, 'operator_disabled');
  const enabled = await as(
    s,
    s.token,
    'PATCH',
    `/operators/${id}`,
    { enabled: true },
    { 'If-Match': `"${disabled.body.revision}"` },
  );
  t.is(enabled.status, 200);
  t.is(await meStatus(s, token), 200);

  // A stale If-Match, an unknown account, a bad role: refused.
  await problem(
    t,
    await s.call('PATCH', `${A}/operators/${id}`, { role: 'auditor' }, { 'If-Match': '"1"' }),
    412,
    'revision_mismatch',
  );
  await problem(
    t,
    await s.call('PATCH', `${A}/operators/00000000-0000-4000-8000-000000000000`, { role: 'auditor' }),
    404,
    'operator_not_found',
  );
  await problem(t, await s.call('PATCH', `${A}/operators/${id}`, { role: 'root' }), 422, 'validation_failed');

  // The events name who changed what.
  const stream = await (await s.openStore()).readStream(`operator-${id}`);
  t.deepEqual(
    stream.slice(2).map((e) => [e.type, e.metadata.actor.id]),
    [
      ['OperatorRoleChanged', 'bootstrap'],
      ['OperatorAccountDisabled', 'bootstrap'],
      ['OperatorAccountEnabled', 'bootstrap'],
    ],
  );
});

test('an admin account manages accounts but cannot demote or disable itself', async (t) => {
  const s = await startService(t);
  const admin = await createAccount(t, s, { name: 'Root Admin', email: 'root@example.com', role: 'admin' });
  const id = admin.operator.operator_id as string;
  await problem(
    t,
    await s.call(
      'PATCH',
      `${A}/operators/${id}`,
      { role: 'operator' },
      { authorization: `Bearer ${admin.token}` },
    ),
    409,
    'own_account',
  );
  await problem(
    t,
    await s.call(
      'PATCH',
      `${A}/operators/${id}`,
      { enabled: false },
      { authorization: `Bearer ${admin.token}` },
    ),
    409,
    'own_account',
  );
  // It creates an account, whose events name it as actor.
  const res = await as(s, admin.token, 'POST', '/operators', {
    name: 'Aud',
    email: 'aud@example.com',
    role: 'auditor',
  });
  t.is(res.status, 201);
  const stream = await (await s.openStore()).readStream(`operator-${res.body.operator.operator_id}`);
  t.deepEqual(stream[0].metadata.actor, { type: 'operator', id });
  // Another admin (the bootstrap token) may demote it.
  t.is(
    (await as(s, s.token, 'PATCH', `/operators/${id}`, { role: 'auditor' })).body.operator.role,
    'auditor',
  );
});

test('emails are unique whatever their case; bad input is a 422 naming the field and appends nothing', async (t) => {
  const s = await startService(t);
  const { operator } = await createAccount(t, s, { name: 'Lee', email: 'lee@example.com', role: 'auditor' });
  const inspect = await s.openStore();
  const before = await inspect.headPosition();
  const taken = await problem(
    t,
    await s.call('POST', `${A}/operators`, { name: 'Lee 2', email: 'LEE@Example.com', role: 'operator' }),
    409,
    'email_taken',
  );
  t.is(taken.operator_id, operator.operator_id);
  t.false(JSON.stringify(taken).toLowerCase().includes('lee@example.com'), 'the address is not echoed');
  for (const [body, field] of [
    [{ name: 'X', email: 'not-an-email', role: 'auditor' }, 'email'],
    [{ name: '', email: 'x@example.com', role: 'auditor' }, 'name'],
    [{ name: 'X', email: 'x@example.com', role: 'superuser' }, 'role'],
    [{ name: 'X', email: 'x@example.com' }, 'role'],
    [{ name: 'X', email: 'x@example.com', role: 'auditor', password: 'p' }, 'password'],
  ] as const) {
    const p = await problem(t, await s.call('POST', `${A}/operators`, body), 422, 'validation_failed');
    t.true(
      (p.errors as Json[]).some((e) => e.field === field),
      `${JSON.stringify(body)}: ${JSON.stringify(p.errors)}`,
    );
    t.false(JSON.stringify(p).includes('not-an-email'), 'the input is not echoed');
  }
  t.is(await inspect.headPosition(), before, 'refusals append nothing');
  t.false(s.logs().includes('not-an-email') || s.logs().includes('lee@example.com'));
});

test('GET /operators pages with limit, cursor and Link, filtered by role', async (t) => {
  const s = await startService(t);
  const ids: string[] = [];
  for (const [i, role] of ['auditor', 'operator', 'auditor', 'admin', 'auditor'].entries()) {
    ids.push(
      (await createAccount(t, s, { name: `P${i}`, email: `p${i}@example.com`, role })).operator.operator_id,
    );
  }
  const seen: string[] = [];
  let url = '/operators?limit=2';
  for (let page = 0; page < 5 && url; page++) {
    const res = await as(s, s.token, 'GET', url);
    seen.push(...res.body.operators.map((o: Json) => o.operator_id));
    const link = res.headers.get('link');
    t.is(link !== null, res.body.next_cursor !== null);
    url = res.body.next_cursor ? `/operators?limit=2&cursor=${res.body.next_cursor}` : '';
  }
  t.deepEqual(seen, [...ids].sort());
  const auditors = await as(s, s.token, 'GET', '/operators?role=auditor&limit=2');
  t.true(auditors.body.operators.every((o: Json) => o.role === 'auditor'));
  t.regex(auditors.headers.get('link') ?? '', /role=auditor/);
  await problem(t, await s.call('GET', `${A}/operators?cursor=bm90LWEtdXVpZA`), 400, 'invalid_cursor');
  await problem(t, await s.call('GET', `${A}/operators?sort=name`), 400, 'invalid_parameter');
});

test('an idempotent replay of a creation answers the first answer, without the token; its record names the person', async (t) => {
  const s = await startService(t);
  const admin = await createAccount(t, s, { name: 'Ida Admin', email: 'ida@example.com', role: 'admin' });
  const body = { name: 'Once', email: 'once@example.com', role: 'auditor' };
  const headers = { 'Idempotency-Key': 'create-once-1' };
  const first = await as(s, admin.token, 'POST', '/operators', body, headers);
  const replay = await as(s, admin.token, 'POST', '/operators', body, headers);
  t.is(first.status, 201);
  t.is(replay.status, 201);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.regex(first.body.operator_token, OPERATOR_TOKEN_PATTERN);
  t.is(replay.body.operator_token, null);
  t.deepEqual(replay.body.operator, first.body.operator);
  const all = await (await s.openStore()).readAll({ maxCount: 10_000 });
  t.false(JSON.stringify(all).includes(first.body.operator_token), 'the idempotency record holds no token');
  const records = all.filter((e) => e.streamId.startsWith('idempotency-'));
  t.true(records.length >= 2, 'the claim and the answer');
  for (const e of records)
    t.deepEqual(e.metadata.actor, { type: 'operator', id: admin.operator.operator_id });
});

/** A read store whose commits (the projector's writes) each take `ms` longer: a projector behind. */
function slowCommits(inner: ReadStore, ms: number): ReadStore {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'commit') {
        return async (commit: Parameters<ReadStore['commit']>[0]) => {
          await new Promise((r) => setTimeout(r, ms));
          return target.commit(commit);
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

test('a token works as soon as its answer arrives, and is refused as soon as its revocation answers, however slow the projector', async (t) => {
  const s = await startService(t, { wrapReadStore: (store) => slowCommits(store, 150) });
  const { operator, token } = await createAccount(t, s, {
    name: 'Quick',
    email: 'quick@example.com',
    role: 'auditor',
  });
  t.is(await meStatus(s, token), 200, 'no retry: the answer came once authentication could see the token');
  const issued = await as(s, s.token, 'POST', `/operators/${operator.operator_id}/tokens`, {});
  t.is(await meStatus(s, issued.body.operator_token), 200);
  await as(s, s.token, 'DELETE', `/operators/${operator.operator_id}/tokens/${issued.body.token.token_id}`);
  t.is(await meStatus(s, issued.body.operator_token), 401);
  await as(s, s.token, 'PATCH', `/operators/${operator.operator_id}`, { enabled: false });
  t.is(await meStatus(s, token), 401);
});

test("authenticating an account's token reads no event store: one read-model lookup", async (t) => {
  let reads = 0;
  const s = await startService(t, {
    wrapStore: (store) =>
      new Proxy(store, {
        get(target, prop) {
          const value = Reflect.get(target, prop);
          if (typeof value !== 'function') return value;
          if (prop === 'readStream' || prop === 'readAll' || prop === 'headPosition') {
            return (...args: unknown[]) => {
              reads += 1;
              return value.apply(target, args);
            };
          }
          return value.bind(target);
        },
      }),
  });
  const { operator, token } = await createAccount(t, s, {
    name: 'Cheap',
    email: 'cheap@example.com',
    role: 'auditor',
  });
  await new Promise((r) => setTimeout(r, 100));
  const before = reads;
  for (let i = 0; i < 20; i++) t.is(await meStatus(s, token), 200);
  t.is(reads - before, 0, 'no event store read for 20 authenticated requests');
  // The control: a route that does read the store is counted.
  await as(s, s.token, 'GET', `/operators/${operator.operator_id}`);
  t.true(reads > before);
});
