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
 * The filter is always checked in full by mingo, so index ranges need only contain the matches.
 */
import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import {
  afterDoc,
  applyTo,
  compiledQuery,
  type FieldCondition,
  fieldConditions,
  MAX_MERGED_WALKS,
  onlyId,
  sortComparator,
  upsertSeed,
  walkFields,
} from '../documents.ts';
import {
  type Doc,
  type DocId,
  type Filter,
  type FindOptions,
  type IndexSpec,
  type SortDirection,
  type SortSpec,
  totalSort,
  type WriteOp,
} from '../read-store.ts';
import type { DocumentCache } from './document-cache.ts';
import { compareKeys, entriesOf, isKeyable, NULL_KEY, toKey } from './keys.ts';

/** An index as the catalog records it. */
export interface IndexMeta extends IndexSpec {
  table: string;
  /** Some document has several entries: a range may not be bounded on both sides (see `rangeOf`). */
  multikey: boolean;
}

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
 * its limit is met (a page), so a walk over a whole index is not a scan of it.
 */
export type QueryObserver = (sql: string, params: readonly SQLInputValue[], bounded: boolean) => void;

/** Observers of every SQLite read store in this process (the plan tests EXPLAIN what routes run). */
const observers = new Set<QueryObserver>();

export function observeQueries(observer: QueryObserver): () => void {
  observers.add(observer);
  return () => observers.delete(observer);
}

function observed(statements: Statements, sql: string, params: readonly SQLInputValue[], bounded: boolean) {
  statements.onQuery?.(sql, params, bounded);
  for (const o of observers) o(sql, params, bounded);
}

const q = (name: string) => `"${name}"`;
const column = (i: number) => `k${i}`;

/** The SQL of an index column constrained to one key. */
function equals(col: string, value: SQLInputValue, params: SQLInputValue[]): string {
  params.push(value);
  return `${col} = ?`;
}

/** The condition for `col` to sort strictly after the key `value` in `direction`. */
function beyond(
  col: string,
  direction: SortDirection,
  value: SQLInputValue,
  params: SQLInputValue[],
): string {
  params.push(value);
  return `${col} ${direction === 1 ? '>' : '<'} ?`;
}

/** SQL bounds for a range condition, kept within the bound's type (MongoDB compares within a type). */
function rangeOf(col: string, c: FieldCondition, multikey: boolean, params: SQLInputValue[]): string[] {
  const out: string[] = [];
  // On a multikey index each bound may be met by a different element: only one bound is safe.
  const high = c.low && multikey ? undefined : c.high;
  const bound = c.low ?? c.high;
  if (c.low && isKeyable(c.low.value) && c.low.value !== null) {
    out.push(`${col} ${c.low.inclusive ? '>=' : '>'} ?`);
    params.push(toKey(c.low.value));
  }
  if (high && isKeyable(high.value) && high.value !== null) {
    out.push(`${col} ${high.inclusive ? '<=' : '<'} ?`);
    params.push(toKey(high.value));
  }
  const type = typeof bound?.value;
  if (type === 'number') {
    if (!c.low) {
      out.push(`${col} > ?`); // not null or missing
      params.push(NULL_KEY);
    }
    out.push(`${col} < ''`); // every text sorts after every number
  } else if (type === 'string') {
    if (!c.low) out.push(`${col} >= ''`);
    out.push(`${col} < x''`); // every blob sorts after every text
  }
  return out;
}

/** The ids and JSON of matching rows, walked in order; closes the statement's read when left early. */
function* rows(
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

/** A document table and its index tables. */
export class DocumentsTable {
  readonly table: string;
  readonly indexes: IndexMeta[];
  /** Documents the last read looked at (the plan tests check a page looks at about what it returns). */
  lastExamined = 0;
  private readonly statements: Statements;
  private readonly onMultikey: (index: IndexMeta) => void;

  constructor(
    table: string,
    indexes: IndexMeta[],
    statements: Statements,
    onMultikey: (index: IndexMeta) => void,
  ) {
    this.table = table;
    this.indexes = indexes;
    this.statements = statements;
    this.onMultikey = onMultikey;
  }

  /** Creates the tables of a new collection (or of an index added to it). */
  static createTables(db: DatabaseSync, table: string, indexes: readonly IndexMeta[]): void {
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${q(table)} (_id PRIMARY KEY NOT NULL, doc TEXT NOT NULL, keys TEXT NOT NULL)`,
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

  findByIds(ids: readonly DocId[]): Doc[] {
    const { cache } = this.statements;
    const out: Doc[] = [];
    const missing: DocId[] = [];
    for (const id of new Set(ids)) {
      if (typeof id !== 'string' && !Number.isFinite(id)) continue;
      const hit = cache.get(this.table, id);
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
      cache.set(this.table, doc);
      out.push(doc);
    }
    return out;
  }

  find(filter: Filter, options: FindOptions = {}): Doc[] {
    const limit = options.limit ?? Number.POSITIVE_INFINITY;
    if (limit <= 0) return [];
    const sort = totalSort(options.sort);
    const matcher = compiledQuery(filter);
    const conditions = fieldConditions(filter);
    const byId = conditions.get('_id')?.eq;
    const walk = byId ? undefined : this.orderedWalk(conditions, sort, options.after, Number.isFinite(limit));
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
    const candidates = byId ? this.findByIds(byId as DocId[]) : (this.ranged(conditions) ?? this.scan());
    this.lastExamined = candidates.length;
    const compare = sortComparator(sort);
    const after = options.after ? afterDoc(sort, options.after) : undefined;
    const out = candidates.filter((doc) => (!after || compare(doc, after) > 0) && matcher.test(doc));
    out.sort(compare);
    return Number.isFinite(limit) ? out.slice(0, limit) : out;
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

  /**
   * Plan 1: rows in sort order from an index whose fields are [equality fields…, sort fields…], or from
   * the documents table's key when the sort is `_id` alone. Undefined when no index qualifies.
   */
  private orderedWalk(
    conditions: Map<string, FieldCondition>,
    sort: SortSpec,
    after: readonly unknown[] | undefined,
    bounded: boolean,
  ): Iterable<[unknown, unknown]> | undefined {
    if (sort[sort.length - 1][1] !== 1) return undefined;
    const sortWithoutId = sort.slice(0, -1);
    const afterKeys = after ? sort.map((_, i) => toKey(after[i] ?? null)) : undefined;
    if (sortWithoutId.length === 0) {
      // No index pins any field: the documents table in _id order, which a page leaves early.
      const id = conditions.get('_id');
      const helped = this.indexes.some((index) => pinned(walkFields(index), conditions) > 0);
      if (!helped && !id?.low && !id?.high) {
        return this.walks(`FROM ${q(this.table)} AS d`, 'd._id', [], [], [], afterKeys, bounded);
      }
    }
    const byFields = [...this.indexes].sort((a, b) => walkFields(b).length - walkFields(a).length);
    for (const index of byFields) {
      const fields = walkFields(index);
      const eqCount = fields.length - sortWithoutId.length;
      if (eqCount < 0) continue;
      const sameOrder = sortWithoutId.every(
        ([f, d], i) => fields[eqCount + i] === f && index.keys[eqCount + i][1] === d,
      );
      if (!sameOrder) continue;
      const choices = fields
        .slice(0, eqCount)
        .map((f) => [...new Set((conditions.get(f)?.eq ?? []).map((v) => v ?? null))]);
      if (choices.some((values) => values.length === 0 || !values.every(isKeyable))) continue;
      const prefixes = choices.reduce<unknown[][]>(
        (acc, values) => acc.flatMap((p) => values.map((v) => [...p, v])),
        [[]],
      );
      if (prefixes.length > MAX_MERGED_WALKS) continue;
      const from = `FROM ${q(index.table)} AS t CROSS JOIN ${q(this.table)} AS d ON d._id = t._id`;
      const eqCols = fields.slice(0, eqCount).map((_, i) => `t.${column(i)}`);
      const sortCols = sortWithoutId.map((_, i) => `t.${column(eqCount + i)}`);
      const dirs = sortWithoutId.map(([, d]) => d);
      return this.walks(
        from,
        't._id',
        eqCols,
        prefixes.map((p) => p.map(toKey)),
        sortCols.map((c, i) => [c, dirs[i]] as const),
        afterKeys,
        bounded,
      );
    }
    return undefined;
  }

  /**
   * One walk per equality prefix, each in index order from the cursor, merged in sort order. Rows are
   * [sort values…, _id, doc]; the merge compares them with SQLite's order, the order the walks return.
   */
  private walks(
    from: string,
    idCol: string,
    eqCols: string[],
    prefixes: SQLInputValue[][],
    sortCols: ReadonlyArray<readonly [string, SortDirection]>,
    afterKeys: SQLInputValue[] | undefined,
    bounded: boolean,
  ): Iterable<[unknown, unknown]> {
    const cols = [...sortCols, [idCol, 1 as SortDirection] as const];
    const select = `SELECT ${cols.map(([c]) => c).join(', ')}, d.doc ${from}`;
    const order = `ORDER BY ${cols.map(([c, d]) => `${c}${d === -1 ? ' DESC' : ''}`).join(', ')}`;
    const statements = this.statements;
    const walkOf = (prefix: SQLInputValue[], slot: number) =>
      function* (): Generator<unknown[]> {
        const base: string[] = [];
        const baseParams: SQLInputValue[] = [];
        eqCols.forEach((c, i) => {
          base.push(equals(c, prefix[i], baseParams));
        });
        if (!afterKeys) {
          const where = base.length > 0 ? `WHERE ${base.join(' AND ')}` : '';
          yield* rows(statements, `${select} ${where} ${order}`, baseParams, slot, bounded);
          return;
        }
        // Strictly after the cursor: the rows equal to it on the first j sort columns and beyond it on
        // column j, deepest j first; each branch is one range of the index, in order.
        for (let j = cols.length - 1; j >= 0; j--) {
          const prefixParams = [...baseParams];
          const same = cols.slice(0, j).map(([c], i) => equals(c, afterKeys[i], prefixParams));
          const cond = beyond(cols[j][0], cols[j][1], afterKeys[j], prefixParams);
          const where = `WHERE ${[...base, ...same, cond].join(' AND ')}`;
          yield* rows(statements, `${select} ${where} ${order}`, prefixParams, slot, bounded);
        }
      };
    const width = cols.length;
    const pick = (row: unknown[]): [unknown, unknown] => [row[width - 1], row[width]];
    if (prefixes.length <= 1) {
      const only = walkOf(prefixes[0] ?? [], 0)();
      return (function* () {
        for (const row of only) yield pick(row);
      })();
    }
    return (function* () {
      const its = prefixes.map((p, slot) => walkOf(p, slot)());
      const heads = its.map((it) => it.next());
      try {
        for (;;) {
          let best = -1;
          for (let i = 0; i < heads.length; i++) {
            if (heads[i].done) continue;
            if (best < 0 || compareRows(heads[i].value, heads[best].value, cols) < 0) best = i;
          }
          if (best < 0) return;
          yield pick(heads[best].value as unknown[]);
          heads[best] = its[best].next();
        }
      } finally {
        for (const it of its) it.return(undefined);
      }
    })();
  }

  /** Plan 2: candidates from the key ranges of the index that pins down the most fields. */
  private ranged(conditions: Map<string, FieldCondition>): Doc[] | undefined {
    let best: { index: IndexMeta; used: number } | undefined;
    for (const index of this.indexes) {
      const used = pinned(walkFields(index), conditions);
      if (used > 0 && (!best || used > best.used)) best = { index, used };
    }
    const idRange = conditions.get('_id');
    if (!best && !(idRange?.low || idRange?.high)) return undefined;
    if (!best) {
      const params: SQLInputValue[] = [];
      const where = rangeOf('_id', idRange as FieldCondition, false, params);
      const sql = `SELECT doc FROM ${q(this.table)} WHERE ${where.join(' AND ')}`;
      return [...rows(this.statements, sql, params)].map((r) => JSON.parse(r[0] as string));
    }
    const { index, used } = best;
    const fields = walkFields(index).slice(0, used);
    let prefixes: unknown[][] = [[]];
    let range: FieldCondition | undefined;
    for (const f of fields) {
      const c = conditions.get(f) as FieldCondition;
      if (c.eq) prefixes = prefixes.flatMap((p) => (c.eq ?? []).map((v) => [...p, v ?? null]));
      else range = c;
    }
    // The ids from the index, then the documents through the cache: a hot range (the stores near a
    // ZIP code) is not read and parsed again at every request.
    const ids = new Set<DocId>();
    for (const prefix of prefixes) {
      const params: SQLInputValue[] = [];
      const where = prefix.map((v, i) => equals(`t.${column(i)}`, toKey(v), params));
      if (range) where.push(...rangeOf(`t.${column(prefix.length)}`, range, index.multikey, params));
      const sql = `SELECT t._id FROM ${q(index.table)} AS t WHERE ${where.join(' AND ')}`;
      for (const [id] of rows(this.statements, sql, params)) ids.add(id as DocId);
    }
    return this.findByIds([...ids]);
  }

  // ---- writes --------------------------------------------------------------------------------------

  /** Applies one write operation (the caller holds the transaction). */
  write(op: WriteOp): void {
    if ('replaceOne' in op) {
      const { filter, replacement, upsert } = op.replaceOne;
      const id = onlyId(filter);
      const existing = id !== undefined ? this.keysOf(id) : this.firstMatch(filter);
      if (!existing && !upsert) return;
      if (existing && replacement._id !== existing.id) throw new Error('a replacement cannot change _id');
      if (!existing) this.assertNewId(replacement._id);
      this.store(replacement, existing?.keys);
    } else if ('updateOne' in op) {
      const { filter, update, upsert } = op.updateOne;
      const [doc] = this.find(filter, { limit: 1 });
      if (doc) this.store(applyTo(doc, update), this.keysOf(doc._id)?.keys);
      else if (upsert) {
        const seed = upsertSeed(filter);
        if (seed._id === undefined) throw new Error('an upsert needs _id in its filter');
        this.assertNewId(seed._id);
        this.store(applyTo(seed, update), undefined);
      }
    } else if ('updateMany' in op) {
      for (const doc of this.find(op.updateMany.filter)) {
        this.store(applyTo(doc, op.updateMany.update), this.keysOf(doc._id)?.keys);
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

  /** Writes every document's index entries into a newly declared index. */
  backfill(index: IndexMeta): void {
    const all = [...rows(this.statements, `SELECT _id, doc, keys FROM ${q(this.table)}`, [])];
    for (const [id, json, keys] of all) {
      const stored = JSON.parse(keys as string) as StoredKeys;
      const entries = this.insertEntries(index, JSON.parse(json as string) as Doc);
      stored[index.table] = encodeEntries(entries);
      this.statements
        .get(`UPDATE ${q(this.table)} SET keys = ? WHERE _id = ?`)
        .run(JSON.stringify(stored), id as SQLInputValue);
    }
  }

  private firstMatch(filter: Filter): { id: DocId; keys: string } | undefined {
    const [doc] = this.find(filter, { limit: 1 });
    return doc ? this.keysOf(doc._id) : undefined;
  }

  /** The stored index entries of a document (what a rewrite must remove), without parsing it. */
  private keysOf(id: DocId): { id: DocId; keys: string } | undefined {
    const row = this.statements.get(`SELECT _id, keys FROM ${q(this.table)} WHERE _id = ?`).get(id) as
      | unknown[]
      | undefined;
    return row ? { id: row[0] as DocId, keys: row[1] as string } : undefined;
  }

  private assertNewId(id: DocId): void {
    if (this.keysOf(id)) throw new Error(`duplicate key ${JSON.stringify(id)} in the _id index`);
  }

  /**
   * Writes a document and the index entries that changed: most rewrites change none, and a multikey
   * field that gains an element (a product listed at one more store) gains one entry, not all again.
   */
  private store(doc: Doc, oldKeys: string | undefined): void {
    const old = oldKeys ? (JSON.parse(oldKeys) as StoredKeys) : {};
    const keys: StoredKeys = {};
    for (const index of this.indexes) {
      const entries = entriesOf(walkFields(index), doc);
      const texts = entries.map(entryText);
      const encoded = `[${texts.join(',')}]`;
      keys[index.table] = encoded;
      const before = old[index.table];
      if (before === encoded) continue;
      if (!before) {
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
      .run(doc._id, JSON.stringify(doc), JSON.stringify(keys));
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
      this.onMultikey(index);
    }
    if (entries.length === 0) return entries;
    const n = walkFields(index).length;
    const marks = Array.from({ length: n + 1 }, () => '?').join(', ');
    const cols = [...Array.from({ length: n }, (_, i) => column(i)), '_id'].join(', ');
    const insert = this.statements.get(`INSERT OR IGNORE INTO ${q(index.table)} (${cols}) VALUES (${marks})`);
    for (const entry of entries) {
      if (index.unique) this.assertUnique(index, entry);
      insert.run(...entry, doc._id);
    }
    return entries;
  }

  private assertUnique(index: IndexMeta, entry: SQLInputValue[]): void {
    const params: SQLInputValue[] = [];
    const where = entry.map((v, i) => equals(column(i), v, params));
    const sql = `SELECT _id FROM ${q(index.table)} WHERE ${where.join(' AND ')} LIMIT 1`;
    if (this.statements.get(sql).get(...params)) {
      throw new Error(
        `duplicate key ${JSON.stringify(entry)} in unique index ${walkFields(index).join(',')}`,
      );
    }
  }

  private deleteEntries(index: IndexMeta, entries: SQLInputValue[][], id: DocId): void {
    for (const entry of entries) {
      const params: SQLInputValue[] = [];
      const where = entry.map((v, i) => equals(column(i), v, params));
      this.statements
        .get(`DELETE FROM ${q(index.table)} WHERE ${where.join(' AND ')} AND _id = ?`)
        .run(...params, id);
    }
  }
}

/** How many of an index's leading fields the conditions pin: equalities, then at most one range. */
function pinned(fields: readonly string[], conditions: Map<string, FieldCondition>): number {
  let used = 0;
  for (const f of fields) {
    const c = conditions.get(f);
    if (c?.eq?.every(isKeyable)) {
      used += 1;
      continue;
    }
    if (c?.low || c?.high) used += 1;
    break;
  }
  return used;
}

function compareRows(
  a: unknown[],
  b: unknown[],
  cols: ReadonlyArray<readonly [string, SortDirection]>,
): number {
  for (let i = 0; i < cols.length; i++) {
    const c = compareKeys(a[i], b[i]);
    if (c !== 0) return cols[i][1] === -1 ? -c : c;
  }
  return 0;
}

/**
 * A document's index entries as its row keeps them, by index table: each index's entries as JSON text
 * (blobs as {"b": hex}; null for the null key, -Infinity, which JSON cannot hold), so a rewrite
 * compares one string per index.
 */
type StoredKeys = Record<string, string>;

/** One entry as JSON text: `encodeEntries` is these in an array, and equal entries have equal texts. */
function entryText(entry: SQLInputValue[]): string {
  return JSON.stringify(
    entry.map((k) =>
      k instanceof Uint8Array ? { b: Buffer.from(k).toString('hex') } : k === NULL_KEY ? null : k,
    ),
  );
}

function encodeEntries(entries: SQLInputValue[][]): string {
  return `[${entries.map(entryText).join(',')}]`;
}

function decodeEntries(text: string): SQLInputValue[][] {
  return decodeParsed(JSON.parse(text) as unknown[][]);
}

/** Stored entries already parsed from their JSON text, back to SQLite values. */
function decodeParsed(entries: unknown[][]): SQLInputValue[][] {
  return entries.map((e) =>
    e.map((k) => {
      if (k === null) return NULL_KEY;
      if (typeof k === 'object') return new Uint8Array(Buffer.from((k as { b: string }).b, 'hex'));
      return k as SQLInputValue;
    }),
  );
}
