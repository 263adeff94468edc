/**
 * The MongoDB read store's bounded waits (docs/operations.md, "MongoDB"), with the real driver and no
 * server: a peer that accepts connections and never answers (a host whose mongod hangs, a network
 * that drops the replies) fails the start within the bounded server selection time, not the driver's
 * 30 s; a URL's own timeouts win over the defaults; and the driver's errors that mean "unreachable or
 * too slow" become ReadStoreUnavailableError, which HTTP answers with 503 (test/read-store-unavailable.test.ts).
 */
import test, { type ExecutionContext } from 'ava';
import { MongoClient, MongoNetworkTimeoutError, MongoServerError, MongoServerSelectionError } from 'mongodb';
import {
  clientTimeouts,
  connectionGuard,
  createMongoReadStore,
  DEFAULT_MONGO_TIMEOUTS,
  ReadStoreUnavailableError,
} from '../projections/mongo-read-store.ts';
import { silentPeer } from './support/silent-peer.ts';

/** A MongoDB URL of a peer that accepts TCP connections and never answers: the driver's handshake waits. */
async function silentServer(t: ExecutionContext): Promise<string> {
  return `mongodb://reader:s3cret@127.0.0.1:${await silentPeer(t)}/pds`;
}

/** How long a promise took to settle, and its error. */
async function failure(work: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  try {
    await work;
  } catch (error) {
    return { error, ms: performance.now() - started };
  }
  throw new Error('expected a failure');
}

test('the defaults: 5 s to select a server and 5 s to connect, where the URL does not set its own', (t) => {
  t.deepEqual(DEFAULT_MONGO_TIMEOUTS, { serverSelectionTimeoutMS: 5_000, connectTimeoutMS: 5_000 });
  t.deepEqual(clientTimeouts('mongodb://mongo:27017/pds?replicaSet=rs0', DEFAULT_MONGO_TIMEOUTS), {
    serverSelectionTimeoutMS: 5_000,
    connectTimeoutMS: 5_000,
  });
  // The driver prefers an option given in code to the URL's: the URL's own is left to the URL.
  t.deepEqual(
    clientTimeouts(
      'mongodb://mongo:27017/pds?replicaSet=rs0&serverSelectionTimeoutMS=20000',
      DEFAULT_MONGO_TIMEOUTS,
    ),
    { connectTimeoutMS: 5_000 },
  );
  // Option names are case-insensitive to the driver, and so here.
  t.deepEqual(
    clientTimeouts(
      'mongodb+srv://u:p@cluster.example.com/pds?connecttimeoutms=1000&SERVERSELECTIONTIMEOUTMS=2000',
      DEFAULT_MONGO_TIMEOUTS,
    ),
    {},
  );
  t.deepEqual(clientTimeouts('mongodb://mongo:27017', DEFAULT_MONGO_TIMEOUTS), { ...DEFAULT_MONGO_TIMEOUTS });
});

test('a silent MongoDB fails the start within the default selection time (5 s), not the driver’s 30 s', async (t) => {
  t.timeout(20_000);
  const url = await silentServer(t);
  const { error, ms } = await failure(createMongoReadStore(url));
  t.true(error instanceof ReadStoreUnavailableError, String(error));
  const message = (error as Error).message;
  t.regex(message, /^cannot connect to MongoDB at mongodb:\/\/\*\*\*@127\.0\.0\.1:\d+\/pds: /);
  t.regex(message, /Server selection timed out after 5000 ms/);
  t.false(message.includes('s3cret'));
  t.true((error as Error).cause instanceof MongoServerSelectionError);
  t.true(ms < 15_000, `failed after ${Math.round(ms)} ms`);
});

test('a URL’s own timeouts win over the store’s defaults', async (t) => {
  t.timeout(20_000);
  const url = await silentServer(t);
  const { error, ms } = await failure(
    createMongoReadStore(`${url}?serverSelectionTimeoutMS=300&connectTimeoutMS=300`, {
      timeouts: { serverSelectionTimeoutMS: 60_000, connectTimeoutMS: 60_000 },
    }),
  );
  t.true(error instanceof ReadStoreUnavailableError, String(error));
  t.regex((error as Error).message, /Server selection timed out after 300 ms/);
  t.true(ms < 10_000, `failed after ${Math.round(ms)} ms`);
});

test('the guard reports what the driver raises for an unreachable or too slow server as ReadStoreUnavailableError, and nothing else', async (t) => {
  t.timeout(20_000);
  const guard = connectionGuard('mongodb://***@mongo:27017/pds');
  // A real selection failure, as every operation raises once no server answers within the selection time.
  const client = new MongoClient(await silentServer(t), {
    serverSelectionTimeoutMS: 200,
    connectTimeoutMS: 200,
  });
  t.teardown(() => client.close());
  const selection = await t.throwsAsync(client.db('pds').collection('carts').findOne({}));
  t.true(selection instanceof MongoServerSelectionError, String(selection));
  // What the server answers a read that ran past its maxTimeMS, as the driver raises it.
  const overTime = new MongoServerError({
    ok: 0,
    code: 50,
    codeName: 'MaxTimeMSExpired',
    errmsg: 'operation exceeded time limit',
  });
  const network = new MongoNetworkTimeoutError('connection 3 to 10.0.0.5:27017 timed out');
  for (const raised of [selection, overTime, network]) {
    const error = await t.throwsAsync(
      guard(() => Promise.reject(raised)),
      {
        instanceOf: ReadStoreUnavailableError,
      },
    );
    t.is(error?.cause, raised);
    t.regex(error?.message ?? '', /^MongoDB at mongodb:\/\/\*\*\*@mongo:27017\/pds is unavailable: /);
  }
  // A refusal of the operation itself (a duplicate key) is the caller's to handle, as it was.
  const duplicate = new MongoServerError({ ok: 0, code: 11000, errmsg: 'E11000 duplicate key error' });
  t.is(await t.throwsAsync(guard(() => Promise.reject(duplicate))), duplicate);
});
