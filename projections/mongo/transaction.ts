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
 * halves, down to one event (docs/read-side.md, "Oversized batches"). A server that reports cache
 * pressure as a WriteConflict instead (a known server bug) makes `withTransaction` retry until its
 * 120 s are spent; that error is thrown.
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

/** A commit's failure as the caller should see it: CommitTooLargeError when a transaction limit refused it. */
export function commitFailure(err: unknown, operations: number, collections: number): unknown {
  if (err instanceof MongoServerError && typeof err.code === 'number' && TOO_LARGE_CODES.has(err.code)) {
    const limit = `a MongoDB transaction limit (${err.codeName ?? err.code})`;
    return new CommitTooLargeError(operations, collections, limit, { cause: err });
  }
  return err;
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

/** Applies a commit's writes and checkpoints in one transaction, refused whole under a stale fence. */
export async function commitWrites(
  mongo: MongoClient,
  own: CommitCollections,
  targetOf: TargetOf,
  { writes, checkpoints: named = [], fence }: Commit,
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
  try {
    await inTransaction(mongo, async (session) => {
      await fenceInTransaction(own.leases, fence, session);
      for (const { coll, models, name, ops } of batches) {
        // An update whose result is over the document limit is refused by the server: named here.
        await coll.bulkWrite(models, { ordered: true, session }).catch((err: unknown) => {
          throw writeFailure(err, name, ops);
        });
      }
      await writeCheckpoints(own.checkpoints, named, session);
    });
  } catch (err) {
    const operations = batches.reduce((n, b) => n + b.models.length, 0);
    throw commitFailure(err, operations, batches.length);
  }
}
