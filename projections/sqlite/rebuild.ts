/**
 * Rebuilding an embedded store's file for `pds customers protect --vacuum`
 * (docs/operations.md, "Customer data"): a file written without `secure_delete` keeps what it deleted
 * in its free pages, plain text among it. `VACUUM` writes the file anew without them, and the truncated WAL drops the old pages'
 * copies. With the service stopped: `VACUUM` holds every writer back while it runs.
 */
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import type { RebuiltFile } from '../../application/customer-data-protection.ts';

/** Rebuilds `db`'s file when told, then truncates its WAL when no reader holds it; whether it could. */
export function rebuildAndTruncate(db: DatabaseSync, vacuum: boolean): boolean {
  if (vacuum) db.exec('VACUUM');
  db.exec('PRAGMA busy_timeout = 0');
  try {
    const [result] = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').all() as Array<{ busy: number }>;
    return result.busy === 0;
  } finally {
    db.exec('PRAGMA busy_timeout = 10000');
  }
}

/** The file of the embedded read store (`read.db`), to rebuild; null when it is not there. */
export function openRebuiltFile(file: string): RebuiltFile | null {
  if (!existsSync(file)) return null;
  const db = new DatabaseSync(file, { timeout: 10_000 });
  db.exec('PRAGMA secure_delete = ON');
  return {
    async finish(vacuum) {
      return rebuildAndTruncate(db, vacuum);
    },
    async close() {
      if (db.isOpen) db.close();
    },
  };
}
