/**
 * The customer key store of the split deployment (`application/customer-keys.ts`): collection
 * `customer_keys` (one document a key, with its links, indexed), `customer_key_tombstones` and
 * `customer_erasures`, in the database the URL names. A destroyed key's tombstone is written before
 * its document is deleted, so a key is never neither; what MongoDB keeps of the document afterwards
 * (its journal, the oplog's window, backups) is the operator's to bound (docs/operations.md,
 * "Customer data").
 *
 * Every read goes to the primary with read concern `majority`: a secondary may not have a key another
 * process has just created, and a key read there would be missing; a majority-committed read is one no
 * failover rolls back.
 */
import { type Collection, MongoClient } from 'mongodb';
import type {
  CustomerErasure,
  CustomerKeyStore,
  CustomerKeyTombstone,
  LinkedKey,
  StoredCustomerKey,
} from '../application/customer-keys.ts';

export const CUSTOMER_KEYS = 'customer_keys';
export const CUSTOMER_ERASURES = 'customer_erasures';
export const CUSTOMER_KEY_TOMBSTONES = 'customer_key_tombstones';

type KeyDoc = StoredCustomerKey & { _id: string; links: string[] };
type TombstoneDoc = CustomerKeyTombstone & { _id: string };
type ErasureDoc = CustomerErasure & { _id: string; finished: boolean };

export async function openMongoKeyStore(url: string): Promise<CustomerKeyStore> {
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 10_000 });
  await client.connect();
  const db = client.db();
  const onPrimary = { readPreference: 'primary', readConcern: { level: 'majority' } } as const;
  const keys: Collection<KeyDoc> = db.collection(CUSTOMER_KEYS, onPrimary);
  const tombstones: Collection<TombstoneDoc> = db.collection(CUSTOMER_KEY_TOMBSTONES, onPrimary);
  const erasures: Collection<ErasureDoc> = db.collection(CUSTOMER_ERASURES, onPrimary);
  await keys.createIndex({ links: 1 });
  await keys.createIndex({ created_at: 1, _id: 1 });
  // Acknowledged by a majority before an append may rest on it, as the key is the only copy.
  const durable = { writeConcern: { w: 'majority' as const, journal: true } };
  const stored = (d: KeyDoc): StoredCustomerKey => ({
    key_id: d.key_id,
    wrapped: d.wrapped,
    created_at: d.created_at,
  });

  return {
    async key(keyId) {
      const doc = await keys.findOne({ _id: keyId });
      if (doc) return { key: stored(doc) };
      const tombstone = await tombstones.findOne({ _id: keyId });
      if (!tombstone) return null;
      const { key_id, erasure_id, erased_at } = tombstone;
      return { tombstone: { key_id, erasure_id, erased_at } };
    },
    async keysLinkedTo(links) {
      if (links.length === 0) return [];
      const docs = await keys
        .find({ links: { $in: [...links] } })
        .sort({ created_at: 1, _id: 1 })
        .toArray();
      return docs.map((d): LinkedKey => ({ key_id: d.key_id, links: [...d.links].sort() }));
    },
    async link(key, links) {
      await keys.updateOne(
        { _id: key.key_id },
        {
          $setOnInsert: { key_id: key.key_id, wrapped: key.wrapped, created_at: key.created_at },
          $addToSet: { links: { $each: [...links] } },
        },
        { upsert: true, ...durable },
      );
    },
    async beginErasure(erasure) {
      await erasures.updateOne(
        { _id: erasure.erasure_id },
        { $setOnInsert: { ...erasure, finished: false } },
        { upsert: true, ...durable },
      );
    },
    async destroyKeys(keyIds, erasure) {
      if (keyIds.length === 0) return;
      // The tombstones first: a crash between the two leaves the keys readable, never neither.
      await tombstones.bulkWrite(
        keyIds.map((keyId) => ({
          updateOne: {
            filter: { _id: keyId },
            update: { $setOnInsert: { key_id: keyId, ...erasure } },
            upsert: true,
          },
        })),
        durable,
      );
      await keys.deleteMany({ _id: { $in: [...keyIds] } }, durable);
    },
    async pendingErasures() {
      const docs = await erasures.find({ finished: false }).sort({ requested_at: 1, _id: 1 }).toArray();
      return docs.map(({ _id, finished: _f, ...erasure }) => erasure);
    },
    async finishErasure(erasureId) {
      await erasures.updateOne({ _id: erasureId }, { $set: { finished: true } }, durable);
    },
    async close() {
      await client.close();
    },
  };
}
