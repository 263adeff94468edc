/**
 * The collection handles of one SQLite read store: each reaches the physical table its name resolves
 * to now (a live handle follows promotes, also another process's), and writes as ordered bulk writes.
 */
import type { Collection, Doc, WriteOp } from '../read-store.ts';
import type { Catalog } from './catalog.ts';
import type { DocumentsTable } from './documents-table.ts';

/** A collection of this store, with what the plan tests look at. */
export interface SqliteCollection<T extends Doc = Doc> extends Collection<T> {
  /** Documents the last query of this collection looked at. */
  lastExamined(): number;
  /** How many documents it holds. */
  size(): number;
}

export class Handles {
  private readonly catalog: Catalog;
  /** Handle → the physical table it reaches now (live handles follow promotes). */
  private readonly resolvers = new WeakMap<Collection, (force?: boolean) => DocumentsTable>();

  constructor(catalog: Catalog) {
    this.catalog = catalog;
  }

  /** A handle named `name` on the table `physicalOf` names at each use. */
  create<T extends Doc>(name: string, physicalOf: () => string): SqliteCollection<T> {
    const { catalog } = this;
    const { tables, statements } = catalog;
    const resolve = (force = false) => {
      catalog.fresh(force);
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
        catalog.load();
        return fn(resolve(true));
      }
    };
    const h: SqliteCollection<T> = {
      name,
      lastExamined: () => tables.get(physicalOf())?.lastExamined ?? 0,
      size: () => read((t) => t.count({})),
      findOne: async (filter) => (read((t) => t.find(filter, { limit: 1 }))[0] as T | undefined) ?? null,
      findByIds: async (ids, options) => read((t) => t.findByIds(ids, options?.own)) as T[],
      find: async (filter, opts) => read((t) => t.find(filter, opts)) as T[],
      count: async (filter = {}) => read((t) => t.count(filter)),
      async bulkWrite(ops) {
        if (ops.length === 0) return;
        const table = resolve(true);
        // Ordered, as MongoDB's: the operations before a failing one stay, the rest do not run.
        let failure: unknown;
        catalog.transaction(() => {
          for (const op of ops) {
            statements.get('SAVEPOINT op').run();
            try {
              table.write(op as WriteOp, name);
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
    this.resolvers.set(h as Collection, resolve);
    return h;
  }

  /** The table a handle of this store reaches now; throws for a handle of another store. */
  resolve(c: Collection): DocumentsTable {
    const resolve = this.resolvers.get(c);
    if (!resolve) throw new Error(`${c.name} is not a collection of this store`);
    return resolve(true);
  }
}
