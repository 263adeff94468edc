/**
 * A worker thread that appends to an embedded store file one event at a time for `ms` milliseconds,
 * pausing a millisecond after every tenth (as a service does between requests, though busier), through
 * a connection that leaves checkpoints to another one (`'elsewhere'`); it posts how many it appended.
 * For tests of checkpoints made on another thread while appends go on. Its commits are not synced
 * (`synchronous: 'normal'`): the test needs the WAL to grow fast, and a sync per append would leave
 * the rate to the disk.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { rawEvent } from './raw-events.ts';

const { file, ms } = workerData as { file: string; ms: number };
const store = await openSqliteEventStore(file, { checkpoints: 'elsewhere', synchronous: 'normal' });
const end = performance.now() + ms;
let appended = 0;
while (performance.now() < end) {
  await store.append(`s-${appended % 50}`, [rawEvent('Appended', { appended, padding: 'x'.repeat(500) })]);
  appended += 1;
  if (appended % 10 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
}
await store.close();
parentPort?.postMessage(appended);
