/**
 * Backups of the embedded data dir (docs/operations.md, "Backups"): what a backup copies and in which
 * order, its manifest, what `verifyBackup` finds wrong, and what `restoreBackup` refuses and restores.
 */
import { randomUUID } from 'node:crypto';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test, { type ExecutionContext } from 'ava';
import { dataFiles } from '../../cli/backup/files.ts';
import { MANIFEST_FILE, type Manifest } from '../../cli/backup/manifest.ts';
import { RestoreRefused, restoreBackup } from '../../cli/backup/restore.ts';
import { backupName, takeBackup } from '../../cli/backup/take.ts';
import { BackupNotFound, verifyBackup } from '../../cli/backup/verify.ts';
import { manualClock } from '../../domain/clock.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { tempDir } from './support.ts';

const meta = () => ({
  correlation_id: randomUUID(),
  causation_id: null,
  actor: { type: 'platform' as const, id: 'test' },
  occurred_at: new Date().toISOString(),
  schema_version: 1,
});

async function appendEvents(store: EventStore, streams: number, perStream: number): Promise<void> {
  for (let s = 0; s < streams; s++) {
    const events = Array.from({ length: perStream }, (_, i) => ({
      type: i === 0 ? 'ThingCreated' : 'ThingChanged',
      data: { n: i },
      metadata: meta(),
    }));
    await store.append(`thing-${s}`, events);
  }
}

/** A SQLite database of the service's kind: WAL, one table `kv` with `rows` rows. */
function sqliteFile(file: string, rows: number): void {
  const db = new DatabaseSync(file);
  db.exec('PRAGMA journal_mode = WAL; CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)');
  const insert = db.prepare('INSERT INTO kv VALUES (?, ?)');
  for (let i = 0; i < rows; i++) insert.run(`k${i}`, `v${i}`);
  db.close();
}

/** A data dir as the embedded service leaves it, plus a database it does not know by name (`keys.db`). */
async function dataDir(t: ExecutionContext): Promise<string> {
  const dir = await tempDir(t, 'pds-backup-data-');
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  await appendEvents(store, 3, 4);
  await store.close();
  for (const name of ['read.db', 'dispatcher.db', 'sessions.db', 'keys.db'])
    sqliteFile(path.join(dir, name), 10);
  await writeFile(path.join(dir, 'operator-token'), 'operator-token-0123456789\n', { mode: 0o600 });
  await writeFile(path.join(dir, 'secret-key'), `${Buffer.alloc(32, 7).toString('base64')}\n`, {
    mode: 0o600,
  });
  return dir;
}

test('a backup holds every database of the data dir, derived files before the log and the rest after it, the secret files, 0600 in 0700, and a manifest', async (t) => {
  const data = await dataDir(t);
  const into = await tempDir(t, 'pds-backups-');
  const clock = manualClock('2026-11-29T03:00:00.000Z');
  const taken = await takeBackup({ dataDir: data, into, version: '9.9.9', clock });

  t.is(taken.dir, path.join(into, 'pds-backup-2026-11-29T03-00-00-000Z'));
  t.deepEqual(await readdir(into), ['pds-backup-2026-11-29T03-00-00-000Z'], 'no partial directory left');
  const m = taken.manifest;
  t.deepEqual(
    m.files.map((f) => [f.name, f.kind]),
    [
      ['dispatcher.db', 'sqlite'],
      ['read.db', 'sqlite'],
      ['events.db', 'sqlite'],
      ['keys.db', 'sqlite'],
      ['operator-token', 'file'],
      ['secret-key', 'file'],
      ['sessions.db', 'sqlite'],
    ],
  );
  t.deepEqual(m.log, {
    file: 'events.db',
    head: 12,
    events: 12,
    streams: 3,
    by_type: { ThingChanged: 9, ThingCreated: 3 },
  });
  t.is(m.created_at, '2026-11-29T03:00:00.000Z');
  t.is(m.version, '9.9.9');
  t.deepEqual(JSON.parse(await readFile(path.join(taken.dir, MANIFEST_FILE), 'utf8')), m);
  t.is((await stat(taken.dir)).mode & 0o777, 0o700);
  t.deepEqual((await readdir(taken.dir)).sort(), [...m.files.map((f) => f.name), MANIFEST_FILE].sort());
  for (const name of await readdir(taken.dir))
    t.is((await stat(path.join(taken.dir, name))).mode & 0o777, 0o600, name);
  t.is(
    await readFile(path.join(taken.dir, 'secret-key'), 'utf8'),
    await readFile(path.join(data, 'secret-key'), 'utf8'),
  );
  const keys = new DatabaseSync(path.join(taken.dir, 'keys.db'), { readOnly: true });
  t.is((keys.prepare('SELECT COUNT(*) AS n FROM kv').get() as { n: number }).n, 10);
  keys.close();
  t.deepEqual(await verifyBackup(taken.dir), { manifest: m, problems: [] });
});

test('a backup taken while the log and a read model are written: the log copy is whole up to its head, and the read model is never ahead of it', async (t) => {
  const data = await tempDir(t, 'pds-backup-busy-');
  const store = await openSqliteEventStore(path.join(data, 'events.db'));
  t.teardown(() => store.close());
  await appendEvents(store, 200, 50);
  // A projector's checkpoint, written after each append as the service's are.
  const read = new DatabaseSync(path.join(data, 'read.db'));
  t.teardown(() => read.close());
  read.exec('PRAGMA journal_mode = WAL; CREATE TABLE checkpoints (name TEXT PRIMARY KEY, position INTEGER)');
  const checkpoint = read.prepare('INSERT OR REPLACE INTO checkpoints VALUES (?, ?)');
  checkpoint.run('carts', 10_000);
  let writing = true;
  let appended = 0;
  const writer = (async () => {
    for (let i = 0; writing; i++) {
      const { position } = await store.append(`busy-${i}`, [
        { type: 'ThingCreated', data: { i }, metadata: meta() },
      ]);
      checkpoint.run('carts', Number(position));
      appended += 1;
      // As requests arrive: the event loop turns between appends (the backup's completion is a task too).
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  const into = await tempDir(t, 'pds-backups-');
  const taken = await takeBackup({ dataDir: data, into, version: '1' });
  const during = appended;
  writing = false;
  await writer;
  t.true(during > 0, 'appends went on while the backup ran');

  const log = new DatabaseSync(path.join(taken.dir, 'events.db'), { readOnly: true });
  const { n, lowest } = log.prepare('SELECT COUNT(*) AS n, MIN(position) AS lowest FROM events').get() as {
    n: number;
    lowest: number;
  };
  log.close();
  t.is(lowest, 1);
  t.is(n, taken.manifest.log.head, 'every position up to the head, none missing');
  const copy = new DatabaseSync(path.join(taken.dir, 'read.db'), { readOnly: true });
  const { position } = copy.prepare("SELECT position FROM checkpoints WHERE name = 'carts'").get() as {
    position: number;
  };
  copy.close();
  t.true(position <= taken.manifest.log.head, `checkpoint ${position}, head ${taken.manifest.log.head}`);
  t.deepEqual((await verifyBackup(taken.dir)).problems, []);
});

test('the data dir files a backup takes: every SQLite database by its header, not the -wal, -shm, -journal beside them', async (t) => {
  const data = await dataDir(t);
  await writeFile(path.join(data, 'events.db-journal'), '');
  await writeFile(path.join(data, 'empty.db'), '');
  await writeFile(path.join(data, 'notes.txt'), 'SQLite format 2');
  t.deepEqual(
    (await dataFiles(data)).map((f) => `${f.name}:${f.kind}`),
    [
      'dispatcher.db:sqlite',
      'read.db:sqlite',
      'events.db:sqlite',
      'empty.db:file',
      'keys.db:sqlite',
      'notes.txt:file',
      'operator-token:file',
      'secret-key:file',
      'sessions.db:sqlite',
    ],
  );
});

test('a data dir without the embedded log is no backup: refused, and nothing left behind', async (t) => {
  const data = await tempDir(t, 'pds-backup-none-');
  await writeFile(path.join(data, 'secret-key'), 'x');
  const into = await tempDir(t, 'pds-backups-');
  await t.throwsAsync(takeBackup({ dataDir: data, into, version: '1' }), {
    message: /holds no embedded event store/,
  });
  t.deepEqual(await readdir(into), []);
});

async function damaged(
  t: ExecutionContext,
  damage: (dir: string, m: Manifest) => Promise<void>,
): Promise<string[]> {
  const taken = await takeBackup({
    dataDir: await dataDir(t),
    into: await tempDir(t, 'pds-backups-'),
    version: '1',
  });
  await damage(taken.dir, taken.manifest);
  return (await verifyBackup(taken.dir)).problems;
}

const rewriteManifest = (dir: string, m: Manifest) =>
  writeFile(path.join(dir, MANIFEST_FILE), JSON.stringify(m), { mode: 0o600 });

test('verify names what is wrong with a backup', async (t) => {
  t.deepEqual(
    await damaged(t, async (dir) => {
      const file = path.join(dir, 'secret-key');
      const bytes = await readFile(file);
      bytes[0] ^= 1;
      await writeFile(file, bytes);
    }),
    ["secret-key: its SHA-256 differs from the manifest's"],
  );
  t.deepEqual(await damaged(t, (dir) => rm(path.join(dir, 'keys.db'))), ['keys.db: missing']);
  t.deepEqual(await damaged(t, (dir) => writeFile(path.join(dir, 'stray.db'), 'x')), [
    'stray.db is not in the manifest',
  ]);
  t.deepEqual(
    await damaged(t, (dir, m) => rewriteManifest(dir, { ...m, log: { ...m.log, head: 13, events: 13 } })),
    ['events.db: holds 12 events up to position 12, the manifest says 13 up to 13'],
  );
  t.deepEqual(
    await damaged(t, (dir, m) => rewriteManifest(dir, { ...m, files: [...m.files.slice(1), m.files[0]] })),
    ['dispatcher.db was copied after the log: it may be ahead of it'],
  );
  t.deepEqual(await damaged(t, (dir) => rm(path.join(dir, MANIFEST_FILE))), [
    'no manifest.json: not a backup',
  ]);
  const [notManifest] = await damaged(t, (dir) => writeFile(path.join(dir, MANIFEST_FILE), '{"format":1}'));
  t.regex(notManifest, /^manifest\.json is not a backup manifest: /);
  // A database whose pages are damaged where the checksum cannot see it (the manifest made to match).
  const [integrity] = await damaged(t, async (dir, m) => {
    const file = path.join(dir, 'read.db');
    const bytes = await readFile(file);
    bytes.fill(0xff, 4096 + 8, 4096 + 200);
    await writeFile(file, bytes);
    const { createHash } = await import('node:crypto');
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    await rewriteManifest(dir, {
      ...m,
      files: m.files.map((f) => (f.name === 'read.db' ? { ...f, sha256 } : f)),
    });
  });
  t.regex(integrity, /^read\.db: (integrity check: |.*malformed)/);
  await t.throwsAsync(verifyBackup(path.join(tmpdir(), `no-such-backup-${randomUUID()}`)), {
    instanceOf: BackupNotFound,
  });
});

test('restore: into an empty or absent data dir only, from a sound backup only; every file back, the same bytes, 0600 in 0700', async (t) => {
  const data = await dataDir(t);
  const taken = await takeBackup({ dataDir: data, into: await tempDir(t, 'pds-backups-'), version: '1' });

  const inUse = await tempDir(t, 'pds-restore-used-');
  await writeFile(path.join(inUse, 'events.db'), '');
  await t.throwsAsync(restoreBackup(taken.dir, inUse), {
    instanceOf: RestoreRefused,
    message: /is not empty \(events\.db\): restore into an empty data dir/,
  });
  t.deepEqual(await readdir(inUse), ['events.db'], 'nothing written into it');

  const target = path.join(await tempDir(t, 'pds-restore-'), 'data');
  const { manifest, reapplied } = await restoreBackup(taken.dir, target);
  t.deepEqual(manifest, taken.manifest);
  t.deepEqual(reapplied, []);
  t.is((await stat(target)).mode & 0o777, 0o700);
  t.deepEqual((await readdir(target)).sort(), manifest.files.map((f) => f.name).sort());
  for (const f of manifest.files) {
    t.is((await stat(path.join(target, f.name))).mode & 0o777, 0o600, f.name);
    t.deepEqual(
      await readFile(path.join(target, f.name)),
      await readFile(path.join(taken.dir, f.name)),
      f.name,
    );
  }
  const store = await openSqliteEventStore(path.join(target, 'events.db'));
  t.is((await store.readAll()).length, 12);
  await store.close();

  const empty = await tempDir(t, 'pds-restore-empty-');
  await rm(path.join(taken.dir, 'keys.db'));
  await t.throwsAsync(restoreBackup(taken.dir, empty), {
    instanceOf: RestoreRefused,
    message: /is not a sound backup: keys\.db: missing/,
  });
  t.deepEqual(await readdir(empty), []);
});

test('backup names sort by time', (t) => {
  const names = ['2026-11-29T10:00:00.000Z', '2026-11-29T09:59:59.999Z', '2026-12-01T00:00:00.000Z'].map(
    (at) => backupName(new Date(at)),
  );
  t.deepEqual([...names].sort(), [names[1], names[0], names[2]]);
});
