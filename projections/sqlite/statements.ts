/**
 * The statements of one SQLite read store connection, prepared once, and the observers told of every
 * query statement run (the plan tests EXPLAIN what each route runs: test/read-store-sqlite-plans.test.ts).
 */
import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import type { DocumentCache } from './document-cache.ts';

/** Statements of one database connection, prepared once. `slot` tells apart walks run side by side. */
export interface Statements {
  get(sql: string, slot?: number): StatementSync;
  /** Told of every query statement run (tests check each one's plan). */
  onQuery?: QueryObserver;
  /** Parsed documents of point lookups. */
  cache: DocumentCache;
}

/**
 * Told of a query statement as it runs: `bounded` when the caller reads rows in index order only until
 * its limit is met (a page), so a walk over a whole index is not a scan of it. `explain` gives SQLite's
 * plan for it on its own connection (a process may have several store files open, with alike table
 * names), one line per step.
 */
export type QueryObserver = (
  sql: string,
  params: readonly SQLInputValue[],
  bounded: boolean,
  explain: () => string[],
) => void;

/** Observers of every SQLite read store in this process (the plan tests EXPLAIN what routes run). */
const observers = new Set<QueryObserver>();

export function observeQueries(observer: QueryObserver): () => void {
  observers.add(observer);
  return () => observers.delete(observer);
}

export function observed(
  statements: Statements,
  sql: string,
  params: readonly SQLInputValue[],
  bounded: boolean,
) {
  if (statements.onQuery === undefined && observers.size === 0) return;
  const explain = () =>
    (statements.get(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as unknown as unknown[][]).map((row) =>
      String(row[3]),
    );
  statements.onQuery?.(sql, params, bounded, explain);
  for (const o of observers) o(sql, params, bounded, explain);
}

/** The ids and JSON of matching rows, walked in order; closes the statement's read when left early. */
export function* rows(
  statements: Statements,
  sql: string,
  params: SQLInputValue[],
  slot = 0,
  bounded = false,
): Generator<unknown[]> {
  const stmt = statements.get(sql, slot);
  observed(statements, sql, params, bounded);
  const it = stmt.iterate(...params) as Iterator<unknown[]>;
  try {
    for (let r = it.next(); !r.done; r = it.next()) yield r.value;
  } finally {
    it.return?.();
  }
}

/** The `Statements` of a connection: each SQL text (per slot) prepared on first use, rows as arrays. */
export class PreparedStatements implements Statements {
  readonly onQuery: QueryObserver | undefined;
  readonly cache: DocumentCache;
  private readonly db: DatabaseSync;
  private readonly prepared = new Map<string, StatementSync>();

  constructor(db: DatabaseSync, onQuery: QueryObserver | undefined, cache: DocumentCache) {
    this.db = db;
    this.onQuery = onQuery;
    this.cache = cache;
  }

  get(sql: string, slot = 0): StatementSync {
    const key = slot === 0 ? sql : `${slot}|${sql}`;
    let stmt = this.prepared.get(key);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      stmt.setReturnArrays(true);
      this.prepared.set(key, stmt);
    }
    return stmt;
  }

  /** Forgets the statements of dropped tables (table names are never reused). */
  forget(table: string): void {
    for (const key of this.prepared.keys())
      if (key.includes(`"${table}"`) || key.includes(`"${table}_`)) this.prepared.delete(key);
  }

  clear(): void {
    this.prepared.clear();
  }
}
