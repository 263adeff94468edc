/**
 * Threads opening a new SQLite read store file at once (role `all`'s dispatcher and delivery threads
 * open `dispatcher.db` together at a first start; docs/webhooks.md, "Scale"): one creates the schema,
 * the others find it created, and none fails (a thread whose start failed would be started again).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import test from 'ava';

const THREADS = 4;
const FILES = 10;

test('threads opening a new read store file at once: one creates it, the others open it, none fails', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-read-store-threads-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (let n = 0; n < FILES; n++) {
    const file = path.join(dir, `dispatcher-${n}.db`);
    const go = new SharedArrayBuffer(4);
    const answers = Array.from({ length: THREADS }, () => {
      const worker = new Worker(new URL('../support/read-store-opener-thread.ts', import.meta.url), {
        workerData: { file, go },
      });
      return new Promise<{ state?: string; error?: string }>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
    });
    // Each thread is loaded and waiting before they all go.
    await new Promise((resolve) => setTimeout(resolve, 300));
    Atomics.store(new Int32Array(go), 0, 1);
    Atomics.notify(new Int32Array(go), 0);
    const found = await Promise.all(answers);
    t.deepEqual(
      found.filter((a) => a.error),
      [],
      `file ${n}: no thread failed (${found.map((a) => a.error ?? a.state).join('; ')})`,
    );
    t.is(found.filter((a) => a.state === 'created').length, 1, `file ${n}: created once`);
  }
});
