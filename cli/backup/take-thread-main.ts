/** The backup thread's program (`take-thread.ts`): one backup, its answer posted to the caller, then it ends. */
import { parentPort, workerData } from 'node:worker_threads';
import { takeBackup } from './take.ts';
import type { BackupThreadData, FromBackupThread } from './take-thread.ts';

const { dataDir, into, version, at } = workerData as BackupThreadData;
let answer: FromBackupThread;
try {
  answer = { taken: await takeBackup({ dataDir, into, version, clock: { now: () => new Date(at) } }) };
} catch (error) {
  answer = { error: error instanceof Error ? error.message : String(error) };
}
parentPort?.postMessage(answer);
