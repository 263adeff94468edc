/**
 * A collection that is no longer live (a promote's old copy, a dropped shadow, a crashed rebuild's
 * leftovers) is emptied a part at a time before its tables are dropped: a table dropped whole under
 * `secure_delete` has every page it frees zeroed in one transaction, held in memory until the commit
 * (projections/sqlite/catalog.ts, `emptySome`; docs/read-side.md, "The SQLite read store").
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test, { type ExecutionContext } from 'ava';
import type { IndexSpec } from '../projections/read-store.ts';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';

const INDEXES: IndexSpec[] = [{ keys: [['n', 1]] }, { keys: [['tags', 1]] }];

async function storeFile(t: ExecutionContext) {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-drop-'));
  const file = path.join(dir, 'read.db');
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return file;
}

/** The tables of the file whose name starts with a collection's physical name. */
function tablesOf(file: string, physical: string): string[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const rows = db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND (name = ? OR name LIKE ? || '\\_i%' ESCAPE '\\')",
      )
      .all(physical, physical) as Array<{ name: string }>;
    return rows.map((r) => r.name).sort();
  } finally {
    db.close();
  }
}

const docs = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    insertOne: { document: { _id: i, n: i % 7, tags: ['a', `t${i}`] } },
  }));

test('a promote drops the old copy a part at a time, the event loop turning between parts', async (t) => {
  const file = await storeFile(t);
  const store = openSqliteReadStore(file);
  t.teardown(() => store.close());
  const live = await store.collection('items', INDEXES);
  await live.bulkWrite(docs(1_300));
  const old = physicalOf(file, 'items');
  const shadow = await store.createShadow('items', INDEXES);
  await shadow.bulkWrite(docs(10));
  let turns = 0;
  let promoting = true;
  const turn = () => {
    if (!promoting) return;
    turns += 1;
    setImmediate(turn);
  };
  setImmediate(turn);
  await store.promote([shadow]);
  promoting = false;
  // 1,300 documents in parts of 500, then each index's entries: a turn before each part after the first.
  t.true(turns >= 3, `the event loop turned ${turns} times during the promote`);
  t.deepEqual(tablesOf(file, old), [], 'the old copy and its index tables are gone');
  t.is(await (await store.collection('items', INDEXES)).count({}), 10);
});

test('a promote whose drop did not finish (a crash) leaves a table that the next sweep drops', async (t) => {
  const file = await storeFile(t);
  const store = openSqliteReadStore(file);
  const live = await store.collection('items', INDEXES);
  await live.bulkWrite(docs(50));
  const old = physicalOf(file, 'items');
  const shadow = await store.createShadow('items', INDEXES);
  await store.promote([shadow]);
  await store.close();
  // What a crash between the promote's commit and the end of its drop leaves: the old copy, not live.
  const db = new DatabaseSync(file);
  db.exec(`CREATE TABLE "${old}" (_id PRIMARY KEY NOT NULL, keys TEXT NOT NULL, doc TEXT NOT NULL)`);
  db.prepare('INSERT INTO pds_collections (physical, name, live, indexes) VALUES (?, ?, 0, ?)').run(
    old,
    'items',
    '[]',
  );
  db.close();
  const reopened = openSqliteReadStore(file);
  t.teardown(() => reopened.close());
  t.is(await reopened.dropOrphanShadows(), 1);
  t.deepEqual(tablesOf(file, old), []);
  t.is(await (await reopened.collection('items', INDEXES)).count({}), 0, 'the live copy stays');
});

/** The live physical table of a collection, as the file's catalog says. */
function physicalOf(file: string, name: string): string {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const row = db.prepare('SELECT physical FROM pds_collections WHERE name = ? AND live = 1').get(name) as {
      physical: string;
    };
    return row.physical;
  } finally {
    db.close();
  }
}
