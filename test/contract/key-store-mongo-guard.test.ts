/**
 * The MongoDB key store's failures as the service answers them (docs/operations.md, "Customer data"):
 * a write no majority acknowledged within `wtimeoutMS` is unavailable (503), as a server out of
 * reach is, and other errors pass as they are. The driver's own error objects, no server needed.
 */
import test from 'ava';
import { MongoServerError, MongoServerSelectionError, MongoWriteConcernError } from 'mongodb';
import { keyStoreGuard } from '../../projections/mongo/key-store.ts';
import { ReadStoreUnavailableError } from '../../projections/read-store.ts';

const guard = keyStoreGuard('mongodb://db/pds');

test('a write concern timeout is the key store unavailable, not a fault of the request', async (t) => {
  for (const writeConcernError of [
    { code: 64, errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } },
    { code: 100, errmsg: 'timed out', errInfo: { wtimeout: true } },
  ]) {
    const err = new MongoWriteConcernError({ ok: 1, writeConcernError } as never);
    await t.throwsAsync(
      guard(() => Promise.reject(err)),
      { instanceOf: ReadStoreUnavailableError },
    );
  }
});

test('a server out of reach is unavailable; a duplicate key passes as it is', async (t) => {
  const selection = new MongoServerSelectionError('no primary', { type: 'ReplicaSetNoPrimary' } as never);
  await t.throwsAsync(
    guard(() => Promise.reject(selection)),
    { instanceOf: ReadStoreUnavailableError },
  );
  const duplicate = new MongoServerError({ code: 11000, errmsg: 'E11000 duplicate key' });
  t.is(await t.throwsAsync(guard(() => Promise.reject(duplicate))), duplicate);
  t.is(await guard(async () => 7), 7);
});
