/**
 * Index keys of the SQLite read store. A value is stored in an index column so that SQLite's own order
 * (NULL, numbers, text, blobs) is MongoDB's order for the types read models hold: null and missing,
 * numbers, strings, then objects, arrays and booleans as blobs behind a type byte in MongoDB's type
 * order. SQLite compares text as UTF-8 bytes, as MongoDB does (docs/read-side.md).
 *
 * Null and missing are -Infinity, the smallest number: index keys are primary keys, which hold no
 * NULL, and a document (JSON) can never hold -Infinity itself. An empty array is a key of its own, as
 * MongoDB's `undefined` key for it: no null, and unique apart from null (a blob, which no range meets).
 */
import type { SQLInputValue } from 'node:sqlite';
import type { Doc } from '../read-store.ts';

const OBJECT = 0x03;
const ARRAY = 0x04;
/** BSON's type number of `undefined`, the key MongoDB gives an empty array. */
const EMPTY = 0x06;
const BOOLEAN = 0x08;

/** The key of null and missing. */
export const NULL_KEY = Number.NEGATIVE_INFINITY;

/** What `pathValues` answers for a field holding an empty array. */
export const EMPTY_ARRAY: unique symbol = Symbol('empty array');

/**
 * The values a path reaches, as MongoDB indexes and sorts by them: through arrays of documents, one per
 * element of a final array, EMPTY_ARRAY for an empty final array, and one undefined (null) when the
 * path reaches nothing (a missing field, or an empty array on the way).
 */
export function pathValues(doc: Doc, path: string): unknown[] {
  let values: unknown[] = [doc];
  for (const part of path.split('.')) {
    values = values
      .flatMap((v) => (Array.isArray(v) ? v : [v]))
      .map((v) => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[part] : undefined));
  }
  const out = values.flatMap((v) => (Array.isArray(v) ? (v.length === 0 ? [EMPTY_ARRAY] : v) : [v]));
  return out.length === 0 ? [undefined] : out;
}

/** Whether an index key is an empty array's. */
export function isEmptyArrayKey(key: SQLInputValue): boolean {
  return key instanceof Uint8Array && key.length === 1 && key[0] === EMPTY;
}

/** A value as an index column holds it. */
export function toKey(value: unknown): SQLInputValue {
  if (value === EMPTY_ARRAY) return Uint8Array.of(EMPTY);
  if (value === undefined || value === null) return NULL_KEY;
  if (typeof value === 'number') return Number.isNaN(value) ? NULL_KEY : value;
  // Well-formed: SQLite binds a lone surrogate as U+FFFD, and the keys column's JSON would give an
  // index build another string (bulk-load.ts).
  if (typeof value === 'string') return value.toWellFormed();
  if (typeof value === 'boolean') return Uint8Array.of(BOOLEAN, value ? 1 : 0);
  const json = Buffer.from(JSON.stringify(value));
  const out = new Uint8Array(json.length + 1);
  out[0] = Array.isArray(value) ? ARRAY : OBJECT;
  out.set(json, 1);
  return out;
}

/** Whether an index column can be pinned by this filter value (a scalar the key encodes exactly). */
export function isKeyable(value: unknown): boolean {
  return value === null || ['number', 'string', 'boolean'].includes(typeof value);
}

/** Identity of a key within one document's entries (blobs compare by content). */
function keyText(key: SQLInputValue): string {
  if (key instanceof Uint8Array) return `b${Buffer.from(key).toString('hex')}`;
  return `${typeof key}:${String(key)}`;
}

/**
 * The index entries of a document: the key columns of each, one entry per element where a field holds
 * an array (multikey), as `pathValues` reaches them. Entries are unique.
 */
export function entriesOf(fields: readonly string[], doc: Doc): SQLInputValue[][] {
  let entries: SQLInputValue[][] = [[]];
  for (const field of fields) {
    const direct = field.includes('.') ? undefined : (doc as Record<string, unknown>)[field];
    if (direct !== undefined && !Array.isArray(direct)) {
      // One value, the common case: each entry (each its own array) gains the same key in place.
      const key = toKey(direct);
      for (const entry of entries) entry.push(key);
      continue;
    }
    const values = pathValues(doc, field);
    const keys = new Map<string, SQLInputValue>();
    for (const v of values) {
      const k = toKey(v);
      keys.set(keyText(k), k);
    }
    entries = entries.flatMap((e) => [...keys.values()].map((k) => [...e, k]));
  }
  return entries;
}

/** Whether two documents' entries are the same (most rewrites leave an index untouched). */
export function sameEntries(a: SQLInputValue[][], b: SQLInputValue[][]): boolean {
  return (
    a.length === b.length &&
    a.every((e, i) => e.length === b[i].length && e.every((k, j) => keyText(k) === keyText(b[i][j])))
  );
}

function rank(v: unknown): number {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'number' || typeof v === 'bigint') return 1;
  if (typeof v === 'string') return 2;
  return 3;
}

/** SQLite's order of two column values (BINARY collation): merges index walks in JavaScript. */
export function compareKeys(a: unknown, b: unknown): number {
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (ra === 0) return 0;
  if (ra === 1) return Number(a) - Number(b);
  if (ra === 2) return a === b ? 0 : Buffer.compare(Buffer.from(a as string), Buffer.from(b as string));
  return Buffer.compare(a as Uint8Array, b as Uint8Array);
}
