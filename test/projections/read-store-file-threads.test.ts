/**
 * Threads opening one SQLite read store file at once (role `all`'s dispatcher and delivery threads
 * open `dispatcher.db` together; docs/webhooks.md, "Scale"): a new file is created by one of them and
 * the others find it created; a file to replace (of another schema, or unreadable) is moved aside and
 * created anew by one of them, and every thread ends up on that new file. None fails (a thread whose
 * start failed would be started again).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import test from 'ava';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

/** Threads at once, files in turn: with 8 threads on 2 cores, the replacement before the lock failed on the first file. */
const THREADS = 8;
const FILES = 10;

/** `threads` threads opening `file` at the same moment; each stores a checkpoint `mark-<i>` with `marks`. */
async function openAtOnce(file: string, threads: number, marks: boolean) {
  const go = new SharedArrayBuffer(4);
  const ready: Array<Promise<unknown>> = [];
  const answers = Array.from({ length: threads }, (_, i) => {
    const worker = new Worker(new URL('../support/read-store-opener-thread.ts', import.meta.url), {
      workerData: { file, go, ...(marks && { mark: `mark-${i}` }) },
    });
    const loaded = Promise.withResolvers();
    ready.push(loaded.promise);
    return new Promise<{ state?: string; error?: string }>((resolve, reject) => {
      worker.on('message', (message: { ready?: true; state?: string; error?: string }) =>
        message.ready ? loaded.resolve(undefined) : resolve(message),
      );
      worker.once('error', (err) => {
        loaded.reject(err);
        reject(err);
      });
    });
  });
  // Each thread is loaded and waiting before they all go.
  await Promise.all(ready);
  Atomics.store(new Int32Array(go), 0, 1);
  Atomics.notify(new Int32Array(go), 0);
  return Promise.all(answers);
}

test('threads opening a new read store file at once: one creates it, the others open it, none fails', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-read-store-threads-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (let n = 0; n < FILES; n++) {
    const found = await openAtOnce(path.join(dir, `dispatcher-${n}.db`), 4, false);
    t.deepEqual(
      found.filter((a) => a.error),
      [],
      `file ${n}: no thread failed (${found.map((a) => a.error ?? a.state).join('; ')})`,
    );
    t.is(found.filter((a) => a.state === 'created').length, 1, `file ${n}: created once`);
  }
});

test('threads opening a read store file to replace at once (unreadable, or of another schema): one moves it aside, every thread writes to the one file created in its place', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-read-store-threads-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (let n = 0; n < FILES; n++) {
    const file = path.join(dir, `dispatcher-${n}.db`);
    // Every other file a database of another schema, the others not a database at all.
    const foreign = n % 2 === 1;
    if (foreign) {
      const db = new DatabaseSync(file);
      db.exec('PRAGMA journal_mode = WAL; CREATE TABLE elsewhere (x); PRAGMA user_version = 7;');
      db.close();
    } else await writeFile(file, `not a database ${n} `.repeat(400));
    const found = await openAtOnce(file, THREADS, true);
    const summary = found.map((a) => a.error ?? a.state).join('; ');
    t.deepEqual(
      found.filter((a) => a.error),
      [],
      `file ${n}: no thread failed (${summary})`,
    );
    t.is(found.filter((a) => a.state === 'replaced').length, 1, `file ${n}: replaced once (${summary})`);
    const store = openSqliteReadStore(file);
    t.is(store.opened.state, 'opened');
    const marks = await Promise.all(
      Array.from({ length: THREADS }, (_, i) => store.getCheckpoint(`mark-${i}`)),
    );
    await store.close();
    t.is(marks.filter(Boolean).length, THREADS, `file ${n}: every thread wrote to the new file (${summary})`);
    if (foreign) {
      const aside = new DatabaseSync(`${file}.unreadable`);
      t.truthy(aside.prepare("SELECT name FROM sqlite_master WHERE name = 'elsewhere'").get(), 'kept aside');
      aside.close();
    } else t.regex(await readFile(`${file}.unreadable`, 'utf8'), /^not a database/, `file ${n}: kept aside`);
  }
});
