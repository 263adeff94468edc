/**
 * MongoDB's document size limit in the SQLite read store (docs/read-side.md, "Read stores"): a document
 * whose BSON would be over 16 MiB is refused here too, so a read model that outgrows MongoDB fails on
 * the embedded store first, and the same way.
 *
 * The size is what the `mongodb` driver would serialize (integers in the int32 range as int32, other
 * numbers as doubles, a field set to undefined left out), counted on the document: exact for JSON
 * values, and larger than the driver's for a Date (counted as the ISO string JSON stores) and for
 * `undefined` in an array (counted as null). It errs on the refusing side only.
 */
import { type Doc, DocumentTooLargeError, MAX_DOCUMENT_BYTES } from '../read-store.ts';

const INT32_MIN = -0x80000000;
const INT32_MAX = 0x7fffffff;

/**
 * Each UTF-16 unit of a document's JSON stands for at most 10 bytes of its BSON (an array element
 * `0,` is 2 units and at most 1 + 8 + 4 bytes): JSON shorter than this is far below the limit, and
 * most documents are not counted at all.
 */
const SURELY_SMALL_JSON = Math.floor(MAX_DOCUMENT_BYTES / 10);

function elementSize(key: string, value: unknown): number {
  return 1 + Buffer.byteLength(key, 'utf8') + 1 + valueSize(value);
}

function valueSize(value: unknown): number {
  switch (typeof value) {
    case 'number': {
      // As the driver: an integer of the int32 range is an int32, anything else (-0 too) a double.
      const n = value as number;
      return Number.isInteger(n) && n >= INT32_MIN && n <= INT32_MAX && !Object.is(n, -0) ? 4 : 8;
    }
    case 'string':
      return 4 + Buffer.byteLength(value as string, 'utf8') + 1;
    case 'boolean':
      return 1;
    case 'bigint':
      return 8;
    case 'object': {
      if (value === null) return 0;
      const json = (value as { toJSON?: () => unknown }).toJSON;
      if (typeof json === 'function') return valueSize(json.call(value));
      return Array.isArray(value) ? arraySize(value) : objectSize(value as Record<string, unknown>);
    }
    default:
      return 0; // undefined, a function, a symbol: not stored
  }
}

function objectSize(obj: Record<string, unknown>): number {
  let size = 4 + 1;
  for (const [key, value] of Object.entries(obj)) {
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol') continue;
    size += elementSize(key, value);
  }
  return size;
}

function arraySize(list: readonly unknown[]): number {
  let size = 4 + 1;
  for (let i = 0; i < list.length; i++) size += elementSize(String(i), list[i]);
  return size;
}

/** A document's BSON size as the module's comment says (at least the driver's). */
export function bsonSize(doc: Doc): number {
  return objectSize(doc);
}

/** Refuses a document over MAX_DOCUMENT_BYTES; `json` is its JSON text, which rules most out cheaply. */
export function assertDocumentSize(collection: string, doc: Doc, json: string): void {
  if (json.length <= SURELY_SMALL_JSON) return;
  const bytes = bsonSize(doc);
  if (bytes > MAX_DOCUMENT_BYTES) throw new DocumentTooLargeError(collection, doc._id, bytes);
}
