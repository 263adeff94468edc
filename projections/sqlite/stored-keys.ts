/**
 * A document's index entries as its row keeps them (the `keys` column), so a rewrite finds the entries
 * to remove, and whether any changed, without reading the index tables.
 */
import type { SQLInputValue } from 'node:sqlite';
import { NULL_KEY } from './keys.ts';

/**
 * A document's index entries as its row keeps them, by index table: each index's entries as JSON text
 * (blobs as {"b": hex}; null for the null key, -Infinity, which JSON cannot hold), so a rewrite
 * compares one string per index.
 */
export type StoredKeys = Record<string, string>;

/** One entry as JSON text: equal entries have equal texts. */
export function entryText(entry: SQLInputValue[]): string {
  return JSON.stringify(
    entry.map((k) =>
      k instanceof Uint8Array ? { b: Buffer.from(k).toString('hex') } : k === NULL_KEY ? null : k,
    ),
  );
}

export function decodeEntries(text: string): SQLInputValue[][] {
  return decodeParsed(JSON.parse(text) as unknown[][]);
}

/** Stored entries already parsed from their JSON text, back to SQLite values. */
export function decodeParsed(entries: unknown[][]): SQLInputValue[][] {
  return entries.map((e) =>
    e.map((k) => {
      if (k === null) return NULL_KEY;
      if (typeof k === 'object') return new Uint8Array(Buffer.from((k as { b: string }).b, 'hex'));
      return k as SQLInputValue;
    }),
  );
}
