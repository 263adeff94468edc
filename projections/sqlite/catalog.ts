/**
 * The catalog of one SQLite read store connection (docs/read-side.md): which physical tables hold
 * which collections, kept in step with other connections' commits, and the write transactions that
 * change it (creating, indexing, promoting and dropping collections).
 *
 * - Collections are physical tables named in `pds_collections`; a logical name maps to its live table.
 *   Shadows are tables of their own; `promote` switches the names and stores the checkpoints in one
 *   transaction, so a reader sees every old copy or every new one.
 * - Another process on the same file (an `api` beside a `projector`) notices a promote by the catalog's
 *   generation, read again only when SQLite's `data_version` says another connection committed.
 */
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { isDeferred } from '../deferred-indexes.ts';
import {
  type Fence,
  type IndexSpec,
  type NamedCheckpoint,
  UnfinishedBulkShadowError,
} from '../read-store.ts';
import { buildDeferredIndex } from './bulk-load.ts';
import { writeCheckpoint } from './checkpoints.ts';
import { DocumentsTable, type IndexMeta } from './documents-table.ts';
import { TEMP_STORE } from './file.ts';
import { assertFence } from './leases.ts';
import type { PreparedStatements } from './statements.ts';

/** How long a connection trusts that no other connection committed (see `fresh`). */
const FRESH_MS = 20;

interface CollectionRow {
  physical: string;
  name: string;
  live: number;
  indexes: string;
}

export class Catalog {
  readonly db: DatabaseSync;
  readonly statements: PreparedStatements;
  /** Physical table name → its documents and indexes. */
  readonly tables = new Map<string, DocumentsTable>();
  /** Logical name → its live physical table. */
  readonly liveByName = new Map<string, string>();
  /** Shadows this process created: the only ones it may call orphans' opposite. */
  readonly ownShadows = new Set<string>();
  private generation = -1;
  private readonly dataVersion: StatementSync;
  private seenDataVersion = -1;
  private checkedAt = Number.NEGATIVE_INFINITY;

  constructor(db: DatabaseSync, statements: PreparedStatements) {
    this.db = db;
    this.statements = statements;
    this.dataVersion = db.prepare('PRAGMA data_version');
    this.dataVersion.setReturnArrays(true);
  }

  private metaValue(key: string): number {
    return (
      this.statements.get('SELECT value FROM pds_meta WHERE key = ?').get(key) as unknown as unknown[]
    )[0] as number;
  }

  load(): void {
    this.generation = this.metaValue('generation');
    this.tables.clear();
    this.liveByName.clear();
    const rows = this.db
      .prepare('SELECT physical, name, live, indexes FROM pds_collections')
      .all() as unknown as CollectionRow[];
    for (const row of rows) {
      this.tables.set(row.physical, this.tableOf(row.physical, JSON.parse(row.indexes) as IndexMeta[]));
      if (row.live === 1) this.liveByName.set(row.name, row.physical);
    }
  }

  /**
   * Follows other connections' commits: drops the cached documents, and reloads the catalog when one
   * promoted or created something. Asked at most every FRESH_MS (a query on a table another process
   * dropped meanwhile reloads and retries, see `read` in handles.ts), and always by `getCheckpoint`,
   * so a reader that saw a checkpoint then reads documents at least as recent.
   */
  fresh(force = false): void {
    const now = performance.now();
    if (!force && now - this.checkedAt < FRESH_MS) return;
    this.checkedAt = now;
    const version = (this.dataVersion.get() as unknown as unknown[])[0] as number;
    if (version === this.seenDataVersion) return;
    this.seenDataVersion = version;
    this.statements.cache.clear();
    if (this.metaValue('generation') !== this.generation) this.load();
  }

  private tableOf(physical: string, indexes: IndexMeta[]): DocumentsTable {
    return new DocumentsTable(physical, indexes, this.statements, () => this.saveIndexes(physical));
  }

  private saveIndexes(physical: string): void {
    const table = this.tables.get(physical) as DocumentsTable;
    this.statements
      .get('UPDATE pds_collections SET indexes = ? WHERE physical = ?')
      .run(JSON.stringify(table.indexes), physical);
    this.bumpGeneration();
  }

  private bumpGeneration(): void {
    this.statements.get("UPDATE pds_meta SET value = value + 1 WHERE key = 'generation'").run();
    this.generation = this.metaValue('generation');
  }

  /** Runs `fn` in one write transaction: all of it commits or none. */
  transaction<R>(fn: () => R): R {
    this.statements.get('BEGIN IMMEDIATE').run();
    try {
      const result = fn();
      this.statements.get('COMMIT').run();
      return result;
    } catch (err) {
      this.statements.get('ROLLBACK').run();
      // What the rolled-back transaction changed in the catalog is read again.
      this.load();
      throw err;
    }
  }

  /**
   * Creates a collection's tables; a bulk shadow's (`bulk`) with its indexes not read while applying
   * deferred: their entries are written when its load is done (`finishBulk`).
   */
  createCollection(name: string, indexes: readonly IndexSpec[], live: boolean, bulk = false): string {
    return this.transaction(() => {
      const n = this.metaValue('next_table');
      this.statements.get("UPDATE pds_meta SET value = value + 1 WHERE key = 'next_table'").run();
      const physical = `c${n}`;
      const metas = indexes.map(
        (spec, i): IndexMeta => ({
          ...spec,
          table: `${physical}_i${i}`,
          multikey: false,
          ...(bulk && isDeferred(spec) ? { deferred: true } : {}),
        }),
      );
      DocumentsTable.createTables(this.db, physical, metas);
      this.statements
        .get('INSERT INTO pds_collections (physical, name, live, indexes) VALUES (?, ?, ?, ?)')
        .run(physical, name, live ? 1 : 0, JSON.stringify(metas));
      this.tables.set(physical, this.tableOf(physical, metas));
      if (live) this.liveByName.set(name, physical);
      this.bumpGeneration();
      return physical;
    });
  }

  /**
   * Adds the declared indexes a collection lacks while it holds no document. One that holds documents
   * keeps the indexes it has: an index is never built over a live collection's documents, which may
   * be many and may break a new unique index; a rebuild brings it
   * (docs/read-side.md, "Upgrades of read models"). Checked inside the write transaction, so no
   * document arrives in between.
   */
  ensureIndexes(physical: string, specs: readonly IndexSpec[]): void {
    const table = this.tables.get(physical) as DocumentsTable;
    const same = (a: IndexSpec, b: IndexSpec) =>
      JSON.stringify(a.keys) === JSON.stringify(b.keys) && Boolean(a.unique) === Boolean(b.unique);
    const missing = specs.filter((spec) => !table.indexes.some((i) => same(i, spec)));
    if (missing.length === 0) return;
    this.transaction(() => {
      if (!table.isEmpty()) return;
      for (const spec of missing) {
        const meta: IndexMeta = { ...spec, table: `${physical}_i${table.indexes.length}`, multikey: false };
        DocumentsTable.createIndexTable(this.db, meta);
        table.indexes.push(meta);
      }
      this.saveIndexes(physical);
    });
  }

  /**
   * `transaction` with the connection's temporary storage in files (SQLite refuses the change inside
   * one), set back as every connection has it (file.ts) whatever `fn` did. For an index build's sort,
   * and for every transaction that drops a collection: a `DROP TABLE` zeroes each page it frees
   * (`secure_delete`) and keeps what it changes in temporary storage, so in memory it took as much as
   * the table (docs/read-side.md, "The SQLite read store").
   */
  private throughFiles(fn: () => void): void {
    this.statements.get('PRAGMA temp_store = FILE').run();
    try {
      this.transaction(fn);
    } finally {
      this.statements.get(`PRAGMA temp_store = ${TEMP_STORE}`).run();
    }
  }

  private dropCollection(physical: string): void {
    const table = this.tables.get(physical);
    DocumentsTable.dropTables(this.db, physical, table?.indexes ?? []);
    this.statements.get('DELETE FROM pds_collections WHERE physical = ?').run(physical);
    this.tables.delete(physical);
    this.statements.forget(physical);
  }

  /**
   * Builds the first deferred index of a bulk shadow left (bulk-load.ts) and records it built, in a
   * transaction of its own, and answers whether another is left: the caller yields between them, so
   * the write lock and the thread are held for one index's sort at a time, not a collection's. One
   * that fails (a unique index's duplicate) stays deferred. The sort spills to temporary files,
   * not memory: at ten million events an index's entries outgrow what the process should hold
   * (docs/read-side.md, "How a build writes its shadows").
   */
  finishBulkIndex(physical: string, fence: Fence | undefined): boolean {
    const table = this.tables.get(physical);
    if (!table) throw new Error(`collection ${physical} was dropped`);
    const index = table.indexes.find((i) => i.deferred);
    if (!index) return false;
    this.throughFiles(() => {
      assertFence(this.statements, fence);
      buildDeferredIndex(this.statements, physical, index);
      this.saveIndexes(physical);
    });
    return table.indexes.some((i) => i.deferred);
  }

  /** Makes each shadow the live table of its name and stores the checkpoints, in one transaction. */
  promote(
    found: ReadonlyArray<{ name: string; physical: string }>,
    checkpoints: readonly NamedCheckpoint[],
    fence: Fence | undefined,
  ): void {
    for (const { name, physical } of found) {
      if (this.tables.get(physical)?.indexes.some((index) => index.deferred)) {
        throw new UnfinishedBulkShadowError(name);
      }
    }
    this.throughFiles(() => {
      assertFence(this.statements, fence);
      for (const { name, physical } of found) {
        const old = this.liveByName.get(name);
        if (old && old !== physical) this.dropCollection(old);
        this.statements.get('UPDATE pds_collections SET live = 1 WHERE physical = ?').run(physical);
        this.liveByName.set(name, physical);
      }
      for (const c of checkpoints) writeCheckpoint(this.statements, c);
      this.bumpGeneration();
    });
  }

  /** Drops a shadow of this process, unless it has become live or is gone already. */
  dropShadow(name: string, physical: string, fence: Fence | undefined): void {
    this.ownShadows.delete(physical);
    if (this.liveByName.get(name) === physical || !this.tables.has(physical)) return;
    this.throughFiles(() => {
      assertFence(this.statements, fence);
      this.dropCollection(physical);
      this.bumpGeneration();
    });
  }

  /** Drops the tables neither live nor a shadow of this process: returns how many. */
  dropOrphanShadows(fence: Fence | undefined): number {
    const orphans = [...this.tables.keys()].filter(
      (physical) => ![...this.liveByName.values()].includes(physical) && !this.ownShadows.has(physical),
    );
    if (orphans.length === 0) return 0;
    this.throughFiles(() => {
      assertFence(this.statements, fence);
      for (const physical of orphans) this.dropCollection(physical);
      this.bumpGeneration();
    });
    return orphans.length;
  }
}
