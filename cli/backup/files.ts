/**
 * What a backup copies from the data dir, and in which order (docs/operations.md, "Backups"): every
 * SQLite database in it, whatever its name (a file that starts with SQLite's header), through SQLite's
 * online backup API, and every other file as it is (the operator token, the secret key). The `-wal`,
 * `-shm` and `-journal` files beside a database are not copied: the backup API reads through them.
 *
 * The order makes the copy consistent across files without stopping the service. The log is the source
 * of truth and the read models and the dispatcher's working state are derived from it, each with its
 * checkpoint (a position in the log) in the same file. So the derived files are copied first and the log
 * after them: a derived file is never ahead of the log it is restored with, and after a restore each
 * resumes after its checkpoint and reads the rest from the log. Were one ahead, the events appended
 * after the restore would take the positions it had already applied, and it would skip them. Every
 * other database (the console's sessions, a key store the log's events need) is copied after the log,
 * so whatever an event of the copy refers to is there too.
 */
import { open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { DEFAULTS } from '../config.ts';

/** The embedded event store's file in the data dir (`PDS_EVENT_STORE` unset). */
export const LOG_FILE = 'events.db';

/** Files derived from the log, each holding its own checkpoint: copied before it. */
export const DERIVED_FILES: readonly string[] = [DEFAULTS.readStoreFile, DEFAULTS.dispatcherStoreFile];

export const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');
const SQLITE_COMPANION = /-(wal|shm|journal)$/;

export interface DataFile {
  name: string;
  kind: 'sqlite' | 'file';
}

async function isSqlite(file: string): Promise<boolean> {
  const handle = await open(file, 'r');
  try {
    const header = Buffer.alloc(SQLITE_HEADER.length);
    const { bytesRead } = await handle.read(header, 0, header.length, 0);
    return bytesRead === header.length && header.equals(SQLITE_HEADER);
  } finally {
    await handle.close();
  }
}

const rank = (name: string) => (DERIVED_FILES.includes(name) ? 0 : name === LOG_FILE ? 1 : 2);

/** The files of `dataDir` a backup copies, in the order it copies them (derived files, the log, the rest). */
export async function dataFiles(dataDir: string): Promise<DataFile[]> {
  const files: DataFile[] = [];
  for (const entry of await readdir(dataDir, { withFileTypes: true })) {
    if (!entry.isFile() || SQLITE_COMPANION.test(entry.name) || entry.name.startsWith('.')) continue;
    files.push({
      name: entry.name,
      kind: (await isSqlite(path.join(dataDir, entry.name))) ? 'sqlite' : 'file',
    });
  }
  return files.sort(
    (a, b) => rank(a.name) - rank(b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
}
