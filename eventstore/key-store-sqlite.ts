/**
 * The embedded customer key store (`application/customer-keys.ts`): `keys.db` in the data directory,
 * beside the event store and never inside it, so that destroying a key leaves no byte of it behind.
 * `secure_delete` overwrites what a delete frees, and a destroy ends with a truncating WAL checkpoint,
 * so the key's pages are neither in the file nor in its WAL (docs/operations.md, "Customer data").
 */
import { DatabaseSync } from 'node:sqlite';
import type {
  CustomerErasure,
  CustomerKeyStore,
  LinkedKey,
  StoredCustomerKey,
} from '../application/customer-keys.ts';
import { preparePrivateSqliteFile } from '../application/private-files.ts';

export const KEY_STORE_FILE = 'keys.db';

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS customer_keys (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key_id TEXT NOT NULL UNIQUE,
    wrapped TEXT NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS customer_key_links (
    link TEXT NOT NULL,
    key_id TEXT NOT NULL,
    PRIMARY KEY (link, key_id)
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS customer_key_links_by_key ON customer_key_links (key_id);
  CREATE TABLE IF NOT EXISTS customer_erasures (
    erasure_id TEXT PRIMARY KEY,
    erasure TEXT NOT NULL,
    finished INTEGER NOT NULL DEFAULT 0
  );
`;

/** Opens (creating) the key store file; `:memory:` for tests. */
export function openSqliteKeyStore(file: string): CustomerKeyStore {
  // 0600 before SQLite opens it, and so its WAL (docs/operations.md, "Secrets").
  preparePrivateSqliteFile(file);
  const db = new DatabaseSync(file);
  db.exec('PRAGMA busy_timeout = 10000');
  db.exec('PRAGMA journal_mode = WAL');
  // A key is the only copy of what it sealed: an acknowledged one survives a power cut.
  db.exec('PRAGMA synchronous = FULL');
  db.exec('PRAGMA secure_delete = ON');
  db.exec(SCHEMA);
  const getKey = db.prepare('SELECT key_id, wrapped, created_at FROM customer_keys WHERE key_id = ?');
  const insertKey = db.prepare(
    'INSERT INTO customer_keys (key_id, wrapped, created_at) VALUES (?, ?, ?) ON CONFLICT (key_id) DO NOTHING',
  );
  const insertLink = db.prepare('INSERT OR IGNORE INTO customer_key_links (link, key_id) VALUES (?, ?)');
  const linksOf = db.prepare('SELECT link FROM customer_key_links WHERE key_id = ? ORDER BY link');
  const deleteLinks = db.prepare('DELETE FROM customer_key_links WHERE key_id = ?');
  const deleteKey = db.prepare('DELETE FROM customer_keys WHERE key_id = ?');
  const insertErasure = db.prepare(
    'INSERT INTO customer_erasures (erasure_id, erasure) VALUES (?, ?) ON CONFLICT (erasure_id) DO NOTHING',
  );
  const pending = db.prepare('SELECT erasure FROM customer_erasures WHERE finished = 0 ORDER BY rowid');
  const finish = db.prepare('UPDATE customer_erasures SET finished = 1 WHERE erasure_id = ?');

  function inTransaction<T>(work: () => T): T {
    db.exec('BEGIN IMMEDIATE');
    try {
      const result = work();
      db.exec('COMMIT');
      return result;
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
  }

  return {
    async key(keyId) {
      return (getKey.get(keyId) as StoredCustomerKey | undefined) ?? null;
    },
    async keysLinkedTo(links) {
      if (links.length === 0) return [];
      const rows = db
        .prepare(
          `SELECT DISTINCT k.key_id, k.seq FROM customer_key_links l JOIN customer_keys k ON k.key_id = l.key_id
           WHERE l.link IN (${links.map(() => '?').join(', ')}) ORDER BY k.seq`,
        )
        .all(...links) as Array<{ key_id: string }>;
      return rows.map(
        (r): LinkedKey => ({
          key_id: r.key_id,
          links: (linksOf.all(r.key_id) as Array<{ link: string }>).map((l) => l.link),
        }),
      );
    },
    async link(key, links) {
      inTransaction(() => {
        insertKey.run(key.key_id, key.wrapped, key.created_at);
        for (const link of links) insertLink.run(link, key.key_id);
      });
    },
    async beginErasure(erasure) {
      insertErasure.run(erasure.erasure_id, JSON.stringify(erasure));
    },
    async destroyKeys(keyIds) {
      inTransaction(() => {
        for (const keyId of keyIds) {
          deleteLinks.run(keyId);
          deleteKey.run(keyId);
        }
      });
      // The deleted pages are zeroed in the file once copied there; the WAL, which still holds the
      // key's earlier pages, is then cut to nothing. RESTART/TRUNCATE wait for readers (busy_timeout).
      db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    },
    async pendingErasures() {
      return (pending.all() as Array<{ erasure: string }>).map(
        (r) => JSON.parse(r.erasure) as CustomerErasure,
      );
    },
    async finishErasure(erasureId) {
      finish.run(erasureId);
    },
    async close() {
      if (db.isOpen) db.close();
    },
  };
}

/**
 * Every erasure a key store file records, finished or not, oldest first, read without writing: the
 * key store of a data dir a restore replaces is a ledger of its erasures (docs/operations.md, "Backups").
 */
export function erasuresRecordedIn(file: string): CustomerErasure[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const rows = db.prepare('SELECT erasure FROM customer_erasures ORDER BY rowid').all() as Array<{
      erasure: string;
    }>;
    return rows.map((r) => JSON.parse(r.erasure) as CustomerErasure);
  } finally {
    db.close();
  }
}
