/**
 * A behaviour double of MongoDB's transaction limits around the embedded read store. MongoDB refuses a
 * transaction over its oplog, storage-cache or time limits, and the adapter throws the port's
 * `CommitTooLargeError` (projections/mongo/transaction.ts): this store refuses, the same way, any
 * commit over `maxOperations` write operations or `maxBytes` bytes of writes (as JSON), applying
 * nothing of it, and counts the commits tried, refused and taken. The limits can be changed while it
 * runs (pressure on the cache that passes).
 */
import { type Commit, CommitTooLargeError, type ReadStore } from '../../projections/read-store.ts';

export interface TransactionLimits {
  maxOperations: number;
  maxBytes: number;
}

export interface LimitedCommits {
  /** Commits tried, including the refused ones. */
  attempts: number;
  refused: number;
  /** Write operations of each commit taken. */
  taken: number[];
}

export function sizeOf(commit: Commit): { operations: number; bytes: number } {
  let operations = 0;
  let bytes = 0;
  for (const { ops } of commit.writes) {
    operations += ops.length;
    for (const op of ops) bytes += Buffer.byteLength(JSON.stringify(op));
  }
  return { operations, bytes };
}

export function withTransactionLimits(
  inner: ReadStore,
  limits: TransactionLimits,
): { readStore: ReadStore; commits: LimitedCommits; limits: TransactionLimits } {
  const commits: LimitedCommits = { attempts: 0, refused: 0, taken: [] };
  const readStore: ReadStore = {
    ...inner,
    async commit(commit) {
      commits.attempts += 1;
      const { operations, bytes } = sizeOf(commit);
      if (operations > limits.maxOperations || bytes > limits.maxBytes) {
        commits.refused += 1;
        throw new CommitTooLargeError(
          operations,
          commit.writes.length,
          `the double's transaction limit (${limits.maxOperations} operations, ${limits.maxBytes} bytes)`,
        );
      }
      await inner.commit(commit);
      commits.taken.push(operations);
    },
  };
  return { readStore, commits, limits };
}
