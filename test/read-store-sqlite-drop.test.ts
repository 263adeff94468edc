/**
 * The transactions that drop a collection (a promote's old copy, a dropped shadow, a crashed
 * rebuild's shadows) run with the connection's temporary storage in files, and set it back to memory
 * after: a `DROP TABLE` under `secure_delete` keeps what it changes there, as much as the table
 * (projections/sqlite/catalog.ts, `throughFiles`; docs/read-side.md, "The SQLite read store").
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import type { IndexSpec } from '../projections/read-store.ts';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';

const INDEXES: IndexSpec[] = [{ keys: [['n', 1]] }];
const MEMORY = 2;

async function store(t: ExecutionContext) {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-drop-'));
  const file = path.join(dir, 'read.db');
  const s = openSqliteReadStore(file);
  t.teardown(async () => {
    await s.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { s, file };
}

const docs = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ insertOne: { document: { _id: i, n: i % 7 } } }));

test('a promote, a dropped shadow and a sweep drop their tables and leave temporary storage in memory', async (t) => {
  const { s, file } = await store(t);
  const live = await s.collection('items', INDEXES);
  await live.bulkWrite(docs(300));
  const next = await s.createShadow('items', INDEXES);
  await next.bulkWrite(docs(5));
  await s.promote([next]);
  t.is(s.setting('temp_store'), MEMORY, 'after a promote that dropped the old copy');
  t.is(await (await s.collection('items', INDEXES)).count({}), 5);
  const dropped = await s.createShadow('items', INDEXES);
  await dropped.bulkWrite(docs(50));
  await s.dropShadow(dropped);
  t.is(s.setting('temp_store'), MEMORY, 'after a dropped shadow');
  // A shadow this store did not make (another connection's, as a crashed rebuild leaves one): swept.
  const other = openSqliteReadStore(file);
  t.teardown(() => other.close());
  await (await other.createShadow('items', INDEXES)).bulkWrite(docs(20));
  await new Promise((resolve) => setTimeout(resolve, 50)); // past the catalog's freshness window
  t.is(await s.dropOrphanShadows(), 1);
  t.is(s.setting('temp_store'), MEMORY, 'after a sweep');
});
