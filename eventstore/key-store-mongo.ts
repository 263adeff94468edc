/**
 * The customer key store of the split deployment (`application/customer-keys.ts`): collection
 * `customer_keys` (one document a key, with its links, indexed) and `customer_erasures`, in the
 * database the URL names. A destroyed key's document is deleted; what MongoDB keeps of it afterwards
 * (its journal, the oplog's window, backups) is the operator's to bound (docs/operations.md,
 * "Customer data").
 */
import { type Collection, MongoClient } from 'mongodb';
import type {
  CustomerErasure,
  CustomerKeyStore,
  LinkedKey,
  StoredCustomerKey,
} from '../application/customer-keys.ts';

export const CUSTOMER_KEYS = 'customer_keys';
export const CUSTOMER_ERASURES = 'customer_erasures';

type KeyDoc = StoredCustomerKey & { _id: string; links: string[] };
type ErasureDoc = CustomerErasure & { _id: string; finished: boolean };

export async function openMongoKeyStore(url: string): Promise<CustomerKeyStore> {
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 10_000 });
  await client.connect();
  const db = client.db();
  const keys: Collection<KeyDoc> = db.collection(CUSTOMER_KEYS);
  const erasures: Collection<ErasureDoc> = db.collection(CUSTOMER_ERASURES);
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
      return doc ? stored(doc) : null;
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
    async destroyKeys(keyIds) {
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
