/**
 * The durable embedded ReadStore on `node:sqlite` (docs/read-side.md): read models survive restarts in
 * their own file (WAL; separate from the event store, so projector writes never hold its write lock),
 * and each projection resumes from the checkpoint committed with its last batch.
 *
 * - Collections are physical tables named in a catalog (`pds_collections`); a logical name maps to its
 *   live table. Shadows are tables of their own; `promote` switches the names and stores the checkpoints
 *   in one transaction, so a reader sees every old copy or every new one.
 * - Another process on the same file (an `api` beside a `projector`) notices a promote by the catalog's
 *   generation, read again only when SQLite's `data_version` says another connection committed.
 * - A file that is unreadable or of another schema is moved aside and a new one created: read models
 *   are rebuilt from the events, and `opened` says why.
 * - Memory is SQLite's page cache (`cacheMiB`), not the data: documents are parsed per query.
 */
import { existsSync, renameSync, rmSync } from 'node:fs';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import type {
  Checkpoint,
  Collection,
  Commit,
  Doc,
  IndexSpec,
  NamedCheckpoint,
  ReadStore,
  WriteOp,
} from '../read-store.ts';
import { DocumentCache } from './document-cache.ts';
import { DocumentsTable, type IndexMeta, type QueryObserver, type Statements } from './documents-table.ts';

/** `PRAGMA application_id` of a read store file ("PDSR"), and the schema this code reads. */
const APPLICATION_ID = 0x50445352;
const SCHEMA_VERSION = 1;
/** How long a connection trusts that no other connection committed (see `fresh`). */
const FRESH_MS = 20;

export interface SqliteReadStoreOptions {
  /** SQLite's page cache for this file, in MiB: the knob of the read side's memory. */
  cacheMiB?: number;
  /** How long a write waits for another process's lock before failing. */
  busyTimeoutMs?: number;
  /** Told of every query statement run (the plan tests EXPLAIN each one). */
  onQuery?: QueryObserver;
  /** Parsed documents kept for point lookups (0: none). */
  cachedDocuments?: number;
}

/** A collection of this store, with what the plan tests look at. */
export interface SqliteCollection<T extends Doc = Doc> extends Collection<T> {
  /** Documents the last query of this collection looked at. */
  lastExamined(): number;
  /** How many documents it holds. */
  size(): number;
}

export interface SqliteReadStore extends ReadStore {
  readonly kind: 'sqlite';
  collection<T extends Doc = Doc>(name: string, indexes?: readonly IndexSpec[]): Promise<SqliteCollection<T>>;
  /** How the file was found: `replaced` (moved aside, see `reason`) and `created` start empty. */
  readonly opened: { state: 'opened' | 'created' | 'replaced'; reason: string | null };
  /** Drops shadows left by a rebuild that did not finish (a crash): returns how many. */
  dropOrphanShadows(): Promise<number>;
  /** SQLite's plan for a statement, one line per step (`SEARCH …`, `SCAN …`). */
  explainQueryPlan(sql: string, params: readonly SQLInputValue[]): string[];
}

class UnknownSchemaError extends Error {}

/** SQLITE_CORRUPT and SQLITE_NOTADB: the file is not a database this code can read. */
function isUnreadable(err: unknown): boolean {
  const code = (err as { errcode?: number }).errcode;
  return code !== undefined && [11, 26].includes(code & 0xff);
}

interface CollectionRow {
  physical: string;
  name: string;
  live: number;
  indexes: string;
}

function configure(db: DatabaseSync, cacheMiB: number): void {
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA temp_store = MEMORY');
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

function createSchema(db: DatabaseSync): void {
  db.exec(`BEGIN IMMEDIATE;
    CREATE TABLE pds_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
    INSERT INTO pds_meta (key, value) VALUES ('generation', 0), ('next_table', 1);
    CREATE TABLE pds_collections (physical TEXT PRIMARY KEY, name TEXT NOT NULL, live INTEGER NOT NULL, indexes TEXT NOT NULL);
    CREATE TABLE pds_checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL, events INTEGER NOT NULL, updated_at TEXT NOT NULL, version TEXT);
    PRAGMA application_id = ${APPLICATION_ID};
    PRAGMA user_version = ${SCHEMA_VERSION};
    COMMIT;`);
}

/** Moves an unreadable file (and its WAL) aside, keeping the last one for a look. */
function moveAside(path: string): void {
  for (const suffix of ['', '-wal', '-shm']) {
    if (existsSync(path + suffix)) renameSync(path + suffix, `${path}.unreadable${suffix}`);
  }
}

/** Opens (or creates, or replaces) the file and its schema. */
function openFile(path: string, options: SqliteReadStoreOptions) {
  const open = () => {
    const db = new DatabaseSync(path, { timeout: options.busyTimeoutMs ?? 5_000 });
    try {
      configure(db, options.cacheMiB ?? 32);
      return { db, schema: checkSchema(db) };
    } catch (err) {
      db.close();
      throw err;
    }
  };
  const missing = path !== ':memory:' && !existsSync(path);
  try {
    const { db, schema } = open();
    if (schema === 'empty') createSchema(db);
    const state = schema === 'empty' ? ('created' as const) : ('opened' as const);
    return { db, opened: { state, reason: missing ? 'no read store file yet' : null } };
  } catch (err) {
    if (!(err instanceof UnknownSchemaError) && !isUnreadable(err)) throw err;
    if (path === ':memory:') throw err;
    rmSync(`${path}.unreadable`, { force: true });
    moveAside(path);
    const { db } = open();
    createSchema(db);
    const reason = `${path} ${err instanceof UnknownSchemaError ? 'has an' : 'is unreadable:'} ${(err as Error).message}; moved to ${path}.unreadable`;
    return { db, opened: { state: 'replaced' as const, reason } };
  }
}

export function openSqliteReadStore(path: string, options: SqliteReadStoreOptions = {}): SqliteReadStore {
  const { db, opened } = openFile(path, options);

  const prepared = new Map<string, StatementSync>();
  const statements: Statements = {
    get(sql, slot = 0) {
      const key = slot === 0 ? sql : `${slot}|${sql}`;
      let stmt = prepared.get(key);
      if (!stmt) {
        stmt = db.prepare(sql);
        stmt.setReturnArrays(true);
        prepared.set(key, stmt);
      }
      return stmt;
    },
    onQuery: options.onQuery,
    cache: new DocumentCache(options.cachedDocuments ?? 10_000),
  };
  /** Forgets the statements of dropped tables (table names are never reused). */
  const forgetStatements = (table: string) => {
    for (const key of prepared.keys())
      if (key.includes(`"${table}"`) || key.includes(`"${table}_`)) prepared.delete(key);
  };

  // ---- the catalog -----------------------------------------------------------------------------------

  const tables = new Map<string, DocumentsTable>();
  const liveByName = new Map<string, string>();
  /** Shadows this process created: the only ones it may call orphans' opposite. */
  const ownShadows = new Set<string>();
  let generation = -1;
  const dataVersion = db.prepare('PRAGMA data_version');
  dataVersion.setReturnArrays(true);
  let seenDataVersion = -1;
  const metaValue = (key: string) =>
    (
      statements.get('SELECT value FROM pds_meta WHERE key = ?').get(key) as unknown as unknown[]
    )[0] as number;

  function loadCatalog(): void {
    generation = metaValue('generation');
    tables.clear();
    liveByName.clear();
    const rows = db
      .prepare('SELECT physical, name, live, indexes FROM pds_collections')
      .all() as unknown as CollectionRow[];
    for (const row of rows) {
      tables.set(row.physical, tableOf(row.physical, JSON.parse(row.indexes) as IndexMeta[]));
      if (row.live === 1) liveByName.set(row.name, row.physical);
    }
  }

  /**
   * Follows other connections' commits: drops the cached documents, and reloads the catalog when one
   * promoted or created something. Asked at most every FRESH_MS (a query on a table another process
   * dropped meanwhile reloads and retries, see `withTable`), and always by `getCheckpoint`, so a reader
   * that saw a checkpoint then reads documents at least as recent.
   */
  let checkedAt = Number.NEGATIVE_INFINITY;
  function fresh(force = false): void {
    const now = performance.now();
    if (!force && now - checkedAt < FRESH_MS) return;
    checkedAt = now;
    const version = (dataVersion.get() as unknown as unknown[])[0] as number;
    if (version === seenDataVersion) return;
    seenDataVersion = version;
    statements.cache.clear();
    if (metaValue('generation') !== generation) loadCatalog();
  }

  function tableOf(physical: string, indexes: IndexMeta[]): DocumentsTable {
    return new DocumentsTable(physical, indexes, statements, () => saveIndexes(physical));
  }

  function saveIndexes(physical: string): void {
    const table = tables.get(physical) as DocumentsTable;
    statements
      .get('UPDATE pds_collections SET indexes = ? WHERE physical = ?')
      .run(JSON.stringify(table.indexes), physical);
    bumpGeneration();
  }

  function bumpGeneration(): void {
    statements.get("UPDATE pds_meta SET value = value + 1 WHERE key = 'generation'").run();
    generation = metaValue('generation');
  }

  /** Runs `fn` in one write transaction: all of it commits or none. */
  function transaction<R>(fn: () => R): R {
    statements.get('BEGIN IMMEDIATE').run();
    try {
      const result = fn();
      statements.get('COMMIT').run();
      return result;
    } catch (err) {
      statements.get('ROLLBACK').run();
      // What the rolled-back transaction changed in the catalog is read again.
      loadCatalog();
      throw err;
    }
  }

  function createCollection(name: string, indexes: readonly IndexSpec[], live: boolean): string {
    return transaction(() => {
      const n = metaValue('next_table');
      statements.get("UPDATE pds_meta SET value = value + 1 WHERE key = 'next_table'").run();
      const physical = `c${n}`;
      const metas = indexes.map((spec, i) => ({ ...spec, table: `${physical}_i${i}`, multikey: false }));
      DocumentsTable.createTables(db, physical, metas);
      statements
        .get('INSERT INTO pds_collections (physical, name, live, indexes) VALUES (?, ?, ?, ?)')
        .run(physical, name, live ? 1 : 0, JSON.stringify(metas));
      tables.set(physical, tableOf(physical, metas));
      if (live) liveByName.set(name, physical);
      bumpGeneration();
      return physical;
    });
  }

  /** Adds the declared indexes a collection lacks, filled from its documents. */
  function ensureIndexes(physical: string, specs: readonly IndexSpec[]): void {
    const table = tables.get(physical) as DocumentsTable;
    const same = (a: IndexSpec, b: IndexSpec) =>
      JSON.stringify(a.keys) === JSON.stringify(b.keys) && Boolean(a.unique) === Boolean(b.unique);
    const missing = specs.filter((spec) => !table.indexes.some((i) => same(i, spec)));
    if (missing.length === 0) return;
    transaction(() => {
      for (const spec of missing) {
        const meta: IndexMeta = { ...spec, table: `${physical}_i${table.indexes.length}`, multikey: false };
        DocumentsTable.createIndexTable(db, meta);
        table.indexes.push(meta);
        table.backfill(meta);
      }
      saveIndexes(physical);
    });
  }

  function dropCollection(physical: string): void {
    const table = tables.get(physical);
    DocumentsTable.dropTables(db, physical, table?.indexes ?? []);
    statements.get('DELETE FROM pds_collections WHERE physical = ?').run(physical);
    tables.delete(physical);
    forgetStatements(physical);
  }

  function setCheckpoint({ name, checkpoint }: NamedCheckpoint): void {
    statements
      .get(
        `INSERT INTO pds_checkpoints (name, position, events, updated_at, version) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET position = excluded.position, events = excluded.events,
         updated_at = excluded.updated_at, version = excluded.version`,
      )
      .run(name, checkpoint.position, checkpoint.events, checkpoint.updated_at, checkpoint.version ?? null);
  }

  // ---- handles ---------------------------------------------------------------------------------------

  /** Handle → the physical table it reaches now (live handles follow promotes). */
  const resolvers = new WeakMap<Collection, (force?: boolean) => DocumentsTable>();

  function handle<T extends Doc>(name: string, physicalOf: () => string): SqliteCollection<T> {
    const resolve = (force = false) => {
      fresh(force);
      const table = tables.get(physicalOf());
      if (!table) throw new Error(`collection ${name} was dropped`);
      return table;
    };
    /** A read; if another process dropped the table since `fresh` last looked, looks again once. */
    const read = <R>(fn: (table: DocumentsTable) => R): R => {
      try {
        return fn(resolve());
      } catch (err) {
        if (!/no such table/.test((err as Error).message ?? '')) throw err;
        loadCatalog();
        return fn(resolve(true));
      }
    };
    const h: SqliteCollection<T> = {
      name,
      lastExamined: () => tables.get(physicalOf())?.lastExamined ?? 0,
      size: () => read((t) => t.count({})),
      findOne: async (filter) => (read((t) => t.find(filter, { limit: 1 }))[0] as T | undefined) ?? null,
      findByIds: async (ids) => read((t) => t.findByIds(ids)) as T[],
      find: async (filter, opts) => read((t) => t.find(filter, opts)) as T[],
      count: async (filter = {}) => read((t) => t.count(filter)),
      async bulkWrite(ops) {
        if (ops.length === 0) return;
        const table = resolve(true);
        // Ordered, as MongoDB's: the operations before a failing one stay, the rest do not run.
        let failure: unknown;
        transaction(() => {
          for (const op of ops) {
            statements.get('SAVEPOINT op').run();
            try {
              table.write(op as WriteOp);
              statements.get('RELEASE op').run();
            } catch (err) {
              statements.get('ROLLBACK TO op').run();
              statements.get('RELEASE op').run();
              failure = err;
              break;
            }
          }
        });
        if (failure) throw failure;
      },
    };
    resolvers.set(h as Collection, resolve);
    return h;
  }

  function resolveHandle(c: Collection): DocumentsTable {
    const resolve = resolvers.get(c);
    if (!resolve) throw new Error(`${c.name} is not a collection of this store`);
    return resolve(true);
  }

  loadCatalog();

  return {
    kind: 'sqlite',
    opened,
    async collection<T extends Doc>(name: string, indexes: readonly IndexSpec[] = []) {
      fresh();
      const physical = liveByName.get(name) ?? createCollection(name, indexes, true);
      ensureIndexes(physical, indexes);
      return handle<T>(name, () => {
        const current = liveByName.get(name);
        if (!current) throw new Error(`collection ${name} has no live copy`);
        return current;
      });
    },
    async createShadow<T extends Doc>(name: string, indexes: readonly IndexSpec[] = []) {
      fresh();
      const physical = createCollection(name, indexes, false);
      ownShadows.add(physical);
      const shadow = handle<T>(`${name}#${physical}`, () => physical);
      shadowNames.set(shadow as Collection, { name, physical });
      return shadow;
    },
    async promote(list, checkpoints = []) {
      fresh();
      const found = list.map((shadow) => {
        const s = shadowNames.get(shadow);
        if (!s || !tables.has(s.physical)) throw new Error(`${shadow.name} is not a shadow of this store`);
        return s;
      });
      transaction(() => {
        for (const { name, physical } of found) {
          const old = liveByName.get(name);
          if (old && old !== physical) dropCollection(old);
          statements.get('UPDATE pds_collections SET live = 1 WHERE physical = ?').run(physical);
          liveByName.set(name, physical);
        }
        for (const c of checkpoints) setCheckpoint(c);
        bumpGeneration();
      });
      for (const shadow of list) shadowNames.delete(shadow);
      for (const { physical } of found) ownShadows.delete(physical);
    },
    async dropShadow(shadow) {
      fresh();
      const s = shadowNames.get(shadow);
      if (!s) return;
      shadowNames.delete(shadow);
      ownShadows.delete(s.physical);
      if (liveByName.get(s.name) === s.physical || !tables.has(s.physical)) return;
      transaction(() => {
        dropCollection(s.physical);
        bumpGeneration();
      });
    },
    async dropOrphanShadows() {
      fresh();
      const orphans = [...tables.keys()].filter(
        (physical) => ![...liveByName.values()].includes(physical) && !ownShadows.has(physical),
      );
      if (orphans.length === 0) return 0;
      transaction(() => {
        for (const physical of orphans) dropCollection(physical);
        bumpGeneration();
      });
      return orphans.length;
    },
    async getCheckpoint(name) {
      fresh(true);
      const row = statements
        .get('SELECT position, events, updated_at, version FROM pds_checkpoints WHERE name = ?')
        .get(name) as [number, number, string, string | null] | undefined;
      if (!row) return undefined;
      const [position, events, updated_at, version] = row;
      const checkpoint: Checkpoint = { position, events, updated_at };
      if (version !== null) checkpoint.version = version;
      return checkpoint;
    },
    async setCheckpoint(name, checkpoint) {
      transaction(() => setCheckpoint({ name, checkpoint }));
    },
    async commit({ writes, checkpoints = [] }: Commit) {
      fresh();
      const resolved = writes.map(({ collection, ops }) => ({ table: resolveHandle(collection), ops }));
      transaction(() => {
        for (const { table, ops } of resolved) for (const op of ops) table.write(op as WriteOp);
        for (const c of checkpoints) setCheckpoint(c);
      });
    },
    explainQueryPlan(sql, params) {
      const rows = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>;
      return rows.map((r) => r.detail);
    },
    async close() {
      prepared.clear();
      if (db.isOpen) db.close();
    },
  };
}

/** Shadow handle → its logical name and table (module scope: handles are objects of one store). */
const shadowNames = new WeakMap<Collection, { name: string; physical: string }>();
