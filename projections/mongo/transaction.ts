/**
 * The MongoDB read store's unit of work: a commit (a projector batch and its checkpoints) and a
 * promote each run in one transaction, and a commit too large for one is refused whole.
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
 * (TransactionTooLargeForCache) and, before 4.2, by 16 MB of oplog. A document over 16 MiB refuses the
 * whole commit as `DocumentTooLargeError` (a replacement before the transaction starts, an update's
 * result when the server refuses it, which aborts the transaction).
 * A commit refused for its size or duration is thrown as the port's `CommitTooLargeError` (nothing
 * of it applied) so the caller can commit smaller batches: the projector applies the batch again in
 * halves, down to one event (docs/read-side.md, "Oversized batches"). The lifetime limit shows in two
 * ways: a statement running when the server aborts the transaction fails with
 * TransactionExceededLifetimeLimitSeconds; a statement after it with NoSuchTransaction, labelled a
 * TransientTransactionError, so `withTransaction` runs the whole commit again, and again, until its
 * 120 s are spent and it throws NoSuchTransaction. Those whose last attempt ran at least the server's
 * lifetime limit are refused for their duration, and a statement of the commit that meets such a
 * refusal ends the commit at once instead of letting the driver run it again (which would outlive the
 * limit a second time). A server that reports cache pressure as a WriteConflict instead (a known
 * server bug) makes `withTransaction` retry until its 120 s are spent; that error is thrown.
 */
import {
  type ClientSession,
  type MongoClient,
  type Collection as MongoCollection,
  MongoServerError,
} from 'mongodb';
import { type Collection, type Commit, CommitTooLargeError, type Doc, type WriteOp } from '../read-store.ts';
import { type CheckpointDoc, writeCheckpoints } from './checkpoints.ts';
import { fenceInTransaction, type LeaseDoc } from './leases.ts';
import { firstTooLarge, toModel, writeFailure } from './translate.ts';

/** Server error codes of a transaction refused for its size or duration. */
const TOO_LARGE_CODES = new Set([
  257, // TransactionTooLarge: more than 16 MB of oplog (servers before 4.2)
  290, // TransactionExceededLifetimeLimitSeconds
  388, // TransactionTooLargeForCache
]);

/** NoSuchTransaction: the statement's transaction was aborted (by the lifetime limit, a failover, …). */
const NO_SUCH_TRANSACTION = 251;

/** MongoDB's `transactionLifetimeLimitSeconds` by default: a transaction open longer is aborted. */
export const DEFAULT_TRANSACTION_LIFETIME_MS = 60_000;

/**
 * A commit's failure as the caller should see it: CommitTooLargeError when a transaction limit refused
 * it. `attemptMs` is how long the commit's last attempt ran, `lifetimeMs` the server's transaction
 * lifetime limit: a NoSuchTransaction after an attempt that long is the server's abort for the
 * transaction's duration, one after a shorter attempt (a failover) is not.
 */
export function commitFailure(
  err: unknown,
  operations: number,
  collections: number,
  attemptMs = 0,
  lifetimeMs = DEFAULT_TRANSACTION_LIFETIME_MS,
): unknown {
  if (!(err instanceof MongoServerError) || typeof err.code !== 'number') return err;
  const outlived = err.code === NO_SUCH_TRANSACTION && attemptMs >= lifetimeMs;
  if (!TOO_LARGE_CODES.has(err.code) && !outlived) return err;
  const limit = outlived
    ? `MongoDB's transaction lifetime limit (${lifetimeMs / 1000} s: the server aborted it, ${err.codeName ?? err.code})`
    : `a MongoDB transaction limit (${err.codeName ?? err.code})`;
  return new CommitTooLargeError(operations, collections, limit, { cause: err });
}

/**
 * The server's transaction lifetime limit (`transactionLifetimeLimitSeconds`), or MongoDB's default
 * where the server does not say (a user without the `getParameter` privilege, a mongos).
 */
export async function transactionLifetimeMs(mongo: MongoClient): Promise<number> {
  try {
    const answer = await mongo.db('admin').command({ getParameter: 1, transactionLifetimeLimitSeconds: 1 });
    const seconds = Number(answer.transactionLifetimeLimitSeconds);
    return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : DEFAULT_TRANSACTION_LIFETIME_MS;
  } catch {
    return DEFAULT_TRANSACTION_LIFETIME_MS;
  }
}

/** Runs `fn` in one transaction, retried by the driver as described above. */
export async function inTransaction(
  mongo: MongoClient,
  fn: (session: ClientSession) => Promise<void>,
): Promise<void> {
  const session = mongo.startSession();
  try {
    await session.withTransaction(fn, { readPreference: 'primary', writeConcern: { w: 'majority' } });
  } finally {
    await session.endSession();
  }
}

/** The physical collection behind a handle of this store, or undefined for another store's handle. */
export type TargetOf = (collection: Collection) => (() => Promise<MongoCollection<Doc>>) | undefined;

/** The store's own collections a commit writes besides the read models'. */
export interface CommitCollections {
  checkpoints: MongoCollection<CheckpointDoc>;
  leases: MongoCollection<LeaseDoc>;
}

/**
 * Applies a commit's writes and checkpoints in one transaction, refused whole under a stale fence;
 * `lifetimeMs` is the server's transaction lifetime limit (`transactionLifetimeMs`).
 */
export async function commitWrites(
  mongo: MongoClient,
  own: CommitCollections,
  targetOf: TargetOf,
  { writes, checkpoints: named = [], fence }: Commit,
  lifetimeMs = DEFAULT_TRANSACTION_LIFETIME_MS,
): Promise<void> {
  // Checked and translated before the transaction: a refused operation starts none, and the
  // callback, which the driver may run several times, only writes.
  const batches = await Promise.all(
    writes
      .filter(({ ops }) => ops.length > 0)
      .map(async ({ collection, ops }) => {
        const target = targetOf(collection);
        if (!target) throw new Error(`${collection.name} is not a collection of this store`);
        const models = ops.map((op) => toModel(op as WriteOp));
        const tooLarge = firstTooLarge(collection.name, ops as readonly WriteOp[]);
        if (tooLarge) throw tooLarge.error;
        return { coll: await target(), models, name: collection.name, ops: ops as readonly WriteOp[] };
      }),
  );
  if (batches.length === 0 && named.length === 0) return;
  const operations = batches.reduce((n, b) => n + b.models.length, 0);
  /** When the last attempt began: the driver runs the callback again for each. */
  let attemptStarted = performance.now();
  const failure = (err: unknown) =>
    commitFailure(err, operations, batches.length, performance.now() - attemptStarted, lifetimeMs);
  try {
    await inTransaction(mongo, async (session) => {
      attemptStarted = performance.now();
      try {
        await fenceInTransaction(own.leases, fence, session);
        for (const { coll, models, name, ops } of batches) {
          // An update whose result is over the document limit is refused by the server: named here.
          await coll.bulkWrite(models, { ordered: true, session }).catch((err: unknown) => {
            throw writeFailure(err, name, ops);
          });
        }
        await writeCheckpoints(own.checkpoints, named, session);
      } catch (err) {
        // Refused for its size or duration (the server aborted it for its lifetime): thrown at once,
        // not run again by the driver, which would only outlive the limit a second time.
        const tooLarge = failure(err);
        throw tooLarge instanceof CommitTooLargeError ? tooLarge : err;
      }
    });
  } catch (err) {
    throw failure(err);
  }
}
