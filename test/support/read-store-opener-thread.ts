/**
 * A worker thread that opens the SQLite read store file `file` as soon as the parent says go, and
 * posts how the file was found (`opened.state`) or the error: for tests of threads opening a new
 * file at once, as role `all`'s dispatcher and delivery threads open `dispatcher.db`. With `mark`,
 * it stores a checkpoint of that name through its connection before closing it, so the parent can
 * tell which file each thread wrote to.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

const { file, go, mark } = workerData as { file: string; go: SharedArrayBuffer; mark?: string };
// Every thread says it is loaded, then waits on one flag, so they open the file at the same moment.
parentPort?.postMessage({ ready: true });
Atomics.wait(new Int32Array(go), 0, 0);
try {
  const store = openSqliteReadStore(file);
  const state = store.opened.state;
  if (mark) {
    const checkpoint = { position: 1, events: 1, updated_at: new Date(0).toISOString() };
    await store.setCheckpoint(mark, checkpoint);
  }
  await store.close();
  parentPort?.postMessage({ state });
} catch (error) {
  parentPort?.postMessage({ error: (error as Error).message });
}
