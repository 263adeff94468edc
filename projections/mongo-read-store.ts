/**
 * MongoDB ReadStore on the `mongodb` driver. A collection of the port is a MongoDB collection of the
 * same name; filters and update documents pass through unchanged (they are MongoDB's own languages).
 *
 * - `find` sorts by `totalSort` (so `_id` breaks ties) and turns an `after` cursor into a filter with
 *   `afterFilter`, combined with the caller's filter through `$and`.
 * - `bulkWrite` is one ordered bulk write: it stops at the first failing operation.
 * - Shadows are real collections `<name>__shadow_<n>` with the same indexes; `promote` renames each over
 *   the live name with `dropTarget` (atomic per collection), so handles, which address collections by
 *   name, reach the new contents at once.
 * - Checkpoints live in the `_checkpoints` collection, one document per projection name.
 * - Documents come back as plain values: driver types (Long, Decimal128, ObjectId, …) are converted.
 */
import {
  type AnyBulkWriteOperation,
  type Db,
  MongoClient,
  MongoClientClosedError,
  type Collection as MongoCollection,
  type Filter as MongoFilter,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  type Sort,
} from 'mongodb';
import {
  afterFilter,
  type Checkpoint,
  type Collection,
  type Doc,
  type Filter,
  type FindOptions,
  type IndexSpec,
  type ReadStore,
  totalSort,
  type Update,
  type WriteOp,
} from './read-store.ts';

export interface MongoReadStoreOptions {
  /** The database; defaults to the one named in the URL (else the driver's default, `test`). */
  dbName?: string;
}

/** MongoDB can't be reached (at connect time or later): a deployment problem, not a query problem. */
export class ReadStoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReadStoreUnavailableError';
  }
}

const CHECKPOINTS = '_checkpoints';
const SHADOW_SEPARATOR = '__shadow_';

/** The URL without credentials, for messages. */
function redact(url: string): string {
  return url.replace(/^([a-z+]+:\/\/)[^@/]*@/i, '$1***@');
}

function isConnectionFailure(err: unknown): boolean {
  return (
    err instanceof MongoServerSelectionError ||
    err instanceof MongoNetworkError ||
    err instanceof MongoNotConnectedError ||
    err instanceof MongoTopologyClosedError ||
    err instanceof MongoClientClosedError
  );
}

// ---- values out of the driver ---------------------------------------------------------------------

const NUMERIC_BSON = new Set(['Long', 'Decimal128', 'Int32', 'Double']);

/** A driver value type (BSON wrapper) as the plain value the port promises: a number or a string. */
function fromBson(type: string, value: object): unknown {
  return NUMERIC_BSON.has(type) ? Number(String(value)) : String(value); // ObjectId: its hex string
}

function plain(value: unknown): unknown {
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

/** The port's write operation as the driver's, refusing what the in-memory adapter refuses too. */
function toModel(op: WriteOp): AnyBulkWriteOperation<Doc> {
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

async function ensureIndexes(coll: MongoCollection<Doc>, indexes: readonly IndexSpec[]): Promise<void> {
  for (const spec of indexes) {
    // createIndex with the same keys and options is a no-op, so declaring indexes again is idempotent.
    const keys = new Map(spec.keys.map(([field, direction]) => [field, direction] as const));
    await coll.createIndex(keys, spec.unique ? { unique: true } : {});
  }
}

// ---- the store ---------------------------------------------------------------------------------------

async function connect(
  url: string,
  where: string,
  dbName: string | undefined,
): Promise<{ client: MongoClient; db: Db }> {
  let client: MongoClient | undefined;
  try {
    // ignoreUndefined: a field set to undefined is left out, as JSON would, instead of stored as null.
    client = new MongoClient(url, { ignoreUndefined: true });
    await client.connect();
    const db = client.db(dbName);
    await db.command({ ping: 1 });
    return { client, db };
  } catch (err) {
    await client?.close().catch(() => {});
    const reason = err instanceof Error ? err.message : String(err);
    throw new ReadStoreUnavailableError(`cannot connect to MongoDB at ${where}: ${reason}`, { cause: err });
  }
}

export async function createMongoReadStore(
  url: string,
  options: MongoReadStoreOptions = {},
): Promise<ReadStore> {
  const where = redact(url);
  const { client: mongo, db } = await connect(url, where, options.dbName);

  /** Runs a driver call, reporting a lost connection as ReadStoreUnavailableError. */
  async function guard<R>(fn: () => Promise<R>): Promise<R> {
    try {
      return await fn();
    } catch (err) {
      if (isConnectionFailure(err)) {
        throw new ReadStoreUnavailableError(`MongoDB at ${where} is unreachable: ${(err as Error).message}`, {
          cause: err,
        });
      }
      throw err;
    }
  }

  function handle<T extends Doc>(name: string): Collection<T> {
    // The driver's collection is only a name: after a rename over it, it reaches the new collection.
    const coll = db.collection<Doc>(name);
    return {
      name,
      findOne: (filter) =>
        guard(async () => {
          // Lowest _id first, as the in-memory adapter answers, when several documents match.
          const doc = await coll.findOne(filter as MongoFilter<Doc>, { sort: [['_id', 1]] });
          return doc === null ? null : (plain(doc) as T);
        }),
      findByIds: (ids) =>
        guard(async () => {
          if (ids.length === 0) return [];
          const docs = await coll.find({ _id: { $in: [...new Set(ids)] } }).toArray();
          return docs.map((d) => plain(d) as T);
        }),
      find: (filter: Filter, opts: FindOptions = {}) =>
        guard(async () => {
          // MongoDB reads a limit of 0 as "no limit"; the port means no documents.
          if (opts.limit !== undefined && opts.limit <= 0) return [];
          const sort = totalSort(opts.sort);
          const query = opts.after ? { $and: [filter, afterFilter(sort, opts.after)] } : filter;
          const docs = await coll
            .find(query as MongoFilter<Doc>, {
              sort: sort as Sort,
              ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
            })
            .toArray();
          return docs.map((d) => plain(d) as T);
        }),
      count: (filter = {}) => guard(() => coll.countDocuments(filter as MongoFilter<Doc>)),
      bulkWrite: (ops) =>
        guard(async () => {
          if (ops.length === 0) return; // the driver refuses an empty batch
          const models = ops.map((op) => toModel(op as WriteOp));
          await coll.bulkWrite(models, { ordered: true });
        }),
    };
  }

  /** Shadows this store created and hasn't promoted or dropped: handle → live name. */
  const shadows = new WeakMap<Collection, { live: string }>();
  let shadowSeq = 0;

  /** A new, empty collection named `<name>__shadow_<n>`, n above every shadow of `name` that exists. */
  async function newShadowCollection(name: string): Promise<string> {
    const stem = `${name}${SHADOW_SEPARATOR}`;
    const existing = await db.listCollections({}, { nameOnly: true }).toArray();
    for (const { name: other } of existing) {
      if (other.startsWith(stem) && /^\d+$/.test(other.slice(stem.length))) {
        shadowSeq = Math.max(shadowSeq, Number(other.slice(stem.length)));
      }
    }
    shadowSeq += 1;
    const shadowName = `${stem}${shadowSeq}`;
    // Created explicitly: a rebuild that writes nothing must still promote to an empty collection.
    // (MongoDB 7+ answers `create` of an existing identical collection with success, so uniqueness rests
    // on the numbering above: one rebuild of a collection at a time.)
    await db.createCollection(shadowName);
    return shadowName;
  }

  return {
    kind: 'mongodb',
    collection: <T extends Doc = Doc>(name: string, indexes: readonly IndexSpec[] = []) =>
      guard(async () => {
        await ensureIndexes(db.collection(name), indexes);
        return handle<T>(name);
      }),
    createShadow: <T extends Doc = Doc>(name: string, indexes: readonly IndexSpec[] = []) =>
      guard(async () => {
        const shadowName = await newShadowCollection(name);
        await ensureIndexes(db.collection(shadowName), indexes);
        const shadow = handle<T>(shadowName);
        shadows.set(shadow as Collection, { live: name });
        return shadow;
      }),
    promote: (list) =>
      guard(async () => {
        for (const shadow of list) {
          if (!shadows.has(shadow)) throw new Error(`${shadow.name} is not a shadow of this store`);
        }
        for (const shadow of list) {
          const { live } = shadows.get(shadow) as { live: string };
          await db.renameCollection(shadow.name, live, { dropTarget: true });
          shadows.delete(shadow);
        }
      }),
    dropShadow: (shadow) =>
      guard(async () => {
        if (!shadows.has(shadow)) return;
        shadows.delete(shadow);
        await db.dropCollection(shadow.name);
      }),
    getCheckpoint: (name) =>
      guard(async () => {
        const doc = await db.collection<{ _id: string } & Checkpoint>(CHECKPOINTS).findOne({ _id: name });
        if (!doc) return undefined;
        const { position, events, updated_at } = plain(doc) as Checkpoint;
        return { position, events, updated_at };
      }),
    setCheckpoint: (name, checkpoint) =>
      guard(async () => {
        const { position, events, updated_at } = checkpoint;
        await db
          .collection<{ _id: string } & Checkpoint>(CHECKPOINTS)
          .replaceOne({ _id: name }, { position, events, updated_at }, { upsert: true });
      }),
    close: () => mongo.close(),
  };
}
