/**
 * The filters of the SQLite read store, as mingo checks them, with strings compared as MongoDB does
 * (docs/read-side.md, "Read stores"): mingo's `$gt`, `$gte`, `$lt` and `$lte` compare strings with
 * JavaScript's `<` (UTF-16 code units), which puts '😀' before '\uFFFD'; MongoDB and the index keys
 * compare code points (UTF-8 bytes). A filter with a string bound gets these four operators instead;
 * every other filter is the shared compiled query.
 */
import { LRUCache } from 'lru-cache';
import { Context } from 'mingo/core';
import * as queryOperators from 'mingo/operators/query';
import { Query } from 'mingo/query';
import { compiledQuery, type Matcher } from '../documents.ts';
import { compareStrings, type Doc, type Filter } from '../read-store.ts';
import { pathValues } from './keys.ts';

type Test = (a: number) => boolean;

/**
 * A comparison operator that compares a string bound by code point, with MongoDB's type bracketing
 * (only strings are compared with a string), on the value or any element of an array it reaches.
 */
function stringAware(inner: typeof queryOperators.$gt, holds: Test) {
  return (selector: string, value: unknown, options: Parameters<typeof inner>[2]) => {
    // A position in the path ('lines.0.sku') is left to mingo, which follows it.
    if (typeof value !== 'string' || /(^|\.)\d+(\.|$)/.test(selector)) return inner(selector, value, options);
    const test = (v: unknown) => typeof v === 'string' && holds(compareStrings(v, value));
    if (selector.includes('.'))
      return (doc: Record<string, unknown>) => pathValues(doc as Doc, selector).some(test);
    // A top-level field (an `updated_at` bound): its value, or the elements of its array.
    return (doc: Record<string, unknown>) => {
      const v = doc[selector];
      return Array.isArray(v) ? v.some(test) : test(v);
    };
  };
}

const OPTIONS = {
  context: Context.init({
    query: {
      ...queryOperators,
      $gt: stringAware(queryOperators.$gt, (c) => c > 0),
      $gte: stringAware(queryOperators.$gte, (c) => c >= 0),
      $lt: stringAware(queryOperators.$lt, (c) => c < 0),
      $lte: stringAware(queryOperators.$lte, (c) => c <= 0),
    },
  }),
};

const RANGE = new Set(['$gt', '$gte', '$lt', '$lte']);

/** Whether a filter compares anything with a string bound (at any depth). */
function hasStringBound(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(hasStringBound);
  if (value === null || typeof value !== 'object') return false;
  return Object.entries(value).some(([k, v]) => (RANGE.has(k) && typeof v === 'string') || hasStringBound(v));
}

/** Whether JSON tells a filter apart from every other (no RegExp, Date, undefined, function…). */
function plainJson(value: unknown): boolean {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return true;
  if (Array.isArray(value)) return value.every(plainJson);
  return Object.getPrototypeOf(value) === Object.prototype && Object.values(value as object).every(plainJson);
}

/** Compiled filters with a string bound, by their JSON, the most recently used kept. */
const LIMIT = 200;
const compiled = new LRUCache<string, Query>({ max: LIMIT });

/** The matcher of a filter (see the module's comment). */
export function matcherOf(filter: Filter): Matcher {
  if (!hasStringBound(filter)) return compiledQuery(filter);
  if (!plainJson(filter)) return new Query(filter, OPTIONS);
  const key = JSON.stringify(filter);
  let query = compiled.get(key);
  if (!query) {
    query = new Query(filter, OPTIONS);
    compiled.set(key, query);
  }
  return query;
}
