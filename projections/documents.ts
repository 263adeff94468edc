/**
 * What both document adapters of the ReadStore port (in memory and SQLite) need of MongoDB's
 * semantics beyond mingo: the paths an index holds, the single-field conditions a filter pins an
 * index by, compiled filters, and update/upsert application.
 */

import { LRUCache } from 'lru-cache';
import { Context } from 'mingo/core';
import * as queryOperators from 'mingo/operators/query';
import { Query } from 'mingo/query';
import { update as applyUpdate } from 'mingo/updater';
import type { Doc, DocId, Filter, IndexSpec, SortSpec, Update } from './read-store.ts';

export function getPath(doc: unknown, path: string): unknown {
  let v: unknown = doc;
  for (const part of path.split('.')) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

export interface FieldCondition {
  eq?: unknown[];
  low?: { value: unknown; inclusive: boolean };
  high?: { value: unknown; inclusive: boolean };
}

const RANGE_OPS = new Set(['$gt', '$gte', '$lt', '$lte', '$eq', '$in']);

/** The conditions on single fields that an index can serve (from the top level and `$and`). */
export function fieldConditions(filter: Filter): Map<string, FieldCondition> {
  const out = new Map<string, FieldCondition>();
  const visit = (f: Filter) => {
    for (const [field, cond] of Object.entries(f)) {
      if (field === '$and' && Array.isArray(cond)) {
        for (const sub of cond) visit(sub as Filter);
        continue;
      }
      if (field.startsWith('$')) continue;
      const c = out.get(field) ?? {};
      const isOps =
        cond !== null &&
        typeof cond === 'object' &&
        !Array.isArray(cond) &&
        Object.keys(cond).length > 0 &&
        Object.keys(cond).every((k) => k.startsWith('$'));
      if (!isOps) {
        if (Array.isArray(cond) || (cond !== null && typeof cond === 'object')) continue;
        c.eq = [cond];
      } else {
        const ops = cond as Record<string, unknown>;
        if (!Object.keys(ops).every((k) => RANGE_OPS.has(k))) continue;
        if ('$eq' in ops && (ops.$eq === null || typeof ops.$eq !== 'object')) c.eq = [ops.$eq];
        if (
          '$in' in ops &&
          Array.isArray(ops.$in) &&
          ops.$in.every((x) => x === null || typeof x !== 'object')
        ) {
          c.eq = ops.$in;
        }
        if ('$gt' in ops) c.low = { value: ops.$gt, inclusive: false };
        if ('$gte' in ops) c.low = { value: ops.$gte, inclusive: true };
        if ('$lt' in ops) c.high = { value: ops.$lt, inclusive: false };
        if ('$lte' in ops) c.high = { value: ops.$lte, inclusive: true };
      }
      out.set(field, c);
    }
  };
  visit(filter);
  return out;
}

/**
 * The fields an index is walked by. A trailing ascending `_id` key is the order every entry already
 * ends with (entries are [...values, _id]): as in MongoDB, an index [f, _id] serves what [f] serves.
 */
export function walkFields(spec: IndexSpec): string[] {
  const fields = spec.keys.map(([f]) => f);
  const last = spec.keys[spec.keys.length - 1];
  return last[0] === '_id' && last[1] === 1 ? fields.slice(0, -1) : fields;
}

/**
 * Compiled mingo queries by filter text. Compiling a filter costs more than walking an index page, and
 * a service asks the same shapes over and over (a key's store, a cursor): the most recent are kept.
 */
const COMPILED_LIMIT = 1_000;
const compiled = new LRUCache<string, Query>({ max: COMPILED_LIMIT });

/**
 * The query operators, and nothing else: filters are built by the code, never taken from a request, and
 * use none of the aggregation expressions. Importing mingo's index instead loads and registers every
 * operator it has, 70 ms of every start (docs/read-side.md, "Start-up and restart").
 */
const QUERY_OPTIONS = { context: Context.init({ query: queryOperators }) };

/** What the adapters ask of a compiled filter. */
export interface Matcher {
  test(doc: Doc): boolean;
}

/**
 * A filter of top-level fields each equal to a string, a number or a boolean (a key's lookup, a menu
 * product of a store): matched without mingo, as MongoDB does, by the value or an element of an array
 * holding it. Such filters differ per request (the id), so compiling each would cost more than the query.
 */
function plainEquality(filter: Filter): Matcher | undefined {
  const pairs = Object.entries(filter);
  for (const [field, value] of pairs) {
    if (field.startsWith('$') || field.includes('.')) return undefined;
    if (typeof value !== 'string' && typeof value !== 'boolean' && !Number.isFinite(value)) return undefined;
  }
  return {
    test(doc) {
      for (const [field, value] of pairs) {
        const v = (doc as Record<string, unknown>)[field];
        if (v !== value && !(Array.isArray(v) && v.includes(value))) return false;
      }
      return true;
    },
  };
}

export function compiledQuery(filter: Filter): Matcher {
  const plain = plainEquality(filter);
  if (plain) return plain;
  let key: string;
  try {
    key = JSON.stringify(filter);
  } catch {
    return new Query(filter, QUERY_OPTIONS); // not serialisable (a cycle): no caching
  }
  // JSON cannot tell these apart from other values: filters holding one are compiled every time.
  if (hasSpecialValue(filter)) return new Query(filter, QUERY_OPTIONS);
  let query = compiled.get(key);
  if (!query) {
    query = new Query(filter, QUERY_OPTIONS);
    compiled.set(key, query);
  }
  return query;
}

/** Values JSON loses or confuses: a RegExp, a Date, a function, undefined, a bigint. */
function hasSpecialValue(value: unknown): boolean {
  if (value === undefined || typeof value === 'function' || typeof value === 'bigint') return true;
  if (value instanceof RegExp || value instanceof Date) return true;
  if (Array.isArray(value)) return value.some(hasSpecialValue);
  if (value && typeof value === 'object') return Object.values(value).some(hasSpecialValue);
  return false;
}

/** At most this many index walks are merged for one query (MongoDB's default bound for SORT_MERGE). */
export const MAX_MERGED_WALKS = 200;

export function clone<T>(value: T): T {
  return structuredClone(value);
}

export function upsertSeed(filter: Filter): Doc {
  const seed: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(filter)) {
    if (!k.startsWith('$') && !k.includes('.') && (v === null || typeof v !== 'object')) seed[k] = v;
  }
  return seed as Doc;
}

export function applyTo(doc: Doc, update: Update): Doc {
  const next = clone(doc);
  if (Object.keys(update).some((k) => !k.startsWith('$'))) {
    throw new Error('an update document must use update operators ($set, $inc, …)');
  }
  // Values in the update (e.g. a $push) are copied too, so the caller's objects never end up stored.
  applyUpdate(next, clone(update) as never, undefined, undefined, { queryOptions: QUERY_OPTIONS });
  if (next._id !== doc._id) throw new Error('an update cannot change _id');
  return next;
}

/** The id a filter names when it is exactly `{ _id: <scalar> }` (the projector's writes): no query needed. */
export function onlyId(filter: Filter): DocId | undefined {
  const keys = Object.keys(filter);
  const id = filter._id;
  return keys.length === 1 && (typeof id === 'string' || typeof id === 'number') ? id : undefined;
}

function typeRank(v: unknown): number {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number') return 1;
  if (typeof v === 'string') return 2;
  if (typeof v === 'object') return 3;
  if (typeof v === 'boolean') return 5;
  return 6;
}

/** MongoDB's order of two values of the types read models hold. */
export function compareValues(a: unknown, b: unknown): number {
  const ra = typeRank(a);
  const rb = typeRank(b);
  if (ra !== rb) return ra - rb;
  if (ra === 0) return 0;
  if (ra === 1) return (a as number) - (b as number);
  if (ra === 2) return a === b ? 0 : (a as string) < (b as string) ? -1 : 1;
  if (ra === 5) return Number(a) - Number(b);
  const sa = JSON.stringify(a);
  const sb = JSON.stringify(b);
  return sa === sb ? 0 : sa < sb ? -1 : 1;
}

/** Compares documents by a sort specification. */
export function sortComparator(sort: SortSpec) {
  return (a: Doc, b: Doc): number => {
    for (const [field, dir] of sort) {
      const c = compareValues(getPath(a, field), getPath(b, field));
      if (c !== 0) return dir === 1 ? c : -c;
    }
    return 0;
  };
}

/** A stand-in document holding the cursor values at the sort paths, to compare documents against. */
export function afterDoc(sort: SortSpec, after: readonly unknown[]): Doc {
  const doc: Record<string, unknown> = {};
  sort.forEach(([field], i) => {
    const parts = field.split('.');
    let target = doc;
    for (const p of parts.slice(0, -1)) {
      target[p] = (target[p] as Record<string, unknown>) ?? {};
      target = target[p] as Record<string, unknown>;
    }
    target[parts[parts.length - 1]] = after[i];
  });
  return doc as Doc;
}
