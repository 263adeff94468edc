/**
 * Leases in the MongoDB read store's `_leases` collection, one document per lease: its holder, the
 * token of the last acquisition and when it runs out, by the server's clock (`$$NOW`), so processes
 * on machines whose clocks differ agree (docs/read-side.md, "One projector at a time").
 *
 * A fenced commit, promote or checkpoint writes the lease document in its own transaction, under the
 * fence's token (`fenceInTransaction`): a read alone would not conflict with a concurrent take-over,
 * since MongoDB's transactions read a snapshot and detect only write conflicts, but two writes of one
 * document do. Either the take-over waits for the transaction, which commits under the old token
 * before it, or the transaction meets the take-over's write, is retried by the driver, finds the new
 * token and is refused. The holder's own fenced transactions would conflict with each other the same
 * way, so a store runs them one at a time (`oneAtATime`). Dropping a collection cannot run in a
 * transaction: the token is read just before (`assertFence`).
 */
import { type ClientSession, type Collection as MongoCollection, MongoServerError } from 'mongodb';
import { type Fence, type LeaseAttempt, LeaseLostError } from '../read-store.ts';

export const LEASES = '_leases';
const DUPLICATE_KEY = 11000;

export interface LeaseDoc {
  _id: string;
  owner: string;
  token: number;
  expires_at: Date;
  /** Fenced commits and promotes: each writes the document, so a take-over conflicts with it. */
  fenced_writes?: number;
}

export async function acquireLease(
  leases: MongoCollection<LeaseDoc>,
  lease: string,
  owner: string,
  ttlMs: number,
  from?: string,
): Promise<LeaseAttempt> {
  // A lease never held exists first, run out long ago, with token 0 (MongoDB refuses `$expr` in the
  // filter of an upsert, so the acquisition below cannot create it).
  await leases
    .updateOne(
      { _id: lease },
      { $setOnInsert: { owner: '', token: 0, expires_at: new Date(0) } },
      { upsert: true },
    )
    .catch((err: unknown) => {
      // Two first acquisitions at once: one inserts it, the other's insert collides. It exists.
      if (!(err instanceof MongoServerError && err.code === DUPLICATE_KEY)) throw err;
    });
  // Run out, or held by this owner already (or by `from`): taken with the next token, in one write,
  // so of two acquisitions at once the second no longer matches.
  // Names are `$literal`s: in an aggregation expression a string starting with `$` is a field.
  const holders = { $literal: from === undefined ? [owner] : [owner, from] };
  const doc = await leases.findOneAndUpdate(
    { _id: lease, $expr: { $or: [{ $lte: ['$expires_at', '$$NOW'] }, { $in: ['$owner', holders] }] } },
    [
      {
        $set: {
          owner: { $literal: owner },
          token: { $add: ['$token', 1] },
          expires_at: { $add: ['$$NOW', ttlMs] },
        },
      },
    ],
    { returnDocument: 'after' },
  );
  if (doc) return { acquired: true, fence: { lease, token: doc.token } };
  const held = await leases.findOne(
    { _id: lease },
    { projection: { owner: 1, remaining: { $subtract: ['$expires_at', '$$NOW'] } } },
  );
  const { owner: holder = 'unknown', remaining = 0 } = (held ?? {}) as { owner?: string; remaining?: number };
  return { acquired: false, holder, expiresInMs: Math.max(0, Number(remaining)) };
}

/** Sets the expiry `ttlMs` from the server's now while `fence` is the last acquisition. */
export async function renewLease(
  leases: MongoCollection<LeaseDoc>,
  fence: Fence,
  ttlMs: number,
): Promise<boolean> {
  const result = await leases.updateOne({ _id: fence.lease, token: fence.token }, [
    { $set: { expires_at: { $add: ['$$NOW', ttlMs] } } },
  ]);
  return result.matchedCount === 1;
}

/** In the caller's transaction: refuses it (LeaseLostError) unless `fence` is the last acquisition. */
export async function fenceInTransaction(
  leases: MongoCollection<LeaseDoc>,
  fence: Fence | undefined,
  session: ClientSession,
): Promise<void> {
  if (fence === undefined) return;
  const result = await leases.updateOne(
    { _id: fence.lease, token: fence.token },
    { $inc: { fenced_writes: 1 } },
    { session },
  );
  if (result.matchedCount !== 1) throw new LeaseLostError(fence);
}

/** Outside a transaction (before a drop): throws LeaseLostError unless `fence` is the last acquisition. */
export async function assertFence(
  leases: MongoCollection<LeaseDoc>,
  fence: Fence | undefined,
): Promise<void> {
  if (fence === undefined) return;
  if ((await leases.countDocuments({ _id: fence.lease, token: fence.token })) !== 1) {
    throw new LeaseLostError(fence);
  }
}

/** Runs the calls it is given one after another, in order (each after the last settled). */
export function oneAtATime(): <R>(fn: () => Promise<R>) => Promise<R> {
  let tail: Promise<unknown> = Promise.resolve();
  return <R>(fn: () => Promise<R>): Promise<R> => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => undefined);
    return run;
  };
}
