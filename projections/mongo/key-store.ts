/**
 * The customer key store of the split deployment (`application/customer-keys.ts`): collection
 * `customer_keys` (one document a key, with its links, indexed; a destroyed key's document keeps only
 * its tombstone) and `customer_erasures`, in the database the URL names. A destroyed key's material and
 * links leave its document in the same write that sets its tombstone, so a key is never neither, and a
 * key is created only by an insert of a new document (a tombstoned one refuses it) and linked only by
 * an update that skips tombstoned ones, so nothing brings a destroyed key back. What MongoDB keeps of
 * the key afterwards (its journal, the oplog's window, backups) is the operator's to bound
 * (docs/operations.md, "Customer data").
 *
 * Every read goes to the primary with read concern `majority`: a secondary may not have a key another
 * process has just created, and a key read there would be missing; a majority-committed read is one no
 * failover rolls back. Sealing is on the append path, so no call may hang on a lost majority: writes
 * wait `wtimeoutMS`, reads `maxTimeMS`, and a server out of reach is reported as unavailable (503).
 * Keys and erasures are ordered by a sequence of their own, so that two created in the same
 * millisecond are listed in the order they were made, as on SQLite.
 */
import { type Collection, MongoClient, MongoServerError, MongoWriteConcernError } from 'mongodb';
import type {
  CustomerErasure,
  CustomerKeyStore,
  CustomerKeyTombstone,
  LinkedKey,
  StoredCustomerKey,
} from '../../application/customer-keys.ts';
import {
  clientTimeouts,
  connectionGuard,
  DEFAULT_MONGO_TIMEOUTS,
  DEFAULT_READ_MAX_TIME_MS,
  type Guard,
  ReadStoreUnavailableError,
  redact,
} from './connection.ts';

export const CUSTOMER_KEYS = 'customer_keys';
export const CUSTOMER_ERASURES = 'customer_erasures';
/** The sequences keys and erasures are ordered by. */
export const CUSTOMER_KEY_SEQUENCES = 'customer_key_sequences';

/** How long a write waits for a majority before it fails (and the append it seals for answers 503). */
export const KEY_STORE_WTIMEOUT_MS = 10_000;

/** A key (its material and links), or once destroyed only its tombstone. */
interface KeyDoc extends Partial<StoredCustomerKey> {
  _id: string;
  seq: number;
  links?: string[];
  tombstone?: CustomerKeyTombstone;
}
type ErasureDoc = CustomerErasure & { _id: string; seq: number; finished: boolean };
type SequenceDoc = { _id: string; value: number };

const DUPLICATE_KEY = 11000;
/** WriteConcernTimeout (WriteConcernFailed before MongoDB 8.1): no majority acknowledged in `wtimeoutMS`. */
const WRITE_CONCERN_TIMEOUT = 64;

/**
 * The read store's guard (a server out of reach, a read past its `maxTimeMS`: unavailable), and a
 * write no majority acknowledged in time: unavailable too, answered 503 instead of held or a 500.
 */
export function keyStoreGuard(where: string): Guard {
  const guard = connectionGuard(where);
  return async <R>(fn: () => Promise<R>): Promise<R> => {
    try {
      return await guard(fn);
    } catch (err) {
      const timedOut =
        err instanceof MongoWriteConcernError &&
        (err.code === WRITE_CONCERN_TIMEOUT ||
          (err.errInfo as { wtimeout?: boolean } | undefined)?.wtimeout === true);
      if (!timedOut) throw err;
      throw new ReadStoreUnavailableError(
        `MongoDB key store at ${where}: no majority acknowledged the write in time`,
        {
          cause: err,
        },
      );
    }
  };
}

export async function openMongoKeyStore(url: string): Promise<CustomerKeyStore> {
  const client = new MongoClient(url, {
    ignoreUndefined: true,
    ...clientTimeouts(url, DEFAULT_MONGO_TIMEOUTS),
  });
  const guard = keyStoreGuard(redact(url));
  await guard(() => client.connect());
  const db = client.db();
  const onPrimary = { readPreference: 'primary', readConcern: { level: 'majority' } } as const;
  const keys: Collection<KeyDoc> = db.collection(CUSTOMER_KEYS, onPrimary);
  const erasures: Collection<ErasureDoc> = db.collection(CUSTOMER_ERASURES, onPrimary);
  const sequences: Collection<SequenceDoc> = db.collection(CUSTOMER_KEY_SEQUENCES, onPrimary);
  await guard(async () => {
    await keys.createIndex({ links: 1 });
    await keys.createIndex({ links: 1, seq: 1 });
    await keys.createIndex({ seq: 1 });
    await keys.createIndex({ 'tombstone.cart_uuid': 1 }, { sparse: true });
    await erasures.createIndex({ finished: 1, seq: 1 });
  });
  // Acknowledged by a majority before an append may rest on it, as the key is the only copy.
  const durable = {
    writeConcern: { w: 'majority' as const, journal: true, wtimeoutMS: KEY_STORE_WTIMEOUT_MS },
  };
  const read = { maxTimeMS: DEFAULT_READ_MAX_TIME_MS };
  const next = async (name: string) => {
    const doc = await sequences.findOneAndUpdate(
      { _id: name },
      { $inc: { value: 1 } },
      { upsert: true, returnDocument: 'after', ...durable },
    );
    return doc?.value ?? 1;
  };

  return {
    async key(keyId) {
      const doc = await guard(() => keys.findOne({ _id: keyId }, read));
      if (!doc) return null;
      if (doc.tombstone) return { tombstone: { ...doc.tombstone } };
      return { key: { key_id: doc._id, wrapped: doc.wrapped ?? '', created_at: doc.created_at ?? '' } };
    },
    async keysLinkedTo(links, last) {
      if (links.length === 0) return [];
      const linked = () => keys.find({ links: { $in: [...links] }, tombstone: { $exists: false } }, read);
      // The last ones made, newest first from the `[links, seq]` index: no more keys are read.
      const docs = await guard(async () =>
        last === undefined
          ? linked().sort({ seq: 1 }).toArray()
          : (await linked().sort({ seq: -1 }).limit(last).toArray()).reverse(),
      );
      return docs.map((d): LinkedKey => ({ key_id: d._id, links: [...(d.links ?? [])].sort() }));
    },
    async createKey(key, links) {
      return guard(async () => {
        const seq = await next(CUSTOMER_KEYS);
        try {
          await keys.insertOne(
            {
              _id: key.key_id,
              seq,
              wrapped: key.wrapped,
              created_at: key.created_at,
              links: [...new Set(links)],
            },
            durable,
          );
          return true;
        } catch (error) {
          // Its id is taken: the key exists, or its tombstone does.
          if (error instanceof MongoServerError && error.code === DUPLICATE_KEY) return false;
          throw error;
        }
      });
    },
    async addLinks(keyId, links) {
      if (links.length === 0) return;
      await guard(() =>
        keys.updateOne(
          { _id: keyId, tombstone: { $exists: false } },
          { $addToSet: { links: { $each: [...links] } } },
          durable,
        ),
      );
    },
    async tombstonesOfCart(cartUuid) {
      const docs = await guard(() =>
        keys
          .find({ 'tombstone.cart_uuid': cartUuid.toLowerCase() }, read)
          .sort({ 'tombstone.erased_at': 1, _id: 1 })
          .toArray(),
      );
      return docs.flatMap((d) => (d.tombstone ? [{ ...d.tombstone }] : []));
    },
    async beginErasure(erasure) {
      await guard(async () => {
        if (await erasures.findOne({ _id: erasure.erasure_id }, read)) return;
        const seq = await next(CUSTOMER_ERASURES);
        await erasures.updateOne(
          { _id: erasure.erasure_id },
          { $setOnInsert: { ...erasure, seq, finished: false } },
          { upsert: true, ...durable },
        );
      });
    },
    async destroyKeys(keyIds, erasure) {
      await guard(async () => {
        for (const keyId of keyIds) {
          const doc = await keys.findOne({ _id: keyId }, read);
          if (doc?.tombstone) continue;
          const cart = (doc?.links ?? []).find((l) => l.startsWith('cart:'));
          const tombstone: CustomerKeyTombstone = {
            key_id: keyId,
            cart_uuid: cart ? cart.slice('cart:'.length) : null,
            erasure_id: erasure.erasure_id,
            erased_at: erasure.erased_at,
          };
          // One write: the tombstone in, the key material and its links out (a key never stored here
          // gets its tombstone too). A key destroyed meanwhile keeps its first tombstone: the filter
          // no longer matches it, and the upsert's insert meets its id.
          try {
            await keys.updateOne(
              { _id: keyId, tombstone: { $exists: false } },
              {
                $set: { tombstone },
                $unset: { key_id: '', wrapped: '', created_at: '', links: '' },
                $setOnInsert: { seq: 0 },
              },
              { upsert: true, ...durable },
            );
          } catch (error) {
            if (!(error instanceof MongoServerError && error.code === DUPLICATE_KEY)) throw error;
          }
        }
      });
      return { wiped: true };
    },
    async pendingErasures() {
      const docs = await guard(() => erasures.find({ finished: false }, read).sort({ seq: 1 }).toArray());
      return docs.map(({ _id, seq: _s, finished: _f, ...erasure }) => erasure);
    },
    async finishErasure(erasureId) {
      await guard(() => erasures.updateOne({ _id: erasureId }, { $set: { finished: true } }, durable));
    },
    async close() {
      await client.close();
    },
  };
}
