/**
 * `restoreBackup`: a verified backup into an empty data dir (docs/operations.md, "Backups"). Never over
 * data: a data dir that holds anything is refused, so a restore cannot mix two histories. The directory
 * is made 0700 and every file 0600, like the service's own (docs/operations.md, "Secrets"). Then the
 * erasures of the erasure ledger the copy may not hold are applied again to its key store: an erasure
 * is never undone by a restore.
 */
import { constants } from 'node:fs';
import { chmod, copyFile, mkdir, open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { CustomerErasure } from '../../application/customer-keys.ts';
import { reapplyErasures } from '../../application/erasure-ledger.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../../application/private-files.ts';
import {
  erasuresRecordedIn,
  KEY_STORE_FILE,
  openSqliteKeyStore,
  reopenErasuresIn,
} from '../../eventstore/key-store-sqlite.ts';
import { ERASURE_LEDGER_FILE, ErasureLedgerMissing, readErasureLedger } from './erasure-ledger.ts';
import { LOG_FILE } from './files.ts';
import type { Manifest } from './manifest.ts';
import { openRestoredLog } from './restored-log.ts';
import { verifyBackup } from './verify.ts';

/** Why a restore did not begin: the backup is not sound, or the data dir is not empty. */
export class RestoreRefused extends Error {
  override name = 'RestoreRefused';
}

async function syncPath(file: string): Promise<void> {
  const handle = await open(file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** What is in `dir`; empty when it does not exist. */
async function entries(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

export interface Restored {
  manifest: Manifest;
  /** The ledger files read (those that exist), and the erasures applied again from them. */
  ledgers: string[];
  reapplied: CustomerErasure[];
}

/** The erasure ledger beside a backup: in the directory backups are taken into (`PDS_BACKUP_DIR`). */
export const ledgerBeside = (backupDir: string) => path.join(path.dirname(backupDir), ERASURE_LEDGER_FILE);

/**
 * Copies the backup in `backupDir` into `dataDir`, which must be empty or absent, and applies again the
 * erasures the copy does not hold whole, from the copy's own key store, the ledger beside the backup
 * (when there is one) and the `named` ledgers (each must exist).
 */
export async function restoreBackup(
  backupDir: string,
  dataDir: string,
  named: readonly string[] = [],
): Promise<Restored> {
  const beside = ledgerBeside(backupDir);
  for (const file of named) {
    if (!(await exists(file))) throw new ErasureLedgerMissing(`${file} does not exist (--erasures)`);
  }
  const ledgers = [...new Set([beside, ...named])];
  // Read before anything is copied: a damaged ledger refuses the restore, not half of it.
  const read = await Promise.all(
    ledgers.map(async (file) => ({ file, erasures: await readErasureLedger(file) })),
  );
  const { manifest, problems } = await verifyBackup(backupDir);
  if (manifest === null || problems.length > 0) {
    throw new RestoreRefused(`${backupDir} is not a sound backup: ${problems.join('; ')}`);
  }
  const present = await entries(dataDir);
  if (present.length > 0) {
    const shown = present.sort().slice(0, 5).join(', ');
    throw new RestoreRefused(
      `${dataDir} is not empty (${shown}${present.length > 5 ? ', …' : ''}): restore into an empty data dir`,
    );
  }
  await mkdir(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  await chmod(dataDir, PRIVATE_DIR_MODE);
  for (const file of manifest.files) {
    const target = path.join(dataDir, file.name);
    await copyFile(path.join(backupDir, file.name), target, constants.COPYFILE_EXCL);
    await chmod(target, PRIVATE_FILE_MODE);
    await syncPath(target);
  }
  await syncPath(dataDir);
  const found = await Promise.all(read.map(async (l) => ((await exists(l.file)) ? [l.file] : [])));
  const keysFile = path.join(dataDir, KEY_STORE_FILE);
  // The copy's own key store records the erasures it made, also one finished after the log was
  // copied and before the key store was: the copied log lacks its record on the carts.
  const recorded = (await exists(keysFile)) ? erasuresRecordedInCopy(keysFile) : [];
  const erasures = [...recorded, ...read.flatMap((l) => l.erasures)];
  if (erasures.length === 0) return { manifest, ledgers: found.flat(), reapplied: [] };
  const keys = openSqliteKeyStore(keysFile);
  const log = openRestoredLog(path.join(dataDir, LOG_FILE));
  try {
    const reapplied = await reapplyErasures(
      {
        keys,
        reopenErasure: async (erasure) => reopenErasuresIn(keysFile, [erasure]),
        cartsNotErased: async (erasureId, carts) => log.cartsNotErased(erasureId, carts),
      },
      erasures,
    );
    return { manifest, ledgers: found.flat(), reapplied };
  } finally {
    log.close();
    await keys.close();
  }
}

/** The erasures a restored key store records; none when it holds no erasure yet (no table for them). */
function erasuresRecordedInCopy(file: string): CustomerErasure[] {
  const db = new DatabaseSync(file, { readOnly: true });
  let recording: boolean;
  try {
    recording =
      db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'customer_erasures'").get() !==
      undefined;
  } finally {
    db.close();
  }
  return recording ? erasuresRecordedIn(file) : [];
}

async function exists(file: string): Promise<boolean> {
  return (await entries(path.dirname(file))).includes(path.basename(file));
}
