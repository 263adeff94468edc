/**
 * Leases in the MongoDB read store's `_leases` collection, two documents per lease, so that a renewal
 * never waits for a commit (docs/read-side.md, "One projector at a time"):
 *
 * - The fence document (`_id` the lease's name) holds the token of the last acquisition. A fenced
 *   commit, promote or checkpoint writes it in its own transaction, under the fence's token
 *   (`fenceInTransaction`): a read alone would not conflict with a concurrent take-over, since
 *   MongoDB's transactions read a snapshot and detect only write conflicts, but two writes of one
 *   document do. The holder's own fenced transactions would conflict with each other the same way, so
 *   a store runs them one at a time (`oneAtATime`). Dropping a collection cannot run in a
 *   transaction: the token is read just before (`assertFence`), from the primary (`FROM_PRIMARY`).
 * - The expiry document (`_id` `<lease>#expiry`) holds the holder, the token it holds and when it runs
 *   out, by the server's clock (`$$NOW`), so processes on machines whose clocks differ agree. A
 *   renewal writes only this one, filtered on the token. MongoDB makes a write outside a transaction
 *   wait while a transaction has modified the same document: a renewal of the fence document waited
 *   for every commit, and a commit longer than the lease's last third made its holder give the lease
 *   up under it.
 *
 * An acquisition writes both in one transaction: the expiry's, filtered on its having run out (or on
 * its holder), so that of two acquisitions, or an acquisition and a renewal, one conflicts and is
 * retried on what the other wrote; and the fence's, so that it conflicts with a fenced commit in
 * progress. Either the take-over's transaction is retried until the commit, under the old token, is
 * done (and finds the expiry renewed meanwhile, or takes the lease over), or the commit meets the
 * take-over's write, is retried by the driver, finds the new token and is refused.
 */
import { type ClientSession, type Collection as MongoCollection, MongoServerError } from 'mongodb';
import { type Fence, type LeaseAttempt, LeaseLostError } from '../read-store.ts';
import { FROM_PRIMARY } from './connection.ts';

export const LEASES = '_leases';
const DUPLICATE_KEY = 11000;

/** The lease's fence document, or its expiry document (`expiryId`). */
export interface LeaseDoc {
  _id: string;
  /** The last acquisition's token (the fence document), or the token the holder holds (the expiry). */
  token: number;
  /** The expiry document's: who holds the lease, and when it runs out. */
  owner?: string;
  expires_at?: Date;
  /** The fence document's: fenced commits and promotes each write it, so a take-over conflicts with them. */
  fenced_writes?: number;
}

/** The expiry document of the lease `lease`. */
export const expiryId = (lease: string) => `${lease}#expiry`;

/** Runs its callback in one transaction, retried by the driver (transaction.ts). */
type InTransaction = (fn: (session: ClientSession) => Promise<void>) => Promise<void>;

export async function acquireLease(
  leases: MongoCollection<LeaseDoc>,
  inTransaction: InTransaction,
  lease: string,
  owner: string,
  ttlMs: number,
  from?: string,
): Promise<LeaseAttempt> {
  let seen = await holderOf(leases, lease);
  if (seen === undefined) {
    // A lease never held exists first, run out long ago, with token 0 (MongoDB refuses `$expr` in the
    // filter of an upsert, so the acquisition below cannot create its documents).
    await created(leases, lease, { token: 0 });
    await created(leases, expiryId(lease), { owner: '', token: 0, expires_at: new Date(0) });
    seen = { holder: '', expiresInMs: 0 };
  }
  // Held by another (what a standby finds at each try): answered by that read, with no transaction.
  if (seen.expiresInMs > 0 && seen.holder !== owner && seen.holder !== from) {
    return { acquired: false, ...seen };
  }
  // Run out, or held by this owner already (or by `from`): taken with the next token. Names are
  // `$literal`s: in an aggregation expression a string starting with `$` is a field.
  const holders = { $literal: from === undefined ? [owner] : [owner, from] };
  const takeable = { $or: [{ $lte: ['$expires_at', '$$NOW'] }, { $in: ['$owner', holders] }] };
  let token: number | undefined;
  await inTransaction(async (session) => {
    token = undefined;
    const expiry = await leases.findOneAndUpdate(
      { _id: expiryId(lease), $expr: takeable },
      [{ $set: { owner: { $literal: owner }, expires_at: { $add: ['$$NOW', ttlMs] } } }],
      { session },
    );
    if (!expiry) {
      // Renewed or taken since it was read: nothing to write.
      await session.abortTransaction();
      return;
    }
    const fence = await leases.findOneAndUpdate(
      { _id: lease },
      { $inc: { token: 1 } },
      { session, returnDocument: 'after' },
    );
    if (!fence) throw new Error(`the ${lease} lease's fence document is missing`);
    await leases.updateOne({ _id: expiryId(lease) }, { $set: { token: fence.token } }, { session });
    token = fence.token;
  });
  if (token !== undefined) return { acquired: true, fence: { lease, token } };
  return { acquired: false, ...((await holderOf(leases, lease)) ?? { holder: 'unknown', expiresInMs: 0 }) };
}

/** Inserts the document `_id` with `fields` unless it exists. */
async function created(leases: MongoCollection<LeaseDoc>, _id: string, fields: Omit<LeaseDoc, '_id'>) {
  await leases.updateOne({ _id }, { $setOnInsert: fields }, { upsert: true }).catch((err: unknown) => {
    // Two first acquisitions at once: one inserts it, the other's insert collides. It exists.
    if (!(err instanceof MongoServerError && err.code === DUPLICATE_KEY)) throw err;
  });
}

/** Who holds the lease and for how much longer, by the server's clock (0: run out); undefined: never held. */
async function holderOf(
  leases: MongoCollection<LeaseDoc>,
  lease: string,
): Promise<{ holder: string; expiresInMs: number } | undefined> {
  const held = await leases.findOne(
    { _id: expiryId(lease) },
    { ...FROM_PRIMARY, projection: { owner: 1, remaining: { $subtract: ['$expires_at', '$$NOW'] } } },
  );
  if (!held) return undefined;
  const { owner: holder = 'unknown', remaining = 0 } = held as { owner?: string; remaining?: number };
  return { holder, expiresInMs: Math.max(0, Number(remaining)) };
}

/**
 * Sets the expiry `ttlMs` from the server's now while `fence` is the last acquisition. Only the
 * expiry document is written: a commit in progress, which holds the fence document, does not hold it up.
 */
export async function renewLease(
  leases: MongoCollection<LeaseDoc>,
  fence: Fence,
  ttlMs: number,
): Promise<boolean> {
  const result = await leases.updateOne({ _id: expiryId(fence.lease), token: fence.token }, [
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

/**
 * Outside a transaction (before a drop): throws LeaseLostError unless `fence` is the last acquisition,
 * as the primary has it (a secondary behind it may show the token of before a take-over).
 */
export async function assertFence(
  leases: MongoCollection<LeaseDoc>,
  fence: Fence | undefined,
): Promise<void> {
  if (fence === undefined) return;
  if ((await leases.countDocuments({ _id: fence.lease, token: fence.token }, FROM_PRIMARY)) !== 1) {
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
