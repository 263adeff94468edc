/**
 * Connecting the MongoDB read store, and telling deployment problems apart: a server that can't run
 * transactions is refused at start, and a lost connection, an outage or a server too slow to answer
 * is reported as ReadStoreUnavailableError (docs/operations.md, "MongoDB").
 */
import {
  type Db,
  type Document,
  MongoClient,
  MongoClientClosedError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoOperationTimeoutError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  ReadPreference,
} from 'mongodb';
import { ReadStoreUnavailableError } from '../read-store.ts';

export { ReadStoreUnavailableError };

/**
 * How long the client waits, where the URL does not say (docs/operations.md, "MongoDB"). The driver's
 * own defaults, 30 s to find a server and 30 s to connect, held a partner read for 30 s in an outage.
 */
export interface MongoTimeouts {
  /** How long an operation waits for a server it can use (an outage, an election) before it fails. */
  serverSelectionTimeoutMS: number;
  /**
   * How long opening a connection may take; the monitor's heartbeat waits this long past its interval
   * (10 s) before it takes the server for lost and fails the operations in flight on it.
   */
  connectTimeoutMS: number;
}

export const DEFAULT_MONGO_TIMEOUTS: Readonly<MongoTimeouts> = Object.freeze({
  serverSelectionTimeoutMS: 5_000,
  connectTimeoutMS: 5_000,
});

/**
 * How long the server may work on one read (`maxTimeMS`): a server too loaded to answer a read in this
 * time answers none, and the read is refused as unavailable instead of held.
 */
export const DEFAULT_READ_MAX_TIME_MS = 5_000;

/**
 * The timeouts the client is given: `defaults`, less those the URL names itself. The driver takes an
 * option given in code over the URL's, so the URL's own setting wins only where the code leaves it
 * out. Option names are compared without regard to case, as the driver compares them.
 */
export function clientTimeouts(url: string, defaults: Readonly<MongoTimeouts>): Partial<MongoTimeouts> {
  const query = url.split('#')[0].split('?')[1] ?? '';
  const named = new Set(query.split('&').map((pair) => pair.split('=')[0].toLowerCase()));
  return Object.fromEntries(
    Object.entries(defaults).filter(([name]) => !named.has(name.toLowerCase())),
  ) as Partial<MongoTimeouts>;
}

/** The URL without credentials, for messages. */
export function redact(url: string): string {
  return url.replace(/^([a-z+]+:\/\/)[^@/]*@/i, '$1***@');
}

/**
 * How a read that decides a write is made (the fence before a drop, what an orphan sweep or a sweep of
 * retired collections compares): from the primary, of what a majority holds, whatever read preference
 * the URL gives the rest. A lagging secondary may not have the last take-over or promote yet.
 */
export const FROM_PRIMARY = {
  readPreference: ReadPreference.primary,
  readConcern: { level: 'majority' },
} as const;

/** MongoDB's code for an operation that ran out of its `maxTimeMS`. */
const MAX_TIME_MS_EXPIRED = 50;

/**
 * Whether an error means that the server can't be reached or can't answer in time, not that the
 * operation was wrong: no server found within the selection time, a connection lost or timed out
 * (also the network error that ends the operations in flight when the monitor loses the server), a
 * closed client, or a read past its `maxTimeMS`.
 */
export function isUnavailable(err: unknown): boolean {
  return (
    err instanceof MongoServerSelectionError ||
    err instanceof MongoNetworkError ||
    err instanceof MongoNotConnectedError ||
    err instanceof MongoTopologyClosedError ||
    err instanceof MongoClientClosedError ||
    err instanceof MongoOperationTimeoutError ||
    (err instanceof MongoServerError && err.code === MAX_TIME_MS_EXPIRED)
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

export async function connect(
  url: string,
  where: string,
  dbName: string | undefined,
  timeouts: Readonly<MongoTimeouts> = DEFAULT_MONGO_TIMEOUTS,
): Promise<{ client: MongoClient; db: Db }> {
  let client: MongoClient | undefined;
  try {
    // ignoreUndefined: a field set to undefined is left out, as JSON would, instead of stored as null.
    client = new MongoClient(url, { ignoreUndefined: true, ...clientTimeouts(url, timeouts) });
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

/** Runs a driver call, reporting a server that can't be reached or can't answer in time as ReadStoreUnavailableError. */
export type Guard = <R>(fn: () => Promise<R>) => Promise<R>;

/** The guard of a store connected to `where` (the redacted URL). */
export function connectionGuard(where: string): Guard {
  return async function guard<R>(fn: () => Promise<R>): Promise<R> {
    try {
      return await fn();
    } catch (err) {
      if (isUnavailable(err)) {
        throw new ReadStoreUnavailableError(`MongoDB at ${where} is unavailable: ${(err as Error).message}`, {
          cause: err,
        });
      }
      throw err;
    }
  };
}
