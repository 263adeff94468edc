/**
 * The ReadStore contract, continued: where MongoDB's behaviour is easy to miss, so an embedded adapter
 * could differ without any other case noticing (docs/read-side.md, "Read stores"). Every adapter runs
 * these through `readStoreContract`:
 *
 * - strings order by code point (UTF-8 bytes, MongoDB's simple binary collation), not by JavaScript's
 *   UTF-16 code units: in sorts, ranges and cursors;
 * - a sort on a field holding arrays uses the smallest element ascending and the largest descending,
 *   an empty array before null and missing; a cursor holding an array is refused;
 * - a unique index holds null for a missing field, and an empty array as a key of its own;
 * - a document over 16 MiB of BSON is refused, and its whole commit with it.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext, TestFn } from 'ava';
import {
  ArrayCursorError,
  type Collection,
  type Doc,
  type DocId,
  DocumentTooLargeError,
  type Filter,
  type IndexSpec,
  MAX_DOCUMENT_BYTES,
  type ReadStore,
  type SortSpec,
  totalSort,
} from '../../projections/read-store.ts';

export interface OpenedStore {
  store: ReadStore;
  cleanup: () => Promise<void>;
}

function ids(docs: readonly Doc[]): DocId[] {
  return docs.map((d) => d._id);
}

async function seed(c: Collection, docs: readonly Doc[]): Promise<void> {
  await c.bulkWrite(
    docs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
  );
}

/** Reads a whole result page by page with `after` (top-level sort fields). */
async function pageAll(c: Collection, filter: Filter, sort: SortSpec | undefined, size: number) {
  const out: Doc[] = [];
  let after: unknown[] | undefined;
  for (let n = 0; n < 1_000; n++) {
    const page = await c.find(filter, { sort, limit: size, ...(after ? { after } : {}) });
    out.push(...page);
    if (page.length < size) return out;
    const last = page[page.length - 1];
    after = totalSort(sort).map(([f]) => last[f] ?? null);
  }
  throw new Error('paging did not end');
}

/** Strings in code point order; JavaScript's `<` puts the last two before '\uE000'. */
const ORDERED_STRINGS = ['Z', 'a', 'ab', 'é', '中', '\uE000', '\uFFFD', '𝒜', '😀'];

/** One document per string, stored in another order than theirs. */
const stringDocs: Doc[] = ORDERED_STRINGS.map((v, i) => ({ _id: `s${(i * 5) % 9}`, v, tags: [v, 'm'] }));
const byString = (list: readonly string[]) =>
  list.map((v) => stringDocs.find((d) => d.v === v)?._id as DocId);

/** Documents for sorts on a field holding arrays, with their orders (ties by ascending `_id`). */
const arrayDocs: Doc[] = [
  { _id: 'a', v: [3, 1] },
  { _id: 'b', v: 2 },
  { _id: 'c', v: [5] },
  { _id: 'd', v: [] },
  { _id: 'e', v: null },
  { _id: 'f' },
  { _id: 'g', v: [0, 9] },
  { _id: 'h', v: 'x' },
  { _id: 'i', v: ['a', 4] },
  { _id: 'j', v: 1 },
];
const ARRAYS_ASCENDING = ['d', 'e', 'f', 'g', 'a', 'j', 'b', 'i', 'c', 'h'];
const ARRAYS_DESCENDING = ['h', 'i', 'g', 'c', 'a', 'b', 'j', 'e', 'f', 'd'];

/** Both directions of `v` indexed, so an index walk can serve each sort. */
const V_INDEXES: IndexSpec[] = [{ keys: [['v', 1]] }, { keys: [['v', -1]] }];

export function readStoreDifferences(test: TestFn, adapter: string, open: () => Promise<OpenedStore>): void {
  const name = (title: string) => `${adapter}: ${title}`;

  async function withStore(t: ExecutionContext, fn: (store: ReadStore, p: string) => Promise<void>) {
    const opened = await open();
    t.teardown(() => opened.cleanup());
    await fn(opened.store, `d${randomUUID().replaceAll('-', '').slice(0, 12)}`);
  }

  /** The same documents in a collection declaring `indexes` and in one declaring none. */
  async function variants(store: ReadStore, p: string, indexes: readonly IndexSpec[], docs: readonly Doc[]) {
    const indexed = await store.collection(`${p}_indexed`, indexes);
    const plain = await store.collection(`${p}_plain`);
    await seed(indexed, docs);
    await seed(plain, docs);
    return [
      ['indexed', indexed],
      ['unindexed', plain],
    ] as const;
  }

  // ---- strings ---------------------------------------------------------------------------------------

  test(name('strings sort by code point (UTF-8 bytes): Z < a < é < 中 < \\uE000 < \\uFFFD < 𝒜 < 😀'), (t) =>
    withStore(t, async (store, p) => {
      const descending = [...ORDERED_STRINGS].reverse();
      for (const [label, c] of await variants(store, p, V_INDEXES, stringDocs)) {
        t.deepEqual(ids(await c.find({}, { sort: [['v', 1]] })), byString(ORDERED_STRINGS), label);
        t.deepEqual(ids(await c.find({}, { sort: [['v', -1]] })), byString(descending), label);
        t.deepEqual(ids(await c.find({}, { sort: [['v', -1]], limit: 3 })), byString(descending.slice(0, 3)));
      }
      // _id order too (the documents' own key).
      const keyed = await store.collection(`${p}_ids`);
      await seed(
        keyed,
        [...ORDERED_STRINGS].reverse().map((v) => ({ _id: v })),
      );
      t.deepEqual(ids(await keyed.find({})), ORDERED_STRINGS);
      t.deepEqual(ids(await keyed.find({}, { sort: [['_id', -1]] })), descending);
      t.deepEqual(ids(await keyed.find({ _id: { $gt: '\uFFFD' } })), ['𝒜', '😀']);
    }),
  );

  test(name('string ranges $gt/$gte/$lt/$lte compare code points, also on array elements'), (t) =>
    withStore(t, async (store, p) => {
      const indexes: IndexSpec[] = [{ keys: [['v', 1]] }, { keys: [['tags', 1]] }];
      const sort: SortSpec = [['v', 1]];
      for (const [label, c] of await variants(store, p, indexes, stringDocs)) {
        t.deepEqual(ids(await c.find({ v: { $gt: '\uFFFD' } }, { sort })), byString(['𝒜', '😀']), label);
        t.deepEqual(
          ids(await c.find({ v: { $gte: '\uE000' } }, { sort })),
          byString(ORDERED_STRINGS.slice(5)),
        );
        t.deepEqual(
          ids(await c.find({ v: { $gte: '中', $lt: '😀' } }, { sort })),
          byString(['中', '\uE000', '\uFFFD', '𝒜']),
          label,
        );
        t.deepEqual(
          ids(await c.find({ v: { $lte: 'é' } }, { sort })),
          byString(['Z', 'a', 'ab', 'é']),
          label,
        );
        t.deepEqual(
          ids(await c.find({ v: { $lt: '\uFFFD' } }, { sort })),
          byString(ORDERED_STRINGS.slice(0, 6)),
        );
        t.deepEqual(ids(await c.find({ tags: { $gt: '\uFFFD' } }, { sort })), byString(['𝒜', '😀']), label);
        t.deepEqual(ids(await c.find({ $nor: [{ v: { $lt: '😀' } }] })), byString(['😀']), label);
        t.is(await c.count({ v: { $gt: '\uFFFD' } }), 2, label);
      }
    }),
  );

  test(name('paging with after through non-ASCII strings visits each once, in code point order'), (t) =>
    withStore(t, async (store, p) => {
      const descending = [...ORDERED_STRINGS].reverse();
      for (const [label, c] of await variants(store, p, V_INDEXES, stringDocs)) {
        for (const size of [1, 2, 4]) {
          t.deepEqual(ids(await pageAll(c, {}, [['v', 1]], size)), byString(ORDERED_STRINGS), label);
          t.deepEqual(ids(await pageAll(c, {}, [['v', -1]], size)), byString(descending), label);
          t.deepEqual(ids(await pageAll(c, {}, undefined, size)), ids(stringDocs).sort(), label);
        }
      }
      const keyed = await store.collection(`${p}_ids`);
      await seed(
        keyed,
        ORDERED_STRINGS.map((v) => ({ _id: v })),
      );
      t.deepEqual(ids(await pageAll(keyed, {}, undefined, 2)), ORDERED_STRINGS);
      t.deepEqual(ids(await pageAll(keyed, {}, [['_id', -1]], 3)), descending);
    }),
  );

  // ---- arrays in sorts -------------------------------------------------------------------------------

  test(name('a sort on an array field uses its smallest element ascending, its largest descending'), (t) =>
    withStore(t, async (store, p) => {
      // With an empty array ([] sorts before null and missing), and without one.
      const without = arrayDocs.filter((d) => d._id !== 'd');
      const drop = (list: string[]) => list.filter((id) => id !== 'd');
      for (const [docs, prefix, up, down] of [
        [arrayDocs, `${p}a`, ARRAYS_ASCENDING, ARRAYS_DESCENDING],
        [without, `${p}b`, drop(ARRAYS_ASCENDING), drop(ARRAYS_DESCENDING)],
      ] as const) {
        for (const [label, c] of await variants(store, prefix, V_INDEXES, docs)) {
          t.deepEqual(ids(await c.find({}, { sort: [['v', 1]] })), up, label);
          t.deepEqual(ids(await c.find({}, { sort: [['v', -1]] })), down, label);
          t.deepEqual(ids(await c.find({}, { sort: [['v', 1]], limit: 3 })), up.slice(0, 3), label);
          t.deepEqual(ids(await c.find({}, { sort: [['v', -1]], limit: 2 })), down.slice(0, 2), label);
        }
      }
    }),
  );

  test(
    name('a sort on a dotted path through an array of documents uses its smallest or largest value'),
    (t) =>
      withStore(t, async (store, p) => {
        const docs: Doc[] = [
          { _id: 'o1', lines: [{ price: 3 }, { price: 1 }] },
          { _id: 'o2', lines: [{ price: 2 }] },
          { _id: 'o3', lines: { price: 0 } },
          { _id: 'o4' },
        ];
        for (const [label, c] of await variants(store, p, [{ keys: [['lines.price', 1]] }], docs)) {
          t.deepEqual(ids(await c.find({}, { sort: [['lines.price', 1]] })), ['o4', 'o3', 'o1', 'o2'], label);
          t.deepEqual(
            ids(await c.find({}, { sort: [['lines.price', -1]] })),
            ['o1', 'o2', 'o3', 'o4'],
            label,
          );
        }
      }),
  );

  test(name('a cursor holding an array is refused: a field holding arrays is sorted by, not paged by'), (t) =>
    withStore(t, async (store, p) => {
      for (const [label, c] of await variants(store, p, V_INDEXES, arrayDocs)) {
        await t.throwsAsync(c.find({}, { sort: [['v', 1]], limit: 2, after: [[3, 1], 'a'] }), {
          instanceOf: ArrayCursorError,
          message: /v/,
        });
        await t.throwsAsync(c.find({}, { after: [[]] }), { instanceOf: ArrayCursorError }, label);
      }
    }),
  );

  // ---- unique indexes --------------------------------------------------------------------------------

  test(
    name(
      'a unique index holds null for a missing field: null and missing collide, and so do all-missing compound keys',
    ),
    (t) =>
      withStore(t, async (store, p) => {
        const c = await store.collection(`${p}_one`, [{ keys: [['sku', 1]], unique: true }]);
        await seed(c, [{ _id: 'a', sku: null }]);
        await t.throwsAsync(seed(c, [{ _id: 'b' }]), { message: /duplicate key/i }, 'missing after null');
        await t.throwsAsync(
          c.bulkWrite([{ updateOne: { filter: { _id: 'b' }, update: { $set: { x: 1 } }, upsert: true } }]),
          { message: /duplicate key/i },
          'an upsert without the field',
        );
        await seed(c, [{ _id: 'b', sku: 'B' }]);
        await t.throwsAsync(
          c.bulkWrite([{ updateOne: { filter: { _id: 'b' }, update: { $unset: { sku: '' } } } }]),
          { message: /duplicate key/i },
          'an update that removes the field',
        );
        t.deepEqual(await c.find({}), [
          { _id: 'a', sku: null },
          { _id: 'b', sku: 'B' },
        ]);

        const pair = await store.collection(`${p}_pair`, [
          {
            keys: [
              ['store_id', 1],
              ['sku', 1],
            ],
            unique: true,
          },
        ]);
        await seed(pair, [{ _id: 'a', store_id: 1 }, { _id: 'b' }, { _id: 'c', store_id: 1, sku: 'S' }]);
        await t.throwsAsync(seed(pair, [{ _id: 'd', store_id: 1, sku: null }]), {
          message: /duplicate key/i,
        });
        await t.throwsAsync(seed(pair, [{ _id: 'e' }]), { message: /duplicate key/i }, 'both fields missing');
        await t.throwsAsync(seed(pair, [{ _id: 'f', store_id: null, sku: null }]), {
          message: /duplicate key/i,
        });
        await seed(pair, [{ _id: 'g', store_id: 2 }]);
        t.deepEqual(ids(await pair.find({})), ['a', 'b', 'c', 'g']);
      }),
  );

  test(
    name('in a unique index an empty array is a key of its own: two collide, one and a missing field do not'),
    (t) =>
      withStore(t, async (store, p) => {
        const c = await store.collection(`${p}_tags`, [{ keys: [['tags', 1]], unique: true }]);
        await seed(c, [{ _id: 'a', tags: [] }, { _id: 'b' }]);
        await t.throwsAsync(seed(c, [{ _id: 'c', tags: [] }]), { message: /duplicate key/i });
        await t.throwsAsync(seed(c, [{ _id: 'c', tags: null }]), { message: /duplicate key/i });
        await c.bulkWrite([{ updateOne: { filter: { _id: 'a' }, update: { $push: { tags: 'x' } } } }]);
        await seed(c, [{ _id: 'c', tags: [] }]);
        t.deepEqual(ids(await c.find({ tags: null })), ['b']);
        t.deepEqual(ids(await c.find({}, { sort: [['tags', 1]] })), ['c', 'b', 'a']);
      }),
  );

  // ---- the document size limit -----------------------------------------------------------------------

  /** A document of about `bytes` bytes of BSON (one ASCII string). */
  const sized = (id: DocId, bytes: number): Doc => ({ _id: id, text: 'x'.repeat(bytes - 64) });

  test(name('a commit holding a document over 16 MiB is refused whole, naming the document'), (t) =>
    withStore(t, async (store, p) => {
      const a = await store.collection(`${p}_a`);
      const b = await store.collection(`${p}_b`);
      await seed(b, [{ _id: 'kept', v: 1 }]);
      const err = await t.throwsAsync(
        store.commit({
          writes: [
            {
              collection: a,
              ops: [{ replaceOne: { filter: { _id: 'x' }, replacement: { _id: 'x' }, upsert: true } }],
            },
            {
              collection: b,
              ops: [
                { updateOne: { filter: { _id: 'kept' }, update: { $set: { v: 2 } } } },
                {
                  replaceOne: {
                    filter: { _id: 'big' },
                    replacement: sized('big', MAX_DOCUMENT_BYTES + 1024),
                    upsert: true,
                  },
                },
              ],
            },
          ],
          checkpoints: [
            {
              name: `${p}-proj`,
              checkpoint: { position: 9, events: 9, updated_at: '2026-03-01T00:00:00.000Z' },
            },
          ],
        }),
        { instanceOf: DocumentTooLargeError },
      );
      t.is(err?.collection, b.name);
      t.is(err?.id, 'big');
      t.regex(err?.message ?? '', /"big".*16777216/);
      t.is(await a.count(), 0, 'nothing of the commit is applied');
      t.deepEqual(await b.find({}), [{ _id: 'kept', v: 1 }]);
      t.is(await store.getCheckpoint(`${p}-proj`), undefined);
    }),
  );

  test(
    name('an update or upsert whose result is over 16 MiB is refused; the document stays as it was'),
    (t) =>
      withStore(t, async (store, p) => {
        const c = await store.collection(`${p}_c`);
        const nine = 'y'.repeat(9 * 1024 * 1024);
        await seed(c, [{ _id: 'grow', a: nine }]);
        const grown = await t.throwsAsync(
          c.bulkWrite([{ updateOne: { filter: { _id: 'grow' }, update: { $set: { b: nine } } } }]),
          { instanceOf: DocumentTooLargeError },
        );
        t.is(grown?.id, 'grow');
        t.is(grown?.collection, c.name);
        const upserted = await t.throwsAsync(
          store.commit({
            writes: [
              {
                collection: c,
                ops: [
                  {
                    updateOne: {
                      filter: { _id: 'new' },
                      update: { $set: { a: nine, b: nine } },
                      upsert: true,
                    },
                  },
                ],
              },
            ],
          }),
          { instanceOf: DocumentTooLargeError },
        );
        t.is(upserted?.id, 'new');
        const kept = await c.findOne({ _id: 'grow' });
        t.deepEqual(Object.keys(kept ?? {}), ['_id', 'a']);
        t.is(await c.count(), 1);
      }),
  );

  test(
    name(
      'the limit is on BSON bytes (UTF-8, per-element overhead), not string length; just under it is kept',
    ),
    (t) =>
      withStore(t, async (store, p) => {
        const c = await store.collection(`${p}_c`);
        const refused = [
          { _id: 'utf8', text: 'é'.repeat(8_500_000) }, // 8.5 M characters, 17 MB of UTF-8
          { _id: 'zeros', list: new Array(1_400_000).fill(0) }, // 2.8 MB of JSON, 17 MB of BSON
        ];
        for (const doc of refused) {
          await t.throwsAsync(seed(c, [doc]), { instanceOf: DocumentTooLargeError }, String(doc._id));
        }
        await seed(c, [sized('under', MAX_DOCUMENT_BYTES - 1024)]);
        const back = await c.findOne({ _id: 'under' });
        t.is(String(back?.text).length, MAX_DOCUMENT_BYTES - 1024 - 64);
        t.deepEqual(ids(await c.find({})), ['under']);
      }),
  );

  test(name('a bulkWrite stops at the document over the limit: the operations before it stay'), (t) =>
    withStore(t, async (store, p) => {
      const c = await store.collection(`${p}_c`);
      await t.throwsAsync(
        c.bulkWrite([
          { replaceOne: { filter: { _id: 'first' }, replacement: { _id: 'first' }, upsert: true } },
          {
            replaceOne: {
              filter: { _id: 'big' },
              replacement: sized('big', MAX_DOCUMENT_BYTES + 1024),
              upsert: true,
            },
          },
          { replaceOne: { filter: { _id: 'third' }, replacement: { _id: 'third' }, upsert: true } },
        ]),
        { instanceOf: DocumentTooLargeError },
      );
      t.deepEqual(ids(await c.find({})), ['first']);
    }),
  );
}
