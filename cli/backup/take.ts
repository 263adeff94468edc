/**
 * `takeBackup`: a consistent copy of the embedded deployment's data dir while the service serves
 * (docs/operations.md, "Backups"). Each database is copied by SQLite's online backup API in one step:
 * one read transaction on the source for the whole copy, so the copy is the database as it was when
 * the step began, while the service's writers go on appending to the WAL (a copy made in several steps
 * would start over at every write of another connection, and under steady traffic never end). The copy
 * runs on Node's thread pool, not on the caller's event loop.
 *
 * The backup is written under a hidden name and renamed when whole, with its manifest: a backup
 * directory without the leading dot is complete.
 */
import { constants } from 'node:fs';
import { chmod, copyFile, mkdir, open, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { backup, DatabaseSync } from 'node:sqlite';
import {
  PRIVATE_DIR_MODE,
  PRIVATE_FILE_MODE,
  preparePrivateSqliteFile,
} from '../../application/private-files.ts';
import { type Clock, systemClock } from '../../domain/clock.ts';
import { type DataFile, dataFiles, LOG_FILE } from './files.ts';
import { type BackupFile, checksum, MANIFEST_FILE, MANIFEST_FORMAT, type Manifest } from './manifest.ts';

/** Every page in one step (the largest rate `backup()` takes). */
const ONE_STEP = 2 ** 31 - 1;
/** How long a source's open waits for a lock another connection holds (a checkpoint, a schema change). */
const BUSY_TIMEOUT_MS = 5_000;

export const BACKUP_PREFIX = 'pds-backup-';

/** A backup's directory name: `pds-backup-2026-11-29T03-47-27-123Z`, sorting by time. */
export function backupName(at: Date): string {
  return `${BACKUP_PREFIX}${at.toISOString().replace(/[:.]/g, '-')}`;
}

export type LogSummary = Manifest['log'];

/** Where the log in `db` ends and what it holds. */
export function summarizeLog(db: DatabaseSync, file: string): LogSummary {
  const totals = db
    .prepare('SELECT COALESCE(MAX(position), 0) AS head, COUNT(*) AS events FROM events')
    .get() as {
    head: number;
    events: number;
  };
  const streams = db.prepare('SELECT COUNT(DISTINCT stream_id) AS n FROM events').get() as { n: number };
  const byType: Record<string, number> = {};
  for (const row of db.prepare('SELECT type, COUNT(*) AS n FROM events GROUP BY type ORDER BY type').all()) {
    byType[row.type as string] = row.n as number;
  }
  return { file, head: totals.head, events: totals.events, streams: streams.n, by_type: byType };
}

/** Writes a file's data and its directory entry to the disk. */
async function syncFile(file: string): Promise<void> {
  const handle = await open(file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * One database through the online backup API. The copy is left in rollback-journal mode, so that
 * opening it to verify it makes no `-wal` beside it; the service turns WAL on again when it opens it.
 */
async function copyDatabase(source: string, target: string): Promise<LogSummary | undefined> {
  const from = new DatabaseSync(source, { readOnly: true, timeout: BUSY_TIMEOUT_MS });
  try {
    preparePrivateSqliteFile(target);
    await backup(from, target, { rate: ONE_STEP });
  } finally {
    from.close();
  }
  const copy = new DatabaseSync(target);
  try {
    copy.exec('PRAGMA journal_mode = DELETE');
    return path.basename(target) === LOG_FILE ? summarizeLog(copy, LOG_FILE) : undefined;
  } finally {
    copy.close();
  }
}

async function copyFileAsIs(source: string, target: string): Promise<void> {
  await copyFile(source, target, constants.COPYFILE_EXCL);
  await chmod(target, PRIVATE_FILE_MODE);
}

export interface BackupOptions {
  /** The data dir of the embedded deployment. */
  dataDir: string;
  /** Where the backup's own directory is made. */
  into: string;
  /** The service's version, for the manifest. */
  version: string;
  clock?: Clock;
}

export interface TakenBackup {
  /** The backup's directory. */
  dir: string;
  manifest: Manifest;
  /** How long it took, in ms. */
  ms: number;
}

/** Takes a backup of `dataDir` into a new directory under `into`; throws when the data dir holds no log. */
export async function takeBackup(options: BackupOptions): Promise<TakenBackup> {
  const began = performance.now();
  const created = (options.clock ?? systemClock).now();
  const files: DataFile[] = await dataFiles(options.dataDir);
  if (!files.some((f) => f.name === LOG_FILE && f.kind === 'sqlite')) {
    throw new Error(`${options.dataDir} holds no embedded event store (${LOG_FILE})`);
  }
  await mkdir(options.into, { recursive: true, mode: PRIVATE_DIR_MODE });
  const name = backupName(created);
  const partial = path.join(options.into, `.${name}.partial`);
  await mkdir(partial, { mode: PRIVATE_DIR_MODE });
  try {
    let log: LogSummary | undefined;
    const copied: BackupFile[] = [];
    for (const file of files) {
      const source = path.join(options.dataDir, file.name);
      const target = path.join(partial, file.name);
      if (file.kind === 'sqlite') log = (await copyDatabase(source, target)) ?? log;
      else await copyFileAsIs(source, target);
      await syncFile(target);
      copied.push({ ...file, ...(await checksum(target)) });
    }
    const manifest: Manifest = {
      format: MANIFEST_FORMAT,
      service: 'pds',
      version: options.version,
      created_at: created.toISOString(),
      duration_ms: performance.now() - began,
      log: log as LogSummary,
      files: copied,
    };
    const manifestFile = path.join(partial, MANIFEST_FILE);
    await writeFile(manifestFile, `${JSON.stringify(manifest, null, 2)}\n`, {
      mode: PRIVATE_FILE_MODE,
      flag: 'wx',
    });
    await syncFile(manifestFile);
    await syncFile(partial);
    const dir = path.join(options.into, name);
    await rename(partial, dir);
    await syncFile(options.into);
    return { dir, manifest, ms: performance.now() - began };
  } catch (error) {
    await rm(partial, { recursive: true, force: true });
    throw error;
  }
}
