/**
 * The SQL shape of a collection's tables: how an index is recorded, how tables and key columns are
 * named, and the conditions on index keys (equality, beyond a cursor, ranges) with their parameters.
 */
import type { SQLInputValue } from 'node:sqlite';
import type { FieldCondition } from '../documents.ts';
import type { IndexSpec, SortDirection } from '../read-store.ts';
import { isKeyable, NULL_KEY, toKey } from './keys.ts';

/** An index as the catalog records it. */
export interface IndexMeta extends IndexSpec {
  table: string;
  /** Some document has several entries: a range may not be bounded on both sides (see `rangeOf`). */
  multikey: boolean;
  /**
   * The fields (by position) some document has held an empty array in: its key sorts apart from
   * MongoDB's place for it (before null), so no walk of this index serves a sort by them (plans.ts).
   */
  emptyArrays?: number[];
  /**
   * A bulk shadow's index left empty while its documents are written, built from their `keys` column
   * when the load is done (bulk-load.ts); its flags above are kept meanwhile, as every write notes them.
   */
  deferred?: true;
}

export const q = (name: string) => `"${name}"`;
export const column = (i: number) => `k${i}`;

/** The SQL of an index column constrained to one key. */
export function equals(col: string, value: SQLInputValue, params: SQLInputValue[]): string {
  params.push(value);
  return `${col} = ?`;
}

/** The condition for `col` to sort strictly after the key `value` in `direction`. */
export function beyond(
  col: string,
  direction: SortDirection,
  value: SQLInputValue,
  params: SQLInputValue[],
): string {
  params.push(value);
  return `${col} ${direction === 1 ? '>' : '<'} ?`;
}

/** SQL bounds for a range condition, kept within the bound's type (MongoDB compares within a type). */
export function rangeOf(
  col: string,
  c: FieldCondition,
  multikey: boolean,
  params: SQLInputValue[],
): string[] {
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
