/**
 * Bulk shadows of the SQLite read store (docs/read-side.md, "How a build writes its shadows"): the
 * index tables a build fills in one pass per index hold exactly the rows, and the catalog the flags,
 * that writing every entry as its document was written leaves (the build's plan, a sort and appends:
 * test/read-store-sqlite-plans.test.ts). The port's cases are in test/contract/read-store-bulk.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test, { type ExecutionContext } from 'ava';
import type { Collection } from '../projections/read-store.ts';
import { openSqliteReadStore, type SqliteReadStoreOptions } from '../projections/sqlite/read-store.ts';
import { BULK_INDEXES, loadBulkWrites } from './contract/read-store-bulk.ts';

async function storeFile(t: ExecutionContext, options: SqliteReadStoreOptions = {}) {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bulk-'));
  const file = path.join(dir, 'read.db');
  const store = openSqliteReadStore(file, options);
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { store, file };
}

interface Recorded {
  physical: string;
  indexes: Array<{ table: string; multikey: boolean; emptyArrays?: number[]; deferred?: true }>;
}

/** `typeof(<column>)` of each column of a table. */
function typesOf(db: DatabaseSync, table: string): string {
  const columns = db.prepare('SELECT name FROM pragma_table_info(?)').all(table) as Array<{ name: string }>;
  return columns.map((c) => `typeof("${c.name}") AS "${c.name}"`).join(', ');
}

/** What the file holds for a shadow: its documents' rows, and each index's rows and recorded flags. */
function contents(file: string, shadow: Collection) {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const physical = shadow.name.split('#')[1];
    const row = db
      .prepare('SELECT physical, indexes FROM pds_collections WHERE physical = ?')
      .get(physical) as unknown as { physical: string; indexes: string };
    const recorded: Recorded = { physical: row.physical, indexes: JSON.parse(row.indexes) };
    const documents = db.prepare(`SELECT _id, doc, keys FROM "${physical}" ORDER BY _id`).all();
    const indexes = recorded.indexes.map((index) => ({
      flags: { multikey: index.multikey, emptyArrays: index.emptyArrays, deferred: index.deferred },
      // In the table's own order (its primary key), as stored, with each value's storage class (a
      // REAL and an INTEGER of one value read alike in JS, but are two keys to SQLite).
      rows: db.prepare(`SELECT * FROM "${index.table}"`).all(),
      types: db.prepare(`SELECT ${typesOf(db, index.table)} FROM "${index.table}"`).all(),
    }));
    // The keys column names the index tables: compared by position, not by physical name.
    const keys = documents.map((d) =>
      Object.values(JSON.parse((d as { keys: string }).keys) as Record<string, string>),
    );
    return { docs: documents.map((d) => [d._id, d.doc]), keys, indexes };
  } finally {
    db.close();
  }
}

test('a bulk shadow built at finishBulk holds the rows and flags of one whose entries were written as its documents were', async (t) => {
  const { store, file } = await storeFile(t);
  const kept = await store.createShadow('items', BULK_INDEXES);
  const bulk = await store.createShadow('items', BULK_INDEXES, { bulk: true });
  await loadBulkWrites(store, kept);
  await loadBulkWrites(store, bulk);
  const loading = contents(file, bulk);
  t.deepEqual(
    loading.indexes.map((i) => [i.rows.length > 0, i.flags.deferred]),
    [
      [true, undefined],
      [false, true],
      [false, true],
      [false, true],
      [false, true],
    ],
    'while loading, only the index read while applying has entries',
  );
  await store.finishBulk(bulk);
  const expected = contents(file, kept);
  const built = contents(file, bulk);
  t.deepEqual(built.docs, expected.docs);
  t.deepEqual(built.keys, expected.keys);
  t.deepEqual(
    built.indexes.map((i) => i.flags),
    expected.indexes.map((i) => i.flags),
  );
  t.true(
    expected.indexes.some((i) => i.flags.multikey) && expected.indexes.some((i) => i.flags.emptyArrays),
    'the writes make some index multikey and hold an empty array',
  );
  built.indexes.forEach((index, i) => {
    t.true(index.rows.length > 0, `index ${i} has rows`);
    t.deepEqual(index.rows, expected.indexes[i].rows, `index ${i}`);
    t.deepEqual(index.types, expected.indexes[i].types, `index ${i}'s storage classes`);
  });
});

test('a failed finishBulk leaves the failing index and those after it deferred and empty, and the shadow is dropped whole', async (t) => {
  const { store, file } = await storeFile(t);
  const bulk = await store.createShadow('items', BULK_INDEXES, { bulk: true });
  await bulk.bulkWrite([
    { insertOne: { document: { _id: 1, sku: 'S', tags: ['a', 'b'] } } },
    { insertOne: { document: { _id: 2, sku: 'S', tags: [] } } },
  ]);
  await t.throwsAsync(store.finishBulk(bulk), { message: /duplicate key \["S"\] in unique index sku/ });
  const after = contents(file, bulk);
  // Each index is built in a transaction of its own: [tags, _id] and [price] before the unique [sku]
  // are built; [sku]'s rows are rolled back, and [info.kind, …] after it was never started.
  t.deepEqual(
    after.indexes.slice(1).map((i) => [i.rows.length, i.flags.deferred]),
    [
      [3, undefined],
      [2, undefined],
      [0, true],
      [0, true],
    ],
  );
  await store.dropShadow(bulk);
  const db = new DatabaseSync(file, { readOnly: true });
  t.teardown(() => db.close());
  t.deepEqual(db.prepare("SELECT count(*) AS n FROM pds_collections WHERE name = 'items'").get(), { n: 0 });
});

test('finishBulk builds one index at a time, the event loop turning before each, also between two collections', async (t) => {
  const events: string[] = [];
  let building = false;
  const { store } = await storeFile(t, {
    onQuery: (sql) => {
      if (building && sql.startsWith('INSERT INTO')) events.push('index');
    },
  });
  const first = await store.createShadow('items', BULK_INDEXES, { bulk: true });
  const second = await store.createShadow('others', BULK_INDEXES, { bulk: true });
  await loadBulkWrites(store, first);
  await loadBulkWrites(store, second);
  // Work queued on the event loop runs between the indexes (the projector thread's status, the live
  // projections' commits), not only once the last is built.
  let done = false;
  const turn = () => {
    if (done) return;
    events.push('turn');
    setImmediate(turn);
  };
  setImmediate(turn);
  building = true;
  await store.finishBulk(first);
  await store.finishBulk(second);
  done = true;
  t.is(events.filter((e) => e === 'index').length, 2 * (BULK_INDEXES.length - 1));
  t.notRegex(events.join(','), /index,index/, events.join(','));
});

test('an index build sorts through files, and the connection keeps its temporary storage in memory after it', async (t) => {
  const { store } = await storeFile(t);
  const memory = 2;
  t.is(store.setting('temp_store'), memory);
  const bulk = await store.createShadow('items', BULK_INDEXES, { bulk: true });
  await loadBulkWrites(store, bulk);
  const during: number[] = [];
  const observed = await storeFile(t, {
    onQuery: (sql) => {
      if (sql.startsWith('INSERT INTO')) during.push(observed.store.setting('temp_store'));
    },
  });
  const other = await observed.store.createShadow('items', BULK_INDEXES, { bulk: true });
  await loadBulkWrites(observed.store, other);
  await observed.store.finishBulk(other);
  t.deepEqual(during, Array(BULK_INDEXES.length - 1).fill(1), 'FILE while each index is built');
  t.is(observed.store.setting('temp_store'), memory, 'MEMORY again after');
  // And after a build that failed (a unique index's duplicate).
  await bulk.bulkWrite([{ insertOne: { document: { _id: 'dup', sku: 'sku-3' } } }]);
  await t.throwsAsync(store.finishBulk(bulk), { message: /duplicate key/ });
  t.is(store.setting('temp_store'), memory);
});
