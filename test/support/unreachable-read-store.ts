/**
 * A read store whose server can be lost, around the embedded one: while `unreachable`, every operation
 * fails as the MongoDB adapter's operations fail once no server answers within the selection time
 * (docs/operations.md, "MongoDB"): the driver's own MongoServerSelectionError, passed through the
 * adapter's guard, which makes it a ReadStoreUnavailableError. `ping`, which a store on a server has,
 * answers or fails the same way. Handles given out before keep working through the switch, as the
 * adapter's do. Everything else passes through to the embedded store.
 */
import { MongoClient, MongoServerSelectionError } from 'mongodb';
import { connectionGuard } from '../../projections/mongo-read-store.ts';
import type { Collection, Commit, Doc, ReadStore } from '../../projections/read-store.ts';

export interface UnreachableReadStore extends ReadStore {
  /** While true, every operation fails as on a MongoDB that no longer answers. */
  unreachable: boolean;
  /** Operations refused so far. */
  readonly refused: number;
}

/** Where the double says it is, as the adapter names a server (credentials hidden). */
const WHERE = 'mongodb://***@mongo:27017/pds';

let selectionFailure: Promise<MongoServerSelectionError> | undefined;

/** What the driver raises when no server answers: asked once of a port nothing listens on. */
function driverSelectionFailure(): Promise<MongoServerSelectionError> {
  selectionFailure ??= (async () => {
    const client = new MongoClient('mongodb://127.0.0.1:1/pds', { serverSelectionTimeoutMS: 100 });
    try {
      await client.db('pds').command({ ping: 1 });
    } catch (error) {
      if (error instanceof MongoServerSelectionError) return error;
      throw error;
    } finally {
      await client.close();
    }
    throw new Error('a MongoDB answered on 127.0.0.1:1');
  })();
  return selectionFailure;
}

export async function unreachableReadStore(inner: ReadStore): Promise<UnreachableReadStore> {
  const failure = await driverSelectionFailure();
  const guard = connectionGuard(WHERE);
  let refused = 0;
  /** The embedded store's handle behind each handle given out. */
  const inners = new WeakMap<Collection, Collection>();

  const reach = <R>(work: () => Promise<R>): Promise<R> => {
    if (!store.unreachable) return work();
    refused += 1;
    return guard(() => Promise.reject(failure));
  };

  function wrap<T extends Doc>(handle: Collection<T>): Collection<T> {
    const outer: Collection<T> = {
      name: handle.name,
      findOne: (filter) => reach(() => handle.findOne(filter)),
      findByIds: (ids, options) => reach(() => handle.findByIds(ids, options)),
      find: (filter, options) => reach(() => handle.find(filter, options)),
      count: (filter) => reach(() => handle.count(filter)),
      bulkWrite: (ops) => reach(() => handle.bulkWrite(ops)),
    };
    inners.set(outer as Collection, handle as Collection);
    return outer;
  }
  const innerOf = (c: Collection) => inners.get(c) ?? c;

  const store: UnreachableReadStore = {
    unreachable: false,
    get refused() {
      return refused;
    },
    kind: inner.kind,
    collection: (name, indexes) => reach(async () => wrap(await inner.collection(name, indexes))),
    createShadow: (name, indexes, options) =>
      reach(async () => wrap(await inner.createShadow(name, indexes, options))),
    finishBulk: (shadow, fence) => reach(() => inner.finishBulk(innerOf(shadow), fence)),
    promote: (shadows, checkpoints, fence) =>
      reach(() => inner.promote(shadows.map(innerOf), checkpoints, fence)),
    dropShadow: (shadow, fence) => reach(() => inner.dropShadow(innerOf(shadow), fence)),
    dropOrphanShadows: (fence) => reach(() => inner.dropOrphanShadows(fence)),
    getCheckpoint: (name) => reach(() => inner.getCheckpoint(name)),
    setCheckpoint: (name, checkpoint, fence) => reach(() => inner.setCheckpoint(name, checkpoint, fence)),
    commit: ({ writes, checkpoints, fence }: Commit) =>
      reach(() =>
        inner.commit({
          writes: writes.map((w) => ({ collection: innerOf(w.collection), ops: w.ops })),
          ...(checkpoints && { checkpoints }),
          ...(fence && { fence }),
        }),
      ),
    acquireLease: (lease, owner, ttlMs, from) => reach(() => inner.acquireLease(lease, owner, ttlMs, from)),
    renewLease: (fence, ttlMs) => reach(() => inner.renewLease(fence, ttlMs)),
    releaseLease: (fence) => reach(() => inner.releaseLease(fence)),
    ping: () => reach(async () => {}),
    close: () => inner.close(),
  };
  return store;
}
