/**
 * The ReadStore contract, continued: bulk shadows, the shadows a build writes
 * (docs/read-side.md, "How a build writes its shadows"). Every adapter runs these through
 * `readStoreContract`:
 *
 * - a bulk shadow loaded with the same writes as a shadow whose indexes were kept all along answers
 *   every query alike once `finishBulk` built its deferred indexes, before and after the promote;
 * - while it loads, a query a deferred index would serve is refused (`DeferredIndexError`), one an
 *   index read while applying serves is answered;
 * - a unique index the loaded documents break fails `finishBulk`; the shadow is dropped, the live
 *   collection untouched; a bulk shadow is promoted only once finished.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext, TestFn } from 'ava';
import type {
  Collection,
  Doc,
  DocId,
  Filter,
  FindOptions,
  IndexSpec,
  ReadStore,
  WriteOp,
} from '../../projections/read-store.ts';

export interface OpenedBulkStore {
  store: ReadStore;
  cleanup: () => Promise<void>;
}

/** The indexes of the bulk cases: one read while applying, the others deferred (multikey, dotted, unique, descending). */
export const BULK_INDEXES: readonly IndexSpec[] = [
  { keys: [['store_id', 1]], readWhileApplying: true },
  {
    keys: [
      ['tags', 1],
      ['_id', 1],
    ],
  },
  { keys: [['price', -1]] },
  { keys: [['sku', 1]], unique: true },
  {
    keys: [
      ['info.kind', 1],
      ['flag', 1],
    ],
  },
];

/** A small deterministic PRNG (mulberry32), so a failing run can be replayed. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

// A lone surrogate too: SQLite binds it as U+FFFD, so the index build must read the same string.
const TAGS = ['a', 'b', 'c', 'd', 'é', '中', 'x\ud800'];
/** A number past 2^53: an index build reading it as an integer would hold another number. */
const BIG = 1e18 + 128;

function documentOf(id: number, next: () => number): Doc {
  const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)];
  const tags = TAGS.filter(() => next() < 0.3);
  const doc: Doc = { _id: id, sku: `sku-${id}`, store_id: 1 + Math.floor(next() * 5) };
  const r = next();
  // Every kind of key: arrays (multikey), an empty array, null and missing, numbers, strings, objects, booleans.
  if (r < 0.8) doc.tags = tags;
  else if (r < 0.9) doc.tags = [];
  doc.price = pick([1, 2.5, 7, 10, -3, null, undefined, 'free', 0, BIG]);
  if (doc.price === undefined) delete doc.price;
  if (next() < 0.7) doc.info = { kind: pick(['x', 'y', null]) };
  else if (next() < 0.5) doc.info = [{ kind: 'x' }, { kind: 'z' }];
  doc.flag = pick([true, false, null, { on: 1 }]);
  return doc;
}

/**
 * Writes to `c`, the same for every call: inserts, upserts, replacements that move documents between
 * keys, updates that add and remove array elements, deletions, and `updateMany`s by the index read
 * while applying; by bulk writes and by commits.
 */
export async function loadBulkWrites(store: ReadStore, c: Collection): Promise<void> {
  const next = prng(41);
  const batch: WriteOp[] = [];
  for (let id = 1; id <= 240; id++) batch.push({ insertOne: { document: documentOf(id, next) } });
  await c.bulkWrite(batch.splice(0));
  for (let round = 0; round < 4; round++) {
    for (let i = 0; i < 60; i++) {
      const id = 1 + Math.floor(next() * 300);
      const r = next();
      if (r < 0.35) {
        batch.push({ replaceOne: { filter: { _id: id }, replacement: documentOf(id, next), upsert: true } });
      } else if (r < 0.55) {
        batch.push({ updateOne: { filter: { _id: id }, update: { $addToSet: { tags: TAGS[round] } } } });
      } else if (r < 0.7) {
        batch.push({ updateOne: { filter: { _id: id }, update: { $pull: { tags: 'a' } } } });
      } else if (r < 0.85) {
        batch.push({
          updateOne: { filter: { _id: id }, update: { $set: { price: round * 3, flag: true } } },
        });
      } else {
        batch.push({ deleteOne: { filter: { _id: id } } });
      }
    }
    batch.push({ updateMany: { filter: { store_id: round + 1 }, update: { $set: { price: 100 + round } } } });
    if (round % 2 === 0) await c.bulkWrite(batch.splice(0));
    else await store.commit({ writes: [{ collection: c, ops: batch.splice(0) }] });
  }
}

/** Queries that each index answers (and a few none does), with sorts, limits and a cursor. */
export const BULK_QUERIES: ReadonlyArray<[Filter, FindOptions?]> = [
  [{}],
  [{ store_id: 2 }],
  [{ store_id: { $in: [1, 3] } }, { sort: [['price', -1]] }],
  [{ tags: 'b' }],
  [{ tags: { $in: ['a', 'é'] } }, { limit: 7 }],
  [{ tags: [] }],
  [{ tags: null }],
  [{ price: { $gt: 2 } }, { sort: [['price', -1]] }],
  [{}, { sort: [['price', -1]], limit: 25 }],
  [{}, { sort: [['price', -1]], limit: 10, after: [7, 50] }],
  [{ price: null }],
  [{ price: 'free' }],
  [{ sku: 'sku-17' }],
  [{ sku: { $gte: 'sku-2', $lt: 'sku-3' } }, { sort: [['sku', 1]] }],
  [{ 'info.kind': 'x', flag: true }],
  [{ 'info.kind': { $in: ['y', 'z'] } }],
  [{ price: { $gte: 100 } }, { sort: [['price', -1]] }],
  [{ 'info.kind': null }],
  [{ flag: { on: 1 } }],
  [{ price: BIG }],
  [{ price: { $gt: 1e17 } }, { sort: [['price', -1]], limit: 4 }],
  [{}, { sort: [['price', -1]], limit: 5, after: [BIG, 100] }],
  [{ tags: 'x\ud800' }],
];

function ids(docs: readonly Doc[]): DocId[] {
  return docs.map((d) => d._id);
}

export function readStoreBulk(test: TestFn, adapter: string, open: () => Promise<OpenedBulkStore>): void {
  const name = (title: string) => `${adapter}: ${title}`;

  async function withStore(t: ExecutionContext, fn: (store: ReadStore, p: string) => Promise<void>) {
    const opened = await open();
    t.teardown(() => opened.cleanup());
    await fn(opened.store, `c${randomUUID().replaceAll('-', '').slice(0, 12)}`);
  }

  /** Every query's answer (ids in order, and the documents) on `c`. */
  async function answers(c: Collection): Promise<unknown[]> {
    const out: unknown[] = [];
    for (const [filter, options] of BULK_QUERIES) {
      out.push([JSON.stringify(filter), options, await c.find(filter, options), await c.count(filter)]);
    }
    return out;
  }

  test(
    name(
      'a bulk shadow answers every query as a shadow whose indexes were kept all along, before and after promote',
    ),
    (t) =>
      withStore(t, async (store, p) => {
        const live = await store.collection(`${p}_items`, BULK_INDEXES);
        const kept = await store.createShadow(`${p}_items`, BULK_INDEXES);
        const bulk = await store.createShadow(`${p}_items`, BULK_INDEXES, { bulk: true });
        await loadBulkWrites(store, kept);
        await loadBulkWrites(store, bulk);
        t.deepEqual(
          ids(await bulk.find({ store_id: 3 })),
          ids(await kept.find({ store_id: 3 })),
          'the index read while applying answers during the load',
        );
        await store.finishBulk(bulk);
        await store.finishBulk(bulk); // finished already: nothing to do
        const expected = await answers(kept);
        t.true((expected[0] as [string, unknown, Doc[]])[2].length > 150, 'the writes left documents');
        t.deepEqual(await answers(bulk), expected);
        await store.promote([bulk]);
        t.deepEqual(await answers(live), expected);
        // Writes after the promote keep every index: a new duplicate is refused, moved keys are found.
        const [some] = await live.find({}, { limit: 1 });
        await t.throwsAsync(live.bulkWrite([{ insertOne: { document: { _id: 'dup', sku: some.sku } } }]), {
          message: /duplicate key/i,
        });
        await live.bulkWrite([
          { updateOne: { filter: { _id: some._id }, update: { $set: { tags: ['new'] } } } },
        ]);
        t.deepEqual(ids(await live.find({ tags: 'new' })), [some._id]);
        await store.dropShadow(kept);
      }),
  );

  test(name('while a bulk shadow loads, a query a deferred index would serve is refused'), (t) =>
    withStore(t, async (store, p) => {
      const bulk = await store.createShadow(`${p}_items`, BULK_INDEXES, { bulk: true });
      await loadBulkWrites(store, bulk);
      const deferred = { name: 'DeferredIndexError', message: /readWhileApplying/ };
      await t.throwsAsync(bulk.find({ tags: 'b' }), deferred);
      await t.throwsAsync(bulk.find({}, { sort: [['price', -1]], limit: 3 }), deferred);
      await t.throwsAsync(bulk.findOne({ sku: 'sku-3' }), deferred);
      await t.throwsAsync(bulk.count({ 'info.kind': 'x' }), deferred);
      await t.throwsAsync(
        bulk.bulkWrite([{ updateMany: { filter: { tags: 'c' }, update: { $set: { seen: 1 } } } }]),
        deferred,
      );
      await t.throwsAsync(
        store.commit({
          writes: [{ collection: bulk, ops: [{ deleteMany: { filter: { sku: 'sku-9' } } }] }],
        }),
        deferred,
      );
      // An index read while applying, `_id`, or no index at all: answered.
      const byStore = await bulk.find({ store_id: 2, tags: 'b' });
      t.true(byStore.every((d) => d.store_id === 2 && (d.tags as string[]).includes('b')));
      t.is((await bulk.findOne({ _id: 3 }))?._id, 3);
      t.true((await bulk.find({ seen: { $exists: false } }, { limit: 2 })).length === 2);
      await store.finishBulk(bulk);
      t.true((await bulk.find({ tags: 'b' })).length > 0, 'answered once finished');
    }),
  );

  test(
    name(
      'a unique index the loaded documents break fails finishBulk; the shadow is dropped, the live copy untouched',
    ),
    (t) =>
      withStore(t, async (store, p) => {
        const live = await store.collection(`${p}_items`, BULK_INDEXES);
        await live.bulkWrite([{ insertOne: { document: { _id: 'kept', sku: 'S', store_id: 1 } } }]);
        const bulk = await store.createShadow(`${p}_items`, BULK_INDEXES, { bulk: true });
        await t.throwsAsync(store.promote([bulk]), { message: /finishBulk/ }, 'not before finishBulk');
        // Accepted while loading: the index that would refuse the second is not built yet.
        await bulk.bulkWrite([
          { insertOne: { document: { _id: 'a', sku: 'S', store_id: 1 } } },
          { insertOne: { document: { _id: 'b', sku: 'T', store_id: 1 } } },
          { insertOne: { document: { _id: 'c', sku: 'S', store_id: 2 } } },
        ]);
        await t.throwsAsync(store.finishBulk(bulk), { message: /duplicate key .*in unique index sku/ });
        await t.throwsAsync(
          store.promote([bulk]),
          { message: /finishBulk/ },
          'a failed build is not promoted',
        );
        await store.dropShadow(bulk);
        t.deepEqual(ids(await live.find({})), ['kept']);
        t.deepEqual(ids(await live.find({ sku: 'S' })), ['kept']);
        // A bulk shadow that keeps its keys unique is built and promoted.
        const again = await store.createShadow(`${p}_items`, BULK_INDEXES, { bulk: true });
        await again.bulkWrite([
          { insertOne: { document: { _id: 'a', sku: 'S', store_id: 1 } } },
          { insertOne: { document: { _id: 'c', store_id: 2 } } },
        ]);
        await store.finishBulk(again);
        await store.promote([again]);
        t.deepEqual(ids(await live.find({ sku: 'S' })), ['a']);
        t.deepEqual(ids(await live.find({ sku: null })), ['c']);
      }),
  );
}
