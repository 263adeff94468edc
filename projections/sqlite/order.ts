/**
 * MongoDB's sort order where the SQLite read store sorts in JavaScript (candidates no index walk
 * serves in order, and the cursor they are compared with), agreeing with the order of its index keys
 * (docs/read-side.md, "Read stores"): null and missing, numbers, strings by code point (UTF-8 byte
 * order, not JavaScript's UTF-16 `<`), objects, arrays, booleans. A field holding an array sorts by
 * its smallest element ascending and its largest descending; an empty array before null and missing.
 */
import { compareStrings, type Doc, type SortDirection, type SortSpec } from '../read-store.ts';
import { EMPTY_ARRAY, pathValues } from './keys.ts';

/** A value's place in MongoDB's type order (an empty array's `undefined` key first). */
function rank(v: unknown): number {
  if (v === EMPTY_ARRAY) return -1;
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number') return 1;
  if (typeof v === 'string') return 2;
  if (typeof v === 'boolean') return 8;
  if (Array.isArray(v)) return 4;
  return typeof v === 'object' ? 3 : 9;
}

/** MongoDB's order of two sort keys of the types JSON documents hold. */
export function compareValues(a: unknown, b: unknown): number {
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (ra <= 0) return 0;
  if (ra === 1) return (a as number) - (b as number);
  if (ra === 2) return compareStrings(a as string, b as string);
  if (ra === 8) return Number(a) - Number(b);
  // Embedded documents and nested arrays: by their JSON text, close to MongoDB's field-by-field order.
  return compareStrings(JSON.stringify(a), JSON.stringify(b));
}

/** What a document sorts by on `field`: the value, or an array's smallest (1) or largest (-1) element. */
function sortKey(doc: Doc, field: string, direction: SortDirection): unknown {
  const direct = field.includes('.') ? undefined : (doc as Record<string, unknown>)[field];
  if (direct !== undefined && !Array.isArray(direct)) return direct;
  const values = pathValues(doc, field);
  let key = values[0];
  for (let i = 1; i < values.length; i++) {
    const c = compareValues(values[i], key);
    if (direction === 1 ? c < 0 : c > 0) key = values[i];
  }
  return key;
}

export interface SortOrder {
  /** The keys a document sorts by, one per field of the sort. */
  keysOf(doc: Doc): unknown[];
  /** Compares two documents' keys in the sort's directions. */
  compare(a: readonly unknown[], b: readonly unknown[]): number;
}

/** The order of a (total) sort specification. */
export function sortOrder(sort: SortSpec): SortOrder {
  return {
    keysOf: (doc) => sort.map(([field, direction]) => sortKey(doc, field, direction)),
    compare(a, b) {
      for (let i = 0; i < sort.length; i++) {
        const c = compareValues(a[i], b[i]);
        if (c !== 0) return sort[i][1] === 1 ? c : -c;
      }
      return 0;
    },
  };
}
