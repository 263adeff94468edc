import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { Query } from 'mingo';
import { MongoClient, MongoServerError } from 'mongodb';
import { manualClock } from '../../domain/clock.ts';
import { compareValues } from '../../projections/documents.ts';
import { findQuery } from '../../projections/mongo/handles.ts';
import { fenceInTransaction, LEASES, type LeaseDoc } from '../../projections/mongo/leases.ts';
import { inTransaction } from '../../projections/mongo/transaction.ts';
import {
  CommitTooLargeError,
  commitFailure,
  createMongoReadStore,
  type LiveNames,
  liveNameCache,
  type MongoReadStoreOptions,
  ReadStoreUnavailableError,
  transactionsProblem,
} from '../../projections/mongo-read-store.ts';
import {
  type CartSearch,
  type CartSearchCursor,
  cartSearchFilter,
  cartSearchSort,
  searchCarts,
} from '../../projections/read-models/cart-search.ts';
import { CARTS, type CartDoc, cartIndexes } from '../../projections/read-models/carts.ts';
import {
  WEBHOOK_DELIVERIES,
  type WebhookDeliveryDoc,
  webhookDeliveryIndexes,
} from '../../projections/read-models/webhook-deliveries.ts';
import {
  oldestQueued,
  QUEUED_STATUSES,
  queuedInQueues,
} from '../../projections/read-models/webhook-delivery-queues.ts';
import {
  afterFilter,
  type Checkpoint,
  type Collection,
  cursorBound,
  type Doc,
  type Fence,
  type Filter,
  type LeaseAttempt,
  LeaseLostError,
  type SortSpec,
  totalSort,
} from '../../projections/read-store.ts';
import {
  ENGINE_STARTUP_MS,
  type EngineContainer,
  startMongoReplicaSet,
  startMongoStandalone,
} from '../support/containers.ts';
import { containersProblem, type Engine, engineAccess, reportMissingEngine } from '../support/engines.ts';
import { readStoreContract } from './read-store.ts';
import { readStoreProcessesContract } from './read-store-processes.ts';

/**
 * The MongoDB adapter runs the shared contract, and its own cases (live-name pointers, retired
 * collections, stores written before pointers), against the MongoDB every engine suite finds the same
 * way (`test/support/engines.ts`): `PDS_TEST_MONGO_URL` when it is set (a replica set: the store needs
 * transactions), or else a throwaway one-node replica set in a container of docker-compose.yml's image
 * and command, reached through its replica-set URL as the service reaches it, when a container runtime
 * answers. With neither, those are reported as skipped, or as failed under `PDS_REQUIRE_ENGINES=1`.
 * All tests share one server; each test gets its own database (dropped afterwards) and its own client,
 * but for the outage and standalone cases, which start containers of their own whatever the URL, and
 * without a container runtime are reported the same way. The cases above that line need no server.
 */
// ---- without a server ------------------------------------------------------------------------------

test('MongoDB: an unreachable server is a clear error without the credentials', async (t) => {
  const err = await t.throwsAsync(
    createMongoReadStore('mongodb://reader:s3cret@127.0.0.1:1/pds?serverSelectionTimeoutMS=300'),
    { instanceOf: ReadStoreUnavailableError },
  );
  t.regex(err?.message ?? '', /^cannot connect to MongoDB at mongodb:\/\/\*\*\*@127\.0\.0\.1:1\/pds/);
  t.false(err?.message.includes('s3cret'));
  await t.throwsAsync(createMongoReadStore('http://127.0.0.1:1'), { instanceOf: ReadStoreUnavailableError });
});

test('MongoDB: the after filter selects what sorts after the cursor across types (checked with mingo)', (t) => {
  // The adapter pages with afterFilter; MongoDB's $gt/$lt only compare within one type, so the filter
  // must reach the types that sort after the cursor by $type, and null/missing by $eq: null.
  const docs: Doc[] = [
    { _id: 'a', v: 3 },
    { _id: 'b', v: 'b' },
    { _id: 'c', v: null },
    { _id: 'd' },
    { _id: 'e', v: 1 },
    { _id: 'f', v: true },
    { _id: 'g', v: '10' },
    { _id: 5, v: 3 },
    { _id: 7, w: 1 },
  ];
  const sorts: SortSpec[] = [
    [['v', 1]],
    [['v', -1]],
    [
      ['v', -1],
      ['_id', -1],
    ],
    [['_id', 1]],
    [
      ['w', 1],
      ['v', -1],
    ],
  ];
  for (const sort of sorts) {
    const spec = totalSort(sort);
    const compare = (a: Doc, b: Doc) => {
      for (const [f, d] of spec) {
        const c = compareValues(a[f], b[f]);
        if (c !== 0) return d === 1 ? c : -c;
      }
      return 0;
    };
    const ordered = [...docs].sort(compare);
    for (let i = 0; i < ordered.length; i++) {
      const after = spec.map(([f]) => ordered[i][f] ?? null);
      const query = new Query(afterFilter(spec, after), {});
      t.deepEqual(
        docs
          .filter((d) => query.test(d))
          .sort(compare)
          .map((d) => d._id),
        ordered.slice(i + 1).map((d) => d._id),
        `${JSON.stringify(sort)} after ${JSON.stringify(after)}`,
      );
    }
  }
});

test('MongoDB: past a cursor, a range on the first sort field also bounds it at the cursor, selecting the same documents (checked with mingo)', (t) => {
  const docs: Doc[] = [
    ...['a', 'b', 'c', 'c', 'd', 'e', 'f'].map((v, i) => ({ _id: `s${i}`, v })),
    { _id: 'n', v: 3 },
    { _id: 'z', v: null },
    { _id: 'm' },
  ];
  const filter = { v: { $gt: 'a', $lt: 'f' } };
  for (const sort of [
    [['v', -1] as const, ['_id', 1] as const],
    [['v', 1] as const, ['_id', 1] as const],
  ] as SortSpec[]) {
    const within = docs.filter((d) => new Query(filter, {}).test(d));
    for (const last of within) {
      const after = sort.map(([f]) => last[f]);
      const bound = cursorBound(filter, sort, after);
      t.deepEqual(bound, { v: { [sort[0][1] === 1 ? '$gte' : '$lte']: last.v } });
      const selected = (query: Filter) =>
        docs
          .filter((d) => new Query(query, {}).test(d))
          .map((d) => d._id)
          .sort();
      t.deepEqual(
        selected(findQuery(filter, sort, after)),
        selected({ $and: [filter, afterFilter(sort, after)] }),
        `${JSON.stringify(sort)} after ${JSON.stringify(after)}`,
      );
    }
  }
  // Only where the filter holds the field to the cursor's type: else no bound.
  const sort: SortSpec = [
    ['v', -1],
    ['_id', 1],
  ];
  t.is(cursorBound({}, sort, ['c', 's2']), undefined);
  t.is(cursorBound({ v: 'c' }, sort, ['c', 's2']), undefined, 'an equality');
  t.is(cursorBound({ v: { $in: ['c'] } }, sort, ['c', 's2']), undefined);
  t.is(cursorBound({ v: { $gt: 1 } }, sort, ['c', 's2']), undefined, 'a range of numbers, a string cursor');
  t.is(cursorBound({ v: { $gt: 'a', $ne: 'b' } }, sort, ['c', 's2']), undefined, 'more than a range');
  t.is(cursorBound({ v: { $gt: 'a' } }, sort, [null, 'z']), undefined, 'a null cursor');
});

test('MongoDB: transactions need a replica set member or a mongos; a standalone server is named as such', (t) => {
  t.is(transactionsProblem({ isWritablePrimary: true, setName: 'rs0' }), undefined);
  t.is(transactionsProblem({ isWritablePrimary: false, secondary: true, setName: 'rs0' }), undefined);
  t.is(transactionsProblem({ isWritablePrimary: true, msg: 'isdbgrid' }), undefined);
  t.is(transactionsProblem({ isWritablePrimary: true }), 'is a standalone server');
  t.regex(
    transactionsProblem({ isWritablePrimary: false, isreplicaset: true }) ?? '',
    /not initiated yet \(run rs\.initiate\(\) once\)/,
  );
});

test('MongoDB: a commit refused for its size or duration becomes CommitTooLargeError; other errors pass', (t) => {
  for (const [code, codeName] of [
    [388, 'TransactionTooLargeForCache'],
    [290, 'TransactionExceededLifetimeLimitSeconds'],
    [257, 'TransactionTooLarge'],
  ] as const) {
    const cause = new MongoServerError({ code, codeName, errmsg: 'refused' });
    const err = commitFailure(cause, 5_000, 3);
    t.true(err instanceof CommitTooLargeError, codeName);
    const tooLarge = err as CommitTooLargeError;
    t.is(tooLarge.cause, cause);
    t.is(tooLarge.operations, 5_000);
    t.is(tooLarge.collections, 3);
    t.regex(
      tooLarge.message,
      new RegExp(`5000 write operations on 3 collections .*\\(${codeName}\\).*nothing of it was applied`),
    );
  }
  const duplicate = new MongoServerError({
    code: 11000,
    codeName: 'DuplicateKey',
    errmsg: 'E11000 duplicate key',
  });
  t.is(commitFailure(duplicate, 1, 1), duplicate);
  const other = new Error('refused update');
  t.is(commitFailure(other, 1, 1), other);
});

test('MongoDB: a commit the server aborted for outliving its transaction lifetime (NoSuchTransaction after an attempt that long) becomes CommitTooLargeError; after a shorter attempt it passes', (t) => {
  // What withTransaction throws once its 120 s are spent on attempts the server aborted at 60 s each:
  // every statement after the abort answers NoSuchTransaction, labelled a transient error.
  const aborted = new MongoServerError({
    code: 251,
    codeName: 'NoSuchTransaction',
    errmsg: 'Transaction with { txnNumber: 4 } has been aborted.',
    errorLabels: ['TransientTransactionError'],
  });
  const err = commitFailure(aborted, 5_000, 2, 60_250, 60_000);
  t.true(err instanceof CommitTooLargeError);
  t.is((err as CommitTooLargeError).cause, aborted);
  t.regex((err as CommitTooLargeError).message, /transaction lifetime limit \(60 s: the server aborted it/);
  t.true(commitFailure(aborted, 5_000, 2, 30_000, 30_000) instanceof CommitTooLargeError, 'a lowered limit');
  // A shorter attempt whose transaction is gone was ended by something else (a failover): not its size.
  t.is(commitFailure(aborted, 5_000, 2, 1_200, 60_000), aborted);
  t.is(commitFailure(aborted, 5_000, 2), aborted, 'no attempt time known');
  t.true(commitFailure(aborted, 5_000, 2, 60_000) instanceof CommitTooLargeError, "MongoDB's default limit");
});

test('MongoDB: live names are read once per TTL, by one fetch at a time, and a newer copy is never replaced by an older one', async (t) => {
  const clock = manualClock();
  const versions: LiveNames[] = [
    { version: 1, physical: new Map([['menu', 'menu__gen_a']]) },
    { version: 2, physical: new Map([['menu', 'menu__gen_b']]) },
  ];
  let fetches = 0;
  let served = versions[0];
  const cache = liveNameCache(
    async () => {
      fetches += 1;
      return served;
    },
    clock,
    1_000,
  );
  const [one, two] = await Promise.all([cache.get(), cache.get()]);
  t.is(fetches, 1, 'concurrent reads share one fetch');
  t.is(one, versions[0]);
  t.is(two, versions[0]);
  served = versions[1];
  clock.advance(999);
  t.is(await cache.get(), versions[0], 'younger than the TTL: the copy held');
  t.is(fetches, 1);
  clock.advance(1);
  t.is(await cache.get(), versions[1], 'a TTL old: read again');
  t.is(fetches, 2);
  t.is(await cache.get(0), versions[1]);
  t.is(fetches, 3, 'a maximum age of 0 always reads');

  // This process's own promote is taken at once; a read that answers with an older version is not.
  const own: LiveNames = { version: 3, physical: new Map([['menu', 'menu__gen_c']]) };
  cache.set(own);
  t.is(await cache.get(), own);
  t.is(fetches, 3);
  clock.advance(1_000);
  t.is(await cache.get(), own, 'the store still answers version 2 (a read begun before the promote)');
  t.is(fetches, 4);

  clock.advance(-10_000);
  await cache.get();
  t.is(fetches, 5, 'a clock moved back does not keep a copy for ever');
});

// ---- on a server -----------------------------------------------------------------------------------

const access = await engineAccess('mongo');

/** A checkpoint for these tests. */
const at = (position: number, version?: string): Checkpoint => ({
  position,
  events: position,
  updated_at: '2026-03-01T00:00:00.000Z',
  ...(version === undefined ? {} : { version }),
});

function ids(docs: readonly Doc[]): unknown[] {
  return docs.map((d) => d._id);
}

async function seed(c: Collection, docs: readonly Doc[]): Promise<void> {
  await c.bulkWrite(
    docs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
  );
}

if (access.missing !== undefined) {
  reportMissingEngine(test, 'MongoDB contract', access.missing);
} else {
  let url: string | undefined;
  let running: Engine | undefined;
  const containers: EngineContainer[] = [];

  test.before(async (t) => {
    t.timeout(ENGINE_STARTUP_MS);
    running = await access.start();
    url = running.url;
  });

  // Only after the last test: every test shares the server.
  test.after.always(async () => {
    await running?.stop();
    for (const c of containers) await c.stop();
  });

  const newDbName = () => `pds_contract_${randomUUID().replaceAll('-', '').slice(0, 16)}`;

  async function dropDatabase(engine: string, dbName: string): Promise<void> {
    const admin = new MongoClient(engine);
    try {
      await admin.db(dbName).dropDatabase();
    } finally {
      await admin.close();
    }
  }

  readStoreContract(test, 'mongodb', async () => {
    if (!url) throw new Error('MongoDB is not running: the setup hook failed');
    const dbName = newDbName();
    const store = await createMongoReadStore(url, { dbName });
    const engine = url;
    return {
      store,
      async cleanup() {
        await store.close();
        await dropDatabase(engine, dbName);
      },
    };
  });

  /** A database of its own for one test, a raw client on it, and a way to open stores ("processes") on it. */
  async function database(t: ExecutionContext) {
    if (!url) throw new Error('MongoDB is not running: the setup hook failed');
    const engine = url;
    const dbName = newDbName();
    const raw = new MongoClient(engine);
    t.teardown(async () => {
      await raw.close();
      await dropDatabase(engine, dbName);
    });
    return {
      db: raw.db(dbName),
      /** A client of the database's own, for a transaction the test holds open. */
      client: raw,
      async open(options: MongoReadStoreOptions = {}) {
        const store = await createMongoReadStore(engine, { dbName, ...options });
        t.teardown(() => store.close());
        return store;
      },
      async collectionNames(): Promise<string[]> {
        const list = await raw.db(dbName).listCollections({}, { nameOnly: true }).toArray();
        return list.map((c) => c.name).sort();
      },
    };
  }

  test('MongoDB: another process switches to the promoted collections a TTL later, all of them at once', async (t) => {
    const { open } = await database(t);
    const clock = manualClock();
    const projector = await open({ clock, liveNamesTtlMs: 1_000 });
    const api = await open({ clock, liveNamesTtlMs: 1_000 });
    await seed(await projector.collection('a'), [{ _id: 'a-old' }]);
    await seed(await projector.collection('b'), [{ _id: 'b-old' }]);
    const liveA = await projector.collection('a');
    const liveB = await projector.collection('b');
    const readA = await api.collection('a');
    const readB = await api.collection('b');
    t.deepEqual(ids(await readA.find({})), ['a-old']);

    const sa = await projector.createShadow('a');
    const sb = await projector.createShadow('b');
    await seed(sa, [{ _id: 'a-new' }]);
    await seed(sb, [{ _id: 'b-new' }]);
    await projector.promote([sa, sb], [{ name: 'catalog', checkpoint: at(7, 'v2') }]);

    t.deepEqual(ids(await liveA.find({})), ['a-new'], 'the promoting process switches at once');
    t.deepEqual(ids(await liveB.find({})), ['b-new']);
    t.deepEqual(ids(await readA.find({})), ['a-old'], 'the other process: the old set, whole');
    t.deepEqual(ids(await readB.find({})), ['b-old']);
    t.deepEqual(await api.getCheckpoint('catalog'), at(7, 'v2'), 'checkpoints are read directly');
    clock.advance(1_000);
    t.deepEqual(ids(await readA.find({})), ['a-new'], 'a TTL later: the new set, whole');
    t.deepEqual(ids(await readB.find({})), ['b-new']);
  });

  test('MongoDB: ping answers, and a read the server cannot finish within its maxTimeMS is refused as unavailable', async (t) => {
    const { open } = await database(t);
    const store = await open({ readMaxTimeMs: 50 });
    await store.ping?.();
    const slow = await store.collection('slow');
    await seed(slow, [{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
    // Server-side JavaScript that sleeps on each document: the server stops at the read's maxTimeMS.
    const err = await t.throwsAsync(slow.find({ $where: 'sleep(100) || true' }), {
      instanceOf: ReadStoreUnavailableError,
    });
    t.true(err?.cause instanceof MongoServerError && err.cause.code === 50, String(err?.cause));
    t.deepEqual(ids(await slow.find({})), [1, 2, 3], 'an ordinary read goes on');
  });

  test('MongoDB: collections a promote replaced are dropped after the grace period, by the promoter or the next start', async (t) => {
    const { open, collectionNames } = await database(t);
    const clock = manualClock();
    const options = { clock, retiredGraceMs: 60_000 };
    const store = await open(options);
    const live = await store.collection('menu', [{ keys: [['store_id', 1]] }]);
    await seed(live, [{ _id: 'old', store_id: 1 }]);
    const first = await store.createShadow('menu', [{ keys: [['store_id', 1]] }]);
    await seed(first, [{ _id: 'first', store_id: 1 }]);
    await store.promote([first]);
    t.true((await collectionNames()).includes('menu'), 'kept for readers still on the old pointers');
    t.deepEqual(await store.dropRetired(), []);
    clock.advance(59_999);
    t.deepEqual(await store.dropRetired(), []);
    clock.advance(1);
    t.deepEqual(await store.dropRetired(), ['menu']);
    t.false((await collectionNames()).includes('menu'));
    t.deepEqual(ids(await live.find({ store_id: 1 })), ['first']);

    const second = await store.createShadow('menu');
    await seed(second, [{ _id: 'second' }]);
    await store.promote([second]);
    clock.advance(60_000);
    await open(options); // another process starting sweeps what is due
    const names = await collectionNames();
    t.false(names.includes(first.name), 'the collection the second promote replaced is dropped');
    t.true(names.includes(second.name), 'the live one stays');
    t.deepEqual(ids(await live.find({})), ['second']);
    t.deepEqual(await store.dropRetired(), []);
  });

  test('MongoDB: a store written before pointers (plain collection names) is read, and promoted over', async (t) => {
    const { db, open } = await database(t);
    await db.collection<Doc>('menu').insertMany([{ _id: 'legacy1' }, { _id: 'legacy2' }]);
    await db
      .collection<Doc>('_checkpoints')
      .insertOne({ _id: 'catalog', position: 5, events: 5, updated_at: '2026-01-01T00:00:00.000Z' });
    const store = await open();
    const menu = await store.collection('menu');
    t.deepEqual(ids(await menu.find({})), ['legacy1', 'legacy2']);
    t.deepEqual(await store.getCheckpoint('catalog'), {
      position: 5,
      events: 5,
      updated_at: '2026-01-01T00:00:00.000Z',
    });
    const shadow = await store.createShadow('menu');
    await seed(shadow, [{ _id: 'rebuilt' }]);
    await store.promote([shadow], [{ name: 'catalog', checkpoint: at(6, 'v1') }]);
    t.deepEqual(ids(await menu.find({})), ['rebuilt']);
    t.deepEqual(await store.getCheckpoint('catalog'), at(6, 'v1'));
    const pointers = await db.collection<Doc>('_live').findOne({});
    t.like(pointers, { version: 1, live: [{ name: 'menu', physical: shadow.name }] });
    const retired = (pointers?.retired ?? []) as Array<{ physical: string; since: string }>;
    t.deepEqual(
      retired.map((r) => r.physical),
      ['menu'],
      'the plain collection is retired',
    );
    const reopened = await open();
    t.deepEqual(ids(await (await reopened.collection('menu')).find({})), ['rebuilt']);
  });

  test('MongoDB: promotes of two processes at once both land (the conflicting pointer write is retried)', async (t) => {
    const { open } = await database(t);
    const one = await open();
    const two = await open();
    const sa = await one.createShadow('a');
    const sb = await two.createShadow('b');
    await seed(sa, [{ _id: 'a-new' }]);
    await seed(sb, [{ _id: 'b-new' }]);
    await Promise.all([
      one.promote([sa], [{ name: 'pa', checkpoint: at(1) }]),
      two.promote([sb], [{ name: 'pb', checkpoint: at(2) }]),
    ]);
    const third = await open();
    t.deepEqual(ids(await (await third.collection('a')).find({})), ['a-new']);
    t.deepEqual(ids(await (await third.collection('b')).find({})), ['b-new']);
    t.deepEqual(await third.getCheckpoint('pa'), at(1));
    t.deepEqual(await third.getCheckpoint('pb'), at(2));
  });

  // These start servers of their own (one to take down, one standalone): they need containers even
  // when PDS_TEST_MONGO_URL names the shared one, and say so when there are none.
  const ownServers = await containersProblem();
  if (ownServers !== undefined) {
    reportMissingEngine(
      test,
      'MongoDB outage and standalone cases',
      `they start MongoDB containers of their own, and ${ownServers}`,
    );
  } else {
    test('MongoDB: with the server gone, a read and a ping fail as unavailable within the selection time (5 s), not 30 s', async (t) => {
      t.timeout(ENGINE_STARTUP_MS);
      // A replica set of its own, since this test takes it down.
      const server = await startMongoReplicaSet();
      t.teardown(() => server.stop().catch(() => undefined));
      const store = await createMongoReadStore(server.url, { dbName: 'outage' });
      t.teardown(() => store.close());
      const carts = await store.collection('carts');
      await seed(carts, [{ _id: 1 }]);
      t.deepEqual(ids(await carts.find({})), [1]);
      await store.ping?.();
      // The server goes away: mongod shuts down, and its container with it (the exec's own answer is lost).
      const port = new URL(server.url).port;
      await server.container
        .exec([
          'mongosh',
          '--port',
          port,
          '--quiet',
          '--eval',
          'db.adminCommand({ shutdown: 1, force: true })',
        ])
        .catch(() => undefined);
      const started = Date.now();
      const err = await t.throwsAsync(carts.find({}), { instanceOf: ReadStoreUnavailableError });
      t.true(Date.now() - started < 15_000, `failed after ${Date.now() - started} ms: ${err?.message}`);
      await t.throwsAsync(store.ping?.() ?? Promise.resolve(), { instanceOf: ReadStoreUnavailableError });
    });

    test('MongoDB: a standalone server is refused at start, saying how to make it a replica set', async (t) => {
      t.timeout(ENGINE_STARTUP_MS);
      const standalone = await startMongoStandalone();
      containers.push(standalone);
      const err = await t.throwsAsync(createMongoReadStore(standalone.url), {
        instanceOf: ReadStoreUnavailableError,
      });
      t.regex(err?.message ?? '', /is a standalone server: .*transaction.*--replSet rs0.*rs\.initiate\(\)/);
    });
  }

  // ---- two processes on one database (read-store-processes.ts), and what MongoDB keeps of them ----

  readStoreProcessesContract(test, 'mongodb', async (t) => {
    const { open } = await database(t);
    return [await open(), await open()];
  });

  test('MongoDB: an orphan sweep drops only the collections named as shadows that nothing names or created', async (t) => {
    const { open, collectionNames } = await database(t);
    const crashed = await open({ retiredGraceMs: 60_000 });
    await seed(await crashed.collection('menu'), [{ _id: 'plain' }]);
    const promoted = await crashed.createShadow('menu');
    await crashed.promote([promoted]); // 'menu' is retired: kept for readers for the grace period
    const orphan = await crashed.createShadow('menu');
    await seed(orphan, [{ _id: 'orphan' }]);
    await seed(await crashed.collection('dispatcher_state'), [{ _id: 'kept' }]);

    const next = await open({ retiredGraceMs: 60_000 });
    const mine = await next.createShadow('menu');
    t.is(await next.dropOrphanShadows(), 1);
    t.deepEqual(
      await collectionNames(),
      ['_checkpoints', '_leases', '_live', 'dispatcher_state', 'menu', mine.name, promoted.name].sort(),
    );
  });

  // ---- the projector lease on MongoDB (docs/read-side.md, "One projector at a time") ----------------

  /** The fence of an attempt that must have acquired the lease. */
  const fenceOf = (attempt: LeaseAttempt): Fence => {
    if (!attempt.acquired) throw new Error(`not acquired: held by ${attempt.holder}`);
    return attempt.fence;
  };
  const after = <T>(ms: number, value: T) => new Promise<T>((r) => setTimeout(() => r(value), ms));

  test('MongoDB: a renewal does not wait for a fenced commit in progress; a take-over does, and the commit lands under the old token first', async (t) => {
    const { client, db, open } = await database(t);
    const holder = await open();
    const standby = await open();
    const leases = db.collection<LeaseDoc>(LEASES);
    const fence = fenceOf(await holder.acquireLease('projector', 'holder', 1_000));
    let renewal: boolean | 'waited' | undefined;
    let takeOver: Promise<LeaseAttempt> | undefined;
    let takenEarly: LeaseAttempt | 'waited' | undefined;
    // A long commit: its transaction has written the fence document and is not committed yet.
    await inTransaction(client, async (session) => {
      await fenceInTransaction(leases, fence, session);
      // MongoDB holds a write outside a transaction until a transaction that modified the same
      // document ends: a renewal that waited here would hold the commit open for the whole wait.
      renewal ??= await Promise.race([holder.renewLease(fence, 1_000), after(3_000, 'waited' as const)]);
      // Its lease runs out meanwhile (the holder stopped renewing): a standby takes it over, which
      // conflicts with this transaction's write of the fence document and waits for it.
      await after(1_200, undefined);
      takeOver ??= standby.acquireLease('projector', 'standby', 60_000);
      takenEarly ??= await Promise.race([takeOver, after(1_500, 'waited' as const)]);
    });
    t.is(renewal, true, 'renewed at once, while the commit was open');
    t.is(takenEarly, 'waited', 'the take-over waited for the commit');
    const taken = fenceOf(await (takeOver ?? Promise.reject(new Error('no take-over'))));
    t.true(taken.token > fence.token);
    t.like(await leases.findOne({ _id: 'projector' }), { token: taken.token, fenced_writes: 1 });
    t.false(await holder.renewLease(fence, 1_000), 'taken over: no longer renewed');
    const upsert = { replaceOne: { filter: { _id: 'a' }, replacement: { _id: 'a' }, upsert: true } };
    const items = await holder.collection('items');
    await t.throwsAsync(holder.commit({ writes: [{ collection: items, ops: [upsert] }], fence }), {
      instanceOf: LeaseLostError,
    });
  });

  test('MongoDB: the fence is a write, not a read of the snapshot: a take-over after a transaction fixed its snapshot refuses that transaction', async (t) => {
    const { client, db, open } = await database(t);
    const old = await open();
    const next = await open();
    const leases = db.collection<LeaseDoc>(LEASES);
    const items = db.collection<Doc>('items');
    await db.createCollection('items');
    const stale = fenceOf(await old.acquireLease('projector', 'old', 60_000));
    await old.releaseLease(stale);
    let attempts = 0;
    let firstRead: number | undefined;
    let taken: Fence | undefined;
    await t.throwsAsync(
      inTransaction(client, async (session) => {
        attempts += 1;
        // The first read fixes the transaction's snapshot: the stale token is the one it shows.
        const read = await leases.findOne({ _id: 'projector' }, { session });
        firstRead ??= read?.token;
        // Another takes the lease over and commits, after that snapshot.
        taken ??= fenceOf(await next.acquireLease('projector', 'next', 60_000));
        // A read of the token here would still find the stale one in the snapshot; the fence's write
        // conflicts with the take-over's, the driver runs the transaction again, and it is refused.
        await fenceInTransaction(leases, stale, session);
        await items.insertOne({ _id: `attempt-${attempts}` }, { session });
      }),
      { instanceOf: LeaseLostError },
    );
    t.is(firstRead, stale.token);
    t.true(attempts >= 2, 'the first attempt conflicted and was run again');
    t.true((taken?.token ?? 0) > stale.token);
    t.is(await items.countDocuments(), 0, 'nothing of it committed');
  });

  test('MongoDB: the reads that decide a drop (the fence, the collections and pointers of an orphan sweep) ask the primary for what a majority holds, whatever the URL reads from', async (t) => {
    const { db, open } = await database(t);
    if (!url) throw new Error('MongoDB is not running: the setup hook failed');
    const option = 'readPreference=secondaryPreferred';
    const fromSecondaries = url.includes('?')
      ? `${url}&${option}`
      : /^mongodb(\+srv)?:\/\/[^/]+$/.test(url)
        ? `${url}/?${option}`
        : `${url}?${option}`;
    const store = await createMongoReadStore(fromSecondaries, { dbName: db.databaseName });
    t.teardown(() => store.close());
    const fence = fenceOf(await store.acquireLease('projector', 'p', 60_000));
    await (await open()).createShadow('menu'); // a crashed rebuild's
    // Every operation on the database from here on is recorded with the command the server received.
    await db.command({ profile: 2 });
    await store.getCheckpoint('catalog');
    t.is(await store.dropOrphanShadows(fence), 1);
    await db.command({ profile: 0 });

    type Profiled = {
      ns?: string;
      command?: Record<string, unknown> & {
        $readPreference?: { mode?: string };
        readConcern?: { level?: string };
      };
    };
    const profiled = await db.collection<Profiled>('system.profile').find({}).toArray();
    const ran = (collection: string, command: string) =>
      profiled.filter(
        (e) => e.ns === `${db.databaseName}.${collection}` && e.command?.[command] !== undefined,
      );
    const mode = (e: Profiled) => e.command?.$readPreference?.mode ?? 'primary';
    const majority = (e: Profiled) => e.command?.readConcern?.level === 'majority';
    // An ordinary read goes where the URL says: the profile shows the read preference it was sent with.
    t.deepEqual(ran('_checkpoints', 'find').map(mode), ['secondaryPreferred']);
    const fenceReads = ran('_leases', 'aggregate');
    t.true(fenceReads.length > 0, 'the fence was read before the drop');
    t.true(
      fenceReads.every((e) => mode(e) === 'primary' && majority(e)),
      JSON.stringify(fenceReads),
    );
    const pointerReads = ran('_live', 'find');
    t.true(pointerReads.length > 0, 'the sweep read the pointers');
    t.true(
      pointerReads.every((e) => mode(e) === 'primary' && majority(e)),
      JSON.stringify(pointerReads),
    );
    const listings = ran('$cmd', 'listCollections');
    t.true(listings.length > 0, 'the sweep listed the collections');
    t.true(
      listings.every((e) => mode(e) === 'primary'),
      JSON.stringify(listings),
    );
  });

  test("MongoDB: a shadow whose creation failed is no longer its store's own: the next sweep drops what was made of it", async (t) => {
    const { collectionNames, open } = await database(t);
    const store = await open();
    // The second index conflicts with the first (same keys, other options): the collection exists,
    // and the shadow is refused.
    await t.throwsAsync(
      store.createShadow('menu', [{ keys: [['sku', 1]] }, { keys: [['sku', 1]], unique: true }]),
    );
    const left = (await collectionNames()).filter((name) => name.startsWith('menu__gen_'));
    t.is(left.length, 1, 'the collection was made before its index was refused');
    t.is(await store.dropOrphanShadows(), 1);
    t.deepEqual(
      (await collectionNames()).filter((name) => name.startsWith('menu__gen_')),
      [],
    );
  });

  /** Every stage of a plan (classic or slot-based), with the key pattern of each index scan. */
  function stagesOf(plan: unknown): { stage: string; keyPattern?: Record<string, number> }[] {
    if (plan === null || typeof plan !== 'object') return [];
    const node = plan as Record<string, unknown>;
    const own =
      typeof node.stage === 'string'
        ? [{ stage: node.stage, keyPattern: node.keyPattern as Record<string, number> | undefined }]
        : [];
    return [...own, ...Object.values(node).flatMap(stagesOf)];
  }

  test("MongoDB: the queued deliveries of a page's queues, and the delivery queued longest, are index scans", async (t) => {
    const { db, open, collectionNames } = await database(t);
    const store = await open();
    const deliveries = await store.collection<WebhookDeliveryDoc>(WEBHOOK_DELIVERIES, webhookDeliveryIndexes);
    const hook = (n: number) => `aaaaaaaa-0000-4000-8000-${String(n).padStart(12, '0')}`;
    const cart = (n: number) => `cccccccc-0000-4000-8000-${String(n).padStart(12, '0')}`;
    const statuses = ['pending', 'in_flight', 'failed', 'delivered', 'parked'] as const;
    const docs = Array.from({ length: 400 }, (_, i) => {
      const at = new Date(Date.UTC(2026, 10, 1) + i * 60_000).toISOString();
      return {
        _id: `d-${i}`,
        delivery_id: `d-${i}`,
        webhook_id: hook(i % 4),
        cart_uuid: cart(i % 50),
        source_revision: i,
        status: statuses[i % statuses.length],
        scheduled_at: at,
        queued_since: at,
      } as unknown as WebhookDeliveryDoc;
    });
    await seed(deliveries, docs);
    const queues = [1, 5, 9].map((n) => ({ webhook_id: hook(1), cart_uuid: cart(n) }));
    const found = [...(await queuedInQueues(deliveries, queues)).values()].flat();
    const want = docs.filter(
      (d) =>
        (QUEUED_STATUSES as readonly string[]).includes(d.status) &&
        queues.some((q) => q.webhook_id === d.webhook_id && q.cart_uuid === d.cart_uuid),
    );
    t.deepEqual(ids(found).sort(), ids(want).sort());
    t.is((await oldestQueued(deliveries, hook(1)))?._id, 'd-1');

    // The collection as the store named it (a new one: its own name, or a generation of it).
    const physical = (await collectionNames()).find((n) => n.startsWith(WEBHOOK_DELIVERIES));
    if (!physical) throw new Error('no webhook_deliveries collection');
    const explain = async (filter: Record<string, unknown>, sort: Record<string, 1>, limit?: number) => {
      const cursor = db.collection(physical).find(filter, { sort, ...(limit ? { limit } : {}) });
      const plan = (await cursor.explain('queryPlanner')) as { queryPlanner: { winningPlan: unknown } };
      return stagesOf(plan.queryPlanner.winningPlan);
    };
    // As the adapter sends them: the port's filter, sorted by `_id` last (`totalSort`).
    const inQueues = await explain(
      {
        webhook_id: { $in: [hook(1)] },
        cart_uuid: { $in: queues.map((q) => q.cart_uuid) },
        status: { $in: [...QUEUED_STATUSES] },
      },
      { _id: 1 },
    );
    t.false(
      inQueues.some((s) => s.stage === 'COLLSCAN'),
      JSON.stringify(inQueues),
    );
    t.true(
      inQueues.some(
        (s) =>
          s.stage === 'IXSCAN' &&
          JSON.stringify(s.keyPattern) ===
            JSON.stringify({ webhook_id: 1, cart_uuid: 1, status: 1, source_revision: 1 }),
      ),
      JSON.stringify(inQueues),
    );
    const longest = await explain(
      { webhook_id: hook(1), status: { $in: [...QUEUED_STATUSES] } },
      { queued_since: 1, _id: 1 },
      1,
    );
    t.false(
      longest.some((s) => s.stage === 'COLLSCAN'),
      JSON.stringify(longest),
    );
    // One scan per queued status, each in `queued_since, _id` order, merged: no sort stage, which
    // would fetch and sort every queued delivery of the subscription to answer one.
    t.true(
      longest.some(
        (s) =>
          s.stage === 'IXSCAN' &&
          JSON.stringify(s.keyPattern) ===
            JSON.stringify({ webhook_id: 1, status: 1, queued_since: 1, _id: 1 }),
      ),
      JSON.stringify(longest),
    );
    t.false(
      longest.some((s) => s.stage === 'SORT'),
      JSON.stringify(longest),
    );
  });

  test('MongoDB: a later page of a cart search walks its scope index from the cursor: no sort stage, about a page of keys', async (t) => {
    const { db, open, collectionNames } = await database(t);
    const store = await open();
    const carts = await store.collection<CartDoc>(CARTS, cartIndexes);
    const T0 = Date.UTC(2026, 10, 1);
    const statuses = ['pending', 'finished', 'cancelled'] as const;
    const docs = Array.from({ length: 900 }, (_, i) => {
      const at = new Date(T0 + i * 60_000).toISOString();
      return {
        _id: `cccccccc-0000-4000-8000-${String(i).padStart(12, '0')}`,
        id: i + 1,
        store_id: 1 + (i % 2),
        status: statuses[i % statuses.length],
        _partner_id: i % 5 === 0 ? 'the-partner' : null,
        _created_at: at,
        _updated_at: at,
        _user_id: null,
        _brand_ids: [],
        _abandoned: false,
      } as unknown as CartDoc;
    });
    await seed(carts, docs);
    const physical = (await collectionNames()).find((n) => n.startsWith(CARTS));
    if (!physical) throw new Error('no carts collection');
    // The range leaves out the first and last 100 minutes: the walk must not read them either.
    const range = {
      created_after: new Date(T0 + 100 * 60_000).toISOString(),
      created_before: new Date(T0 + 800 * 60_000).toISOString(),
    };
    const LIMIT = 10;
    const SLACK = 3;
    const scopes: Array<[string[], CartSearch]> = [
      [[], range],
      [['store_id'], { ...range, store_id: 2 }],
      [['_partner_id'], { ...range, partner_id: 'the-partner' }],
      [['status'], { ...range, status: 'finished' }],
      [['store_id', 'status'], { ...range, store_id: 1, status: 'cancelled' }],
    ];
    for (const [scope, search] of scopes) {
      const label = scope.join() || 'time alone';
      // Three pages in through the adapter, then the fourth as the adapter sends it, explained.
      let after: CartSearchCursor | undefined;
      for (let page = 0; page < 3; page++) {
        const found = await searchCarts(carts, search, { limit: LIMIT, ...(after ? { after } : {}) });
        t.is(found.carts.length, LIMIT, label);
        after = found.next ?? undefined;
      }
      if (!after) throw new Error(`${label}: no fourth page`);
      const sort = totalSort(cartSearchSort);
      const query = findQuery(cartSearchFilter(search), sort, after);
      const explained = (await db
        .collection(physical)
        .find(query, { sort: Object.fromEntries(sort), limit: LIMIT })
        .explain('executionStats')) as {
        queryPlanner: { winningPlan: unknown };
        executionStats: { nReturned: number; totalKeysExamined: number };
      };
      const stages = stagesOf(explained.queryPlanner.winningPlan);
      const keyPattern = Object.fromEntries([
        ...scope.map((f) => [f, 1]),
        ['_created_at', -1],
        ['id', -1],
        ['_id', 1],
      ]);
      t.true(
        stages.some(
          (s) => s.stage === 'IXSCAN' && JSON.stringify(s.keyPattern) === JSON.stringify(keyPattern),
        ),
        `${label}: ${JSON.stringify(stages)}`,
      );
      t.false(
        stages.some((s) => s.stage === 'SORT'),
        `${label}: ${JSON.stringify(stages)}`,
      );
      t.is(explained.executionStats.nReturned, LIMIT, label);
      t.true(
        explained.executionStats.totalKeysExamined <= LIMIT + SLACK,
        `${label}: ${explained.executionStats.totalKeysExamined} keys examined for a page of ${LIMIT}`,
      );
    }
  });
}
