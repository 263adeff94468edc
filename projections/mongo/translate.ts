/**
 * Translation between the read-store port and the `mongodb` driver. Filters and update documents pass
 * through unchanged (they are MongoDB's own languages); write operations become the driver's bulk
 * models, refusing what the SQLite adapter refuses too, and documents come back as plain values:
 * driver types (Long, Decimal128, ObjectId, …) are converted.
 */
import {
  type AnyBulkWriteOperation,
  BSON,
  type Filter as MongoFilter,
  MongoInvalidArgumentError,
  MongoServerError,
} from 'mongodb';
import {
  type Doc,
  type DocId,
  DocumentTooLargeError,
  MAX_DOCUMENT_BYTES,
  type Update,
  type WriteOp,
} from '../read-store.ts';

// ---- values out of the driver ---------------------------------------------------------------------

const NUMERIC_BSON = new Set(['Long', 'Decimal128', 'Int32', 'Double']);

/** A driver value type (BSON wrapper) as the plain value the port promises: a number or a string. */
function fromBson(type: string, value: object): unknown {
  return NUMERIC_BSON.has(type) ? Number(String(value)) : String(value); // ObjectId: its hex string
}

export function plain(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  if (Array.isArray(value)) return value.map(plain);
  const bsonType = (value as { _bsontype?: unknown })._bsontype;
  if (typeof bsonType === 'string') return fromBson(bsonType, value);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = plain(v);
  return out;
}

// ---- writes ----------------------------------------------------------------------------------------

function assertOperators(update: Update): void {
  if (Object.keys(update).some((k) => !k.startsWith('$'))) {
    throw new Error('an update document must use update operators ($set, $inc, …)');
  }
}

/** The port's write operation as the driver's, refusing what the SQLite adapter refuses too. */
export function toModel(op: WriteOp): AnyBulkWriteOperation<Doc> {
  if ('insertOne' in op) {
    // A duplicate `_id` fails the insert with E11000 (passed as it is, as every duplicate key).
    const { document } = op.insertOne;
    if (typeof document._id !== 'string' && typeof document._id !== 'number') {
      throw new Error('an insert needs _id'); // MongoDB would otherwise invent an ObjectId
    }
    return { insertOne: { document } };
  }
  if ('replaceOne' in op) {
    const { filter, replacement, upsert } = op.replaceOne;
    return { replaceOne: { filter: filter as MongoFilter<Doc>, replacement, upsert: upsert ?? false } };
  }
  if ('updateOne' in op) {
    const { filter, update, upsert } = op.updateOne;
    assertOperators(update);
    // The inserted document takes its _id from the filter (MongoDB would otherwise invent an ObjectId).
    const id = filter._id;
    if (upsert && (id === undefined || (id !== null && typeof id === 'object'))) {
      throw new Error('an upsert needs _id in its filter');
    }
    return { updateOne: { filter: filter as MongoFilter<Doc>, update, upsert: upsert ?? false } };
  }
  if ('updateMany' in op) {
    assertOperators(op.updateMany.update);
    return { updateMany: { filter: op.updateMany.filter as MongoFilter<Doc>, update: op.updateMany.update } };
  }
  if ('deleteOne' in op) return { deleteOne: { filter: op.deleteOne.filter as MongoFilter<Doc> } };
  return { deleteMany: { filter: op.deleteMany.filter as MongoFilter<Doc> } };
}

// ---- the document size limit ------------------------------------------------------------------------

const SIZE_OPTIONS = { ignoreUndefined: true } as const;

/**
 * The first replacement or insert MongoDB would refuse for its size, as DocumentTooLargeError with its
 * index, so it is refused before it is sent, naming it: a document over the limit, or one whose write
 * statement (`{ q: filter, u: document, upsert }`, or an insert's document, what the driver measures)
 * reaches it, a few bytes more.
 */
export function firstTooLarge(
  collection: string,
  ops: readonly WriteOp[],
): { index: number; error: DocumentTooLargeError } | undefined {
  for (let index = 0; index < ops.length; index++) {
    const op = ops[index];
    if ('insertOne' in op) {
      // An insert's statement is the document itself, which the driver refuses at the limit.
      const { document } = op.insertOne;
      const bytes = BSON.calculateObjectSize(document, SIZE_OPTIONS);
      if (bytes >= MAX_DOCUMENT_BYTES)
        return { index, error: new DocumentTooLargeError(collection, document._id, bytes) };
      continue;
    }
    if (!('replaceOne' in op)) continue;
    const { filter, replacement, upsert } = op.replaceOne;
    const bytes = BSON.calculateObjectSize(replacement, SIZE_OPTIONS);
    // The statement is the two documents and about 20 bytes: most are far below, and not measured.
    if (bytes + BSON.calculateObjectSize(filter, SIZE_OPTIONS) + 64 < MAX_DOCUMENT_BYTES) continue;
    const statement = { q: filter, u: replacement, upsert: upsert ?? false };
    const sent = BSON.calculateObjectSize(statement, SIZE_OPTIONS);
    if (bytes > MAX_DOCUMENT_BYTES || sent >= MAX_DOCUMENT_BYTES) {
      // The document's size, or its statement's when only that is over.
      const measured = bytes > MAX_DOCUMENT_BYTES ? bytes : sent;
      return { index, error: new DocumentTooLargeError(collection, replacement._id, measured) };
    }
  }
  return undefined;
}

/**
 * Server codes of a document over the limit: an update's result (17419), an upsert's new document
 * (17420, 7655103 on newer servers), a BSON object too large (10334).
 */
const TOO_LARGE_CODES = new Set([10334, 17419, 17420, 7655103]);

/** The `_id` an operation's filter (or an insert's document) names, when it names one plainly. */
function idOf(op: WriteOp | undefined): DocId | undefined {
  if (!op) return undefined;
  if ('insertOne' in op) return op.insertOne.document._id;
  const filter =
    'replaceOne' in op ? op.replaceOne.filter : 'updateOne' in op ? op.updateOne.filter : undefined;
  const id = filter?._id;
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}

/**
 * A bulk write's failure as the port names it: a document over the limit, refused by the server (an
 * update whose result outgrew it) or by the driver (which measures the whole write statement, a few
 * bytes more than the document), is DocumentTooLargeError; anything else is returned as is.
 */
export function writeFailure(err: unknown, collection: string, ops: readonly WriteOp[]): unknown {
  if (err instanceof MongoInvalidArgumentError && /larger than the maximum size/.test(err.message)) {
    let largest = { index: -1, bytes: 0 };
    ops.forEach((op, index) => {
      const document =
        'insertOne' in op
          ? op.insertOne.document
          : 'replaceOne' in op
            ? op.replaceOne.replacement
            : undefined;
      if (!document) return;
      const bytes = BSON.calculateObjectSize(document, SIZE_OPTIONS);
      if (bytes > largest.bytes) largest = { index, bytes };
    });
    const bytes = largest.index < 0 ? undefined : largest.bytes;
    return new DocumentTooLargeError(collection, idOf(ops[largest.index]), bytes, { cause: err });
  }
  if (!(err instanceof MongoServerError)) return err;
  const raw = (err as { writeErrors?: unknown }).writeErrors;
  const first = (Array.isArray(raw) ? raw[0] : raw) as { code?: unknown; index?: unknown } | undefined;
  const code = first?.code ?? err.code;
  if (typeof code !== 'number' || !TOO_LARGE_CODES.has(code)) return err;
  const index = typeof first?.index === 'number' ? first.index : -1;
  return new DocumentTooLargeError(collection, idOf(ops[index]), undefined, { cause: err });
}
