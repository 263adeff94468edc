/**
 * MongoDB ReadStore on the `mongodb` driver (docs/read-side.md): this module puts the store together.
 *
 * - Queries and bulk writes: handles.ts; port ↔ driver values and operations: translate.ts.
 * - Checkpoints live in the `_checkpoints` collection, one document per name (checkpoints.ts).
 * - `commit` and `promote` each run in one transaction; a server without transactions is refused at
 *   start (transaction.ts, connection.ts).
 * - Logical names resolve to physical collections through one pointer document (live-names.ts); the
 *   collections a promote replaced are dropped after a grace period (retired.ts), and shadows a
 *   crashed rebuild left by the next projector (orphans.ts).
 * - Leases, by the server's clock, and the fence a write carries: a fence document every fenced
 *   transaction writes, and an expiry document renewals write, so a renewal never waits for a commit
 *   (leases.ts).
 */
import type { ClientSession, Db } from 'mongodb';
import { type Clock, systemClock } from '../../domain/clock.ts';
import type {
  Checkpoint,
  Collection,
  Commit,
  Doc,
  Fence,
  IndexSpec,
  ReadStore,
  ShadowOptions,
} from '../read-store.ts';
import { BulkShadows } from './bulk-shadows.ts';
import { CHECKPOINTS, type CheckpointDoc, checkpointFields, writeCheckpoints } from './checkpoints.ts';
import {
  createShadowCollection,
  ensureCollection,
  ensureIndexesIfEmpty,
  PhysicalCollections,
} from './collections.ts';
import {
  connect,
  connectionGuard,
  DEFAULT_MONGO_TIMEOUTS,
  DEFAULT_READ_MAX_TIME_MS,
  type MongoTimeouts,
  redact,
} from './connection.ts';
import { Handles } from './handles.ts';
import {
  acquireLease,
  assertFence,
  fenceInTransaction,
  LEASES,
  type LeaseDoc,
  oneAtATime,
  renewLease,
} from './leases.ts';
import {
  LIVE,
  type LiveNames,
  liveNameCache,
  movePointers,
  namesOf,
  POINTERS_ID,
  type PointerDoc,
} from './live-names.ts';
import { dropOrphanShadows } from './orphans.ts';
import { RetiredCollections } from './retired.ts';
import { commitWrites, inTransaction, transactionLifetimeMs } from './transaction.ts';
import { plain } from './translate.ts';

export interface MongoReadStoreOptions {
  /** The database; defaults to the one named in the URL (else the driver's default, `test`). */
  dbName?: string;
  /** How long this process trusts its copy of the live-name pointers before reading them again. */
  liveNamesTtlMs?: number;
  /** How long a collection a promote replaced is kept for readers still on the old pointers. */
  retiredGraceMs?: number;
  /** Times the pointer cache and the grace period (tests move it by hand). */
  clock?: Clock;
  /** The client's timeouts where the URL does not set them (defaults: `DEFAULT_MONGO_TIMEOUTS`). */
  timeouts?: Partial<MongoTimeouts>;
  /** How long the server may work on one read (`maxTimeMS`; default `DEFAULT_READ_MAX_TIME_MS`). */
  readMaxTimeMs?: number;
}

export const DEFAULT_LIVE_NAMES_TTL_MS = 1_000;
export const DEFAULT_RETIRED_GRACE_MS = 5 * 60_000;

/** The store, plus the cleanup it otherwise runs by itself (for operators' tools and tests). */
export interface MongoReadStore extends ReadStore {
  /** Drops the collections retired by promotes whose grace period has passed; returns their names. */
  dropRetired(): Promise<string[]>;
}

/** What creating a shadow touches: the database, this store's shadows and handles. */
interface ShadowParts {
  db: Db;
  ownShadows: Set<string>;
  physicalCollections: PhysicalCollections;
  handles: Handles;
  shadows: WeakMap<Collection, { live: string; physical: string }>;
  bulk: BulkShadows;
}

/** A new shadow of `name`; a bulk one without its deferred indexes (bulk-shadows.ts). */
async function createShadow<T extends Doc>(
  parts: ShadowParts,
  name: string,
  indexes: readonly IndexSpec[],
  options: ShadowOptions,
): Promise<Collection<T>> {
  const bulk = options.bulk === true;
  const physical = await createShadowCollection(
    parts.db,
    name,
    BulkShadows.createdAtOnce(indexes, bulk),
    parts.ownShadows,
  );
  const coll = parts.physicalCollections.get(physical);
  const shadow = parts.handles.create<T>(physical, async () => coll);
  parts.shadows.set(shadow as Collection, { live: name, physical });
  if (bulk) parts.bulk.add(shadow as Collection, coll, indexes);
  return shadow;
}

export async function createMongoReadStore(
  url: string,
  options: MongoReadStoreOptions = {},
): Promise<MongoReadStore> {
  const where = redact(url);
  const clock = options.clock ?? systemClock;
  const graceMs = options.retiredGraceMs ?? DEFAULT_RETIRED_GRACE_MS;
  const { client: mongo, db } = await connect(url, where, options.dbName, {
    ...DEFAULT_MONGO_TIMEOUTS,
    ...options.timeouts,
  });
  const maxTimeMS = options.readMaxTimeMs ?? DEFAULT_READ_MAX_TIME_MS;
  const pointers = db.collection<PointerDoc>(LIVE);
  const checkpoints = db.collection<CheckpointDoc>(CHECKPOINTS);
  const leases = db.collection<LeaseDoc>(LEASES);
  const names = liveNameCache(
    async () => namesOf(await pointers.findOne({ _id: POINTERS_ID }, { maxTimeMS })),
    clock,
    options.liveNamesTtlMs ?? DEFAULT_LIVE_NAMES_TTL_MS,
  );
  const retired = new RetiredCollections(db, pointers, clock, graceMs);
  const guard = connectionGuard(where);
  const physicalCollections = new PhysicalCollections(db);
  const bulk = new BulkShadows();
  const handles = new Handles(guard, maxTimeMS, bulk);
  /** Shadows this store created and hasn't promoted or dropped: handle → logical and physical names. */
  const shadows = new WeakMap<Collection, { live: string; physical: string }>();
  /** Their physical names: never orphans (orphans.ts). */
  const ownShadows = new Set<string>();
  const parts: ShadowParts = { db, ownShadows, physicalCollections, handles, shadows, bulk };
  /** Fenced transactions, one at a time: each writes the lease's fence document (leases.ts). */
  const fenced = oneAtATime();
  const inFencedTransaction = (fence: Fence, fn: (session: ClientSession) => Promise<void>) =>
    fenced(() =>
      inTransaction(mongo, async (session) => {
        await fenceInTransaction(leases, fence, session);
        await fn(session);
      }),
    );

  async function physicalOf(name: string, maxAgeMs?: number): Promise<string> {
    return (await names.get(maxAgeMs)).physical.get(name) ?? name;
  }

  await guard(async () => {
    await ensureCollection(db, CHECKPOINTS);
    await ensureCollection(db, LIVE);
    await ensureCollection(db, LEASES);
  });
  await retired.sweepQuietly();
  const lifetimeMs = await transactionLifetimeMs(mongo);

  return {
    kind: 'mongodb',
    collection: <T extends Doc = Doc>(name: string, indexes: readonly IndexSpec[] = []) =>
      guard(async () => {
        // Read the pointers afresh: a stale copy could recreate a collection a promote retired.
        const physical = await physicalOf(name, 0);
        await ensureCollection(db, physical);
        await ensureIndexesIfEmpty(db.collection(physical), indexes);
        return handles.create<T>(name, async () => physicalCollections.get(await physicalOf(name)));
      }),
    createShadow: <T extends Doc = Doc>(name: string, indexes: readonly IndexSpec[] = [], options = {}) =>
      guard(() => createShadow<T>(parts, name, indexes, options)),
    finishBulk: (shadow, fence) =>
      guard(() => bulk.finish(shadow, shadows.has(shadow), () => assertFence(leases, fence))),
    promote: (list, named = [], fence) =>
      guard(async () => {
        const moves = list.map((shadow) => {
          const s = shadows.get(shadow);
          if (!s) throw new Error(`${shadow.name} is not a shadow of this store`);
          bulk.assertFinished(shadow, s.live);
          return s;
        });
        if (new Set(moves.map((m) => m.live)).size < moves.length) {
          throw new Error('promote got two shadows of one collection');
        }
        if (moves.length === 0 && named.length === 0) return;
        let written: LiveNames | undefined;
        const promoteIn = async (session: ClientSession) => {
          if (moves.length > 0) written = await movePointers(pointers, clock, moves, session);
          await writeCheckpoints(checkpoints, named, session);
        };
        if (fence === undefined) await inTransaction(mongo, promoteIn);
        else await inFencedTransaction(fence, promoteIn);
        if (written) names.set(written);
        for (const shadow of list) shadows.delete(shadow);
        for (const { physical } of moves) ownShadows.delete(physical);
        if (moves.length > 0) {
          retired.sweepAfterGrace();
          await retired.sweepQuietly(); // collections retired by earlier promotes
        }
      }),
    dropShadow: (shadow, fence) =>
      guard(async () => {
        const s = shadows.get(shadow);
        if (!s) return;
        shadows.delete(shadow);
        ownShadows.delete(s.physical);
        await assertFence(leases, fence);
        await db.dropCollection(s.physical);
      }),
    dropOrphanShadows: (fence) =>
      guard(() => dropOrphanShadows(db, pointers, ownShadows, () => assertFence(leases, fence))),
    getCheckpoint: (name) =>
      guard(async () => {
        const doc = await checkpoints.findOne({ _id: name }, { maxTimeMS });
        return doc ? checkpointFields(plain(doc) as Checkpoint) : undefined;
      }),
    setCheckpoint: (name, checkpoint, fence) =>
      guard(async () => {
        if (fence === undefined) {
          await checkpoints.replaceOne({ _id: name }, checkpointFields(checkpoint), { upsert: true });
          return;
        }
        await inFencedTransaction(fence, (session) =>
          writeCheckpoints(checkpoints, [{ name, checkpoint }], session),
        );
      }),
    commit: (commit: Commit) =>
      guard(() => {
        bulk.assertCommit(commit.writes);
        const run = () =>
          commitWrites(mongo, { checkpoints, leases }, (c) => handles.targetOf(c), commit, lifetimeMs);
        return commit.fence === undefined ? run() : fenced(run);
      }),
    acquireLease: (lease, owner, ttlMs, from) =>
      guard(() => acquireLease(leases, (fn) => inTransaction(mongo, fn), lease, owner, ttlMs, from)),
    renewLease: (fence, ttlMs) => guard(() => renewLease(leases, fence, ttlMs)),
    releaseLease: (fence) =>
      guard(async () => {
        await renewLease(leases, fence, 0);
      }),
    dropRetired: () => guard(() => retired.drop()),
    ping: () =>
      guard(async () => {
        await db.command({ ping: 1 });
      }),
    close: async () => {
      retired.stop();
      await mongo.close();
    },
  };
}
