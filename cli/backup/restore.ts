/**
 * `restoreBackup`: a verified backup into an empty data dir (docs/operations.md, "Backups"). Never over
 * data: a data dir that holds anything is refused, so a restore cannot mix two histories. The directory
 * is made 0700 and every file 0600, like the service's own (docs/operations.md, "Secrets").
 */
import { constants } from 'node:fs';
import { chmod, copyFile, mkdir, open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../../application/private-files.ts';
import type { Manifest } from './manifest.ts';
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

/** Copies the backup in `backupDir` into `dataDir`, which must be empty or absent. */
export async function restoreBackup(backupDir: string, dataDir: string): Promise<Manifest> {
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
  return manifest;
}
