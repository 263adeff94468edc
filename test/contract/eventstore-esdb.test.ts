import test from 'ava';
import type { StartedTestContainer } from 'testcontainers';
import { createEsdbEventStore } from '../../eventstore/esdb.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { containerRuntimeProblem } from '../support/containers.ts';
import { eventStoreContract } from './eventstore.ts';

/**
 * The EventStoreDB adapter runs the shared contract against `PDS_TEST_ESDB_URL` when it is set, or else
 * against a throwaway container (the image docker-compose.yml uses) when a container runtime answers.
 * With neither, the suite is reported as skipped. All tests share one engine; the contract gives each
 * test its own stream prefix, and each test gets its own client so `reopen` and `cleanup` stay local.
 */
const IMAGE = 'docker.eventstore.com/eventstore/eventstore:24.10';
const HTTP_PORT = 2113;
const STARTUP_MS = 10 * 60_000;

const configuredUrl = process.env.PDS_TEST_ESDB_URL;
const problem = configuredUrl ? undefined : await containerRuntimeProblem();

if (problem !== undefined) {
  const reason = `PDS_TEST_ESDB_URL is not set and no container runtime is available (${problem})`;
  console.log(`EventStoreDB contract skipped: ${reason}`);
  test.skip(`EventStoreDB contract: skipped — ${reason}`, () => {});
} else {
  let url = configuredUrl;
  let container: StartedTestContainer | undefined;

  test.before(async (t) => {
    if (url) return;
    // Pulling the image can take minutes on a cold machine.
    t.timeout(STARTUP_MS);
    const { GenericContainer, Wait } = await import('testcontainers');
    container = await new GenericContainer(IMAGE)
      .withEnvironment({
        EVENTSTORE_INSECURE: 'true',
        EVENTSTORE_RUN_PROJECTIONS: 'All',
        EVENTSTORE_START_STANDARD_PROJECTIONS: 'true',
        EVENTSTORE_MEM_DB: 'true',
      })
      .withExposedPorts(HTTP_PORT)
      .withWaitStrategy(
        Wait.forHttp('/health/live', HTTP_PORT).forStatusCodeMatching((s) => s >= 200 && s < 300),
      )
      .withStartupTimeout(STARTUP_MS)
      .start();
    url = `esdb://${container.getHost()}:${container.getMappedPort(HTTP_PORT)}?tls=false`;
  });

  // Only after the last test: every test shares the engine.
  test.after.always(async () => {
    await container?.stop();
  });

  eventStoreContract(test, 'esdb', async () => {
    if (!url) throw new Error('EventStoreDB is not running: the setup hook failed');
    const engine = url;
    let current: EventStore = createEsdbEventStore(engine);
    return {
      store: current,
      async reopen() {
        await current.close();
        current = createEsdbEventStore(engine);
        return current;
      },
      async cleanup() {
        await current.close();
      },
    };
  });
}
