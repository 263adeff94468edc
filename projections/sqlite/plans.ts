/**
 * The index plans of a find on one collection (docs/read-side.md; the order they are tried in is in
 * documents-table.ts): rows in sort order walked from an index, one walk per combination of `$in`
 * values merged in sort order, or candidates from the key ranges of the index that pins the most fields.
 */
import type { SQLInputValue } from 'node:sqlite';
import { type FieldCondition, MAX_MERGED_WALKS, walkFields } from '../documents.ts';
import type { Doc, DocId, SortDirection, SortSpec } from '../read-store.ts';
import { compareKeys, isKeyable, toKey } from './keys.ts';
import { beyond, column, equals, type IndexMeta, q, rangeOf } from './sql.ts';
import { rows, type Statements } from './statements.ts';

/** The collection a plan reads: its documents table, its indexes and its connection. */
export interface PlanTable {
  readonly table: string;
  readonly indexes: readonly IndexMeta[];
  readonly statements: Statements;
  /** Documents by `_id`, through the cache. */
  findByIds(ids: readonly DocId[]): Doc[];
}

/**
 * Plan 1: rows in sort order from an index whose fields are [equality fields…, sort fields…], or from
 * the documents table's key when the sort is `_id` alone. Undefined when no index qualifies. A range on
 * the first sort field bounds the walk, so a page of recent rows (newest first, a time range) starts
 * and ends inside the range instead of reading the rows beyond it.
 */
export function orderedWalk(
  source: PlanTable,
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
    const helped = source.indexes.some((index) => pinned(walkFields(index), conditions) > 0);
    if (!helped && !id?.low && !id?.high) {
      return walks(
        source.statements,
        `FROM ${q(source.table)} AS d`,
        'd._id',
        [],
        [],
        [],
        afterKeys,
        bounded,
      );
    }
  }
  const byFields = [...source.indexes].sort((a, b) => walkFields(b).length - walkFields(a).length);
  for (const index of byFields) {
    const fields = walkFields(index);
    const eqCount = fields.length - sortWithoutId.length;
    if (eqCount < 0) continue;
    const sameOrder = sortWithoutId.every(
      ([f, d], i) => fields[eqCount + i] === f && index.keys[eqCount + i][1] === d,
    );
    if (!sameOrder) continue;
    // An empty array's key sorts after the strings; MongoDB sorts it first: sorted in JavaScript.
    if (index.emptyArrays?.some((i) => i >= eqCount)) continue;
    const choices = fields
      .slice(0, eqCount)
      .map((f) => [...new Set((conditions.get(f)?.eq ?? []).map((v) => v ?? null))]);
    if (choices.some((values) => values.length === 0 || !values.every(isKeyable))) continue;
    const prefixes = choices.reduce<unknown[][]>(
      (acc, values) => acc.flatMap((p) => values.map((v) => [...p, v])),
      [[]],
    );
    if (prefixes.length > MAX_MERGED_WALKS) continue;
    const from = `FROM ${q(index.table)} AS t CROSS JOIN ${q(source.table)} AS d ON d._id = t._id`;
    const eqCols = fields.slice(0, eqCount).map((_, i) => `t.${column(i)}`);
    const sortCols = sortWithoutId.map((_, i) => `t.${column(eqCount + i)}`);
    const dirs = sortWithoutId.map(([, d]) => d);
    // An array sorts by its least (or greatest) element, not by its first element in the range: on a
    // multikey index the walk is not bounded, lest it yield a document at the wrong place.
    const first = sortCols.length > 0 && !index.multikey ? conditions.get(fields[eqCount]) : undefined;
    const range = first && !first.eq && (first.low || first.high) ? first : undefined;
    return walks(
      source.statements,
      from,
      't._id',
      eqCols,
      prefixes.map((p) => p.map(toKey)),
      sortCols.map((c, i) => [c, dirs[i]] as const),
      afterKeys,
      bounded,
      range && { col: sortCols[0], cond: range },
    );
  }
  return undefined;
}

/**
 * One walk per equality prefix, each in index order from the cursor, merged in sort order. Rows are
 * [sort values…, _id, doc]; the merge compares them with SQLite's order, the order the walks return.
 */
function walks(
  statements: Statements,
  from: string,
  idCol: string,
  eqCols: string[],
  prefixes: SQLInputValue[][],
  sortCols: ReadonlyArray<readonly [string, SortDirection]>,
  afterKeys: SQLInputValue[] | undefined,
  bounded: boolean,
  range?: { col: string; cond: FieldCondition },
): Iterable<[unknown, unknown]> {
  const cols = [...sortCols, [idCol, 1 as SortDirection] as const];
  const select = `SELECT ${cols.map(([c]) => c).join(', ')}, d.doc ${from}`;
  const order = `ORDER BY ${cols.map(([c, d]) => `${c}${d === -1 ? ' DESC' : ''}`).join(', ')}`;
  const walkOf = (prefix: SQLInputValue[], slot: number) =>
    function* (): Generator<unknown[]> {
      const base: string[] = [];
      const baseParams: SQLInputValue[] = [];
      eqCols.forEach((c, i) => {
        base.push(equals(c, prefix[i], baseParams));
      });
      if (range) base.push(...rangeOf(range.col, range.cond, false, baseParams));
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
export function ranged(source: PlanTable, conditions: Map<string, FieldCondition>): Doc[] | undefined {
  let best: { index: IndexMeta; used: number } | undefined;
  for (const index of source.indexes) {
    const used = pinned(walkFields(index), conditions);
    if (used > 0 && (!best || used > best.used)) best = { index, used };
  }
  const idRange = conditions.get('_id');
  if (!best && !(idRange?.low || idRange?.high)) return undefined;
  if (!best) {
    const params: SQLInputValue[] = [];
    const where = rangeOf('_id', idRange as FieldCondition, false, params);
    const sql = `SELECT doc FROM ${q(source.table)} WHERE ${where.join(' AND ')}`;
    return [...rows(source.statements, sql, params)].map((r) => JSON.parse(r[0] as string));
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
    for (const [id] of rows(source.statements, sql, params)) ids.add(id as DocId);
  }
  return source.findByIds([...ids]);
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
