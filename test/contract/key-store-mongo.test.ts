import { randomUUID } from 'node:crypto';
import test from 'ava';
import { MongoClient } from 'mongodb';
import { openMongoKeyStore } from '../../projections/mongo/key-store.ts';
import { ENGINE_STARTUP_MS, withDatabase } from '../support/containers.ts';
import { type Engine, engineAccess, reportMissingEngine } from '../support/engines.ts';
import { keyStoreContract } from './key-store.ts';

/**
 * The MongoDB key store runs the shared contract on the MongoDB every engine suite finds the same way
 * (`test/support/engines.ts`): `PDS_TEST_MONGO_URL`, or a container when a container runtime answers;
 * with neither, it is reported as skipped, with the reason. Each case gets a database of its own.
 */
const access = await engineAccess('mongo');

if (access.missing !== undefined) {
  reportMissingEngine(test, 'MongoDB key store contract', access.missing);
} else {
  let running: Engine | undefined;
  test.before(async (t) => {
    t.timeout(ENGINE_STARTUP_MS);
    running = await access.start();
  });
  test.after.always(async () => {
    await running?.stop();
  });
  keyStoreContract(test, 'mongodb', async () => {
    if (!running) throw new Error('MongoDB is not running: the setup hook failed');
    const url = withDatabase(running.url, `pds_keys_${randomUUID().replaceAll('-', '').slice(0, 16)}`);
    const store = await openMongoKeyStore(url);
    return {
      store,
      cleanup: async () => {
        await store.close();
        const admin = new MongoClient(url);
        try {
          await admin.db().dropDatabase();
        } finally {
          await admin.close();
        }
      },
    };
  });
}
