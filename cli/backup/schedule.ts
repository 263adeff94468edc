/**
 * Scheduled backups with rotation (`PDS_BACKUP_DIR`, `PDS_BACKUP_EVERY`, `PDS_BACKUP_KEEP`;
 * docs/operations.md, "Backups"): a backup of the data dir every period, then the oldest complete
 * backups beyond the number kept are deleted. The next one is due a period after the newest backup in
 * the directory, so a restart neither skips one nor takes one more; a directory without any gets one at
 * start. A backup that fails is logged and tried again after a tenth of the period (at most an hour).
 *
 * Time is injected: the schedule runs on the dispatcher's timer queue (`dispatcher/scheduler.ts`) over
 * a clock, and tests move the clock and call `tick()`.
 */
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { createScheduler } from '../../dispatcher/scheduler.ts';
import type { Clock } from '../../domain/clock.ts';
import { MANIFEST_FILE, type Manifest, readManifest } from './manifest.ts';
import { BACKUP_PREFIX, type BackupOptions, type TakenBackup, takeBackup } from './take.ts';

const RETRY_CAP_MS = 3_600_000;

export interface BackupScheduleOptions {
  /** How a backup is taken: `takeBackup` by default; the service takes it on a thread (`take-thread.ts`). */
  take?: (options: BackupOptions) => Promise<TakenBackup>;
  dataDir: string;
  backupDir: string;
  everyMs: number;
  keep: number;
  version: string;
  clock: Clock;
  logger: Logger;
  /**
   * The newest backup (for metrics): each one taken, and at start the newest already in the directory,
   * so a restart does not read as no backup; `ms` is unknown for one whose manifest does not say.
   */
  onBackup?(newest: { manifest: Manifest; ms: number | undefined }): void;
}

export interface BackupSchedule {
  /** Finds the newest backup and schedules the next. */
  start(): Promise<void>;
  /** Runs a backup if one is due at the clock's time; resolves with how many ran. */
  tick(): Promise<number>;
  /** When the next backup is due. */
  next(): Date | undefined;
  stop(): Promise<void>;
}

/** The complete backups in `dir` (a manifest in each), oldest first; none when it does not exist. */
export async function completeBackups(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const complete: string[] = [];
  for (const name of names.filter((n) => n.startsWith(BACKUP_PREFIX)).sort()) {
    const manifest = await stat(path.join(dir, name, MANIFEST_FILE)).catch(() => undefined);
    if (manifest?.isFile()) complete.push(name);
  }
  return complete;
}

export function createBackupSchedule(options: BackupScheduleOptions): BackupSchedule {
  const { backupDir, everyMs, keep, clock, logger } = options;
  const scheduler = createScheduler(clock);
  let running: Promise<void> | undefined;
  let stopped = false;
  const later = (ms: number) => new Date(clock.now().getTime() + ms);

  async function rotate(): Promise<string[]> {
    const backups = await completeBackups(backupDir);
    const old = backups.slice(0, Math.max(0, backups.length - keep));
    for (const name of old) await rm(path.join(backupDir, name), { recursive: true, force: true });
    return old;
  }

  async function run(): Promise<void> {
    try {
      const taken = await (options.take ?? takeBackup)({
        dataDir: options.dataDir,
        into: backupDir,
        version: options.version,
        clock,
      });
      options.onBackup?.(taken);
      const deleted = await rotate();
      logger.info(
        {
          backup: taken.dir,
          ms: Math.round(taken.ms),
          head: taken.manifest.log.head,
          events: taken.manifest.log.events,
          deleted,
        },
        'backup taken',
      );
      if (!stopped) scheduler.schedule('backup', later(everyMs), backup);
    } catch (err) {
      const retryMs = Math.min(Math.ceil(everyMs / 10), RETRY_CAP_MS);
      logger.error({ err, retry_in_ms: retryMs }, 'scheduled backup failed: tried again later');
      if (!stopped) scheduler.schedule('backup', later(retryMs), backup);
    }
  }

  function backup(): Promise<void> {
    running = run().finally(() => {
      running = undefined;
    });
    return running;
  }

  return {
    async start() {
      const newest = (await completeBackups(backupDir)).at(-1);
      // A manifest that cannot be read does not stop the start: that backup counts for nothing.
      const manifest = newest
        ? await readManifest(path.join(backupDir, newest)).catch(() => undefined)
        : undefined;
      if (manifest) options.onBackup?.({ manifest, ms: manifest.duration_ms });
      const newestAt = manifest ? new Date(manifest.created_at) : undefined;
      const due = newestAt
        ? new Date(Math.max(clock.now().getTime(), newestAt.getTime() + everyMs))
        : clock.now();
      scheduler.schedule('backup', due, backup);
      logger.info({ backup_dir: backupDir, next: due.toISOString(), keep }, 'scheduled backups');
    },
    tick: () => scheduler.tick(),
    next: () => scheduler.dueAt('backup'),
    async stop() {
      stopped = true;
      scheduler.stop();
      await running;
    },
  };
}
