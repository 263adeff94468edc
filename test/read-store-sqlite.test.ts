/**
 * The SQLite read store as a file (docs/read-side.md): what it keeps across a close and reopen, how a
 * second connection on the same file (an `api` process beside the `projector`) follows a promote, and
 * how a file that is missing, unreadable or of another schema is replaced by an empty one, never
 * served. The shared contract runs in test/contract/read-store-sqlite.test.ts.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test, { type ExecutionContext } from 'ava';
import type { IndexSpec } from '../projections/read-store.ts';
import { openSqliteReadStore, type SqliteReadStore } from '../projections/sqlite/read-store.ts';

const INDEXES: IndexSpec[] = [
  { keys: [['sku', 1]], unique: true },
  {
    keys: [
      ['store_id', 1],
      ['tags', 1],
    ],
  },
];

async function fileOf(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-read-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 'read.db');
}

function open(t: ExecutionContext, file: string): SqliteReadStore {
  const store = openSqliteReadStore(file);
  t.teardown(() => store.close());
  return store;
}

test('documents, indexes, shadows promoted and checkpoints with their version survive a reopen', async (t) => {
  const file = await fileOf(t);
  const first = open(t, file);
  t.is(first.opened.state, 'created');
  const items = await first.collection('items', INDEXES);
  await first.commit({
    writes: [
      {
        collection: items,
        ops: [
          {
            replaceOne: {
              filter: { _id: 1 },
              replacement: { _id: 1, sku: 'A', store_id: 7, tags: ['x', 'y'] },
              upsert: true,
            },
          },
          {
            replaceOne: {
              filter: { _id: 2 },
              replacement: { _id: 2, sku: 'B', store_id: 7, tags: ['y'] },
              upsert: true,
            },
          },
        ],
      },
    ],
    checkpoints: [
      {
        name: 'items',
        checkpoint: { position: 42, events: 2, updated_at: '2026-11-24T00:00:00.000Z', version: 'v3' },
      },
    ],
  });
  const shadow = await first.createShadow('menus', [{ keys: [['store_id', 1]] }]);
  await shadow.bulkWrite([
    { replaceOne: { filter: { _id: 'm' }, replacement: { _id: 'm', store_id: 7 }, upsert: true } },
  ]);
  await first.promote(
    [shadow],
    [
      {
        name: 'menus',
        checkpoint: { position: 40, events: 1, updated_at: '2026-11-24T00:00:00.000Z', version: 'v1' },
      },
    ],
  );
  await first.close();

  const again = open(t, file);
  t.is(again.opened.state, 'opened');
  t.is(again.opened.reason, null);
  const reopened = await again.collection('items', INDEXES);
  t.deepEqual(
    (await reopened.find({ store_id: 7, tags: 'y' })).map((d) => d._id),
    [1, 2],
  );
  await t.throwsAsync(
    reopened.bulkWrite([
      { replaceOne: { filter: { _id: 3 }, replacement: { _id: 3, sku: 'A' }, upsert: true } },
    ]),
    { message: /duplicate key/ },
  );
  t.deepEqual(await again.getCheckpoint('items'), {
    position: 42,
    events: 2,
    updated_at: '2026-11-24T00:00:00.000Z',
    version: 'v3',
  });
  t.deepEqual(await (await again.collection('menus')).find({ store_id: 7 }), [{ _id: 'm', store_id: 7 }]);
  t.is((await again.getCheckpoint('menus'))?.version, 'v1');
});

test('a second connection on the file sees a promote at once, and a commit whole or not at all', async (t) => {
  const file = await fileOf(t);
  const projector = open(t, file);
  const api = open(t, file);
  const live = await projector.collection('carts', [{ keys: [['store_id', 1]] }]);
  await live.bulkWrite([
    { replaceOne: { filter: { _id: 'old' }, replacement: { _id: 'old', store_id: 1 }, upsert: true } },
  ]);
  const reader = await api.collection('carts', [{ keys: [['store_id', 1]] }]);
  t.deepEqual(
    (await reader.find({ store_id: 1 })).map((d) => d._id),
    ['old'],
  );

  const shadow = await projector.createShadow('carts', [{ keys: [['store_id', 1]] }]);
  await shadow.bulkWrite([
    { replaceOne: { filter: { _id: 'new' }, replacement: { _id: 'new', store_id: 1 }, upsert: true } },
  ]);
  t.deepEqual(
    (await reader.find({ store_id: 1 })).map((d) => d._id),
    ['old'],
    'a shadow is invisible',
  );
  await projector.promote([shadow]);
  t.deepEqual(
    (await reader.find({ store_id: 1 })).map((d) => d._id),
    ['new'],
    'the reader follows the promote',
  );

  // A commit that fails part-way leaves nothing of itself, checkpoint included.
  const other = await projector.collection('other', [{ keys: [['sku', 1]], unique: true }]);
  await other.bulkWrite([
    { replaceOne: { filter: { _id: 1 }, replacement: { _id: 1, sku: 'S' }, upsert: true } },
  ]);
  await t.throwsAsync(
    projector.commit({
      writes: [
        { collection: live, ops: [{ deleteOne: { filter: { _id: 'new' } } }] },
        {
          collection: other,
          ops: [{ replaceOne: { filter: { _id: 2 }, replacement: { _id: 2, sku: 'S' }, upsert: true } }],
        },
      ],
      checkpoints: [
        { name: 'carts', checkpoint: { position: 9, events: 9, updated_at: '2026-11-24T00:00:00.000Z' } },
      ],
    }),
    { message: /duplicate key/ },
  );
  t.deepEqual(
    (await reader.find({ store_id: 1 })).map((d) => d._id),
    ['new'],
  );
  t.is(await api.getCheckpoint('carts'), undefined);
});

test('shadows left by a rebuild that never finished are dropped; those of this process are not', async (t) => {
  const file = await fileOf(t);
  const crashed = open(t, file);
  const left = await crashed.createShadow('stores', []);
  await left.bulkWrite([{ replaceOne: { filter: { _id: 1 }, replacement: { _id: 1 }, upsert: true } }]);
  await crashed.close();

  const next = open(t, file);
  const mine = await next.createShadow('stores', []);
  t.is(await next.dropOrphanShadows(), 1);
  const db = new DatabaseSync(file, { readOnly: true });
  t.teardown(() => db.close());
  const rows = db.prepare('SELECT name, live FROM pds_collections').all() as Array<{
    name: string;
    live: number;
  }>;
  t.deepEqual(rows, [{ name: 'stores', live: 0 }], 'only the running rebuild’s shadow is left');
  await next.promote([mine]);
  t.is(await (await next.collection('stores')).count(), 0);
});

test('a missing file is created, and says so', async (t) => {
  const file = await fileOf(t);
  const store = open(t, file);
  t.deepEqual(store.opened, { state: 'created', reason: 'no read store file yet' });
  t.true(existsSync(file));
});

test('an unreadable file is moved aside and replaced by an empty store, never served', async (t) => {
  const file = await fileOf(t);
  const first = open(t, file);
  const items = await first.collection('items');
  await items.bulkWrite([{ replaceOne: { filter: { _id: 1 }, replacement: { _id: 1 }, upsert: true } }]);
  await first.setCheckpoint('items', { position: 5, events: 1, updated_at: '2026-11-24T00:00:00.000Z' });
  await first.close();
  // Garbage over the header and the first pages: SQLite no longer knows the file.
  const bytes = readFileSync(file);
  bytes.fill(0x5a, 0, Math.min(bytes.length, 8192));
  writeFileSync(file, bytes);

  const store = open(t, file);
  t.is(store.opened.state, 'replaced');
  t.regex(store.opened.reason ?? '', /is unreadable: .*moved to .*read\.db\.unreadable/);
  t.true(existsSync(`${file}.unreadable`));
  t.is(await store.getCheckpoint('items'), undefined, 'no checkpoint: every projection starts over');
  t.is(await (await store.collection('items')).count(), 0);
});

test('a database of another schema is moved aside, not read', async (t) => {
  const file = await fileOf(t);
  const foreign = new DatabaseSync(file);
  foreign.exec(
    "CREATE TABLE pds_checkpoints (name TEXT); INSERT INTO pds_checkpoints VALUES ('x'); PRAGMA user_version = 7",
  );
  foreign.close();
  const store = open(t, file);
  t.is(store.opened.state, 'replaced');
  t.regex(store.opened.reason ?? '', /unknown schema \(application id 0, version 7/);
  t.is(await store.getCheckpoint('x'), undefined);
});

test('a future schema version of our own file is moved aside too', async (t) => {
  const file = await fileOf(t);
  await open(t, file).close();
  const db = new DatabaseSync(file);
  db.exec('PRAGMA user_version = 2');
  db.close();
  const store = open(t, file);
  t.is(store.opened.state, 'replaced');
  t.regex(store.opened.reason ?? '', /version 2; this version reads 1/);
});

test('a document cached by one connection is read fresh once it has seen the checkpoint of another connection’s commit', async (t) => {
  const file = await fileOf(t);
  const projector = open(t, file);
  const api = open(t, file);
  const writer = await projector.collection('partner_keys');
  const reader = await api.collection('partner_keys');
  const put = (v: number, position: number) =>
    projector.commit({
      writes: [
        {
          collection: writer,
          ops: [{ replaceOne: { filter: { _id: 'k' }, replacement: { _id: 'k', v }, upsert: true } }],
        },
      ],
      checkpoints: [
        {
          name: 'partner_keys',
          checkpoint: { position, events: position, updated_at: '2026-11-24T00:00:00.000Z' },
        },
      ],
    });
  await put(1, 1);
  t.deepEqual(await reader.findOne({ _id: 'k' }), { _id: 'k', v: 1 }); // cached now
  await put(2, 2);
  // Read-your-writes as the admin routes do it: wait for the checkpoint, then read.
  t.is((await api.getCheckpoint('partner_keys'))?.position, 2);
  t.deepEqual(await reader.findOne({ _id: 'k' }), { _id: 'k', v: 2 });
  t.deepEqual(await reader.findByIds(['k']), [{ _id: 'k', v: 2 }]);
});
