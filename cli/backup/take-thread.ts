/**
 * `takeBackup` on a worker thread of its own, for the scheduled backups of the serving process
 * (docs/operations.md, "Backups"): the log's summary in the manifest scans the whole log (about half a
 * second at 1,000,000 events, on whichever thread runs it), and the checksums read every byte copied;
 * on a thread of their own neither holds up the APIs' event loop. The thread's entry is
 * `take-thread-main.ts`; the backup's time comes from the caller's clock.
 */
import { Worker } from 'node:worker_threads';
import { systemClock } from '../../domain/clock.ts';
import type { BackupOptions, TakenBackup } from './take.ts';

const ENTRY = new URL('./take-thread-main.ts', import.meta.url);

export interface BackupThreadData {
  dataDir: string;
  into: string;
  version: string;
  /** ISO 8601: when the backup is taken, by the caller's clock. */
  at: string;
}

export type FromBackupThread = { taken: TakenBackup } | { error: string };

export function takeBackupOnThread(options: BackupOptions): Promise<TakenBackup> {
  const workerData: BackupThreadData = {
    dataDir: options.dataDir,
    into: options.into,
    version: options.version,
    at: (options.clock ?? systemClock).now().toISOString(),
  };
  const worker = new Worker(ENTRY, { workerData, name: 'pds-backup' });
  return new Promise((resolve, reject) => {
    worker.once('message', (message: FromBackupThread) => {
      if ('taken' in message) resolve(message.taken);
      else reject(new Error(message.error));
    });
    worker.once('error', reject);
    worker.once('exit', (code) =>
      reject(new Error(`the backup thread ended (exit code ${code}) before it answered`)),
    );
  });
}
