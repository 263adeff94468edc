/**
 * A worker thread that only checkpoints an embedded store file (`checkpoints: 'background'`), started by
 * `startCheckpointer` (bench/checkpointer.ts): `command.append`'s bare append route and `webhook.e2e`'s
 * draining dispatcher get the arrangement the service's API and dispatcher threads have, their WAL
 * copied into the file on another thread (eventstore/sqlite/log.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';

const port = parentPort;
if (!port) throw new Error('checkpointer-thread.ts runs as a worker thread');
const store = await openSqliteEventStore((workerData as { file: string }).file, {
  checkpoints: 'background',
});
port.once('message', async () => {
  await store.close();
  process.exit(0);
});
port.postMessage('ready');
