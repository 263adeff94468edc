/**
 * Read model `operators` and the authentication that reads it
 * (docs/operations.md, "Accounts and roles"): a token document per token that may let its bearer in,
 * none for a revoked one or a disabled account, each carrying its account's current role and name; a
 * replayed batch changes nothing (a revoked token never comes back); and another API process,
 * projecting into its own read store, authenticates a person, follows their role, and refuses what is
 * revoked, disabled or expired.
 */
import test from 'ava';
import { createOperatorAuthenticator } from '../../api/operator-authenticator.ts';
import { hashApiKey } from '../../application/credentials.ts';
import { BOOTSTRAP_OPERATOR } from '../../application/operator-principal.ts';
import { manualClock } from '../../domain/clock.ts';
import * as account from '../../domain/operator-account.ts';
import {
  OPERATOR_TOKENS,
  OPERATORS,
  type OperatorDoc,
  type OperatorTokenDoc,
  operatorsProjection,
  operatorWithEmail,
} from '../../projections/read-models/operators.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { append, eventStoreFor, project, resetCheckpoint, snapshot } from './support.ts';

const ID = '3a0e6f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b';
const BOOTSTRAP = 'bootstrap-token-of-the-data-dir-0123456789';
const tokenOf = (n: number) => `pds_op_${String(n).repeat(43).slice(0, 43)}`;
const material = (n: number, expires_at = '2026-06-01T00:00:00.000Z') => ({
  token_id: `tok_${n}`,
  token_hash: hashApiKey(tokenOf(n)),
  token_prefix: tokenOf(n).slice(0, 11),
  expires_at,
});
const created = [
  account.events.OperatorAccountCreated({
    operator_id: ID,
    name: 'Ana Lee',
    email: 'ana@example.com',
    role: 'auditor',
    created_at: '2026-05-01T09:00:00.000Z',
  }),
  account.events.OperatorTokenIssued({
    operator_id: ID,
    ...material(1),
    issued_at: '2026-05-01T09:00:00.000Z',
  }),
  account.events.OperatorTokenIssued({
    operator_id: ID,
    ...material(2, '2026-05-03T00:00:00.000Z'),
    issued_at: '2026-05-01T09:00:00.000Z',
  }),
];

test('one token document per token that may let its bearer in, with the current role; none while disabled', async (t) => {
  const es = await eventStoreFor(t);
  const readStore = openSqliteReadStore(':memory:');
  const stream = account.streamId(ID);
  await append(es, stream, created);
  await project(es, readStore, operatorsProjection);
  const tokens = await readStore.collection<OperatorTokenDoc>(OPERATOR_TOKENS);
  const docs = async () =>
    (await tokens.find({})).map((d) => [d.token_id, d.role, d.name, d.expires_at]).sort();
  t.deepEqual(await docs(), [
    ['tok_1', 'auditor', 'Ana Lee', '2026-06-01T00:00:00.000Z'],
    ['tok_2', 'auditor', 'Ana Lee', '2026-05-03T00:00:00.000Z'],
  ]);

  await append(es, stream, [
    account.events.OperatorRoleChanged({
      operator_id: ID,
      role: 'operator',
      changed_at: '2026-05-02T00:00:00.000Z',
    }),
    account.events.OperatorTokenRotated({
      operator_id: ID,
      old_token_id: 'tok_1',
      ...material(3),
      rotated_at: '2026-05-02T00:00:00.000Z',
    }),
  ]);
  await project(es, readStore, operatorsProjection);
  t.deepEqual(await docs(), [
    ['tok_2', 'operator', 'Ana Lee', '2026-05-03T00:00:00.000Z'],
    ['tok_3', 'operator', 'Ana Lee', '2026-06-01T00:00:00.000Z'],
  ]);

  await append(es, stream, [
    account.events.OperatorAccountDisabled({ operator_id: ID, disabled_at: '2026-05-02T01:00:00.000Z' }),
  ]);
  await project(es, readStore, operatorsProjection);
  t.deepEqual(await docs(), [], 'a disabled account has no token that lets anyone in');
  await append(es, stream, [
    account.events.OperatorAccountEnabled({ operator_id: ID, enabled_at: '2026-05-02T02:00:00.000Z' }),
    account.events.OperatorTokenRevoked({
      operator_id: ID,
      token_id: 'tok_2',
      revoked_at: '2026-05-02T02:00:00.000Z',
    }),
  ]);
  await project(es, readStore, operatorsProjection);
  t.deepEqual(await docs(), [['tok_3', 'operator', 'Ana Lee', '2026-06-01T00:00:00.000Z']]);

  // The account's document: its fields for the admin API, findable by email; no plaintext token anywhere.
  const accounts = await readStore.collection<OperatorDoc>(OPERATORS);
  t.is(await operatorWithEmail(accounts, 'ana@example.com'), ID);
  t.is(await operatorWithEmail(accounts, 'bob@example.com'), null);
  const everything = JSON.stringify(await snapshot(readStore, operatorsProjection));
  for (const n of [1, 2, 3]) t.false(everything.includes(tokenOf(n)));

  // Replaying the whole log over these documents changes nothing: revoked tokens stay out.
  const before = await snapshot(readStore, operatorsProjection);
  await resetCheckpoint(readStore, operatorsProjection.name);
  await project(es, readStore, operatorsProjection, { batchSize: 1 });
  t.deepEqual(await snapshot(readStore, operatorsProjection), before);
  // And a rebuild from nothing gives the same documents.
  const fresh = openSqliteReadStore(':memory:');
  await project(es, fresh, operatorsProjection);
  t.deepEqual(await snapshot(fresh, operatorsProjection), before);
});

test('another process authenticates from its own copy: the person, their role now, and refusals by the clock', async (t) => {
  const es = await eventStoreFor(t);
  const readStore = openSqliteReadStore(':memory:');
  const clock = manualClock('2026-05-01T10:00:00.000Z');
  const auth = createOperatorAuthenticator({ readStore, clock, bootstrapToken: BOOTSTRAP });
  const stream = account.streamId(ID);
  await append(es, stream, created);
  await project(es, readStore, operatorsProjection);

  const bootstrap = await auth.authenticate(BOOTSTRAP);
  t.like(bootstrap, { operator_id: 'bootstrap', name: 'bootstrap token', role: 'admin' });
  t.regex(
    bootstrap?.token_id ?? '',
    /^bootstrap:[0-9a-f]{16}$/,
    'a fingerprint of the token, never the token',
  );
  t.deepEqual(bootstrap && (await auth.current(bootstrap)), bootstrap);
  t.is(await auth.current({ ...BOOTSTRAP_OPERATOR, token_id: 'bootstrap:0000000000000000' }), undefined);
  const ana = await auth.authenticate(tokenOf(1));
  t.deepEqual(ana, { operator_id: ID, name: 'Ana Lee', role: 'auditor', token_id: 'tok_1' });
  if (!ana) return;
  for (const refused of [tokenOf(9), `${tokenOf(1)}x`, 'pds_key_whatever', '', BOOTSTRAP.slice(1)]) {
    t.is(await auth.authenticate(refused), undefined, refused);
  }

  // Token 2 expires on the 3rd: by the clock, not by a write.
  clock.set('2026-05-03T00:00:00.000Z');
  t.is(await auth.authenticate(tokenOf(2)), undefined);
  t.truthy(await auth.authenticate(tokenOf(1)));

  // current(): the person as they stand now, for a session authenticated earlier.
  await append(es, stream, [
    account.events.OperatorRoleChanged({
      operator_id: ID,
      role: 'admin',
      changed_at: '2026-05-03T00:00:00.000Z',
    }),
  ]);
  await project(es, readStore, operatorsProjection);
  t.is((await auth.current(ana))?.role, 'admin');
  await append(es, stream, [
    account.events.OperatorAccountDisabled({ operator_id: ID, disabled_at: '2026-05-03T00:00:00.000Z' }),
  ]);
  await project(es, readStore, operatorsProjection);
  t.is(await auth.current(ana), undefined, 'a disabled account');
  t.is(await auth.authenticate(tokenOf(1)), undefined);
  await append(es, stream, [
    account.events.OperatorAccountEnabled({ operator_id: ID, enabled_at: '2026-05-03T00:00:00.000Z' }),
    account.events.OperatorTokenRevoked({
      operator_id: ID,
      token_id: 'tok_1',
      revoked_at: '2026-05-03T00:00:00.000Z',
    }),
  ]);
  await project(es, readStore, operatorsProjection);
  t.is(await auth.current(ana), undefined, 'a revoked token');
  if (bootstrap) t.deepEqual(await auth.current(bootstrap), bootstrap, 'the bootstrap token stands');
});
