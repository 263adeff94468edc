import { randomUUID } from 'node:crypto';
import test from 'ava';
import { Query } from 'mingo';
import { MongoClient } from 'mongodb';
import type { StartedTestContainer } from 'testcontainers';
import { compareValues } from '../../projections/memory-read-store.ts';
import { createMongoReadStore, ReadStoreUnavailableError } from '../../projections/mongo-read-store.ts';
import { afterFilter, type Doc, type SortSpec, totalSort } from '../../projections/read-store.ts';
import { containerRuntimeProblem } from '../support/containers.ts';
import { readStoreContract } from './read-store.ts';

/**
 * The MongoDB adapter runs the shared contract against `PDS_TEST_MONGO_URL` when it is set, or else
 * against a throwaway single-node container (the image docker-compose.yml uses) when a container
 * runtime answers. With neither, the suite is reported as skipped. All tests share one server; each
 * test gets its own database (dropped afterwards) and its own client.
 */
const IMAGE = 'mongo:8';
const PORT = 27017;
const STARTUP_MS = 10 * 60_000;

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

// ---- the contract on a server ----------------------------------------------------------------------

const configuredUrl = process.env.PDS_TEST_MONGO_URL;
const problem = configuredUrl ? undefined : await containerRuntimeProblem();

if (problem !== undefined) {
  const reason = `PDS_TEST_MONGO_URL is not set and no container runtime is available (${problem})`;
  console.log(`MongoDB contract skipped: ${reason}`);
  test.skip(`MongoDB contract: skipped — ${reason}`, () => {});
} else {
  let url = configuredUrl;
  let container: StartedTestContainer | undefined;

  test.before(async (t) => {
    if (url) return;
    // Pulling the image can take minutes on a cold machine.
    t.timeout(STARTUP_MS);
    const { GenericContainer, Wait } = await import('testcontainers');
    container = await new GenericContainer(IMAGE)
      .withExposedPorts(PORT)
      .withWaitStrategy(Wait.forLogMessage(/Waiting for connections/))
      .withStartupTimeout(STARTUP_MS)
      .start();
    url = `mongodb://${container.getHost()}:${container.getMappedPort(PORT)}/?directConnection=true`;
  });

  // Only after the last test: every test shares the server.
  test.after.always(async () => {
    await container?.stop();
  });

  readStoreContract(test, 'mongodb', async () => {
    if (!url) throw new Error('MongoDB is not running: the setup hook failed');
    const dbName = `pds_contract_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
    const store = await createMongoReadStore(url, { dbName });
    const engine = url;
    return {
      store,
      async cleanup() {
        await store.close();
        const admin = new MongoClient(engine);
        try {
          await admin.db(dbName).dropDatabase();
        } finally {
          await admin.close();
        }
      },
    };
  });
}
