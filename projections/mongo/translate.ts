/**
 * Translation between the read-store port and the `mongodb` driver. Filters and update documents pass
 * through unchanged (they are MongoDB's own languages); write operations become the driver's bulk
 * models, refusing what the SQLite adapter refuses too, and documents come back as plain values:
 * driver types (Long, Decimal128, ObjectId, …) are converted.
 */
import type { AnyBulkWriteOperation, Filter as MongoFilter } from 'mongodb';
import type { Doc, Update, WriteOp } from '../read-store.ts';

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
