/**
 * A worker thread that only checkpoints an embedded store file (`checkpoints: 'background'`): the bare
 * append route of `command.append` gets the arrangement the service's API thread has, its WAL copied
 * into the file on another thread (eventstore/sqlite/log.ts).
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
