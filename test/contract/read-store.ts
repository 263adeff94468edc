/**
 * The ReadStore contract: every adapter of the port (in memory, MongoDB) must pass these cases unchanged.
 * The expectations are MongoDB's own semantics, so a projection developed against the embedded store
 * behaves the same in production. Tests may share one engine: each uses collection and checkpoint names
 * with its own random prefix.
 *
 * Query cases run twice where an adapter has two paths (a collection declaring the indexes
 * the query can use, and one without), so an index plan can't answer differently from a scan.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext, TestFn } from 'ava';
import {
  type Checkpoint,
  type Collection,
  type Doc,
  type DocId,
  type Filter,
  type IndexSpec,
  type ReadStore,
  type SortSpec,
  totalSort,
} from '../../projections/read-store.ts';
import { readStoreBulk } from './read-store-bulk.ts';
import { readStoreDifferences } from './read-store-differences.ts';

export interface OpenedReadStore {
  store: ReadStore;
  cleanup: () => Promise<void>;
}

/** A unique prefix per test, so tests on a shared engine never see each other's collections. */
function prefix(): string {
  return `c${randomUUID().replaceAll('-', '').slice(0, 12)}`;
}

function getPath(doc: unknown, path: string): unknown {
  let v: unknown = doc;
  for (const part of path.split('.')) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

function ids(docs: readonly Doc[]): DocId[] {
  return docs.map((d) => d._id);
}

/** Ids in MongoDB's order for the id types used here: numbers before strings. */
function sortedIds(list: readonly DocId[]): DocId[] {
  return [...list].sort((a, b) =>
    typeof a !== typeof b ? (typeof a === 'number' ? -1 : 1) : a < b ? -1 : a > b ? 1 : 0,
  );
}

async function seed(c: Collection, docs: readonly Doc[]): Promise<void> {
  if (docs.length === 0) return;
  await c.bulkWrite(
    docs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
  );
}

/** The cursor values of a document for `sort` (the `after` of the page that ends with it). */
function cursorOf(doc: Doc, sort: SortSpec | undefined): unknown[] {
  return totalSort(sort).map(([f]) => getPath(doc, f) ?? null);
}

/** Reads a whole result page by page with `after`, calling `between` after each page. */
async function pageAll(
  c: Collection,
  filter: Filter,
  sort: SortSpec | undefined,
  pageSize: number,
  between?: (page: Doc[], n: number) => Promise<void>,
): Promise<Doc[]> {
  const out: Doc[] = [];
  let after: unknown[] | undefined;
  for (let n = 0; n < 10_000; n++) {
    const page = await c.find(filter, { sort, limit: pageSize, ...(after ? { after } : {}) });
    out.push(...page);
    if (page.length < pageSize) return out;
    after = cursorOf(page[page.length - 1], sort);
    await between?.(page, n);
  }
  throw new Error('paging did not end');
}

/** MongoDB's order for the value types read models hold: null/missing, numbers, strings, booleans. */
function rank(v: unknown): number {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number') return 1;
  if (typeof v === 'string') return 2;
  return 3;
}

function compareValues(a: unknown, b: unknown): number {
  const d = rank(a) - rank(b);
  if (d !== 0 || rank(a) === 0) return d;
  return a === b ? 0 : (a as number) < (b as number) ? -1 : 1;
}

/** Sorts documents in JavaScript the way the store must (for expected results). */
function sortDocs(docs: readonly Doc[], sort: SortSpec | undefined): Doc[] {
  const spec = totalSort(sort);
  return [...docs].sort((a, b) => {
    for (const [f, dir] of spec) {
      const c = compareValues(getPath(a, f), getPath(b, f));
      if (c !== 0) return dir === 1 ? c : -c;
    }
    return 0;
  });
}

export function readStoreContract(test: TestFn, adapter: string, open: () => Promise<OpenedReadStore>): void {
  const name = (title: string) => `${adapter}: ${title}`;
  // Where MongoDB differs from what an embedded store would do unless it takes care.
  readStoreDifferences(test, adapter, open);
  // Bulk shadows, the shadows a build writes.
  readStoreBulk(test, adapter, open);

  /** Opens a store for one test and always cleans it up. */
  async function withStore(t: ExecutionContext, fn: (store: ReadStore, p: string) => Promise<void>) {
    const opened = await open();
    t.teardown(() => opened.cleanup());
    await fn(opened.store, prefix());
  }

  /** The same documents in a collection declaring `indexes` and in one declaring none. */
  async function variants(
    store: ReadStore,
    p: string,
    indexes: readonly IndexSpec[],
    docs: readonly Doc[],
  ): Promise<Array<[label: string, c: Collection]>> {
    const indexed = await store.collection(`${p}_indexed`, indexes);
    const plain = await store.collection(`${p}_plain`);
    await seed(indexed, docs);
    await seed(plain, docs);
    return [
      ['indexed', indexed],
      ['unindexed', plain],
    ];
  }

  // ---- bulkWrite: replaceOne ----------------------------------------------------------------------

  test(name('replaceOne with upsert inserts, then replaces the whole document'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await c.bulkWrite([
        { replaceOne: { filter: { _id: 'a' }, replacement: { _id: 'a', v: 1, extra: 'x' }, upsert: true } },
      ]);
      t.deepEqual(await c.findOne({ _id: 'a' }), { _id: 'a', v: 1, extra: 'x' });
      await c.bulkWrite([
        { replaceOne: { filter: { _id: 'a' }, replacement: { _id: 'a', v: 2 }, upsert: true } },
      ]);
      t.deepEqual(await c.findOne({ _id: 'a' }), { _id: 'a', v: 2 });
      t.is(await c.count(), 1);
    }),
  );

  test(name('replaceOne without upsert replaces a match and writes nothing when none matches'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await seed(c, [{ _id: 'a', v: 1, keep: false }]);
      await c.bulkWrite([
        { replaceOne: { filter: { _id: 'missing' }, replacement: { _id: 'missing', v: 9 } } },
        { replaceOne: { filter: { v: 1 }, replacement: { _id: 'a', v: 5 } } },
      ]);
      t.deepEqual(await c.findOne({ _id: 'a' }), { _id: 'a', v: 5 });
      t.is(await c.findOne({ _id: 'missing' }), null);
      t.is(await c.count(), 1);
    }),
  );

  // ---- bulkWrite: updateOne -----------------------------------------------------------------------

  test(name('updateOne applies $set (also dotted) and $inc (also on a missing field)'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await seed(c, [
        { _id: 'a', n: 1, name: 'old', address: { city: 'Oakland', zip: '94601' } },
        { _id: 'b', n: 1 },
      ]);
      await c.bulkWrite([
        {
          updateOne: {
            filter: { _id: 'a' },
            update: { $set: { name: 'new', 'address.city': 'Berkeley' }, $inc: { n: 2, 'stats.hits': 1 } },
          },
        },
      ]);
      t.deepEqual(await c.findOne({ _id: 'a' }), {
        _id: 'a',
        n: 3,
        name: 'new',
        address: { city: 'Berkeley', zip: '94601' },
        stats: { hits: 1 },
      });
      await c.bulkWrite([{ updateOne: { filter: { _id: 'a' }, update: { $inc: { n: -0.5 } } } }]);
      t.is((await c.findOne({ _id: 'a' }))?.n, 2.5);
      t.deepEqual(await c.findOne({ _id: 'b' }), { _id: 'b', n: 1 });
    }),
  );

  test(name('updateOne applies $addToSet (single and $each) and $pull (value and condition)'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await seed(c, [{ _id: 'a', tags: ['x', 'y'], scores: [1, 5, 2, 8] }]);
      await c.bulkWrite([
        { updateOne: { filter: { _id: 'a' }, update: { $addToSet: { tags: 'y' } } } },
        { updateOne: { filter: { _id: 'a' }, update: { $addToSet: { tags: 'z', fresh: 'f' } } } },
        { updateOne: { filter: { _id: 'a' }, update: { $addToSet: { tags: { $each: ['x', 'w', 'v'] } } } } },
      ]);
      const added = (await c.findOne({ _id: 'a' })) as Doc;
      t.deepEqual([...(added.tags as string[])].sort(), ['v', 'w', 'x', 'y', 'z']);
      t.deepEqual(added.fresh, ['f']);
      await c.bulkWrite([
        { updateOne: { filter: { _id: 'a' }, update: { $pull: { tags: 'y', scores: { $lt: 3 } } } } },
      ]);
      const pulled = (await c.findOne({ _id: 'a' })) as Doc;
      t.deepEqual([...(pulled.tags as string[])].sort(), ['v', 'w', 'x', 'z']);
      t.deepEqual(pulled.scores, [5, 8]);
    }),
  );

  test(name('updateOne applies $unset to top-level and dotted fields'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await seed(c, [{ _id: 'a', gone: 1, keep: 2, address: { city: 'Oakland', zip: '94601' } }]);
      await c.bulkWrite([
        {
          updateOne: {
            filter: { _id: 'a' },
            update: { $unset: { gone: '', 'address.zip': '', absent: '' } },
          },
        },
      ]);
      t.deepEqual(await c.findOne({ _id: 'a' }), { _id: 'a', keep: 2, address: { city: 'Oakland' } });
    }),
  );

  test(name('updateOne with upsert seeds the new document from the equality fields of its filter'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await c.bulkWrite([
        {
          updateOne: {
            filter: { _id: 'u1', store_id: 7, kind: 'menu' },
            update: { $set: { name: 'Kiva' }, $inc: { hits: 1 } },
            upsert: true,
          },
        },
      ]);
      t.deepEqual(await c.findOne({ _id: 'u1' }), {
        _id: 'u1',
        store_id: 7,
        kind: 'menu',
        name: 'Kiva',
        hits: 1,
      });
      // Now it matches: the same upsert updates instead of inserting.
      await c.bulkWrite([
        {
          updateOne: {
            filter: { _id: 'u1', store_id: 7, kind: 'menu' },
            update: { $set: { name: 'Kiva 2' }, $inc: { hits: 1 } },
            upsert: true,
          },
        },
      ]);
      t.deepEqual(await c.findOne({ _id: 'u1' }), {
        _id: 'u1',
        store_id: 7,
        kind: 'menu',
        name: 'Kiva 2',
        hits: 2,
      });
      t.is(await c.count(), 1);
    }),
  );

  test(name('updateOne with upsert needs _id in its filter; nothing is written without it'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await t.throwsAsync(
        c.bulkWrite([{ updateOne: { filter: { store_id: 7 }, update: { $set: { v: 1 } }, upsert: true } }]),
      );
      t.is(await c.count(), 0);
    }),
  );

  test(name('updateOne without upsert writes nothing when no document matches'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await seed(c, [{ _id: 'a', v: 1 }]);
      await c.bulkWrite([
        { updateOne: { filter: { _id: 'b' }, update: { $set: { v: 2 } } } },
        { updateOne: { filter: { _id: 'a', v: 2 }, update: { $set: { v: 3 } } } },
      ]);
      t.deepEqual(await c.find({}), [{ _id: 'a', v: 1 }]);
    }),
  );

  test(
    name('an upsert whose filter misses an existing _id (another condition fails) is a duplicate key'),
    (t) =>
      withStore(t, async (store, p) => {
        // The classic version guard: { _id, version: { $lt: n } } with upsert collides when the stored
        // document is newer. MongoDB refuses the insert on the _id index.
        const c = await store.collection(`${p}_items`);
        await seed(c, [{ _id: 'a', version: 5, v: 'kept' }]);
        await t.throwsAsync(
          c.bulkWrite([
            {
              updateOne: {
                filter: { _id: 'a', version: { $lt: 3 } },
                update: { $set: { v: 'x' } },
                upsert: true,
              },
            },
          ]),
          { message: /duplicate key/i },
        );
        await t.throwsAsync(
          c.bulkWrite([
            {
              replaceOne: {
                filter: { _id: 'a', version: 4 },
                replacement: { _id: 'a', version: 4, v: 'y' },
                upsert: true,
              },
            },
          ]),
          { message: /duplicate key/i },
        );
        t.deepEqual(await c.find({}), [{ _id: 'a', version: 5, v: 'kept' }]);
      }),
  );

  test(
    name(
      'insertOne stores a new document; an _id already stored is a duplicate key, refused with nothing of it kept',
    ),
    (t) =>
      withStore(t, async (store, p) => {
        const c = await store.collection(`${p}_items`, [
          { keys: [['sku', 1]], unique: true },
          { keys: [['tags', 1]] },
        ]);
        await seed(c, [{ _id: 'a', sku: 'A', tags: ['x'] }]);
        await c.bulkWrite([{ insertOne: { document: { _id: 'b', sku: 'B', tags: ['x', 'y'] } } }]);
        // Ordered, as every bulkWrite: the insert before the duplicate stays, the one after does not run.
        await t.throwsAsync(
          c.bulkWrite([
            { insertOne: { document: { _id: 'c', sku: 'C', tags: [] } } },
            { insertOne: { document: { _id: 'a', sku: 'Z', tags: ['z'] } } },
            { insertOne: { document: { _id: 'd', sku: 'D' } } },
          ]),
          { message: /duplicate key/i },
        );
        // A new _id whose key a unique index holds already: refused too.
        await t.throwsAsync(c.bulkWrite([{ insertOne: { document: { _id: 'e', sku: 'B' } } }]), {
          message: /duplicate key/i,
        });
        t.deepEqual(await c.find({}), [
          { _id: 'a', sku: 'A', tags: ['x'] },
          { _id: 'b', sku: 'B', tags: ['x', 'y'] },
          { _id: 'c', sku: 'C', tags: [] },
        ]);
        // The refused documents left no index entry behind; the stored ones keep theirs.
        t.deepEqual(ids(await c.find({ sku: { $in: ['Z', 'D'] } })), []);
        t.deepEqual(ids(await c.find({ tags: 'z' })), []);
        t.deepEqual(ids(await c.find({ tags: 'x' }, { sort: [['tags', 1]] })), ['a', 'b']);
        t.deepEqual(ids(await c.find({ sku: 'B' })), ['b']);
        // The collection takes writes after it: an insert after a delete of the same _id included.
        await c.bulkWrite([
          { deleteOne: { filter: { _id: 'a' } } },
          { insertOne: { document: { _id: 'a', sku: 'A2' } } },
          { insertOne: { document: { _id: 'd', sku: 'D' } } },
        ]);
        t.deepEqual(ids(await c.find({ sku: { $in: ['A', 'A2', 'D'] } })), ['a', 'd']);
        t.is(await c.count(), 4);
      }),
  );

  test(
    name('a commit holding an insert of an _id already stored applies nothing, and the next commit applies'),
    (t) =>
      withStore(t, async (store, p) => {
        const c = await store.collection(`${p}_items`, [{ keys: [['v', 1]] }]);
        await seed(c, [{ _id: 'a', v: 1 }]);
        const before = { position: 3, events: 3, updated_at: '2026-05-01T10:00:00.000Z' };
        await store.setCheckpoint(`${p}-proj`, before);
        await t.throwsAsync(
          store.commit({
            writes: [
              {
                collection: c,
                ops: [
                  { insertOne: { document: { _id: 'b', v: 2 } } },
                  { insertOne: { document: { _id: 'a', v: 3 } } },
                ],
              },
            ],
            checkpoints: [{ name: `${p}-proj`, checkpoint: { ...before, position: 9 } }],
          }),
          { message: /duplicate key/i },
        );
        t.deepEqual(await c.find({}), [{ _id: 'a', v: 1 }]);
        t.deepEqual(ids(await c.find({ v: { $gte: 1 } })), ['a']);
        t.is((await store.getCheckpoint(`${p}-proj`))?.position, 3);
        await store.commit({
          writes: [{ collection: c, ops: [{ insertOne: { document: { _id: 'b', v: 2 } } }] }],
          checkpoints: [{ name: `${p}-proj`, checkpoint: { ...before, position: 9 } }],
        });
        t.deepEqual(ids(await c.find({ v: { $gte: 1 } })), ['a', 'b']);
        t.is((await store.getCheckpoint(`${p}-proj`))?.position, 9);
      }),
  );

  test(name('an update document without operators is refused'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await seed(c, [{ _id: 'a', v: 1 }]);
      await t.throwsAsync(c.bulkWrite([{ updateOne: { filter: { _id: 'a' }, update: { v: 2 } } }]));
      t.deepEqual(await c.findOne({ _id: 'a' }), { _id: 'a', v: 1 });
    }),
  );

  // ---- bulkWrite: updateMany, deletes, order -------------------------------------------------------

  test(name('updateMany updates every match and nothing else'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`, [{ keys: [['store_id', 1]] }]);
      await seed(c, [
        { _id: 'a', store_id: 1, v: 1 },
        { _id: 'b', store_id: 1, v: 2 },
        { _id: 'c', store_id: 2, v: 3 },
      ]);
      await c.bulkWrite([
        { updateMany: { filter: { store_id: 1 }, update: { $inc: { v: 10 }, $set: { touched: true } } } },
        { updateMany: { filter: { store_id: 99 }, update: { $set: { touched: 'never' } } } },
      ]);
      t.deepEqual(await c.find({}), [
        { _id: 'a', store_id: 1, v: 11, touched: true },
        { _id: 'b', store_id: 1, v: 12, touched: true },
        { _id: 'c', store_id: 2, v: 3 },
      ]);
      // Moving documents out of the filtered set while updating them.
      await c.bulkWrite([{ updateMany: { filter: { store_id: 1 }, update: { $set: { store_id: 3 } } } }]);
      t.deepEqual(ids(await c.find({ store_id: 3 })), ['a', 'b']);
      t.is(await c.count({ store_id: 1 }), 0);
    }),
  );

  test(name('deleteOne deletes one match, deleteMany every match'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`, [{ keys: [['kind', 1]] }]);
      await seed(c, [
        { _id: 'a', kind: 'x' },
        { _id: 'b', kind: 'x' },
        { _id: 'c', kind: 'y' },
        { _id: 'd', kind: 'y' },
        { _id: 'e', kind: 'z' },
      ]);
      await c.bulkWrite([{ deleteOne: { filter: { kind: 'x' } } }]);
      t.is(await c.count({ kind: 'x' }), 1);
      await c.bulkWrite([
        { deleteOne: { filter: { _id: 'nope' } } },
        { deleteMany: { filter: { kind: 'y' } } },
      ]);
      t.is(await c.count({ kind: 'y' }), 0);
      t.is(await c.count(), 2);
      await c.bulkWrite([{ deleteMany: { filter: {} } }]);
      t.is(await c.count(), 0);
    }),
  );

  test(name('the operations of one bulkWrite apply in order'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await c.bulkWrite([
        { replaceOne: { filter: { _id: 'a' }, replacement: { _id: 'a', v: 1 }, upsert: true } },
        { updateOne: { filter: { _id: 'a' }, update: { $inc: { v: 1 } } } },
        { updateOne: { filter: { _id: 'a', v: 2 }, update: { $set: { seen: 2 } } } },
        { deleteOne: { filter: { _id: 'a' } } },
        { updateOne: { filter: { _id: 'a' }, update: { $set: { lost: true } } } },
        { updateOne: { filter: { _id: 'a' }, update: { $inc: { v: 10 } }, upsert: true } },
        { updateMany: { filter: { v: 10 }, update: { $set: { last: true } } } },
        { replaceOne: { filter: { _id: 'b' }, replacement: { _id: 'b', v: 0 }, upsert: true } },
        { deleteMany: { filter: { v: 0 } } },
      ]);
      t.deepEqual(await c.find({}), [{ _id: 'a', v: 10, last: true }]);
    }),
  );

  test(name('a failing operation stops the bulkWrite: earlier operations stay, later ones do not run'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`, [{ keys: [['sku', 1]], unique: true }]);
      await seed(c, [{ _id: 'a', sku: 'A' }]);
      await t.throwsAsync(
        c.bulkWrite([
          { replaceOne: { filter: { _id: 'b' }, replacement: { _id: 'b', sku: 'B' }, upsert: true } },
          { replaceOne: { filter: { _id: 'c' }, replacement: { _id: 'c', sku: 'A' }, upsert: true } },
          { replaceOne: { filter: { _id: 'd' }, replacement: { _id: 'd', sku: 'D' }, upsert: true } },
        ]),
        { message: /duplicate key/i },
      );
      t.deepEqual(ids(await c.find({})), ['a', 'b']);
    }),
  );

  test(name('an empty bulkWrite does nothing'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await c.bulkWrite([]);
      t.is(await c.count(), 0);
    }),
  );

  // ---- point reads ---------------------------------------------------------------------------------

  test(name('findOne, findByIds and count'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`, [{ keys: [['kind', 1]] }]);
      await seed(c, [
        { _id: 'a', kind: 'x' },
        { _id: 'b', kind: 'y' },
        { _id: 3, kind: 'y' },
        { _id: 'd', kind: 'z' },
      ]);
      t.deepEqual(await c.findOne({ _id: 'b' }), { _id: 'b', kind: 'y' });
      t.deepEqual(await c.findOne({ kind: 'z' }), { _id: 'd', kind: 'z' });
      t.is(await c.findOne({ kind: 'nope' }), null);
      t.is(await c.findOne({ _id: '3' }), null, 'the string "3" is not the number 3');
      const found = await c.findByIds(['a', 3, 'missing', 'a', 'd']);
      t.deepEqual(sortedIds(ids(found)), [3, 'a', 'd'], 'missing ids are left out, repeated ids found once');
      t.deepEqual(await c.findByIds([]), []);
      t.is(await c.count(), 4);
      t.is(await c.count({}), 4);
      t.is(await c.count({ kind: 'y' }), 2);
      t.is(await c.count({ kind: 'nope' }), 0);
    }),
  );

  test(
    name(
      'findByIds with own hands out documents no other read shares: changed in place, they change nothing stored or read',
    ),
    (t) =>
      withStore(t, async (store, p) => {
        const c = await store.collection(`${p}_owned`);
        await seed(c, [{ _id: 'a', tags: ['x'] }]);
        const [shared] = await c.findByIds(['a']); // what a cache would keep, where the store has one
        const [owned] = await c.findByIds(['a'], { own: true });
        (owned.tags as string[]).push('changed');
        t.deepEqual(shared, { _id: 'a', tags: ['x'] });
        t.deepEqual(await c.findByIds(['a']), [{ _id: 'a', tags: ['x'] }]);
        t.deepEqual(await c.findByIds(['a'], { own: true }), [{ _id: 'a', tags: ['x'] }]);
      }),
  );

  test(name('two handles of one name share the data; different names are separate collections'), (t) =>
    withStore(t, async (store, p) => {
      const a1 = await store.collection(`${p}_a`);
      const a2 = await store.collection(`${p}_a`);
      const b = await store.collection(`${p}_b`);
      t.is(a1.name, `${p}_a`);
      await seed(a1, [{ _id: 1, v: 'one' }]);
      t.deepEqual(await a2.findOne({ _id: 1 }), { _id: 1, v: 'one' });
      t.is(await b.count(), 0);
    }),
  );

  // ---- find: filters -------------------------------------------------------------------------------

  const filterDocs: Doc[] = [
    { _id: 'a', store_id: 1, status: 'open', v: 1 },
    { _id: 'b', store_id: 1, status: 'held', v: 2 },
    { _id: 'c', store_id: 2, status: 'open', v: 3 },
    { _id: 'd', store_id: 2, status: 'closed', v: 4 },
    { _id: 'e', store_id: 3, status: 'open', v: 5 },
    { _id: 'f', store_id: 3, status: 'closed', v: '3' },
    { _id: 'g', store_id: 1, status: 'open', v: null },
    { _id: 'h', store_id: 2, status: 'held' },
    { _id: 'i', store_id: '1', status: 'open', v: 10 },
  ];
  const filterIndexes: IndexSpec[] = [
    {
      keys: [
        ['store_id', 1],
        ['status', 1],
      ],
    },
    { keys: [['status', 1]] },
    { keys: [['v', 1]] },
  ];

  test(name('find by equality on one and several fields (no cross-type equality)'), (t) =>
    withStore(t, async (store, p) => {
      for (const [label, c] of await variants(store, p, filterIndexes, filterDocs)) {
        t.deepEqual(ids(await c.find({ store_id: 1 })), ['a', 'b', 'g'], label);
        t.deepEqual(ids(await c.find({ store_id: '1' })), ['i'], label);
        t.deepEqual(ids(await c.find({ store_id: 2, status: 'open' })), ['c'], label);
        t.deepEqual(ids(await c.find({ status: 'held' })), ['b', 'h'], label);
        t.deepEqual(ids(await c.find({ v: 3 })), ['c'], label);
        t.deepEqual(ids(await c.find({ v: '3' })), ['f'], label);
        t.deepEqual(ids(await c.find({ v: { $eq: 4 } })), ['d'], label);
        t.deepEqual(ids(await c.find({ v: null })), ['g', 'h'], `${label}: null matches null and missing`);
        t.deepEqual(ids(await c.find({ status: 'nope' })), [], label);
        t.is(await c.count({ store_id: 1, status: 'open' }), 2, label);
      }
    }),
  );

  test(name('find with $in (null in the list also matches a missing field)'), (t) =>
    withStore(t, async (store, p) => {
      for (const [label, c] of await variants(store, p, filterIndexes, filterDocs)) {
        t.deepEqual(ids(await c.find({ status: { $in: ['held', 'closed'] } })), ['b', 'd', 'f', 'h'], label);
        t.deepEqual(ids(await c.find({ v: { $in: [1, '3', 99] } })), ['a', 'f'], label);
        t.deepEqual(ids(await c.find({ v: { $in: [null, 5] } })), ['e', 'g', 'h'], label);
        t.deepEqual(ids(await c.find({ store_id: { $in: [2, 3] }, status: 'open' })), ['c', 'e'], label);
        t.deepEqual(ids(await c.find({ status: { $in: [] } })), [], label);
      }
    }),
  );

  test(name('find with ranges $gt/$gte/$lt/$lte compares only values of the same type'), (t) =>
    withStore(t, async (store, p) => {
      for (const [label, c] of await variants(store, p, filterIndexes, filterDocs)) {
        t.deepEqual(ids(await c.find({ v: { $gt: 2 } })), ['c', 'd', 'e', 'i'], label);
        t.deepEqual(ids(await c.find({ v: { $gte: 2, $lt: 5 } })), ['b', 'c', 'd'], label);
        t.deepEqual(ids(await c.find({ v: { $lte: 3 } })), ['a', 'b', 'c'], label);
        t.deepEqual(ids(await c.find({ v: { $gt: 4, $lte: 100 } })), ['e', 'i'], label);
        t.deepEqual(ids(await c.find({ v: { $lt: 1 } })), [], `${label}: null and missing are not below 1`);
        t.deepEqual(
          ids(await c.find({ v: { $gte: '0' } })),
          ['f'],
          `${label}: only strings compare to a string`,
        );
        t.deepEqual(ids(await c.find({ v: { $gt: 1 }, store_id: 1 })), ['b'], label);
        t.deepEqual(ids(await c.find({ store_id: 2, status: { $gte: 'd', $lt: 'z' } })), ['c', 'h'], label);
        t.is(await c.count({ v: { $gt: 2 } }), 4, label);
      }
    }),
  );

  test(name('find with $or and $and'), (t) =>
    withStore(t, async (store, p) => {
      for (const [label, c] of await variants(store, p, filterIndexes, filterDocs)) {
        t.deepEqual(
          ids(await c.find({ $or: [{ status: 'held' }, { v: { $gte: 5 } }] })),
          ['b', 'e', 'h', 'i'],
          label,
        );
        t.deepEqual(
          ids(await c.find({ $and: [{ v: { $gte: 2 } }, { v: { $lte: 4 } }] })),
          ['b', 'c', 'd'],
          label,
        );
        t.deepEqual(
          ids(await c.find({ store_id: 1, $or: [{ status: 'held' }, { v: null }] })),
          ['b', 'g'],
          label,
        );
        t.deepEqual(
          ids(
            await c.find({ $or: [{ $and: [{ store_id: 2 }, { status: 'open' }] }, { store_id: 3, v: '3' }] }),
          ),
          ['c', 'f'],
          label,
        );
        t.deepEqual(ids(await c.find({ $and: [{ status: 'open' }, { status: 'held' }] })), [], label);
        t.is(await c.count({ $or: [{ store_id: 3 }, { status: 'closed' }] }), 3, label);
      }
    }),
  );

  test(name('find, sort and index on dotted paths into embedded documents'), (t) =>
    withStore(t, async (store, p) => {
      const docs: Doc[] = [
        { _id: 'a', address: { city: 'Oakland', zip: '94607' } },
        { _id: 'b', address: { city: 'Oakland', zip: '94601' } },
        { _id: 'c', address: { city: 'Berkeley', zip: '94704' } },
        { _id: 'd', address: { city: 'Oakland' } },
        { _id: 'e' },
      ];
      const indexes: IndexSpec[] = [
        {
          keys: [
            ['address.city', 1],
            ['address.zip', 1],
          ],
        },
      ];
      for (const [label, c] of await variants(store, p, indexes, docs)) {
        t.deepEqual(ids(await c.find({ 'address.city': 'Oakland' })), ['a', 'b', 'd'], label);
        t.deepEqual(
          ids(await c.find({ 'address.city': 'Oakland' }, { sort: [['address.zip', 1]] })),
          ['d', 'b', 'a'],
          label,
        );
        t.deepEqual(
          ids(await c.find({ 'address.city': 'Oakland' }, { sort: [['address.zip', -1]] })),
          ['a', 'b', 'd'],
          label,
        );
        t.deepEqual(ids(await c.find({ 'address.zip': { $gte: '94605' } })), ['a', 'c'], label);
        t.deepEqual(ids(await c.find({ 'address.city': null })), ['e'], label);
        t.deepEqual(ids(await c.find({ address: { city: 'Oakland', zip: '94601' } })), ['b'], label);
        t.deepEqual(
          ids(
            await c.find(
              {},
              {
                sort: [
                  ['address.city', 1],
                  ['address.zip', -1],
                ],
              },
            ),
          ),
          ['e', 'c', 'a', 'b', 'd'],
          label,
        );
      }
    }),
  );

  test(name('array fields are matched by element (multikey), also by range'), (t) =>
    withStore(t, async (store, p) => {
      const docs: Doc[] = [
        { _id: 'a', tags: ['x', 'y'], n: [1, 20] },
        { _id: 'b', tags: ['y'], n: [7] },
        { _id: 'c', tags: [], n: [] },
        { _id: 'd', tags: 'x', n: 3 },
      ];
      const indexes: IndexSpec[] = [{ keys: [['tags', 1]] }, { keys: [['n', 1]] }];
      for (const [label, c] of await variants(store, p, indexes, docs)) {
        t.deepEqual(ids(await c.find({ tags: 'x' })), ['a', 'd'], label);
        t.deepEqual(ids(await c.find({ tags: 'x' }, { sort: [['_id', -1]] })), ['d', 'a'], label);
        t.deepEqual(ids(await c.find({ tags: { $in: ['y', 'z'] } })), ['a', 'b'], label);
        t.deepEqual(ids(await c.find({ tags: ['x', 'y'] })), ['a'], `${label}: whole-array equality`);
        t.deepEqual(
          ids(await c.find({ tags: ['y', 'x'] })),
          [],
          `${label}: whole-array equality keeps order`,
        );
        t.deepEqual(ids(await c.find({ n: { $gte: 20 } })), ['a'], label);
        // Each bound may be met by a different element: [1, 20] has 20 > 5 and 1 < 10.
        t.deepEqual(ids(await c.find({ n: { $gt: 5, $lt: 10 } })), ['a', 'b'], label);
        t.deepEqual(ids(await c.find({ n: { $elemMatch: { $gt: 5, $lt: 10 } } })), ['b'], label);
        t.is(await c.count({ tags: 'y' }), 2, label);
        t.deepEqual(ids(await c.find({ tags: 'y' }, { limit: 1 })), ['a'], label);
      }
    }),
  );

  test(name('an array field sorts by its least element, whatever range the filter sets'), (t) =>
    withStore(t, async (store, p) => {
      const docs: Doc[] = [
        { _id: 'a', n: [1, 20] },
        { _id: 'b', n: [7] },
        { _id: 'c', n: 6 },
      ];
      for (const [label, c] of await variants(store, p, [{ keys: [['n', 1]] }], docs)) {
        const sort: SortSpec = [
          ['n', 1],
          ['_id', 1],
        ];
        // a's sort key is 1, though its only element in the range is 20.
        t.deepEqual(ids(await c.find({ n: { $gte: 5 } }, { sort })), ['a', 'c', 'b'], label);
        t.deepEqual(ids(await c.find({ n: { $gte: 5 } }, { sort, limit: 1 })), ['a'], label);
        t.deepEqual(ids(await c.find({ n: { $lte: 6 } }, { sort })), ['a', 'c'], label);
      }
    }),
  );

  test(name('an array field rewritten to gain and lose elements is found by exactly its elements'), (t) =>
    withStore(t, async (store, p) => {
      // Unique: an element the document gave up must be free for another document at once.
      const c = await store.collection(`${p}_tags`, [{ keys: [['tags', 1]], unique: true }]);
      const put = (tags: unknown) =>
        c.bulkWrite([
          { replaceOne: { filter: { _id: 'a' }, replacement: { _id: 'a', tags }, upsert: true } },
        ]);
      const found = async (tag: unknown) => ids(await c.find({ tags: tag as string }));
      for (const [tags, present, absent] of [
        [['x', 'y'], ['x', 'y'], ['z']],
        [['y', 'z'], ['y', 'z'], ['x']],
        [
          ['z', 'z', 'w'],
          ['z', 'w'],
          ['x', 'y'],
        ],
        ['w', ['w'], ['z']],
        [[null, 'v'], [null, 'v'], ['w']],
        // An empty array matches no element (nor null), as in MongoDB.
        [[], [], [null, 'v']],
        [['u'], ['u'], [null]],
      ] as const) {
        await put(tags);
        for (const tag of present)
          t.deepEqual(await found(tag), ['a'], `${JSON.stringify(tags)} holds ${tag}`);
        for (const tag of absent) t.deepEqual(await found(tag), [], `${JSON.stringify(tags)} lacks ${tag}`);
        const given = absent.filter((tag) => tag !== null);
        await c.bulkWrite([
          { replaceOne: { filter: { _id: 'b' }, replacement: { _id: 'b', tags: given }, upsert: true } },
        ]);
        await c.bulkWrite([{ deleteOne: { filter: { _id: 'b' } } }]);
      }
    }),
  );

  test(name('dotted paths through arrays of embedded documents match by element'), (t) =>
    withStore(t, async (store, p) => {
      const docs: Doc[] = [
        {
          _id: 'o1',
          lines: [
            { sku: 'A', qty: 1 },
            { sku: 'B', qty: 5 },
          ],
        },
        { _id: 'o2', lines: [{ sku: 'B', qty: 2 }] },
        { _id: 'o3', lines: [] },
        { _id: 'o4', lines: { sku: 'A', qty: 9 } },
      ];
      const indexes: IndexSpec[] = [{ keys: [['lines.sku', 1]] }, { keys: [['lines.qty', 1]] }];
      for (const [label, c] of await variants(store, p, indexes, docs)) {
        t.deepEqual(ids(await c.find({ 'lines.sku': 'A' })), ['o1', 'o4'], label);
        t.deepEqual(ids(await c.find({ 'lines.sku': 'B' })), ['o1', 'o2'], label);
        t.deepEqual(ids(await c.find({ 'lines.sku': { $in: ['A', 'C'] } })), ['o1', 'o4'], label);
        t.deepEqual(ids(await c.find({ 'lines.qty': { $gte: 5 } })), ['o1', 'o4'], label);
        t.deepEqual(ids(await c.find({ 'lines.qty': { $lt: 2 } })), ['o1'], label);
        t.is(await c.count({ 'lines.sku': 'B' }), 2, label);
      }
    }),
  );

  // ---- find: sort and limit ------------------------------------------------------------------------

  const sortDocsData: Doc[] = [
    { _id: 'a', store_id: 2, v: 3 },
    { _id: 'b', store_id: 1, v: 3 },
    { _id: 'c', store_id: 2, v: 1 },
    { _id: 'd', store_id: 1, v: 2 },
    { _id: 'e', store_id: 2, v: 3 },
    { _id: 'f', store_id: 1, v: 1 },
  ];

  test(name('sort on one field, ascending and descending, ties broken by ascending _id'), (t) =>
    withStore(t, async (store, p) => {
      const indexes: IndexSpec[] = [{ keys: [['v', 1]] }];
      for (const [label, c] of await variants(store, p, indexes, sortDocsData)) {
        t.deepEqual(ids(await c.find({}, { sort: [['v', 1]] })), ['c', 'f', 'd', 'a', 'b', 'e'], label);
        t.deepEqual(ids(await c.find({}, { sort: [['v', -1]] })), ['a', 'b', 'e', 'd', 'c', 'f'], label);
        t.deepEqual(ids(await c.find({}, { sort: [['_id', -1]] })), ['f', 'e', 'd', 'c', 'b', 'a'], label);
        t.deepEqual(ids(await c.find({})), ['a', 'b', 'c', 'd', 'e', 'f'], `${label}: no sort is _id order`);
        t.deepEqual(
          ids(await c.find({ v: { $gte: 2 } }, { sort: [['v', -1]] })),
          ['a', 'b', 'e', 'd'],
          label,
        );
      }
    }),
  );

  test(name('sort on two fields in mixed directions'), (t) =>
    withStore(t, async (store, p) => {
      const indexes: IndexSpec[] = [
        {
          keys: [
            ['store_id', 1],
            ['v', -1],
          ],
        },
      ];
      for (const [label, c] of await variants(store, p, indexes, sortDocsData)) {
        t.deepEqual(
          ids(
            await c.find(
              {},
              {
                sort: [
                  ['store_id', 1],
                  ['v', -1],
                ],
              },
            ),
          ),
          ['b', 'd', 'f', 'a', 'e', 'c'],
          label,
        );
        t.deepEqual(
          ids(
            await c.find(
              {},
              {
                sort: [
                  ['store_id', -1],
                  ['v', 1],
                ],
              },
            ),
          ),
          ['c', 'a', 'e', 'f', 'd', 'b'],
          label,
        );
        t.deepEqual(
          ids(
            await c.find(
              {},
              {
                sort: [
                  ['v', 1],
                  ['store_id', 1],
                ],
              },
            ),
          ),
          ['f', 'c', 'd', 'b', 'a', 'e'],
          label,
        );
        t.deepEqual(ids(await c.find({ store_id: 2 }, { sort: [['v', -1]] })), ['a', 'e', 'c'], label);
        t.deepEqual(ids(await c.find({ store_id: 2 }, { sort: [['v', 1]] })), ['c', 'a', 'e'], label);
      }
    }),
  );

  test(name('limit returns the first documents in sort order'), (t) =>
    withStore(t, async (store, p) => {
      const indexes: IndexSpec[] = [
        {
          keys: [
            ['store_id', 1],
            ['v', -1],
          ],
        },
        { keys: [['v', 1]] },
      ];
      for (const [label, c] of await variants(store, p, indexes, sortDocsData)) {
        t.deepEqual(ids(await c.find({}, { sort: [['v', 1]], limit: 3 })), ['c', 'f', 'd'], label);
        t.deepEqual(ids(await c.find({ store_id: 1 }, { sort: [['v', -1]], limit: 2 })), ['b', 'd'], label);
        t.deepEqual(ids(await c.find({ store_id: 1 }, { limit: 1 })), ['b'], label);
        t.is((await c.find({}, { limit: 100 })).length, 6, label);
        t.deepEqual(
          await c.find({}, { sort: [['v', 1]], limit: 0 }),
          [],
          `${label}: limit 0 is no documents`,
        );
        t.deepEqual(await c.find({ store_id: 1 }, { sort: [['v', -1]], limit: 0 }), [], label);
      }
    }),
  );

  const mixedDocs: Doc[] = [
    { _id: 'a', v: 3 },
    { _id: 'b', v: 'b' },
    { _id: 'c', v: null },
    { _id: 'd' },
    { _id: 'e', v: 1 },
    { _id: 'f', v: 'a' },
    { _id: 'g', v: 10 },
    { _id: 'h', v: '10' },
    { _id: 'i', v: true },
    { _id: 'j', v: false },
    { _id: 'k', v: 2.5 },
    { _id: 'l', v: 3 },
    { _id: 'm', v: null },
  ];

  test(name('sorting mixed types follows MongoDB: null and missing, numbers, strings, booleans'), (t) =>
    withStore(t, async (store, p) => {
      for (const [label, c] of await variants(store, p, [{ keys: [['v', 1]] }], mixedDocs)) {
        t.deepEqual(
          ids(await c.find({}, { sort: [['v', 1]] })),
          ['c', 'd', 'm', 'e', 'k', 'a', 'l', 'g', 'h', 'f', 'b', 'j', 'i'],
          label,
        );
        t.deepEqual(
          ids(await c.find({}, { sort: [['v', -1]] })),
          ['i', 'j', 'b', 'f', 'h', 'g', 'a', 'l', 'k', 'e', 'c', 'd', 'm'],
          label,
        );
        t.deepEqual(ids(await c.find({}, { sort: [['v', 1]], limit: 4 })), ['c', 'd', 'm', 'e'], label);
      }
    }),
  );

  test(name('_id order puts numbers before strings'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`);
      await seed(c, [{ _id: 'b' }, { _id: 10 }, { _id: 'a' }, { _id: 2 }, { _id: '10' }, { _id: 1.5 }]);
      t.deepEqual(ids(await c.find({})), [1.5, 2, 10, '10', 'a', 'b']);
      t.deepEqual(ids(await c.find({}, { sort: [['_id', -1]] })), ['b', 'a', '10', 10, 2, 1.5]);
      t.deepEqual(ids(await pageAll(c, {}, undefined, 2)), [1.5, 2, 10, '10', 'a', 'b']);
      t.deepEqual(ids(await pageAll(c, {}, [['_id', -1]], 4)), ['b', 'a', '10', 10, 2, 1.5]);
    }),
  );

  // ---- paging with `after` -------------------------------------------------------------------------

  test(name('paging with after visits every document once, in order, with many equal sort values'), (t) =>
    withStore(t, async (store, p) => {
      const docs: Doc[] = Array.from({ length: 53 }, (_, i) => ({
        _id: `d${String((i * 37) % 53).padStart(3, '0')}`,
        v: i % 5,
        w: i % 3,
      }));
      const indexes: IndexSpec[] = [
        { keys: [['v', 1]] },
        {
          keys: [
            ['w', -1],
            ['v', 1],
          ],
        },
      ];
      for (const [label, c] of await variants(store, p, indexes, docs)) {
        for (const sort of [
          undefined,
          [['v', 1]],
          [['v', -1]],
          [
            ['w', -1],
            ['v', 1],
          ],
          [
            ['w', 1],
            ['v', -1],
          ],
        ] as Array<SortSpec | undefined>) {
          for (const size of [1, 7, 53, 60]) {
            const got = await pageAll(c, {}, sort, size);
            t.deepEqual(ids(got), ids(sortDocs(docs, sort)), `${label} ${JSON.stringify(sort)} by ${size}`);
          }
        }
        const filtered = await pageAll(c, { v: { $gte: 2 } }, [['v', -1]], 4);
        t.deepEqual(
          ids(filtered),
          ids(
            sortDocs(
              docs.filter((d) => (d.v as number) >= 2),
              [['v', -1]],
            ),
          ),
          label,
        );
      }
    }),
  );

  test(name('paging an index with an equality prefix, ascending and descending'), (t) =>
    withStore(t, async (store, p) => {
      const docs: Doc[] = Array.from({ length: 60 }, (_, i) => ({
        _id: `p${String(i).padStart(3, '0')}`,
        store_id: i % 3,
        id: (i * 7) % 20,
        updated_at: `2026-01-${String((i % 28) + 1).padStart(2, '0')}`,
      }));
      const indexes: IndexSpec[] = [
        {
          keys: [
            ['store_id', 1],
            ['id', 1],
          ],
        },
        {
          keys: [
            ['store_id', 1],
            ['updated_at', -1],
          ],
        },
      ];
      for (const [label, c] of await variants(store, p, indexes, docs)) {
        for (const sort of [
          [['id', 1]],
          [['id', -1]],
          [['updated_at', -1]],
          [['updated_at', 1]],
        ] as SortSpec[]) {
          const want = sortDocs(
            docs.filter((d) => d.store_id === 1),
            sort,
          );
          t.deepEqual(
            ids(await c.find({ store_id: 1 }, { sort })),
            ids(want),
            `${label} ${JSON.stringify(sort)}`,
          );
          t.deepEqual(
            ids(await pageAll(c, { store_id: 1 }, sort, 3)),
            ids(want),
            `${label} ${JSON.stringify(sort)} paged`,
          );
        }
      }
    }),
  );

  test(name('paging through mixed types and nulls follows MongoDB type order'), (t) =>
    withStore(t, async (store, p) => {
      for (const [label, c] of await variants(store, p, [{ keys: [['v', 1]] }], mixedDocs)) {
        for (const size of [1, 2, 5]) {
          t.deepEqual(
            ids(await pageAll(c, {}, [['v', 1]], size)),
            ['c', 'd', 'm', 'e', 'k', 'a', 'l', 'g', 'h', 'f', 'b', 'j', 'i'],
            `${label} asc by ${size}`,
          );
          t.deepEqual(
            ids(await pageAll(c, {}, [['v', -1]], size)),
            ['i', 'j', 'b', 'f', 'h', 'g', 'a', 'l', 'k', 'e', 'c', 'd', 'm'],
            `${label} desc by ${size}`,
          );
        }
        // A cursor taken at a null value, at a number and at a string.
        t.deepEqual(
          ids(await c.find({}, { sort: [['v', 1]], after: [null, 'd'], limit: 3 })),
          ['m', 'e', 'k'],
          label,
        );
        t.deepEqual(
          ids(await c.find({}, { sort: [['v', 1]], after: [10, 'g'], limit: 2 })),
          ['h', 'f'],
          label,
        );
        t.deepEqual(
          ids(await c.find({}, { sort: [['v', -1]], after: ['10', 'h'] })),
          ['g', 'a', 'l', 'k', 'e', 'c', 'd', 'm'],
          label,
        );
        t.deepEqual(ids(await c.find({}, { sort: [['v', -1]], after: [1, 'e'] })), ['c', 'd', 'm'], label);
      }
    }),
  );

  test(name('paging while documents are added and removed between pages'), (t) =>
    withStore(t, async (store, p) => {
      const docs: Doc[] = Array.from({ length: 30 }, (_, i) => ({
        _id: `k${String(i).padStart(3, '0')}`,
        v: Math.floor(i / 3) * 10,
      }));
      for (const [label, c] of await variants(store, p, [{ keys: [['v', 1]] }], docs)) {
        const removed = new Set<DocId>();
        const late: DocId[] = [];
        const got = await pageAll(c, {}, [['v', 1]], 4, async (page, n) => {
          const last = page[page.length - 1];
          const lastV = last.v as number;
          const ahead = docs[Math.min(docs.length - 1, (n + 2) * 4 + 1)];
          const k = String(n).padStart(3, '0');
          const writes = [
            // Behind the cursor: never seen.
            { _id: `${label}-behind-${k}`, v: lastV - 1 },
            { _id: `a-${label}-${k}`, v: lastV },
            // Ahead of the cursor: seen later, in order.
            { _id: `z-${label}-${k}`, v: lastV },
            { _id: `${label}-ahead-${k}`, v: 1000 + n },
          ];
          late.push(`z-${label}-${k}`, `${label}-ahead-${k}`);
          await seed(c, writes);
          if (ahead && !removed.has(ahead._id) && (ahead.v as number) > lastV) {
            removed.add(ahead._id);
            await c.bulkWrite([{ deleteOne: { filter: { _id: ahead._id } } }]);
          }
        });
        const seen = ids(got);
        t.is(new Set(seen).size, seen.length, `${label}: no document twice`);
        const expectedOriginals = docs.map((d) => d._id).filter((id) => !removed.has(id));
        t.deepEqual(
          seen.filter((id) => typeof id === 'string' && id.startsWith('k')),
          expectedOriginals,
          `${label}: every original document that stayed, once, in order`,
        );
        t.true(removed.size > 0, label);
        t.true(
          late.every((id) => seen.includes(id)),
          `${label}: documents added ahead of the cursor are seen`,
        );
        t.false(
          seen.some((id) => String(id).includes('-behind-') || String(id).startsWith('a-')),
          `${label}: documents added behind the cursor are not`,
        );
        for (let i = 1; i < got.length; i++) {
          const a = got[i - 1];
          const b = got[i];
          const c2 = compareValues(a.v, b.v) || (a._id < b._id ? -1 : 1);
          t.true(c2 < 0, `${label}: in order at ${i}`);
        }
      }
    }),
  );

  // ---- indexes -------------------------------------------------------------------------------------

  test(name('a unique index refuses a duplicate from replaceOne and from updateOne'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`, [{ keys: [['sku', 1]], unique: true }]);
      await seed(c, [
        { _id: 'a', sku: 'X' },
        { _id: 'b', sku: 'Y' },
      ]);
      await t.throwsAsync(
        c.bulkWrite([
          { replaceOne: { filter: { _id: 'c' }, replacement: { _id: 'c', sku: 'X' }, upsert: true } },
        ]),
        { message: /duplicate key/i },
      );
      await t.throwsAsync(
        c.bulkWrite([{ updateOne: { filter: { _id: 'b' }, update: { $set: { sku: 'X' } } } }]),
        {
          message: /duplicate key/i,
        },
      );
      t.is(await c.findOne({ _id: 'c' }), null);
      t.deepEqual(await c.findOne({ _id: 'b' }), { _id: 'b', sku: 'Y' });
      t.deepEqual(ids(await c.find({ sku: 'X' })), ['a']);
      // Rewriting a document with its own value is no conflict; a freed value can be taken.
      await seed(c, [{ _id: 'a', sku: 'X', v: 2 }]);
      await c.bulkWrite([
        { updateOne: { filter: { _id: 'a' }, update: { $set: { sku: 'Z' } } } },
        { updateOne: { filter: { _id: 'b' }, update: { $set: { sku: 'X' } } } },
      ]);
      t.deepEqual(await c.find({}, { sort: [['sku', 1]] }), [
        { _id: 'b', sku: 'X' },
        { _id: 'a', sku: 'Z', v: 2 },
      ]);
    }),
  );

  test(name('a document that leaves a unique value (null included) frees it for another'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`, [{ keys: [['sku', 1]], unique: true }]);
      await seed(c, [{ _id: 'a' }]);
      // Only one document may lack the field (MongoDB indexes missing as null)...
      await t.throwsAsync(seed(c, [{ _id: 'b' }]), { message: /duplicate key/i });
      // ...until it gets a value: then the null is free, and the old value once it moves on again.
      await c.bulkWrite([{ updateOne: { filter: { _id: 'a' }, update: { $set: { sku: 'X' } } } }]);
      await seed(c, [{ _id: 'b' }]);
      await c.bulkWrite([{ updateOne: { filter: { _id: 'a' }, update: { $set: { sku: 'Y' } } } }]);
      await seed(c, [{ _id: 'c', sku: 'X' }]);
      await c.bulkWrite([{ deleteOne: { filter: { _id: 'b' } } }]);
      await seed(c, [{ _id: 'd' }]);
      t.deepEqual(ids(await c.find({}, { sort: [['sku', 1]] })), ['d', 'c', 'a']);
    }),
  );

  test(name('a unique compound index refuses only a duplicate of all its fields'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`, [
        {
          keys: [
            ['store_id', 1],
            ['sku', 1],
          ],
          unique: true,
        },
      ]);
      await seed(c, [
        { _id: 'a', store_id: 1, sku: 'X' },
        { _id: 'b', store_id: 2, sku: 'X' },
        { _id: 'c', store_id: 1, sku: 'Y' },
      ]);
      await t.throwsAsync(seed(c, [{ _id: 'd', store_id: 2, sku: 'X' }]), { message: /duplicate key/i });
      t.is(await c.count(), 3);
    }),
  );

  test(name('declaring the indexes again is idempotent'), (t) =>
    withStore(t, async (store, p) => {
      const indexes: IndexSpec[] = [
        { keys: [['sku', 1]], unique: true },
        {
          keys: [
            ['store_id', 1],
            ['v', -1],
          ],
        },
      ];
      const first = await store.collection(`${p}_items`, indexes);
      await seed(first, [
        { _id: 'a', sku: 'X', store_id: 1, v: 1 },
        { _id: 'b', sku: 'Y', store_id: 1, v: 2 },
      ]);
      const again = await store.collection(`${p}_items`, indexes);
      const bare = await store.collection(`${p}_items`);
      t.deepEqual(ids(await again.find({ store_id: 1 }, { sort: [['v', -1]] })), ['b', 'a']);
      t.is(await bare.count(), 2);
      await t.throwsAsync(seed(again, [{ _id: 'c', sku: 'X' }]), { message: /duplicate key/i });
      await t.throwsAsync(seed(bare, [{ _id: 'c', sku: 'Y' }]), { message: /duplicate key/i });
      await seed(first, [{ _id: 'c', sku: 'Z', store_id: 1, v: 3 }]);
      t.deepEqual(ids(await again.find({ store_id: 1 }, { sort: [['v', -1]], limit: 2 })), ['c', 'b']);
    }),
  );

  test(
    name(
      'declared indexes are created on a collection without documents; one holding documents keeps its own',
    ),
    (t) =>
      withStore(t, async (store, p) => {
        const unique: IndexSpec[] = [{ keys: [['sku', 1]], unique: true }];
        const held = await store.collection(`${p}_held`);
        await seed(held, [
          { _id: 'a', sku: 'S' },
          { _id: 'b', sku: 'S' },
        ]);
        // Its documents break the index: it is not built over them, and the declaration is no error.
        const declared = await store.collection(`${p}_held`, unique);
        await seed(declared, [{ _id: 'c', sku: 'S' }]);
        t.is(await held.count({ sku: 'S' }), 3, 'no unique index on a collection that held documents');

        const emptied = await store.collection(`${p}_emptied`);
        await seed(emptied, [{ _id: 'a', sku: 'S' }]);
        await emptied.bulkWrite([{ deleteMany: { filter: {} } }]);
        for (const fresh of [`${p}_new`, `${p}_emptied`]) {
          const indexed = await store.collection(fresh, unique);
          await seed(indexed, [{ _id: 'x', sku: 'S' }]);
          await t.throwsAsync(seed(indexed, [{ _id: 'y', sku: 'S' }]), { message: /duplicate key/i }, fresh);
        }
      }),
  );

  // ---- shadows -------------------------------------------------------------------------------------

  test(
    name('writes to a shadow stay invisible until promote; then an existing live handle sees only them'),
    (t) =>
      withStore(t, async (store, p) => {
        const indexes: IndexSpec[] = [{ keys: [['store_id', 1]] }];
        const live = await store.collection(`${p}_menu`, indexes);
        await seed(live, [
          { _id: 'old1', store_id: 1 },
          { _id: 'old2', store_id: 2 },
        ]);
        const shadow = await store.createShadow(`${p}_menu`, indexes);
        t.is(await shadow.count(), 0, 'a shadow starts empty');
        await seed(shadow, [
          { _id: 'new1', store_id: 1 },
          { _id: 'new2', store_id: 1 },
          { _id: 'new3', store_id: 3 },
        ]);
        t.deepEqual(ids(await live.find({})), ['old1', 'old2']);
        t.is(await live.findOne({ _id: 'new1' }), null);
        t.deepEqual(ids(await shadow.find({ store_id: 1 })), ['new1', 'new2']);

        await store.promote([shadow]);
        t.deepEqual(ids(await live.find({})), ['new1', 'new2', 'new3']);
        t.deepEqual(ids(await live.find({ store_id: 1 })), ['new1', 'new2']);
        t.is(await live.findOne({ _id: 'old1' }), null);
        t.deepEqual(await live.findByIds(['old1', 'old2']), []);
        t.is(await live.count({ store_id: 2 }), 0);
        const reopened = await store.collection(`${p}_menu`, indexes);
        t.deepEqual(ids(await reopened.find({})), ['new1', 'new2', 'new3']);
        // The live handle keeps writing to the promoted collection.
        await seed(live, [{ _id: 'after', store_id: 9 }]);
        t.deepEqual(await reopened.findOne({ store_id: 9 }), { _id: 'after', store_id: 9 });
      }),
  );

  test(name('promote makes several shadows live at once'), (t) =>
    withStore(t, async (store, p) => {
      const a = await store.collection(`${p}_a`);
      const b = await store.collection(`${p}_b`);
      await seed(a, [{ _id: 'a-old' }]);
      await seed(b, [{ _id: 'b-old' }]);
      const sa = await store.createShadow(`${p}_a`);
      const sb = await store.createShadow(`${p}_b`);
      await seed(sa, [{ _id: 'a-new' }]);
      await seed(sb, [{ _id: 'b-new' }]);
      await store.promote([sa, sb]);
      t.deepEqual(ids(await a.find({})), ['a-new']);
      t.deepEqual(ids(await b.find({})), ['b-new']);
    }),
  );

  test(name('a shadow has its declared indexes, and keeps them when promoted'), (t) =>
    withStore(t, async (store, p) => {
      const live = await store.collection(`${p}_items`);
      await seed(live, [
        { _id: 'x1', sku: 'S' },
        { _id: 'x2', sku: 'S' },
      ]);
      const shadow = await store.createShadow(`${p}_items`, [{ keys: [['sku', 1]], unique: true }]);
      await seed(shadow, [{ _id: 'a', sku: 'S' }]);
      await t.throwsAsync(seed(shadow, [{ _id: 'b', sku: 'S' }]), { message: /duplicate key/i });
      await store.promote([shadow]);
      await t.throwsAsync(seed(live, [{ _id: 'c', sku: 'S' }]), { message: /duplicate key/i });
      t.deepEqual(await live.find({}), [{ _id: 'a', sku: 'S' }]);
    }),
  );

  test(
    name('dropShadow abandons a rebuild: the live collection is untouched and the next shadow is empty'),
    (t) =>
      withStore(t, async (store, p) => {
        const live = await store.collection(`${p}_items`);
        await seed(live, [{ _id: 'live' }]);
        const first = await store.createShadow(`${p}_items`);
        await seed(first, [{ _id: 'abandoned' }]);
        await store.dropShadow(first);
        t.deepEqual(ids(await live.find({})), ['live']);
        const second = await store.createShadow(`${p}_items`);
        t.is(await second.count(), 0);
        await t.throwsAsync(
          store.promote([live]),
          { message: /not a shadow/ },
          'a live collection is not a shadow',
        );
        await store.promote([second]);
        t.is(await live.count(), 0, 'promoting an empty shadow empties the live collection');
      }),
  );

  test(name('two shadows of one collection are independent; the one promoted wins'), (t) =>
    withStore(t, async (store, p) => {
      const live = await store.collection(`${p}_items`);
      const s1 = await store.createShadow(`${p}_items`);
      const s2 = await store.createShadow(`${p}_items`);
      await seed(s1, [{ _id: 'one' }]);
      await seed(s2, [{ _id: 'two' }]);
      t.deepEqual(ids(await s1.find({})), ['one']);
      t.deepEqual(ids(await s2.find({})), ['two']);
      await store.promote([s2]);
      await store.dropShadow(s1);
      t.deepEqual(ids(await live.find({})), ['two']);
    }),
  );

  // ---- checkpoints ---------------------------------------------------------------------------------

  test(name('checkpoints round-trip and are kept per name'), (t) =>
    withStore(t, async (store, p) => {
      t.is(await store.getCheckpoint(`${p}-menu`), undefined);
      const first: Checkpoint = { position: 42, events: 7, updated_at: '2026-01-02T03:04:05.000Z' };
      await store.setCheckpoint(`${p}-menu`, first);
      t.deepEqual(await store.getCheckpoint(`${p}-menu`), first);
      const second: Checkpoint = {
        position: 9_007_199_254_740,
        events: 1_000_000,
        updated_at: '2026-02-01T00:00:00.000Z',
      };
      await store.setCheckpoint(`${p}-menu`, second);
      await store.setCheckpoint(`${p}-orders`, first);
      t.deepEqual(await store.getCheckpoint(`${p}-menu`), second);
      t.deepEqual(await store.getCheckpoint(`${p}-orders`), first);
      t.is(await store.getCheckpoint(`${p}-other`), undefined);
    }),
  );

  // ---- copies --------------------------------------------------------------------------------------

  test(name('documents returned are not changed by later writes'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`, [{ keys: [['v', 1]] }]);
      const original = { _id: 'a', v: 1, tags: ['x'], nested: { n: 1 } };
      await seed(c, [original]);
      const one = await c.findOne({ _id: 'a' });
      const [listed] = await c.find({ v: 1 });
      const [byId] = await c.findByIds(['a']);
      const snapshot = structuredClone(original);
      await c.bulkWrite([
        {
          updateOne: {
            filter: { _id: 'a' },
            update: { $set: { v: 2 }, $push: { tags: 'y' }, $inc: { 'nested.n': 1 } },
          },
        },
      ]);
      await c.bulkWrite([{ updateMany: { filter: {}, update: { $set: { 'nested.m': 1 } } } }]);
      t.deepEqual(one, snapshot);
      t.deepEqual(listed, snapshot);
      t.deepEqual(byId, snapshot);
      const updated = await c.findOne({ _id: 'a' });
      await c.bulkWrite([{ replaceOne: { filter: { _id: 'a' }, replacement: { _id: 'a', v: 3 } } }]);
      await c.bulkWrite([{ deleteOne: { filter: { _id: 'a' } } }]);
      t.deepEqual(updated, { _id: 'a', v: 2, tags: ['x', 'y'], nested: { n: 2, m: 1 } });
      t.deepEqual(one, snapshot);
    }),
  );

  test(name('values written are copied: changing them afterwards changes nothing stored'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_items`, [{ keys: [['v', 1]] }]);
      const replacement = { _id: 'a', v: 1, tags: ['x'] };
      const address = { city: 'Oakland' };
      const line = { sku: 'A' };
      await c.bulkWrite([
        { replaceOne: { filter: { _id: 'a' }, replacement, upsert: true } },
        { updateOne: { filter: { _id: 'a' }, update: { $set: { address }, $push: { lines: line } } } },
      ]);
      replacement.v = 99;
      replacement.tags.push('mutated');
      address.city = 'mutated';
      line.sku = 'mutated';
      t.deepEqual(await c.findOne({ _id: 'a' }), {
        _id: 'a',
        v: 1,
        tags: ['x'],
        address: { city: 'Oakland' },
        lines: [{ sku: 'A' }],
      });
      t.deepEqual(ids(await c.find({ v: 1 })), ['a']);
      t.deepEqual(ids(await c.find({ v: 99 })), []);
    }),
  );

  // ---- commits: a batch's writes with its checkpoints, all or nothing --------------------------

  const at = (position: number, version?: string): Checkpoint => ({
    position,
    events: position * 2,
    updated_at: `2026-03-0${(position % 9) + 1}T00:00:00.000Z`,
    ...(version === undefined ? {} : { version }),
  });

  test(name('commit applies writes to several collections in order, then its checkpoints'), (t) =>
    withStore(t, async (store, p) => {
      const a = await store.collection(`${p}_a`);
      const b = await store.collection(`${p}_b`, [{ keys: [['sku', 1]], unique: true }]);
      await seed(a, [{ _id: 'keep', v: 1 }, { _id: 'gone' }]);
      await store.commit({
        writes: [
          {
            collection: a,
            ops: [
              { replaceOne: { filter: { _id: 'x' }, replacement: { _id: 'x', v: 5 }, upsert: true } },
              { updateOne: { filter: { _id: 'keep' }, update: { $inc: { v: 1 } } } },
              { deleteOne: { filter: { _id: 'gone' } } },
            ],
          },
          {
            collection: b,
            ops: [{ updateOne: { filter: { _id: 1 }, update: { $set: { sku: 'S' } }, upsert: true } }],
          },
          {
            collection: a,
            ops: [{ updateMany: { filter: { v: { $gte: 2 } }, update: { $set: { big: true } } } }],
          },
          { collection: b, ops: [] },
        ],
        checkpoints: [
          { name: `${p}-proj`, checkpoint: at(10, 'v2') },
          { name: `${p}-other`, checkpoint: at(4) },
        ],
      });
      t.deepEqual(await a.find({}), [
        { _id: 'keep', v: 2, big: true },
        { _id: 'x', v: 5, big: true },
      ]);
      t.deepEqual(await b.find({ sku: 'S' }), [{ _id: 1, sku: 'S' }]);
      t.deepEqual(await store.getCheckpoint(`${p}-proj`), at(10, 'v2'));
      t.deepEqual(await store.getCheckpoint(`${p}-other`), at(4), 'no version stored: none comes back');

      // Only checkpoints, and nothing at all, are commits too.
      await store.commit({ writes: [], checkpoints: [{ name: `${p}-proj`, checkpoint: at(11, 'v2') }] });
      await store.commit({ writes: [{ collection: a, ops: [] }] });
      t.deepEqual(await store.getCheckpoint(`${p}-proj`), at(11, 'v2'));
      t.is(await a.count(), 2);
    }),
  );

  test(
    name('commit is all or nothing: an op failing in a later collection leaves no trace of the commit'),
    (t) =>
      withStore(t, async (store, p) => {
        const a = await store.collection(`${p}_a`, [{ keys: [['v', 1]] }]);
        const b = await store.collection(`${p}_b`, [{ keys: [['sku', 1]], unique: true }]);
        await seed(a, [
          { _id: 'a1', v: 1 },
          { _id: 'a2', v: 2 },
        ]);
        await seed(b, [{ _id: 'b1', sku: 'S' }]);
        await store.setCheckpoint(`${p}-proj`, at(3, 'v1'));

        const failing = store.commit({
          writes: [
            {
              collection: a,
              ops: [
                { updateOne: { filter: { _id: 'a1' }, update: { $set: { v: 10 } } } },
                { deleteOne: { filter: { _id: 'a2' } } },
                { replaceOne: { filter: { _id: 'a3' }, replacement: { _id: 'a3', v: 3 }, upsert: true } },
                { updateMany: { filter: {}, update: { $set: { touched: true } } } },
              ],
            },
            {
              collection: b,
              ops: [
                { replaceOne: { filter: { _id: 'b2' }, replacement: { _id: 'b2', sku: 'T' }, upsert: true } },
                { updateOne: { filter: { _id: 'b1' }, update: { $set: { sku: 'U' } } } },
                // Duplicates b2's key: the commit fails here, after writes to both collections.
                { replaceOne: { filter: { _id: 'b3' }, replacement: { _id: 'b3', sku: 'T' }, upsert: true } },
              ],
            },
          ],
          checkpoints: [{ name: `${p}-proj`, checkpoint: at(9, 'v1') }],
        });
        await t.throwsAsync(failing, { message: /duplicate key/i });

        t.deepEqual(await a.find({}), [
          { _id: 'a1', v: 1 },
          { _id: 'a2', v: 2 },
        ]);
        t.deepEqual(
          ids(await a.find({ v: { $gte: 1 } }, { sort: [['v', -1]] })),
          ['a2', 'a1'],
          'index as before',
        );
        t.deepEqual(await b.find({}), [{ _id: 'b1', sku: 'S' }]);
        t.deepEqual(await b.find({ sku: 'S' }), [{ _id: 'b1', sku: 'S' }]);
        t.deepEqual(await b.find({ sku: { $in: ['T', 'U'] } }), []);
        t.deepEqual(await store.getCheckpoint(`${p}-proj`), at(3, 'v1'), 'checkpoint unchanged');

        // A refused operation (an update without operators) in a later collection: nothing applied either.
        await t.throwsAsync(
          store.commit({
            writes: [
              { collection: a, ops: [{ deleteMany: { filter: {} } }] },
              { collection: b, ops: [{ updateOne: { filter: { _id: 'b1' }, update: { sku: 'V' } } }] },
            ],
            checkpoints: [{ name: `${p}-proj`, checkpoint: at(9, 'v1') }],
          }),
        );
        t.is(await a.count(), 2);
        t.deepEqual(await store.getCheckpoint(`${p}-proj`), at(3, 'v1'));

        // The store goes on: a valid commit applies, and the unique index still holds.
        await store.commit({
          writes: [
            {
              collection: b,
              ops: [
                { replaceOne: { filter: { _id: 'b2' }, replacement: { _id: 'b2', sku: 'T' }, upsert: true } },
              ],
            },
          ],
          checkpoints: [{ name: `${p}-proj`, checkpoint: at(4, 'v1') }],
        });
        t.deepEqual(ids(await b.find({}, { sort: [['sku', 1]] })), ['b1', 'b2']);
        await t.throwsAsync(seed(b, [{ _id: 'b4', sku: 'S' }]), { message: /duplicate key/i });
        t.deepEqual(await store.getCheckpoint(`${p}-proj`), at(4, 'v1'));
      }),
  );

  test(name('commit refuses a collection handle this store did not give out, and writes nothing'), (t) =>
    withStore(t, async (store, p) => {
      const a = await store.collection(`${p}_a`);
      const foreign = { ...a };
      await t.throwsAsync(
        store.commit({
          writes: [
            {
              collection: a,
              ops: [{ replaceOne: { filter: { _id: 'x' }, replacement: { _id: 'x' }, upsert: true } }],
            },
            { collection: foreign, ops: [{ deleteMany: { filter: {} } }] },
          ],
          checkpoints: [{ name: `${p}-proj`, checkpoint: at(1) }],
        }),
        { message: /not a collection of this store/ },
      );
      t.is(await a.count(), 0);
      t.is(await store.getCheckpoint(`${p}-proj`), undefined);
    }),
  );

  test(name('promote stores its checkpoints with the switch; with no shadows it stores only them'), (t) =>
    withStore(t, async (store, p) => {
      const live = await store.collection(`${p}_menu`);
      await seed(live, [{ _id: 'old' }]);
      await store.setCheckpoint(`${p}-proj`, at(5, 'v1'));
      const shadow = await store.createShadow(`${p}_menu`);
      await store.commit({
        writes: [
          {
            collection: shadow,
            ops: [{ replaceOne: { filter: { _id: 'new' }, replacement: { _id: 'new' }, upsert: true } }],
          },
        ],
        checkpoints: [{ name: `${p}-proj#rebuild`, checkpoint: at(7, 'v2') }],
      });
      t.deepEqual(ids(await live.find({})), ['old'], 'a commit to a shadow is not live');
      await store.promote([shadow], [{ name: `${p}-proj`, checkpoint: at(7, 'v2') }]);
      t.deepEqual(ids(await live.find({})), ['new']);
      t.deepEqual(await store.getCheckpoint(`${p}-proj`), at(7, 'v2'));
      t.deepEqual(await store.getCheckpoint(`${p}-proj#rebuild`), at(7, 'v2'));

      await store.promote([], [{ name: `${p}-other`, checkpoint: at(2, 'v9') }]);
      t.deepEqual(await store.getCheckpoint(`${p}-other`), at(2, 'v9'));
      await t.throwsAsync(store.promote([shadow]), { message: /not a shadow/ }, 'promoted already');
      t.deepEqual(ids(await live.find({})), ['new']);
    }),
  );

  test(name('a checkpoint version round-trips; a checkpoint stored without one replaces it'), (t) =>
    withStore(t, async (store, p) => {
      await store.setCheckpoint(`${p}-proj`, at(1, 'catalog@3'));
      t.deepEqual(await store.getCheckpoint(`${p}-proj`), at(1, 'catalog@3'));
      await store.setCheckpoint(`${p}-proj`, at(2, 'sha256:0f1e2d'));
      t.deepEqual(await store.getCheckpoint(`${p}-proj`), at(2, 'sha256:0f1e2d'));
      await store.setCheckpoint(`${p}-proj`, at(3));
      const back = await store.getCheckpoint(`${p}-proj`);
      t.deepEqual(back, at(3));
      t.false(back !== undefined && 'version' in back, 'no version key at all');
    }),
  );
}
