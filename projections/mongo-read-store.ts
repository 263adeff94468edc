/**
 * MongoDB ReadStore on the `mongodb` driver. Filters and update documents pass through unchanged
 * (they are MongoDB's own languages).
 *
 * - `find` sorts by `totalSort` (so `_id` breaks ties) and turns an `after` cursor into a filter with
 *   `afterFilter`, combined with the caller's filter through `$and`.
 * - `bulkWrite` is one ordered bulk write: it stops at the first failing operation.
 * - Checkpoints live in the `_checkpoints` collection, one document per name (with its `version`).
 * - Documents come back as plain values: driver types (Long, Decimal128, ObjectId, …) are converted.
 *
 * Transactions. `commit` and `promote` each run in one transaction (`session.withTransaction`, every
 * operation given the session), so a projector batch and its checkpoint are applied together or not
 * at all. MongoDB offers transactions only on a replica set (one node is enough; docker-compose.yml
 * runs one) or a sharded cluster, so a standalone server is refused at start with an error saying how
 * to fix it: running without transactions would quietly lose the exactly-once guarantee.
 * `withTransaction` retries the whole transaction on a TransientTransactionError (write conflicts, a
 * failover, a lost connection) and the commit on an UnknownTransactionCommitResult, for up to 120 s;
 * any other error (a duplicate key, a refused update) aborts it and is thrown as is. The callbacks
 * therefore only issue the writes: operations are translated and checked before the transaction.
 * Every collection a transaction touches exists beforehand (`collection`, `createShadow` and the
 * start create them), as servers before 4.4 and sharded clusters require; DDL (create, rename, drop)
 * never runs inside one.
 *
 * Large commits. A commit is never split (a split would break all-or-nothing). MongoDB bounds a
 * transaction by time (60 s, `transactionLifetimeLimitSeconds`), by the storage cache it may dirty
 * (TransactionTooLargeForCache) and, before 4.2, by 16 MB of oplog; each document stays under 16 MB.
 * A commit refused for its size or duration is thrown as `CommitTooLargeError` (nothing of it
 * applied) so the caller can commit smaller batches; a projector batch (at most 1,000 events by
 * default) is far below these limits. A server that reports cache pressure as a WriteConflict instead
 * (a known server bug) makes `withTransaction` retry until its 120 s are spent; that error is thrown.
 *
 * Live names. A logical collection name resolves to a physical collection through one pointer
 * document (`_live`): a name without a pointer is its own physical collection (so a store written
 * before pointers existed keeps working), a shadow is a new physical collection `<name>__gen_<hex>`,
 * and `promote` changes the pointers of all its shadows in one write, in the transaction that also
 * stores its checkpoints. MongoDB can't rename collections in a transaction, and renaming one at a
 * time let readers see a mix of old and new collections; with one document, a reader resolves every
 * name from one version. The replaced collections are kept for `retiredGraceMs` and dropped after it
 * (by a timer in the promoting process, and by the next start or promote of any process).
 *
 * Each process caches the pointers for `liveNamesTtlMs` (1 s by default). The trade-off: reading the
 * pointer with every query would cost a second round trip per query (a partner page of 20 is one);
 * with the cache, a process pays one small read per second, and a process other than the promoting
 * one (an `api` replica) switches to the new collections up to one TTL after the promote, all of them
 * at once. The promoting process switches at once. The grace period (5 min by default) must exceed
 * the TTL plus the longest query plus clock skew between processes, so no reader still resolving the
 * old pointers meets a dropped collection (MongoDB would answer it as an empty one).
 */
import { randomBytes } from 'node:crypto';
import {
  type AnyBulkWriteOperation,
  type ClientSession,
  type Db,
  type Document,
  MongoClient,
  MongoClientClosedError,
  type Collection as MongoCollection,
  type Filter as MongoFilter,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  type Sort,
} from 'mongodb';
import { type Clock, systemClock } from '../domain/clock.ts';
import {
  afterFilter,
  type Checkpoint,
  type Collection,
  type Commit,
  type Doc,
  type Filter,
  type FindOptions,
  type IndexSpec,
  type NamedCheckpoint,
  type ReadStore,
  totalSort,
  type Update,
  type WriteOp,
} from './read-store.ts';

export interface MongoReadStoreOptions {
  /** The database; defaults to the one named in the URL (else the driver's default, `test`). */
  dbName?: string;
  /** How long this process trusts its copy of the live-name pointers before reading them again. */
  liveNamesTtlMs?: number;
  /** How long a collection a promote replaced is kept for readers still on the old pointers. */
  retiredGraceMs?: number;
  /** Times the pointer cache and the grace period (tests move it by hand). */
  clock?: Clock;
}

export const DEFAULT_LIVE_NAMES_TTL_MS = 1_000;
export const DEFAULT_RETIRED_GRACE_MS = 5 * 60_000;

/** The store, plus the cleanup it otherwise runs by itself (for operators' tools and tests). */
export interface MongoReadStore extends ReadStore {
  /** Drops the collections retired by promotes whose grace period has passed; returns their names. */
  dropRetired(): Promise<string[]>;
}

/** MongoDB can't be reached, or can't serve as the read store (at connect time or later): a deployment problem. */
export class ReadStoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReadStoreUnavailableError';
  }
}

/** MongoDB refused a commit for its size or duration: nothing of it was applied; commit less at a time. */
export class CommitTooLargeError extends Error {
  readonly operations: number;
  readonly collections: number;
  constructor(operations: number, collections: number, options: { cause: MongoServerError }) {
    const { codeName, code } = options.cause;
    super(
      `a commit of ${operations} write operations on ${collections} collections exceeds a MongoDB ` +
        `transaction limit (${codeName ?? code}); nothing of it was applied: commit smaller batches`,
      options,
    );
    this.name = 'CommitTooLargeError';
    this.operations = operations;
    this.collections = collections;
  }
}

const CHECKPOINTS = '_checkpoints';
const LIVE = '_live';
/** The one pointer document: every logical name's physical collection, and the retired ones. */
const POINTERS_ID = 'collections';
const GENERATION_SEPARATOR = '__gen_';

/** Server error codes of a transaction refused for its size or duration. */
const TOO_LARGE_CODES = new Set([
  257, // TransactionTooLarge: more than 16 MB of oplog (servers before 4.2)
  290, // TransactionExceededLifetimeLimitSeconds
  388, // TransactionTooLargeForCache
]);
const NAMESPACE_EXISTS = 48;

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

/**
 * Why the server behind a `hello` answer can't run transactions, or undefined when it can (a replica
 * set member or a mongos).
 */
export function transactionsProblem(hello: Document): string | undefined {
  if (hello.msg === 'isdbgrid' || typeof hello.setName === 'string') return undefined;
  if (hello.isreplicaset === true) {
    return 'is a replica set member whose set is not initiated yet (run rs.initiate() once)';
  }
  return 'is a standalone server';
}

/** A commit's failure as the caller should see it: CommitTooLargeError when a transaction limit refused it. */
export function commitFailure(err: unknown, operations: number, collections: number): unknown {
  if (err instanceof MongoServerError && typeof err.code === 'number' && TOO_LARGE_CODES.has(err.code)) {
    return new CommitTooLargeError(operations, collections, { cause: err });
  }
  return err;
}

// ---- live names --------------------------------------------------------------------------------------

/** Which physical collection serves each logical name; a name absent from it is its own collection. */
export interface LiveNames {
  version: number;
  physical: ReadonlyMap<string, string>;
}

export interface LiveNameCache {
  /** The pointers, read again when the copy is `maxAgeMs` old or more (or the clock went back). */
  get(maxAgeMs?: number): Promise<LiveNames>;
  /** Takes pointers this process just wrote (after its own promote), so it switches at once. */
  set(names: LiveNames): void;
}

/**
 * A per-process copy of the pointers. Concurrent reads share one fetch, and a fetched copy older
 * than the one held (a read that started before this process's promote) is not taken.
 */
export function liveNameCache(fetch: () => Promise<LiveNames>, clock: Clock, ttlMs: number): LiveNameCache {
  let held: { names: LiveNames; at: number } | undefined;
  let pending: Promise<LiveNames> | undefined;
  const take = (names: LiveNames, at: number): LiveNames => {
    if (!held || names.version >= held.names.version) held = { names, at };
    else held = { names: held.names, at };
    return held.names;
  };
  return {
    get(maxAgeMs = ttlMs) {
      const now = clock.now().getTime();
      if (held && now - held.at >= 0 && now - held.at < maxAgeMs) return Promise.resolve(held.names);
      pending ??= fetch()
        .then((names) => take(names, now))
        .finally(() => {
          pending = undefined;
        });
      return pending;
    },
    set(names) {
      take(names, clock.now().getTime());
    },
  };
}

interface PointerDoc {
  _id: string;
  version: number;
  live: Array<{ name: string; physical: string }>;
  /** Collections replaced by a promote, dropped once `since` is a grace period old. */
  retired: Array<{ physical: string; since: string }>;
}

function namesOf(doc: PointerDoc | null): LiveNames {
  return {
    version: doc?.version ?? 0,
    physical: new Map((doc?.live ?? []).map(({ name, physical }) => [name, physical])),
  };
}

// ---- checkpoints -------------------------------------------------------------------------------------

type CheckpointDoc = { _id: string } & Checkpoint;

/** The stored form: exactly the port's fields (a version only when there is one). */
function checkpointFields({ position, events, updated_at, version }: Checkpoint): Checkpoint {
  return version === undefined ? { position, events, updated_at } : { position, events, updated_at, version };
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

/** The port's write operation as the driver's, refusing what the SQLite adapter refuses too. */
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
    const problem = transactionsProblem(await db.command({ hello: 1 }));
    if (problem === undefined) return { client, db };
    await client.close();
    throw new ReadStoreUnavailableError(
      `MongoDB at ${where} ${problem}: the read store commits each projector batch with its checkpoint ` +
        'in one transaction, and MongoDB has transactions only on a replica set. One node is enough: ' +
        'start mongod with --replSet rs0, run rs.initiate() once, and name the set in the URL ' +
        '(?replicaSet=rs0), as docker-compose.yml does.',
    );
  } catch (err) {
    if (err instanceof ReadStoreUnavailableError) throw err;
    await client?.close().catch(() => {});
    const reason = err instanceof Error ? err.message : String(err);
    throw new ReadStoreUnavailableError(`cannot connect to MongoDB at ${where}: ${reason}`, { cause: err });
  }
}

/** A random suffix for a new physical collection: unique without scanning what exists. */
const generation = () => randomBytes(6).toString('hex');

export async function createMongoReadStore(
  url: string,
  options: MongoReadStoreOptions = {},
): Promise<MongoReadStore> {
  const where = redact(url);
  const clock = options.clock ?? systemClock;
  const graceMs = options.retiredGraceMs ?? DEFAULT_RETIRED_GRACE_MS;
  const { client: mongo, db } = await connect(url, where, options.dbName);
  const pointers = db.collection<PointerDoc>(LIVE);
  const checkpoints = db.collection<CheckpointDoc>(CHECKPOINTS);
  const names = liveNameCache(
    async () => namesOf(await pointers.findOne({ _id: POINTERS_ID })),
    clock,
    options.liveNamesTtlMs ?? DEFAULT_LIVE_NAMES_TTL_MS,
  );
  const sweeps = new Set<NodeJS.Timeout>();

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

  /** Creates the collection unless it exists, so no transaction has to (see the header). */
  async function ensureCollection(name: string): Promise<void> {
    try {
      await db.createCollection(name);
    } catch (err) {
      // Servers before 7.0 refuse to create an existing collection; later ones accept it.
      if (!(err instanceof MongoServerError && err.code === NAMESPACE_EXISTS)) throw err;
    }
  }

  async function physicalOf(name: string, maxAgeMs?: number): Promise<string> {
    return (await names.get(maxAgeMs)).physical.get(name) ?? name;
  }

  /** Runs `fn` in one transaction, retried by the driver as the header describes. */
  async function inTransaction(fn: (session: ClientSession) => Promise<void>): Promise<void> {
    const session = mongo.startSession();
    try {
      await session.withTransaction(fn, { readPreference: 'primary', writeConcern: { w: 'majority' } });
    } finally {
      await session.endSession();
    }
  }

  async function writeCheckpoints(list: readonly NamedCheckpoint[], session: ClientSession): Promise<void> {
    for (const { name, checkpoint } of list) {
      await checkpoints.replaceOne({ _id: name }, checkpointFields(checkpoint), { upsert: true, session });
    }
  }

  /**
   * Points each logical name of `moves` at its shadow in one write, retiring the collections they
   * replace. Reads the pointers inside the transaction: a concurrent promote makes one of the two
   * conflict, and the driver runs it again on the other's result.
   */
  async function movePointers(
    moves: ReadonlyArray<{ live: string; physical: string }>,
    session: ClientSession,
  ): Promise<LiveNames> {
    const doc = await pointers.findOne({ _id: POINTERS_ID }, { session });
    const current = new Map(namesOf(doc).physical);
    const since = clock.now().toISOString();
    const retired = [...(doc?.retired ?? [])];
    for (const { live, physical } of moves) {
      retired.push({ physical: current.get(live) ?? live, since });
      current.set(live, physical);
    }
    const version = (doc?.version ?? 0) + 1;
    const live = [...current].map(([name, physical]) => ({ name, physical }));
    await pointers.replaceOne({ _id: POINTERS_ID }, { version, live, retired }, { upsert: true, session });
    return { version, physical: current };
  }

  /** Driver handles by physical name, so a live handle's lookup allocates nothing. */
  const byPhysical = new Map<string, MongoCollection<Doc>>();
  function physicalCollection(physical: string): MongoCollection<Doc> {
    let coll = byPhysical.get(physical);
    if (!coll) {
      coll = db.collection<Doc>(physical);
      byPhysical.set(physical, coll);
    }
    return coll;
  }

  /** The physical collection behind every handle this store gave out (live: resolved at each use). */
  const targets = new WeakMap<Collection, () => Promise<MongoCollection<Doc>>>();

  function handle<T extends Doc>(name: string, target: () => Promise<MongoCollection<Doc>>): Collection<T> {
    const h: Collection<T> = {
      name,
      findOne: (filter) =>
        guard(async () => {
          // Lowest _id first, as the SQLite adapter answers, when several documents match.
          const doc = await (await target()).findOne(filter as MongoFilter<Doc>, { sort: [['_id', 1]] });
          return doc === null ? null : (plain(doc) as T);
        }),
      findByIds: (ids) =>
        guard(async () => {
          if (ids.length === 0) return [];
          const docs = await (await target()).find({ _id: { $in: [...new Set(ids)] } }).toArray();
          return docs.map((d) => plain(d) as T);
        }),
      find: (filter: Filter, opts: FindOptions = {}) =>
        guard(async () => {
          // MongoDB reads a limit of 0 as "no limit"; the port means no documents.
          if (opts.limit !== undefined && opts.limit <= 0) return [];
          const sort = totalSort(opts.sort);
          const query = opts.after ? { $and: [filter, afterFilter(sort, opts.after)] } : filter;
          const docs = await (await target())
            .find(query as MongoFilter<Doc>, {
              sort: sort as Sort,
              ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
            })
            .toArray();
          return docs.map((d) => plain(d) as T);
        }),
      count: (filter = {}) => guard(async () => (await target()).countDocuments(filter as MongoFilter<Doc>)),
      bulkWrite: (ops) =>
        guard(async () => {
          if (ops.length === 0) return; // the driver refuses an empty batch
          const models = ops.map((op) => toModel(op as WriteOp));
          await (await target()).bulkWrite(models, { ordered: true });
        }),
    };
    targets.set(h as Collection, target);
    return h;
  }

  /** Shadows this store created and hasn't promoted or dropped: handle → logical and physical names. */
  const shadows = new WeakMap<Collection, { live: string; physical: string }>();

  /** Drops retired collections whose grace period has passed (never one that is live). */
  async function dropRetired(): Promise<string[]> {
    const doc = await pointers.findOne({ _id: POINTERS_ID });
    if (!doc) return [];
    const now = clock.now().getTime();
    const live = new Set(doc.live.map((l) => l.physical));
    const dropped: string[] = [];
    for (const { physical, since } of doc.retired) {
      if (now - Date.parse(since) < graceMs) continue;
      if (!live.has(physical)) await db.dropCollection(physical); // a missing one is no error
      await pointers.updateOne({ _id: POINTERS_ID }, { $pull: { retired: { physical } } });
      dropped.push(physical);
    }
    return dropped;
  }

  /**
   * Cleanup that must not fail a start or a promote: an entry left in `retired` is retried by the
   * next sweep (another process may be dropping the same collection at the same time).
   */
  function sweepQuietly(): Promise<void> {
    return dropRetired().then(
      () => undefined,
      () => undefined,
    );
  }

  function sweepAfterGrace(): void {
    const timer = setTimeout(() => {
      sweeps.delete(timer);
      void sweepQuietly();
    }, graceMs + 1);
    timer.unref();
    sweeps.add(timer);
  }

  await guard(async () => {
    await ensureCollection(CHECKPOINTS);
    await ensureCollection(LIVE);
  });
  await sweepQuietly();

  return {
    kind: 'mongodb',
    collection: <T extends Doc = Doc>(name: string, indexes: readonly IndexSpec[] = []) =>
      guard(async () => {
        // Read the pointers afresh: a stale copy could recreate a collection a promote retired.
        const physical = await physicalOf(name, 0);
        await ensureCollection(physical);
        await ensureIndexes(db.collection(physical), indexes);
        return handle<T>(name, async () => physicalCollection(await physicalOf(name)));
      }),
    createShadow: <T extends Doc = Doc>(name: string, indexes: readonly IndexSpec[] = []) =>
      guard(async () => {
        const physical = `${name}${GENERATION_SEPARATOR}${generation()}`;
        // Created explicitly: a rebuild that writes nothing must still promote to an empty collection.
        await ensureCollection(physical);
        await ensureIndexes(db.collection(physical), indexes);
        const coll = physicalCollection(physical);
        const shadow = handle<T>(physical, async () => coll);
        shadows.set(shadow as Collection, { live: name, physical });
        return shadow;
      }),
    promote: (list, named = []) =>
      guard(async () => {
        const moves = list.map((shadow) => {
          const s = shadows.get(shadow);
          if (!s) throw new Error(`${shadow.name} is not a shadow of this store`);
          return s;
        });
        if (new Set(moves.map((m) => m.live)).size < moves.length) {
          throw new Error('promote got two shadows of one collection');
        }
        if (moves.length === 0 && named.length === 0) return;
        let written: LiveNames | undefined;
        await inTransaction(async (session) => {
          if (moves.length > 0) written = await movePointers(moves, session);
          await writeCheckpoints(named, session);
        });
        if (written) names.set(written);
        for (const shadow of list) shadows.delete(shadow);
        if (moves.length > 0) {
          sweepAfterGrace();
          await sweepQuietly(); // collections retired by earlier promotes
        }
      }),
    dropShadow: (shadow) =>
      guard(async () => {
        const s = shadows.get(shadow);
        if (!s) return;
        shadows.delete(shadow);
        await db.dropCollection(s.physical);
      }),
    getCheckpoint: (name) =>
      guard(async () => {
        const doc = await checkpoints.findOne({ _id: name });
        return doc ? checkpointFields(plain(doc) as Checkpoint) : undefined;
      }),
    setCheckpoint: (name, checkpoint) =>
      guard(async () => {
        await checkpoints.replaceOne({ _id: name }, checkpointFields(checkpoint), { upsert: true });
      }),
    commit: ({ writes, checkpoints: named = [] }: Commit) =>
      guard(async () => {
        // Checked and translated before the transaction: a refused operation starts none, and the
        // callback, which the driver may run several times, only writes.
        const batches = await Promise.all(
          writes
            .filter(({ ops }) => ops.length > 0)
            .map(async ({ collection, ops }) => {
              const target = targets.get(collection);
              if (!target) throw new Error(`${collection.name} is not a collection of this store`);
              return { coll: await target(), models: ops.map((op) => toModel(op as WriteOp)) };
            }),
        );
        if (batches.length === 0 && named.length === 0) return;
        try {
          await inTransaction(async (session) => {
            for (const { coll, models } of batches) await coll.bulkWrite(models, { ordered: true, session });
            await writeCheckpoints(named, session);
          });
        } catch (err) {
          const operations = batches.reduce((n, b) => n + b.models.length, 0);
          throw commitFailure(err, operations, batches.length);
        }
      }),
    dropRetired: () => guard(dropRetired),
    close: async () => {
      for (const timer of sweeps) clearTimeout(timer);
      sweeps.clear();
      await mongo.close();
    },
  };
}
