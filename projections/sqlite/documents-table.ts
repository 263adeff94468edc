/**
 * One physical collection of the SQLite read store: a table of documents (JSON) and, per declared
 * index, a table of index entries whose primary key is the index order (one row per element where a
 * field holds an array). Every query is answered through those B-trees (docs/read-side.md):
 *
 * - `_id` equality or `$in`: the documents table's key.
 * - An index whose fields are [equality fields…, sort fields…]: walked in sort order from the cursor,
 *   stopping at `limit` (one walk per combination of `$in` values, merged in sort order).
 * - Else the index that pins down the most fields: its key ranges give the candidates, sorted here.
 * - Else the whole collection (no route asks for this: test/read-store-sqlite-plans.test.ts).
 *
 * The filter is always checked in full by mingo, so index ranges need only contain the matches. This
 * module chooses among those plans and applies writes; the index plans themselves are in plans.ts.
 */
import type { DatabaseSync, SQLInputValue } from 'node:sqlite';
import { assertNoDeferredIndexNeeded } from '../deferred-indexes.ts';
import { applyTo, fieldConditions, onlyId, upsertSeed, walkFields } from '../documents.ts';
import {
  assertCursor,
  type Doc,
  type DocId,
  type Filter,
  type FindOptions,
  type SortSpec,
  totalSort,
  type WriteOp,
} from '../read-store.ts';
import { assertDocumentSize } from './document-size.ts';
import { entriesOf, isEmptyArrayKey } from './keys.ts';
import { matcherOf } from './matcher.ts';
import { sortOrder } from './order.ts';
import { orderedWalk, type PlanTable, ranged } from './plans.ts';
import { column, type IndexMeta, q } from './sql.ts';
import { observed, rows, type Statements } from './statements.ts';
import { decodeEntries, decodeParsed, entryText, type StoredKeys } from './stored-keys.ts';

// What callers imported from here before the split (the plan tests observe queries through this module).
export type { IndexMeta } from './sql.ts';
export { observeQueries, type QueryObserver, type Statements } from './statements.ts';

/** A document table and its index tables. */
export class DocumentsTable implements PlanTable {
  readonly table: string;
  readonly indexes: IndexMeta[];
  /** Documents the last read looked at (the plan tests check a page looks at about what it returns). */
  lastExamined = 0;
  /** The connection's statements (read by the index plans, plans.ts). */
  readonly statements: Statements;
  /** Records an index's changed flags (`multikey`, `emptyArrays`) in the catalog. */
  private readonly onIndexChange: (index: IndexMeta) => void;

  constructor(
    table: string,
    indexes: IndexMeta[],
    statements: Statements,
    onIndexChange: (index: IndexMeta) => void,
  ) {
    this.table = table;
    this.indexes = indexes;
    this.statements = statements;
    this.onIndexChange = onIndexChange;
  }

  /**
   * Creates the tables of a new collection (or of an index added to it). `keys` comes before `doc`:
   * reading it (a rewrite's old entries, an index build's pass) then stops before the document's
   * overflow pages; at a million events a carts index built in 134-162 ms instead of 189-202.
   */
  static createTables(db: DatabaseSync, table: string, indexes: readonly IndexMeta[]): void {
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${q(table)} (_id PRIMARY KEY NOT NULL, keys TEXT NOT NULL, doc TEXT NOT NULL)`,
    );
    for (const index of indexes) DocumentsTable.createIndexTable(db, index);
  }

  static createIndexTable(db: DatabaseSync, index: IndexMeta): void {
    const fields = walkFields(index);
    const cols = fields.map((_, i) => column(i));
    const key = [...fields.map((_, i) => `${column(i)}${index.keys[i][1] === -1 ? ' DESC' : ''}`), '_id'];
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${q(index.table)} (${[...cols, '_id NOT NULL'].join(', ')}, PRIMARY KEY (${key.join(', ')})) WITHOUT ROWID`,
    );
  }

  static dropTables(db: DatabaseSync, table: string, indexes: readonly IndexMeta[]): void {
    for (const index of indexes) db.exec(`DROP TABLE IF EXISTS ${q(index.table)}`);
    db.exec(`DROP TABLE IF EXISTS ${q(table)}`);
  }

  // ---- reads ---------------------------------------------------------------------------------------

  count(filter: Filter): number {
    if (Object.keys(filter).length > 0) return this.find(filter).length;
    const sql = `SELECT count(*) FROM ${q(this.table)}`;
    observed(this.statements, sql, [], false);
    return (this.statements.get(sql).get() as unknown as unknown[])[0] as number;
  }

  /** `own`: parsed afresh and not cached, for a caller that changes them in place (the port's `own`). */
  findByIds(ids: readonly DocId[], own = false): Doc[] {
    const { cache } = this.statements;
    const out: Doc[] = [];
    const missing: DocId[] = [];
    for (const id of new Set(ids)) {
      if (typeof id !== 'string' && !Number.isFinite(id)) continue;
      const hit = own ? undefined : cache.get(this.table, id);
      if (hit) out.push(hit);
      else missing.push(id);
    }
    this.lastExamined = out.length + missing.length;
    if (missing.length === 0) return out;
    const sql =
      missing.length === 1
        ? `SELECT doc FROM ${q(this.table)} WHERE _id = ?`
        : `SELECT doc FROM ${q(this.table)} WHERE _id IN (SELECT value FROM json_each(?))`;
    const params = missing.length === 1 ? [missing[0]] : [JSON.stringify(missing)];
    for (const [json] of rows(this.statements, sql, params)) {
      const doc = JSON.parse(json as string) as Doc;
      if (!own) cache.set(this.table, doc);
      out.push(doc);
    }
    return out;
  }

  find(filter: Filter, options: FindOptions = {}): Doc[] {
    const limit = options.limit ?? Number.POSITIVE_INFINITY;
    if (limit <= 0) return [];
    const sort = totalSort(options.sort);
    if (options.after) assertCursor(sort, options.after);
    const matcher = matcherOf(filter);
    const conditions = fieldConditions(filter);
    const byId = conditions.get('_id')?.eq;
    const source = byId ? this : this.planSource(filter, options.sort);
    const walk = byId
      ? undefined
      : orderedWalk(source, conditions, sort, options.after, Number.isFinite(limit));
    if (walk) {
      const out: Doc[] = [];
      const seen = new Set<unknown>();
      this.lastExamined = 0;
      for (const [id, json] of walk) {
        if (seen.has(id)) continue; // a multikey index holds a document once per element
        seen.add(id);
        this.lastExamined += 1;
        const doc = this.cached(id as DocId, json as string);
        if (!matcher.test(doc)) continue;
        out.push(doc);
        if (out.length >= limit) break;
      }
      return out;
    }
    const candidates = byId ? this.findByIds(byId as DocId[]) : (ranged(source, conditions) ?? this.scan());
    this.lastExamined = candidates.length;
    // Sorted by MongoDB's order, which the index keys follow too (order.ts).
    const order = sortOrder(sort);
    const after = options.after ? sort.map((_, i) => options.after?.[i] ?? null) : undefined;
    const keyed: Array<{ doc: Doc; keys: unknown[] }> = [];
    for (const doc of candidates) {
      if (!matcher.test(doc)) continue;
      const keys = order.keysOf(doc);
      if (!after || order.compare(keys, after) > 0) keyed.push({ doc, keys });
    }
    keyed.sort((a, b) => order.compare(a.keys, b.keys));
    const out = keyed.map((k) => k.doc);
    return Number.isFinite(limit) ? out.slice(0, limit) : out;
  }

  /**
   * What a find is planned over: this table, or while it is a bulk shadow's (a build) its live indexes
   * only, once a query that a deferred index would serve is refused
   * (docs/read-side.md, "How a build writes its shadows").
   */
  private planSource(filter: Filter, sort: SortSpec | undefined): PlanTable {
    if (!this.indexes.some((index) => index.deferred)) return this;
    const live = this.indexes.filter((index) => !index.deferred);
    const deferred = this.indexes.filter((index) => index.deferred);
    assertNoDeferredIndexNeeded(this.table, live, deferred, filter, sort);
    return {
      table: this.table,
      indexes: live,
      statements: this.statements,
      findByIds: (ids) => this.findByIds(ids),
    };
  }

  /** A walked row's document: the cached one, or parsed and cached (hot pages are read again). */
  private cached(id: DocId, json: string): Doc {
    const { cache } = this.statements;
    const hit = cache.get(this.table, id);
    if (hit) return hit;
    const doc = JSON.parse(json) as Doc;
    cache.set(this.table, doc);
    return doc;
  }

  private scan(): Doc[] {
    return [...rows(this.statements, `SELECT doc FROM ${q(this.table)}`, [])].map((r) =>
      JSON.parse(r[0] as string),
    );
  }

  // ---- writes --------------------------------------------------------------------------------------

  /**
   * Applies one write operation (the caller holds the transaction); `collection` names the handle in
   * errors (a document over the size limit).
   */
  write(op: WriteOp, collection = this.table): void {
    if ('insertOne' in op) {
      this.insert(op.insertOne.document, collection);
    } else if ('replaceOne' in op) {
      const { filter, replacement, upsert } = op.replaceOne;
      const id = onlyId(filter);
      const existing = id !== undefined ? this.keysOf(id) : this.firstMatch(filter);
      if (!existing && !upsert) return;
      if (existing && replacement._id !== existing.id) throw new Error('a replacement cannot change _id');
      // An `_id` just looked up needs no second lookup.
      if (!existing && (id === undefined || replacement._id !== id)) this.assertNewId(replacement._id);
      this.store(replacement, existing?.keys, collection);
    } else if ('updateOne' in op) {
      const { filter, update, upsert } = op.updateOne;
      const [doc] = this.find(filter, { limit: 1 });
      if (doc) this.store(applyTo(doc, update), this.keysOf(doc._id)?.keys, collection);
      else if (upsert) {
        const seed = upsertSeed(filter);
        if (seed._id === undefined) throw new Error('an upsert needs _id in its filter');
        this.assertNewId(seed._id);
        this.store(applyTo(seed, update), undefined, collection);
      }
    } else if ('updateMany' in op) {
      for (const doc of this.find(op.updateMany.filter)) {
        this.store(applyTo(doc, op.updateMany.update), this.keysOf(doc._id)?.keys, collection);
      }
    } else if ('deleteOne' in op) {
      const id = onlyId(op.deleteOne.filter);
      const existing = id !== undefined ? this.keysOf(id) : this.firstMatch(op.deleteOne.filter);
      if (existing) this.remove(existing.id, existing.keys);
    } else {
      for (const doc of this.find(op.deleteMany.filter)) {
        const existing = this.keysOf(doc._id);
        if (existing) this.remove(existing.id, existing.keys);
      }
    }
  }

  /** Whether the collection holds no document (one row looked for, however large it is). */
  isEmpty(): boolean {
    const sql = `SELECT 1 FROM ${q(this.table)} LIMIT 1`;
    return (this.statements.get(sql).get() as unknown) === undefined;
  }

  private firstMatch(filter: Filter): { id: DocId; keys: string } | undefined {
    const [doc] = this.find(filter, { limit: 1 });
    return doc ? this.keysOf(doc._id) : undefined;
  }

  /** The stored index entries of a document (what a rewrite must remove), without parsing it. */
  private keysOf(id: DocId): { id: DocId; keys: string } | undefined {
    const sql = `SELECT _id, keys FROM ${q(this.table)} WHERE _id = ?`;
    observed(this.statements, sql, [id], false);
    const row = this.statements.get(sql).get(id) as unknown[] | undefined;
    return row ? { id: row[0] as DocId, keys: row[1] as string } : undefined;
  }

  private assertNewId(id: DocId): void {
    if (this.keysOf(id)) throw new Error(`duplicate key ${JSON.stringify(id)} in the _id index`);
  }

  /**
   * Writes a document and the index entries that changed: most rewrites change none, and a multikey
   * field that gains an element (a product listed at one more store) gains one entry, not all again.
   * A document MongoDB could not hold is refused before anything is written.
   */
  private store(doc: Doc, oldKeys: string | undefined, collection: string): void {
    const json = JSON.stringify(doc);
    assertDocumentSize(collection, doc, json);
    const old = oldKeys ? (JSON.parse(oldKeys) as StoredKeys) : {};
    const keys: StoredKeys = {};
    for (const index of this.indexes) {
      const entries = entriesOf(walkFields(index), doc);
      const texts = entries.map(entryText);
      const encoded = `[${texts.join(',')}]`;
      keys[index.table] = encoded;
      const before = old[index.table];
      if (before === encoded) continue;
      if (!before || index.deferred) {
        this.insertEntries(index, doc, entries);
        continue;
      }
      const now = new Set(texts);
      const stored = JSON.parse(before) as unknown[][];
      const held = stored.map((e) => JSON.stringify(e));
      const kept = new Set(held);
      const gone = decodeParsed(stored).filter((_, i) => !now.has(held[i]));
      this.deleteEntries(index, gone, doc._id);
      this.insertEntries(
        index,
        doc,
        entries.filter((_, i) => !kept.has(texts[i])),
        entries.length,
      );
    }
    this.statements
      .get(
        `INSERT INTO ${q(this.table)} (_id, doc, keys) VALUES (?, ?, ?) ON CONFLICT (_id) DO UPDATE SET doc = excluded.doc, keys = excluded.keys`,
      )
      .run(doc._id, json, JSON.stringify(keys));
    this.statements.cache.delete(this.table, doc._id);
  }

  /**
   * Writes a document its writer knows is new (`insertOne`), without looking up a stored version: the
   * row first, so an `_id` already stored is refused (by the table's key) before any index entry is
   * written, then every index's entries.
   */
  private insert(doc: Doc, collection: string): void {
    if (typeof doc._id !== 'string' && typeof doc._id !== 'number') throw new Error('an insert needs _id');
    const json = JSON.stringify(doc);
    assertDocumentSize(collection, doc, json);
    const keys: StoredKeys = {};
    const entries = this.indexes.map((index) => {
      const found = entriesOf(walkFields(index), doc);
      keys[index.table] = `[${found.map(entryText).join(',')}]`;
      return found;
    });
    try {
      this.statements
        .get(`INSERT INTO ${q(this.table)} (_id, doc, keys) VALUES (?, ?, ?)`)
        .run(doc._id, json, JSON.stringify(keys));
    } catch (err) {
      if ((err as { errcode?: unknown }).errcode !== SQLITE_CONSTRAINT_PRIMARYKEY) throw err;
      throw new Error(`duplicate key ${JSON.stringify(doc._id)} in the _id index`, { cause: err });
    }
    this.indexes.forEach((index, i) => {
      this.insertEntries(index, doc, entries[i]);
    });
    this.statements.cache.delete(this.table, doc._id);
  }

  private remove(id: DocId, oldKeys: string): void {
    const old = JSON.parse(oldKeys) as StoredKeys;
    for (const index of this.indexes) {
      const before = old[index.table];
      if (before) this.deleteEntries(index, decodeEntries(before), id);
    }
    this.statements.get(`DELETE FROM ${q(this.table)} WHERE _id = ?`).run(id);
    this.statements.cache.delete(this.table, id);
  }

  /** Inserts entries of a document; `all` is how many it has in the index (more than one: multikey). */
  private insertEntries(
    index: IndexMeta,
    doc: Doc,
    entries = entriesOf(walkFields(index), doc),
    all = entries.length,
  ): SQLInputValue[][] {
    if (all > 1 && !index.multikey) {
      index.multikey = true;
      this.onIndexChange(index);
    }
    if (entries.length === 0) return entries;
    this.noteEmptyArrays(index, entries);
    // A deferred index gets its entries from the `keys` column once the load is done (bulk-load.ts).
    if (index.deferred) return entries;
    const insert = this.statements.get(entrySql(index).insert);
    for (const entry of entries) {
      if (index.unique) this.assertUnique(index, entry);
      insert.run(...entry, doc._id);
    }
    return entries;
  }

  /** Records the fields where these entries hold an empty array's key (see `IndexMeta.emptyArrays`). */
  private noteEmptyArrays(index: IndexMeta, entries: SQLInputValue[][]): void {
    for (const entry of entries) {
      entry.forEach((key, i) => {
        if (!isEmptyArrayKey(key) || index.emptyArrays?.includes(i)) return;
        index.emptyArrays = [...(index.emptyArrays ?? []), i];
        this.onIndexChange(index);
      });
    }
  }

  private assertUnique(index: IndexMeta, entry: SQLInputValue[]): void {
    if (this.statements.get(entrySql(index).find).get(...entry)) {
      throw new Error(
        `duplicate key ${JSON.stringify(entry)} in unique index ${walkFields(index).join(',')}`,
      );
    }
  }

  private deleteEntries(index: IndexMeta, entries: SQLInputValue[][], id: DocId): void {
    if (entries.length === 0 || index.deferred) return;
    const remove = this.statements.get(entrySql(index).remove);
    for (const entry of entries) remove.run(...entry, id);
  }
}

/** SQLite's extended result code for a row whose primary key is taken. */
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;

/** The statements that add, remove and find one entry of an index: `k0 … kn-1` (and `_id`). */
interface EntrySql {
  insert: string;
  remove: string;
  /** A document holding the key, if any (a unique index's check). */
  find: string;
}
const entrySqls = new WeakMap<IndexMeta, EntrySql>();

/**
 * An index's entry statements, built once per index: the projector adds and removes entries (and
 * checks a unique index's) at most writes, and building the SQL at each one was about an eighth of its
 * index work per cart event (docs/benchmarks.md, "`command.append` profiled").
 */
function entrySql(index: IndexMeta): EntrySql {
  let sql = entrySqls.get(index);
  if (!sql) {
    const cols = walkFields(index).map((_, i) => column(i));
    const key = cols.map((c) => `${c} = ?`).join(' AND ');
    sql = {
      insert: `INSERT OR IGNORE INTO ${q(index.table)} (${[...cols, '_id'].join(', ')}) VALUES (${[...cols, '_id'].map(() => '?').join(', ')})`,
      remove: `DELETE FROM ${q(index.table)} WHERE ${key} AND _id = ?`,
      find: `SELECT _id FROM ${q(index.table)} WHERE ${key} LIMIT 1`,
    };
    entrySqls.set(index, sql);
  }
  return sql;
}
