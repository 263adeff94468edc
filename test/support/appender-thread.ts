/**
 * A worker thread that appends `count` events to an embedded store file one at a time, pausing a
 * millisecond after every fifth (as a service does between requests, though busier), through a
 * connection that leaves checkpoints to another one (`'elsewhere'`); it posts when it is done. A
 * count, not a duration: what it writes does not depend on how much CPU a loaded machine gives it.
 * For tests of checkpoints made on another thread while appends go on. Its commits are not synced
 * (`synchronous: 'normal'`): the test needs the WAL to grow fast, and a sync per append would leave
 * the rate to the disk.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { rawEvent } from './raw-events.ts';

const { file, count } = workerData as { file: string; count: number };
const store = await openSqliteEventStore(file, { checkpoints: 'elsewhere', synchronous: 'normal' });
for (let appended = 1; appended <= count; appended++) {
  await store.append(`s-${appended % 50}`, [rawEvent('Appended', { appended, padding: 'x'.repeat(500) })]);
  if (appended % 5 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
}
await store.close();
parentPort?.postMessage(count);
