/**
 * The files the service keeps hold customers' personal data, key hashes and sealed secrets: only the
 * service's own user may read them (docs/operations.md, "Secrets"). Directories it creates are 0700 and
 * files 0600, whatever the process's umask; an existing data dir that others can read is tightened at
 * start (`tightenDataDir`), taking group and other access away and keeping the owner's.
 *
 * SQLite creates a database file 0644 less the umask, and gives the `-wal`, `-shm` and `-journal`
 * files it makes beside it the database file's own mode (`findCreateFileMode` and
 * `unixOpenSharedMemory` in its os_unix.c). So the database file is created here, empty and 0600,
 * before SQLite opens it: everything SQLite then makes beside it is 0600 too, on every thread and in
 * every process that opens it, without a process-wide umask.
 */
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { chmod, readdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** Group and other permission bits. */
const SHARED_BITS = 0o077;

/** What SQLite keeps beside a database file. */
const SQLITE_COMPANIONS = ['-wal', '-shm', '-journal'] as const;

/** Takes group and other access away from `file` if it has any; true when it did. Absent: false. */
function tightenSync(file: string): boolean {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
  if ((mode & SHARED_BITS) === 0) return false;
  chmodSync(file, mode & 0o700);
  return true;
}

/**
 * Before SQLite opens the database at `path` (a file name, not `:memory:`): its directory is created
 * 0700 when absent, the file created empty and 0600 when absent (SQLite takes an empty file for a new
 * database), and an existing file and its `-wal`, `-shm`, `-journal` lose group and other access.
 */
export function preparePrivateSqliteFile(path: string): void {
  if (path === ':memory:' || path === '') return;
  mkdirSync(dirname(path), { recursive: true, mode: PRIVATE_DIR_MODE });
  closeSync(openSync(path, 'a', PRIVATE_FILE_MODE));
  for (const file of [path, ...SQLITE_COMPANIONS.map((suffix) => path + suffix)]) tightenSync(file);
}

/** What `tightenDataDir` changed: the directory's former mode (when it changed) and the files it tightened. */
export interface Tightened {
  /** The directory's mode before, when others had access to it. */
  dirModeWas: number | null;
  /** Names of the files in it that others could read or write, now 0600 (or the owner's bits only). */
  files: string[];
}

/**
 * The data dir at start: the directory and every file directly in it lose group and other access
 * (the owner's bits are kept, so nothing the owner could do before is taken away). Files only in the
 * directory itself: what the service keeps there (its databases, the operator token, the secret key).
 */
export async function tightenDataDir(dir: string): Promise<Tightened> {
  const before = (await stat(dir)).mode;
  let dirModeWas: number | null = null;
  if ((before & SHARED_BITS) !== 0) {
    await chmod(dir, before & 0o700);
    dirModeWas = before & 0o777;
  }
  const files: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = join(dir, entry.name);
    try {
      const mode = (await stat(file)).mode;
      if ((mode & SHARED_BITS) === 0) continue;
      await chmod(file, mode & 0o700);
      files.push(entry.name);
    } catch (error) {
      // A `-wal` or `-shm` another thread's connection removed as it closed.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return { dirModeWas, files: files.sort() };
}
