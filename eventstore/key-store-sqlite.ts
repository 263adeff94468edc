/**
 * The embedded customer key store (`application/customer-keys.ts`): `keys.db` in the data directory,
 * beside the event store and never inside it, so that destroying a key leaves no byte of it behind.
 * `secure_delete` overwrites what a delete frees, and a destroy ends with a truncating WAL checkpoint,
 * so the key's pages are neither in the file nor in its WAL (docs/operations.md, "Customer data"); a
 * checkpoint a reader keeps from truncating the WAL is tried again a few times, then reported
 * (`wiped: false`) so that the erasure stays pending. A destroyed key's row is replaced by its
 * tombstone (`customer_key_tombstones`) in one transaction, and a key is created only in a transaction
 * that finds no tombstone of its id, so nothing brings a destroyed key back.
 */
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  CustomerErasure,
  CustomerKeyStore,
  CustomerKeyTombstone,
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
  CREATE TABLE IF NOT EXISTS customer_key_tombstones (
    key_id TEXT PRIMARY KEY,
    erasure_id TEXT NOT NULL,
    erased_at TEXT NOT NULL,
    cart_uuid TEXT
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS customer_erasures (
    erasure_id TEXT PRIMARY KEY,
    erasure TEXT NOT NULL,
    finished INTEGER NOT NULL DEFAULT 0
  );
`;

export interface SqliteKeyStoreOptions {
  /** Truncating checkpoints tried after a destroy before it reports the WAL not wiped. */
  checkpointAttempts?: number;
  /** The pause between two of them, in ms. */
  checkpointPauseMs?: number;
}

/** The file opened, its settings made and its schema brought up to date. */
function openFile(file: string): DatabaseSync {
  // 0600 before SQLite opens it, and so its WAL (docs/operations.md, "Secrets").
  preparePrivateSqliteFile(file);
  const db = new DatabaseSync(file);
  db.exec('PRAGMA busy_timeout = 10000');
  db.exec('PRAGMA journal_mode = WAL');
  // A key is the only copy of what it sealed: an acknowledged one survives a power cut.
  db.exec('PRAGMA synchronous = FULL');
  db.exec('PRAGMA secure_delete = ON');
  // A WAL reset after a checkpoint is cut to nothing, never kept at its size with old frames in it.
  db.exec('PRAGMA journal_size_limit = 0');
  db.exec(SCHEMA);
  // keys.db files made before tombstones named their cart.
  const tombstoneColumns = db.prepare('PRAGMA table_info(customer_key_tombstones)').all() as Array<{
    name: string;
  }>;
  if (!tombstoneColumns.some((c) => c.name === 'cart_uuid')) {
    db.exec('ALTER TABLE customer_key_tombstones ADD COLUMN cart_uuid TEXT');
  }
  db.exec(
    'CREATE INDEX IF NOT EXISTS customer_key_tombstones_by_cart ON customer_key_tombstones (cart_uuid)',
  );
  return db;
}

/** Opens (creating) the key store file; `:memory:` for tests. */
export function openSqliteKeyStore(file: string, options: SqliteKeyStoreOptions = {}): CustomerKeyStore {
  const checkpointAttempts = options.checkpointAttempts ?? 5;
  const checkpointPauseMs = options.checkpointPauseMs ?? 100;
  const db = openFile(file);
  const getKey = db.prepare('SELECT key_id, wrapped, created_at FROM customer_keys WHERE key_id = ?');
  const keyExists = db.prepare(
    'SELECT 1 FROM customer_keys WHERE key_id = ? UNION ALL SELECT 1 FROM customer_key_tombstones WHERE key_id = ?',
  );
  const insertKey = db.prepare('INSERT INTO customer_keys (key_id, wrapped, created_at) VALUES (?, ?, ?)');
  const insertLink = db.prepare('INSERT OR IGNORE INTO customer_key_links (link, key_id) VALUES (?, ?)');
  // Only to a present key: a destroyed one has no row to select.
  const addLink = db.prepare(
    'INSERT OR IGNORE INTO customer_key_links (link, key_id) SELECT ?, key_id FROM customer_keys WHERE key_id = ?',
  );
  const cartOf = db.prepare(
    "SELECT substr(link, 6) AS uuid FROM customer_key_links WHERE key_id = ? AND link LIKE 'cart:%' LIMIT 1",
  );
  const linksOf = db.prepare('SELECT link FROM customer_key_links WHERE key_id = ? ORDER BY link');
  const deleteLinks = db.prepare('DELETE FROM customer_key_links WHERE key_id = ?');
  const deleteKey = db.prepare('DELETE FROM customer_keys WHERE key_id = ?');
  const getTombstone = db.prepare(
    'SELECT key_id, cart_uuid, erasure_id, erased_at FROM customer_key_tombstones WHERE key_id = ?',
  );
  const tombstonesOfCart = db.prepare(
    'SELECT key_id, cart_uuid, erasure_id, erased_at FROM customer_key_tombstones WHERE cart_uuid = ? ORDER BY erased_at, key_id',
  );
  const insertTombstone = db.prepare(
    'INSERT INTO customer_key_tombstones (key_id, cart_uuid, erasure_id, erased_at) VALUES (?, ?, ?, ?) ON CONFLICT (key_id) DO NOTHING',
  );
  const checkpoint = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)');
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

  /**
   * The deleted pages are zeroed in the file once copied there; the WAL, which still holds the key's
   * earlier pages, is then cut to nothing. A reader's open transaction keeps it (the row's `busy`):
   * tried again after a pause, without blocking the thread in SQLite's busy handler meanwhile.
   */
  async function truncateWal(): Promise<boolean> {
    if (file === ':memory:') return true;
    for (let attempt = 1; ; attempt++) {
      db.exec('PRAGMA busy_timeout = 0');
      let busy: number;
      try {
        busy = (checkpoint.get() as { busy: number }).busy;
      } finally {
        db.exec('PRAGMA busy_timeout = 10000');
      }
      if (busy === 0) return true;
      if (attempt >= checkpointAttempts) return false;
      await sleep(checkpointPauseMs);
    }
  }

  return {
    async key(keyId) {
      // The tombstone first: it is final, whatever else a faulty writer left.
      const tombstone = getTombstone.get(keyId) as CustomerKeyTombstone | undefined;
      if (tombstone) return { tombstone: { ...tombstone } };
      const key = getKey.get(keyId) as StoredCustomerKey | undefined;
      return key ? { key: { ...key } } : null;
    },
    async keysLinkedTo(links, last) {
      if (links.length === 0) return [];
      const linked = `SELECT DISTINCT k.key_id, k.seq FROM customer_key_links l JOIN customer_keys k ON k.key_id = l.key_id
           WHERE l.link IN (${links.map(() => '?').join(', ')})`;
      // The last ones made, by the link's index entries: only their links are read.
      const rows = (
        last === undefined
          ? db.prepare(`${linked} ORDER BY k.seq`).all(...links)
          : db
              .prepare(`SELECT key_id FROM (${linked} ORDER BY k.seq DESC LIMIT ?) ORDER BY seq`)
              .all(...links, last)
      ) as Array<{ key_id: string }>;
      return rows.map(
        (r): LinkedKey => ({
          key_id: r.key_id,
          links: (linksOf.all(r.key_id) as Array<{ link: string }>).map((l) => l.link),
        }),
      );
    },
    async createKey(key, links) {
      return inTransaction(() => {
        if (keyExists.get(key.key_id, key.key_id)) return false;
        insertKey.run(key.key_id, key.wrapped, key.created_at);
        for (const link of links) insertLink.run(link, key.key_id);
        return true;
      });
    },
    async addLinks(keyId, links) {
      if (links.length === 0) return;
      inTransaction(() => {
        for (const link of links) addLink.run(link, keyId);
      });
    },
    async tombstonesOfCart(cartUuid) {
      return (tombstonesOfCart.all(cartUuid.toLowerCase()) as unknown as CustomerKeyTombstone[]).map((r) => ({
        ...r,
      }));
    },
    async beginErasure(erasure) {
      insertErasure.run(erasure.erasure_id, JSON.stringify(erasure));
    },
    async destroyKeys(keyIds, erasure) {
      inTransaction(() => {
        for (const keyId of keyIds) {
          const cart = cartOf.get(keyId) as { uuid: string } | undefined;
          insertTombstone.run(keyId, cart?.uuid ?? null, erasure.erasure_id, erasure.erased_at);
          deleteLinks.run(keyId);
          deleteKey.run(keyId);
        }
      });
      return { wiped: await truncateWal() };
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

/**
 * Records the erasures pending in a key store file, also those it holds as finished: a restored copy
 * whose log does not hold them whole (docs/operations.md, "Backups"). The service finishes them at start.
 */
export function reopenErasuresIn(file: string, erasures: readonly CustomerErasure[]): void {
  const db = new DatabaseSync(file);
  try {
    db.exec('PRAGMA busy_timeout = 10000');
    db.exec(SCHEMA);
    const reopen = db.prepare(
      `INSERT INTO customer_erasures (erasure_id, erasure, finished) VALUES (?, ?, 0)
       ON CONFLICT (erasure_id) DO UPDATE SET finished = 0`,
    );
    for (const erasure of erasures) reopen.run(erasure.erasure_id, JSON.stringify(erasure));
  } finally {
    db.close();
  }
}
