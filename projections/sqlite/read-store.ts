/**
 * The durable embedded ReadStore on `node:sqlite` (docs/read-side.md): read models survive restarts in
 * their own file (WAL; separate from the event store, so projector writes never hold its write lock),
 * and each projection resumes from the checkpoint committed with its last batch.
 *
 * - Collections are physical tables named in a catalog, shadows tables of their own, and a promote one
 *   transaction; another process on the same file follows it (catalog.ts).
 * - A file that is unreadable or of another schema is moved aside and a new one created: read models
 *   are rebuilt from the events, and `opened` says why (file.ts).
 * - Memory is SQLite's page cache (`cacheMiB`), not the data: documents are parsed per query.
 * - Leases (leases.ts): a write under a fence is checked in its own write transaction.
 *
 * This module puts the store together: the file, its catalog, the handles it gives out.
 */
import type { SQLInputValue } from 'node:sqlite';
import { setImmediate } from 'node:timers/promises';
import { type Clock, systemClock } from '../../domain/clock.ts';
import type { Collection, Commit, Doc, IndexSpec, ReadStore, ShadowOptions, WriteOp } from '../read-store.ts';
import { Catalog } from './catalog.ts';
import { readCheckpoint, writeCheckpoint } from './checkpoints.ts';
import { DocumentCache } from './document-cache.ts';
import { openFile } from './file.ts';
import { Handles, type SqliteCollection } from './handles.ts';
import { acquireLease, assertFence, renewLease } from './leases.ts';
import { PreparedStatements, type QueryObserver } from './statements.ts';

export type { SqliteCollection } from './handles.ts';

export interface SqliteReadStoreOptions {
  /** SQLite's page cache for this file, in MiB: the knob of the read side's memory. */
  cacheMiB?: number;
  /** How long a write waits for another process's lock before failing. */
  busyTimeoutMs?: number;
  /** Told of every query statement run (the plan tests EXPLAIN each one). */
  onQuery?: QueryObserver;
  /** Parsed documents kept for point lookups (0: none). */
  cachedDocuments?: number;
  /** The time leases run out by (every process on one file shares the machine's clock). */
  clock?: Clock;
}

export interface SqliteReadStore extends ReadStore {
  readonly kind: 'sqlite';
  collection<T extends Doc = Doc>(name: string, indexes?: readonly IndexSpec[]): Promise<SqliteCollection<T>>;
  /** How the file was found: `replaced` (moved aside, see `reason`) and `created` start empty. */
  readonly opened: { state: 'opened' | 'created' | 'replaced'; reason: string | null };
  /** SQLite's plan for a statement, one line per step (`SEARCH …`, `SCAN …`). */
  explainQueryPlan(sql: string, params: readonly SQLInputValue[]): string[];
  /** A setting of this connection, `PRAGMA <name>` (the tests read what a build changes and restores). */
  setting(name: 'temp_store' | 'cache_size'): number;
}

export function openSqliteReadStore(path: string, options: SqliteReadStoreOptions = {}): SqliteReadStore {
  const { db, opened } = openFile(path, options);
  const statements = new PreparedStatements(
    db,
    options.onQuery,
    new DocumentCache(options.cachedDocuments ?? 10_000),
  );
  const catalog = new Catalog(db, statements);
  const handles = new Handles(catalog);
  const clock = options.clock ?? systemClock;
  catalog.load();

  return {
    kind: 'sqlite',
    opened,
    async collection<T extends Doc>(name: string, indexes: readonly IndexSpec[] = []) {
      catalog.fresh();
      const physical = catalog.liveByName.get(name) ?? catalog.createCollection(name, indexes, true);
      catalog.ensureIndexes(physical, indexes);
      return handles.create<T>(name, () => {
        const current = catalog.liveByName.get(name);
        if (!current) throw new Error(`collection ${name} has no live copy`);
        return current;
      });
    },
    async createShadow<T extends Doc>(
      name: string,
      indexes: readonly IndexSpec[] = [],
      options: ShadowOptions = {},
    ) {
      catalog.fresh();
      const physical = catalog.createCollection(name, indexes, false, options.bulk === true);
      catalog.ownShadows.add(physical);
      const shadow = handles.create<T>(`${name}#${physical}`, () => physical);
      shadowNames.set(shadow as Collection, { name, physical });
      return shadow;
    },
    async finishBulk(shadow, fence) {
      const s = shadowNames.get(shadow);
      if (!s) throw new Error(`${shadow.name} is not a shadow of this store`);
      // One index at a time, the event loop turning before each (catalog.ts, finishBulkIndex): between
      // two of a collection's, and between the last of one collection and the first of the next.
      do {
        await setImmediate();
        catalog.fresh();
      } while (catalog.finishBulkIndex(s.physical, fence));
    },
    async promote(list, checkpoints = [], fence) {
      catalog.fresh();
      const found = list.map((shadow) => {
        const s = shadowNames.get(shadow);
        if (!s || !catalog.tables.has(s.physical)) {
          throw new Error(`${shadow.name} is not a shadow of this store`);
        }
        return s;
      });
      catalog.promote(found, checkpoints, fence);
      for (const shadow of list) shadowNames.delete(shadow);
      for (const { physical } of found) catalog.ownShadows.delete(physical);
    },
    async dropShadow(shadow, fence) {
      catalog.fresh();
      const s = shadowNames.get(shadow);
      if (!s) return;
      shadowNames.delete(shadow);
      catalog.dropShadow(s.name, s.physical, fence);
    },
    async dropOrphanShadows(fence) {
      catalog.fresh();
      return catalog.dropOrphanShadows(fence);
    },
    async getCheckpoint(name) {
      catalog.fresh(true);
      return readCheckpoint(statements, name);
    },
    async setCheckpoint(name, checkpoint, fence) {
      catalog.transaction(() => {
        assertFence(statements, fence);
        writeCheckpoint(statements, { name, checkpoint });
      });
    },
    async commit({ writes, checkpoints = [], fence }: Commit) {
      catalog.fresh();
      const resolved = writes.map(({ collection, ops }) => ({
        table: handles.resolve(collection),
        name: collection.name,
        ops,
      }));
      catalog.transaction(() => {
        assertFence(statements, fence);
        for (const { table, name, ops } of resolved) for (const op of ops) table.write(op as WriteOp, name);
        for (const c of checkpoints) writeCheckpoint(statements, c);
      });
    },
    async acquireLease(lease, owner, ttlMs, from) {
      return catalog.transaction(() =>
        acquireLease(statements, lease, owner, ttlMs, clock.now().getTime(), from),
      );
    },
    async renewLease(fence, ttlMs) {
      return catalog.transaction(() => renewLease(statements, fence, clock.now().getTime() + ttlMs));
    },
    async releaseLease(fence) {
      catalog.transaction(() => renewLease(statements, fence, clock.now().getTime()));
    },
    setting(name) {
      return (db.prepare(`PRAGMA ${name}`).get() as Record<string, number>)[name];
    },
    explainQueryPlan(sql, params) {
      const rows = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>;
      return rows.map((r) => r.detail);
    },
    async close() {
      statements.clear();
      if (db.isOpen) db.close();
    },
  };
}

/** Shadow handle → its logical name and table (module scope: handles are objects of one store). */
const shadowNames = new WeakMap<Collection, { name: string; physical: string }>();
