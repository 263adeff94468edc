/**
 * The files the service keeps are its user's alone (docs/operations.md, "Secrets"): they hold
 * customers' personal data, key hashes and the secrets. The data dir is 0700 and every file in it
 * 0600 — the databases, the WAL and shared-memory files SQLite makes beside them, the operator token
 * and the secret key — whatever the umask (this file runs with 022, the usual one, under which SQLite
 * alone would make them 0644); a data dir others can read is tightened at start, and the log says so.
 */
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { openReadStore } from '../projections/index.ts';
import { checkedOut, createWebhook, seedCatalog } from './support/cart-world.ts';
import { serveChild } from './support/child-service.ts';
import { rawEvent } from './support/raw-events.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

// What most machines run with: files 0644 and directories 0755 unless the program says otherwise.
process.umask(0o022);

const modeOf = async (file: string) => ((await stat(file)).mode & 0o777).toString(8);

/** `name → mode` (octal) of the directory itself (`.`) and of everything in it, at any depth. */
async function modes(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = { '.': await modeOf(dir) };
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    try {
      out[path.relative(dir, full)] = await modeOf(full);
    } catch {
      // A -wal or -shm removed as a connection closed.
    }
  }
  return out;
}

/** Names whose mode is not the private one (0700 for directories, 0600 for files). */
function open(found: Record<string, string>, dirs: readonly string[] = ['.']): string[] {
  return Object.entries(found)
    .filter(([name, mode]) => mode !== (dirs.includes(name) ? '700' : '600'))
    .map(([name, mode]) => `${name} ${mode}`);
}

async function scratch(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-modes-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('pds serve makes its data dir 0700 and every file in it 0600: databases, WAL, shared memory, token, key', async (t) => {
  const dataDir = path.join(await scratch(t), 'data');
  // The operator token and the secret key generated into the data dir, as on a first `npm start`.
  const child = await serveChild(t, dataDir, { PDS_OPERATOR_TOKEN: '' });
  const token = (await readFile(path.join(dataDir, 'operator-token'), 'utf8')).trim();
  const api = {
    call: (method: string, url: string, body?: unknown) =>
      fetch(`${child.base}${url}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
  };
  // Events, read models and a webhook delivery: every database of the data dir is written.
  const receiver = await startReceiver(t);
  await seedCatalog(api, [1]);
  await createWebhook(api, receiver.url, [1]);
  await checkedOut(api, 1);
  await receiver.waitFor(1, 20_000);

  const running = await modes(dataDir);
  for (const name of [
    'events.db',
    'events.db-wal',
    'events.db-shm',
    'read.db',
    'read.db-wal',
    'dispatcher.db',
    'keys.db',
    'keys.db-wal',
  ]) {
    t.true(name in running, `${name} exists: ${JSON.stringify(running)}`);
  }
  t.true('operator-token' in running && 'secret-key' in running);
  t.deepEqual(open(running), [], JSON.stringify(running));

  const exited = once(child.process, 'exit');
  child.process.kill('SIGTERM');
  await exited;
  const stopped = await modes(dataDir);
  t.deepEqual(open(stopped), [], JSON.stringify(stopped));
});

test('a data dir others can read is tightened at start, its files too, and the log says what changed', async (t) => {
  const dataDir = await scratch(t);
  // A data dir from before: the event store's file, its WAL and a token file, all readable by anyone.
  const store = await openSqliteEventStore(path.join(dataDir, 'events.db'));
  await store.close();
  await writeFile(path.join(dataDir, 'operator-token'), `${'t'.repeat(32)}\n`);
  await writeFile(path.join(dataDir, 'events.db-wal'), '');
  for (const name of ['events.db', 'operator-token', 'events.db-wal']) {
    await chmod(path.join(dataDir, name), 0o644);
  }
  await writeFile(path.join(dataDir, 'notes.sh'), '#!/bin/sh\n', { mode: 0o755 });
  await chmod(dataDir, 0o755);

  const s = await startService(t, { dataDir });
  const found = await modes(dataDir);
  t.deepEqual(open(found).sort(), ['notes.sh 700'], JSON.stringify(found));
  const line = s
    .logs()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => String(l.msg).startsWith('the data dir was open to other users'));
  t.truthy(line, 'a log line says so');
  t.is(line?.level, 40, 'at warn');
  t.is(line?.dir_mode_was, '755');
  // Only what others could reach, and the owner keeps every bit of their own (a script stays runnable).
  t.deepEqual(line?.files, ['events.db', 'events.db-wal', 'notes.sh', 'operator-token']);
  t.is(await modeOf(path.join(dataDir, 'notes.sh')), '700');

  // A second start on the same dir finds nothing to change and says nothing.
  await s.service.stop();
  const again = await startService(t, { dataDir });
  t.false(again.logs().includes('the data dir was open to other users'));
});

test('the embedded stores create their files 0600 and a missing directory 0700, wherever their URL points', async (t) => {
  const root = await scratch(t);
  const events = path.join(root, 'elsewhere', 'events', 'events.db');
  const store = await openSqliteEventStore(events);
  await store.append('thing-1', [rawEvent('ThingHappened', { n: 1 })]);
  const reads = path.join(root, 'reads', 'read.db');
  await mkdir(path.dirname(reads), { mode: 0o700 });
  const readStore = await openReadStore(`sqlite:${reads}`);
  await (await readStore.collection('things')).bulkWrite([
    { replaceOne: { filter: { _id: 'a' }, replacement: { _id: 'a', n: 1 }, upsert: true } },
  ]);
  try {
    const found = { ...(await modes(path.join(root, 'elsewhere'))), ...(await modes(path.dirname(reads))) };
    t.true('events/events.db-wal' in found && 'read.db-wal' in found, JSON.stringify(found));
    t.deepEqual(open(found, ['.', 'events']), [], JSON.stringify(found));
  } finally {
    await store.close();
    await readStore.close();
  }
});
