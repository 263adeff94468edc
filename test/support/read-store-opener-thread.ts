/**
 * A worker thread that opens the SQLite read store file `file` as soon as the parent says go, and
 * posts how the file was found (`opened.state`) or the error: for tests of threads opening a new
 * file at once, as role `all`'s dispatcher and delivery threads open `dispatcher.db`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

const { file, go } = workerData as { file: string; go: SharedArrayBuffer };
// Every thread waits on one flag, so they open the file at the same moment.
Atomics.wait(new Int32Array(go), 0, 0);
try {
  const store = openSqliteReadStore(file);
  const state = store.opened.state;
  await store.close();
  parentPort?.postMessage({ state });
} catch (error) {
  parentPort?.postMessage({ error: (error as Error).message });
}
