/**
 * Connecting the MongoDB read store, and telling deployment problems apart: a server that can't run
 * transactions is refused at start, and a lost connection is reported as ReadStoreUnavailableError.
 */
import {
  type Db,
  type Document,
  MongoClient,
  MongoClientClosedError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
} from 'mongodb';

/** MongoDB can't be reached, or can't serve as the read store (at connect time or later): a deployment problem. */
export class ReadStoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReadStoreUnavailableError';
  }
}

/** The URL without credentials, for messages. */
export function redact(url: string): string {
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

export async function connect(
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

/** Runs a driver call, reporting a lost connection as ReadStoreUnavailableError. */
export type Guard = <R>(fn: () => Promise<R>) => Promise<R>;

/** The guard of a store connected to `where` (the redacted URL). */
export function connectionGuard(where: string): Guard {
  return async function guard<R>(fn: () => Promise<R>): Promise<R> {
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
  };
}
