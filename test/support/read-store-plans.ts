/**
 * Query plans of the document read stores: on a 10,000-document collection, queries an index can serve
 * examine about as many documents as they return (`lastExamined()`), never the whole collection. An
 * unindexed filter does scan everything, which shows the counter counts. Each adapter's file runs these
 * cases on its own collection; the cases of one adapter share it and its counter, so they run serially.
 * (The SQLite adapter's plans are also checked statement by statement with EXPLAIN QUERY PLAN in
 * test/read-store-sqlite-plans.test.ts.)
 */
import type { TestFn } from 'ava';
import type { Collection, Doc, Filter, FindOptions, IndexSpec } from '../../projections/read-store.ts';

/** A collection of an adapter that counts the documents its last query looked at. */
export interface ExaminedCollection<T extends Doc> extends Collection<T> {
  lastExamined(): number;
}

const N = 10_000;
/** Entries a plan may look at beyond what it returns (e.g. the cursor's own entry). */
const SLACK = 2;

export interface Item extends Doc {
  _id: string;
  sku: string;
  store_id: number;
  id: number;
  price: number;
  status: string;
  tags: string[];
  created: string;
}

function item(i: number): Item {
  return {
    _id: `d${String(i).padStart(5, '0')}`,
    sku: `sku-${i}`,
    store_id: i % 100,
    id: i,
    price: (i * 7919) % N,
    status: ['open', 'held', 'closed', 'void'][i % 4],
    tags: [`t${i % 50}`, `u${i % 7}`],
    created: `2026-01-01T00:00:${String(i % 60).padStart(2, '0')}.${String(i).padStart(5, '0')}Z`,
  };
}

const docs = Array.from({ length: N }, (_, i) => item(i));

export const PLAN_INDEXES: IndexSpec[] = [
  { keys: [['sku', 1]], unique: true },
  {
    keys: [
      ['store_id', 1],
      ['id', 1],
    ],
  },
  {
    keys: [
      ['store_id', 1],
      ['created', -1],
    ],
  },
  { keys: [['price', 1]] },
  { keys: [['tags', 1]] },
];

export function planCases(
  test: TestFn,
  adapter: string,
  open: (indexes: IndexSpec[]) => Promise<ExaminedCollection<Item>>,
): void {
  const name = (title: string) => `${adapter}: ${title}`;
  const collection = (async () => {
    const c = await open(PLAN_INDEXES);
    for (let i = 0; i < N; i += 1000) {
      await c.bulkWrite(
        docs
          .slice(i, i + 1000)
          .map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
      );
    }
    return c;
  })();

  /** The expected result, computed in JavaScript. */
  function expected(pred: (d: Item) => boolean, compare?: (a: Item, b: Item) => number): string[] {
    const out = docs.filter(pred);
    if (compare) out.sort(compare);
    return out.map((d) => d._id);
  }

  async function run(filter: Filter, options?: FindOptions): Promise<{ ids: string[]; examined: number }> {
    const c = await collection;
    const found = await c.find(filter, options);
    return { ids: found.map((d) => d._id), examined: c.lastExamined() };
  }

  test.serial(name('the collection holds 10,000 documents'), async (t) => {
    const c = await collection;
    t.is(await c.count(), N);
  });

  test.serial(name('equality on an indexed field examines only the match'), async (t) => {
    const { ids, examined } = await run({ sku: 'sku-4242' });
    t.deepEqual(ids, ['d04242']);
    t.true(examined <= 1 + SLACK, `examined ${examined}`);
  });

  test.serial(name('equality on an indexed array field (multikey) examines only the matches'), async (t) => {
    const { ids, examined } = await run({ tags: 't7' });
    const want = expected((d) => d.tags.includes('t7'));
    t.deepEqual(ids, want);
    t.is(want.length, 200);
    t.true(examined <= want.length + SLACK, `examined ${examined}`);
  });

  test.serial(name('a range on an indexed field examines only the matches'), async (t) => {
    const { ids, examined } = await run({ price: { $gte: 5000, $lt: 5050 } });
    const want = expected((d) => d.price >= 5000 && d.price < 5050);
    t.deepEqual(ids, want);
    t.is(want.length, 50);
    t.true(examined <= want.length + SLACK, `examined ${examined}`);
  });

  test.serial(name('a sorted range with a limit examines only the matches'), async (t) => {
    const { ids, examined } = await run({ price: { $gt: 9900 } }, { sort: [['price', -1]], limit: 10 });
    const want = expected(
      (d) => d.price > 9900,
      (a, b) => b.price - a.price,
    ).slice(0, 10);
    t.deepEqual(ids, want);
    t.true(examined <= 99 + SLACK, `examined ${examined}`);
  });

  test.serial(name('$in on an indexed field examines only the matches'), async (t) => {
    const skus = await run({ sku: { $in: ['sku-1', 'sku-500', 'sku-9999', 'sku-nope'] } });
    t.deepEqual(skus.ids, ['d00001', 'd00500', 'd09999']);
    t.true(skus.examined <= 3 + SLACK, `examined ${skus.examined}`);

    const stores = await run({ store_id: { $in: [3, 42] } });
    const want = expected((d) => d.store_id === 3 || d.store_id === 42);
    t.deepEqual(stores.ids, want);
    t.true(stores.examined <= want.length + SLACK, `examined ${stores.examined}`);
  });

  test.serial(
    name('a page of 20 in index order with an equality prefix examines only the page, also after a cursor'),
    async (t) => {
      const byId = (a: Item, b: Item) => a.id - b.id;
      const all = expected((d) => d.store_id === 42, byId);
      t.is(all.length, 100);

      const first = await run({ store_id: 42 }, { sort: [['id', 1]], limit: 20 });
      t.deepEqual(first.ids, all.slice(0, 20));
      t.true(first.examined <= 20 + SLACK, `examined ${first.examined}`);

      const last = docs.find((d) => d._id === first.ids[19]) as Item;
      const second = await run(
        { store_id: 42 },
        { sort: [['id', 1]], limit: 20, after: [last.id, last._id] },
      );
      t.deepEqual(second.ids, all.slice(20, 40));
      t.true(second.examined <= 20 + SLACK, `examined ${second.examined}`);

      const tail = all[all.length - 3];
      const end = docs.find((d) => d._id === tail) as Item;
      const third = await run({ store_id: 42 }, { sort: [['id', 1]], limit: 20, after: [end.id, end._id] });
      t.deepEqual(third.ids, all.slice(-2));
      t.true(third.examined <= 2 + SLACK, `examined ${third.examined}`);
    },
  );

  test.serial(
    name(
      'a page of 20 in index order with $in on the equality prefix merges the walks: only the page is examined',
    ),
    async (t) => {
      const byId = (a: Item, b: Item) => a.id - b.id;
      const all = expected((d) => [3, 42, 77].includes(d.store_id), byId);
      t.is(all.length, 300);
      const filter = { store_id: { $in: [77, 3, 42, 3] } };
      const first = await run(filter, { sort: [['id', 1]], limit: 20 });
      t.deepEqual(first.ids, all.slice(0, 20));
      t.true(first.examined <= 20 + SLACK, `examined ${first.examined}`);

      const last = docs.find((d) => d._id === first.ids[19]) as Item;
      const second = await run(filter, { sort: [['id', 1]], limit: 20, after: [last.id, last._id] });
      t.deepEqual(second.ids, all.slice(20, 40));
      t.true(second.examined <= 20 + SLACK, `examined ${second.examined}`);

      // A multikey field: a document holding two of the values is met once.
      const tagged = expected((d) => d.tags.includes('t7') || d.tags.includes('u3'));
      const page = await run({ tags: { $in: ['t7', 'u3'] } }, { limit: 25 });
      t.deepEqual(page.ids, tagged.slice(0, 25));
      t.true(page.examined <= 25 + SLACK, `examined ${page.examined}`);
      const every = await run({ tags: { $in: ['t7', 'u3'] } });
      t.deepEqual(every.ids, tagged);
    },
  );

  test.serial(name('a page of 20 on a descending index key examines only the page'), async (t) => {
    const newest = (a: Item, b: Item) => (a.created < b.created ? 1 : a.created > b.created ? -1 : 0);
    const all = expected((d) => d.store_id === 7, newest);
    const first = await run({ store_id: 7 }, { sort: [['created', -1]], limit: 20 });
    t.deepEqual(first.ids, all.slice(0, 20));
    t.true(first.examined <= 20 + SLACK, `examined ${first.examined}`);

    const last = docs.find((d) => d._id === first.ids[19]) as Item;
    const second = await run(
      { store_id: 7 },
      { sort: [['created', -1]], limit: 20, after: [last.created, last._id] },
    );
    t.deepEqual(second.ids, all.slice(20, 40));
    t.true(second.examined <= 20 + SLACK, `examined ${second.examined}`);
  });

  test.serial(
    name('a range on the first sort key bounds the walk: a page of the range examines only the page'),
    async (t) => {
      const newest = (a: Item, b: Item) => (a.created < b.created ? 1 : a.created > b.created ? -1 : 0);
      // Store 7's items of one second: the walk starts and ends inside it, whichever side it bounds.
      const inRange = (d: Item) => d.created > '2026-01-01T00:00:47' && d.created < '2026-01-01T00:00:48';
      const all = expected((d) => d.store_id === 7 && inRange(d), newest);
      t.true(all.length >= 5);
      const filter = { store_id: 7, created: { $gt: '2026-01-01T00:00:47', $lt: '2026-01-01T00:00:48' } };
      const first = await run(filter, { sort: [['created', -1]], limit: 3 });
      t.deepEqual(first.ids, all.slice(0, 3));
      t.true(first.examined <= 3 + SLACK, `examined ${first.examined}`);
      const last = docs.find((d) => d._id === first.ids[2]) as Item;
      const rest = await run(filter, {
        sort: [['created', -1]],
        limit: 100,
        after: [last.created, last._id],
      });
      t.deepEqual(rest.ids, all.slice(3));
      t.true(rest.examined <= all.length - 3 + SLACK, `examined ${rest.examined}`);
    },
  );

  test.serial(name('count and findOne with an indexed filter examine only the matches'), async (t) => {
    const c = await collection;
    t.is(await c.count({ store_id: 5 }), 100);
    t.true(c.lastExamined() <= 100 + SLACK, `examined ${c.lastExamined()}`);
    t.is((await c.findOne({ sku: 'sku-77' }))?._id, 'd00077');
    t.true(c.lastExamined() <= 1 + SLACK, `examined ${c.lastExamined()}`);
  });

  test.serial(name('reads and writes by _id examine only that document'), async (t) => {
    const c = await collection;
    t.is((await c.findOne({ _id: 'd01234' }))?.sku, 'sku-1234');
    t.true(c.lastExamined() <= 1, `examined ${c.lastExamined()}`);
    const { ids, examined } = await run({ _id: { $in: ['d00010', 'd00020', 'nope'] } });
    t.deepEqual(ids, ['d00010', 'd00020']);
    t.true(examined <= 3, `examined ${examined}`);
    // A write finds its target through the same planner.
    await c.bulkWrite([{ updateOne: { filter: { _id: 'd09876' }, update: { $set: { touched: 1 } } } }]);
    t.true(c.lastExamined() <= 1, `examined ${c.lastExamined()}`);
  });

  test.serial(name('an unindexed filter scans the whole collection'), async (t) => {
    const { ids, examined } = await run({ status: 'void' });
    t.deepEqual(
      ids,
      expected((d) => d.status === 'void'),
    );
    t.is(examined, N);

    const sorted = await run({}, { sort: [['status', 1]], limit: 5 });
    t.is(sorted.ids.length, 5);
    t.is(sorted.examined, N);
  });
}
