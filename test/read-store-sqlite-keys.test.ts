/**
 * Index entries of the SQLite read store (docs/read-side.md): the keys a document gives each index,
 * one entry per element of an array field, and the index rows a rewrite leaves, whatever the fields'
 * order and whether each holds one value or an array.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test from 'ava';
import type { IndexSpec } from '../projections/read-store.ts';
import { entriesOf, NULL_KEY } from '../projections/sqlite/keys.ts';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';

test("a document has one entry per combination of its fields' values, in the index's field order", (t) => {
  const doc = { _id: 1, store_id: 7, tags: ['x', 'y', 'x'], on: true };
  t.deepEqual(entriesOf(['store_id', 'tags'], doc), [
    [7, 'x'],
    [7, 'y'],
  ]);
  t.deepEqual(entriesOf(['tags', 'store_id'], doc), [
    ['x', 7],
    ['y', 7],
  ]);
  t.deepEqual(entriesOf(['tags', 'store_id', 'tags'], { _id: 2, store_id: 1, tags: ['a', 'b'] }), [
    ['a', 1, 'a'],
    ['a', 1, 'b'],
    ['b', 1, 'a'],
    ['b', 1, 'b'],
  ]);
  // Missing and null are the null key; a boolean is a blob behind its type byte.
  t.deepEqual(entriesOf(['missing', 'store_id'], doc), [[NULL_KEY, 7]]);
  const [[flag]] = entriesOf(['on'], doc);
  t.deepEqual([...(flag as Uint8Array)], [0x08, 1]);
});

test("a rewrite leaves exactly the new document's entries in each index", async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-keys-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'read.db');
  const store = openSqliteReadStore(file);
  t.teardown(() => store.close());
  const indexes: IndexSpec[] = [
    {
      keys: [
        ['store_id', 1],
        ['tags', 1],
      ],
    },
    {
      keys: [
        ['tags', 1],
        ['n', 1],
      ],
    },
  ];
  const items = await store.collection('items', indexes);
  const write = (replacement: Record<string, unknown>) =>
    items.bulkWrite([
      { replaceOne: { filter: { _id: 'a' }, replacement: { _id: 'a', ...replacement }, upsert: true } },
    ]);
  const db = new DatabaseSync(file, { readOnly: true });
  t.teardown(() => db.close());
  /** Each index table's rows, in the order the indexes were declared (the catalog names them `<table>_i<n>`). */
  const rows = () => {
    const physical = db.prepare(`SELECT physical FROM pds_collections WHERE name = 'items'`).get()?.physical;
    return indexes.map((_, i) =>
      db
        .prepare(`SELECT * FROM "${physical}_i${i}" ORDER BY 1, 2`)
        .all()
        .map((r) => Object.values(r)),
    );
  };

  await write({ store_id: 7, tags: ['x', 'y'], n: 1 });
  await write({ store_id: 8, tags: ['y', 'z'], n: 1 });
  // `y` stays in both indexes: only the entries that changed were removed.
  t.deepEqual(rows(), [
    [
      [8, 'y', 'a'],
      [8, 'z', 'a'],
    ],
    [
      ['y', 1, 'a'],
      ['z', 1, 'a'],
    ],
  ]);
  await write({ store_id: 8, tags: ['y', 'z'], n: 2 });
  const [byStore, byTags] = rows();
  t.deepEqual(
    [byStore, byTags].map((r) => r.length),
    [2, 2],
  );
  t.deepEqual(
    new Set([...byStore, ...byTags].map((r) => JSON.stringify(r))),
    new Set(
      [
        [8, 'y', 'a'],
        [8, 'z', 'a'],
        ['y', 2, 'a'],
        ['z', 2, 'a'],
      ].map((r) => JSON.stringify(r)),
    ),
  );
  t.deepEqual(
    (await items.find({ store_id: 7 })).map((d) => d._id),
    [],
  );
  t.deepEqual(
    (await items.find({ tags: 'z', n: 2 })).map((d) => d._id),
    ['a'],
  );
  await items.bulkWrite([{ deleteOne: { filter: { _id: 'a' } } }]);
  t.deepEqual(
    rows().map((r) => r.length),
    [0, 0],
  );
});
