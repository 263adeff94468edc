/**
 * The file of the SQLite read store (docs/read-side.md): opened with its pragmas, created with its
 * schema, or, when it is unreadable or of another schema, moved aside and created anew (read models
 * are rebuilt from the events), saying why in `opened`. Threads or processes opening it at once agree:
 * one creates a new file, or replaces one, and the others open the file it made.
 */
import { closeSync, existsSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { preparePrivateSqliteFile } from '../../application/private-files.ts';
import { LEASES_TABLE } from './leases.ts';

/** `PRAGMA application_id` of a read store file ("PDSR"), and the schema this code reads. */
const APPLICATION_ID = 0x50445352;
const SCHEMA_VERSION = 1;

/** What opening the file needs of the store's options (`SqliteReadStoreOptions`, read-store.ts). */
export interface FileOptions {
  cacheMiB?: number;
  busyTimeoutMs?: number;
}

class UnknownSchemaError extends Error {}

/** SQLITE_CORRUPT and SQLITE_NOTADB: the file is not a database this code can read. */
function isUnreadable(err: unknown): boolean {
  const code = (err as { errcode?: number }).errcode;
  return code !== undefined && [11, 26].includes(code & 0xff);
}

/**
 * Where the read store's connections keep temporary storage (sorts of queries): memory. A bulk index
 * build and a drop of a collection go through files instead, and set it back to this (catalog.ts,
 * `throughFiles`).
 */
export const TEMP_STORE = 'MEMORY';

function configure(db: DatabaseSync, cacheMiB: number): void {
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec(`PRAGMA temp_store = ${TEMP_STORE}`);
  // A rewritten document's old bytes are zeroed, not left in free space: an erased customer's data
  // leaves the file at the next checkpoint (docs/operations.md, "Customer data").
  db.exec('PRAGMA secure_delete = ON');
  // Checkpoint the WAL into the file every 64 MB of pages rather than SQLite's 4 MB: projector batches
  // rewrite large documents, and at 4 MB a rebuild spent most of its commits copying pages (a rebuild
  // of 1,000,000 events went from 46.6 s to 38.3 s; docs/read-side.md).
  db.exec('PRAGMA wal_autocheckpoint = 16000');
  db.exec(`PRAGMA cache_size = ${-Math.round(cacheMiB * 1024)}`);
}

/** 'empty' for a new file; throws UnknownSchemaError for a database that is not a read store of ours. */
function checkSchema(db: DatabaseSync): 'empty' | 'ours' {
  const pragma = (name: string) => (db.prepare(`PRAGMA ${name}`).get() as Record<string, number>)[name];
  const appId = pragma('application_id');
  const version = pragma('user_version');
  const objects = (db.prepare('SELECT count(*) AS n FROM sqlite_master').get() as { n: number }).n;
  if (appId === 0 && version === 0 && objects === 0) return 'empty';
  if (appId !== APPLICATION_ID || version !== SCHEMA_VERSION) {
    throw new UnknownSchemaError(
      `unknown schema (application id ${appId}, version ${version}; this version reads ${SCHEMA_VERSION})`,
    );
  }
  // Touch the catalog and the checkpoints: a damaged file fails here, not on a partner's request.
  db.prepare('SELECT count(*) FROM pds_collections').get();
  db.prepare('SELECT count(*) FROM pds_checkpoints').get();
  return 'ours';
}

/**
 * Tables added to schema 1 since it was first written, created where a file lacks them: an older
 * file keeps its read models (a new schema version would move it aside and rebuild them).
 */
function addTables(db: DatabaseSync): void {
  db.exec(LEASES_TABLE);
}

/**
 * Creates the schema; answers false when another connection created it since this one looked (threads
 * opening a new file at once: role `all`'s dispatcher and delivery threads and `dispatcher.db`), which
 * the write lock taken first makes it see.
 */
function createSchema(db: DatabaseSync): boolean {
  // Text compares by its bytes (BINARY): in UTF-8 that is code point order, MongoDB's string order
  // (docs/read-side.md, "Read stores"). Only a database without tables yet can take it.
  db.exec(`PRAGMA encoding = 'UTF-8'; BEGIN IMMEDIATE;`);
  try {
    if (checkSchema(db) === 'ours') {
      db.exec('COMMIT');
      return false;
    }
  } catch (err) {
    db.exec('ROLLBACK');
    throw err;
  }
  db.exec(`CREATE TABLE pds_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
    INSERT INTO pds_meta (key, value) VALUES ('generation', 0), ('next_table', 1);
    CREATE TABLE pds_collections (physical TEXT PRIMARY KEY, name TEXT NOT NULL, live INTEGER NOT NULL, indexes TEXT NOT NULL);
    CREATE TABLE pds_checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL, events INTEGER NOT NULL, updated_at TEXT NOT NULL, version TEXT);
    PRAGMA application_id = ${APPLICATION_ID};
    PRAGMA user_version = ${SCHEMA_VERSION};
    COMMIT;`);
  return true;
}

/**
 * Moves an unreadable file (and its WAL) aside, keeping the last one for a look. The file itself goes
 * last: a thread that finds it gone creates a new one, whose WAL must not be moved aside in its turn.
 */
function moveAside(path: string): void {
  for (const suffix of ['-wal', '-shm', '']) {
    try {
      renameSync(path + suffix, `${path}.unreadable${suffix}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

/** Opens (or creates, or replaces) the file and its schema. */
export function openFile(path: string, options: FileOptions) {
  const missing = path !== ':memory:' && !existsSync(path);
  const open = () => {
    // Customers' data: 0600, and so are the WAL and shared memory SQLite makes beside it.
    preparePrivateSqliteFile(path);
    const db = new DatabaseSync(path, { timeout: options.busyTimeoutMs ?? 5_000 });
    try {
      configure(db, options.cacheMiB ?? 32);
      // One snapshot: a file another connection is creating reads as empty or as ours, never half made.
      db.exec('BEGIN');
      try {
        return { db, schema: checkSchema(db) };
      } finally {
        db.exec('COMMIT');
      }
    } catch (err) {
      db.close();
      throw err;
    }
  };
  const timeoutMs = options.busyTimeoutMs ?? 5_000;
  const openAsIs = () =>
    whileBusy(timeoutMs, () => {
      const { db, schema } = open();
      try {
        const created = schema === 'empty' && createSchema(db);
        addTables(db);
        const state = created ? ('created' as const) : ('opened' as const);
        return { db, opened: { state, reason: missing ? 'no read store file yet' : null } };
      } catch (err) {
        db.close();
        throw err;
      }
    });
  if (path === ':memory:') return openAsIs();
  // Threads or processes opening the file at once (role `all`'s dispatcher and delivery threads and
  // `dispatcher.db`) open it one at a time, under a lock file, and one that finds it to replace does so
  // before the next looks: none can hold a file that is moved aside while it opens it. SQLite opens the
  // WAL by name, so such a connection read the new file's schema through the new WAL, wrote there and
  // checkpointed into the old file.
  return underOpenLock(path, timeoutMs, () => {
    try {
      return openAsIs();
    } catch (err) {
      if (!(err instanceof UnknownSchemaError) && !isUnreadable(err)) throw err;
      rmSync(`${path}.unreadable`, { force: true });
      moveAside(path);
      const { db } = open();
      createSchema(db);
      addTables(db);
      const reason = `${path} ${err instanceof UnknownSchemaError ? 'has an' : 'is unreadable:'} ${(err as Error).message}; moved to ${path}.unreadable`;
      return { db, opened: { state: 'replaced' as const, reason } };
    }
  });
}

/** SQLITE_BUSY: a lock SQLite would not wait for (its busy handler is skipped where it could deadlock). */
const isBusy = (err: unknown) => ((err as { errcode?: number }).errcode ?? 0) % 256 === 5;

/**
 * Runs `open` again while it meets SQLITE_BUSY, up to `timeoutMs`: connections opening a new file at
 * once (role `all`'s dispatcher and delivery threads and `dispatcher.db`) can find its first
 * transaction, or its switch to WAL, taken by another, which SQLite answers at once rather than wait.
 */
function whileBusy<T>(timeoutMs: number, open: () => T): T {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return open();
    } catch (err) {
      if (!isBusy(err) || Date.now() > deadline) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
}

/**
 * Runs `open` holding `<path>.opening`, created exclusively (`wx`): one thread or process at a time
 * opens the file (and moves it aside and creates it anew when it must), and the one after looks at
 * what it left. A lock older than `timeoutMs` is of an opener that died (opening takes milliseconds)
 * and is taken over.
 */
function underOpenLock<T>(path: string, timeoutMs: number, open: () => T): T {
  const lock = `${path}.opening`;
  const deadline = Date.now() + timeoutMs * 2;
  for (;;) {
    let fd: number;
    try {
      fd = openSync(lock, 'wx', 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const since = statSync(lock, { throwIfNoEntry: false })?.mtimeMs;
      if (since !== undefined && Date.now() - since > timeoutMs) rmSync(lock, { force: true });
      else if (Date.now() > deadline) throw new Error(`${lock} held for longer than ${timeoutMs * 2} ms`);
      // Opening is synchronous: the thread sleeps a moment while the other opens the file.
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
      continue;
    }
    try {
      return open();
    } finally {
      closeSync(fd);
      rmSync(lock, { force: true });
    }
  }
}
