import { randomUUID } from 'node:crypto';
import {
  EventStoreDBClient,
  eventTypeFilter,
  PINNED,
  persistentSubscriptionToAllSettingsFromDefaults,
  START,
} from '@eventstore/db-client';
import test from 'ava';
import { connect } from '../../eventstore/esdb/client.ts';
import { createStreams } from '../../eventstore/esdb/streams.ts';
import { createEsdbEventStore } from '../../eventstore/esdb.ts';
import {
  type EventStore,
  MAX_RETRY_COUNT,
  type NewEvent,
  type PersistentMessage,
  WrongExpectedVersionError,
} from '../../eventstore/port.ts';
import { ENGINE_STARTUP_MS } from '../support/containers.ts';
import { type Engine, engineAccess, reportMissingEngine } from '../support/engines.ts';
import { migrationScenario, parkedScenario, uncheckpointedScenario } from '../support/fan-out-migration.ts';
import { eventStoreContract } from './eventstore.ts';

/**
 * The EventStoreDB adapter runs the shared contract against the EventStoreDB every engine suite finds
 * the same way (`test/support/engines.ts`): `PDS_TEST_ESDB_URL` when it is set, or else a throwaway
 * container of the image and settings docker-compose.yml names, its data on disk as there, when a
 * container runtime answers. With neither, the suite is reported as skipped, or as failed under
 * `PDS_REQUIRE_ENGINES=1`. All tests share one engine and one store (the contract gives each test its
 * own stream prefix), closed after the last test: no test disposes of a client while others append on
 * it. `reopen` opens a store of its own, as a restarted process.
 */
const access = await engineAccess('eventstore');

if (access.missing !== undefined) {
  reportMissingEngine(test, 'EventStoreDB contract', access.missing);
} else {
  let url: string | undefined;
  let running: Engine | undefined;
  let shared: EventStore | undefined;

  test.before(async (t) => {
    t.timeout(ENGINE_STARTUP_MS);
    running = await access.start();
    url = running.url;
    shared = createEsdbEventStore(url);
  });

  // Only after the last test: every test shares the engine and the store.
  test.after.always(async () => {
    await shared?.close();
    await running?.stop();
  });

  function engine(): { url: string; store: EventStore } {
    if (!url || !shared) throw new Error('EventStoreDB is not running: the setup hook failed');
    return { url, store: shared };
  }

  eventStoreContract(test, 'esdb', async () => {
    const { url: connection, store } = engine();
    const own: EventStore[] = [];
    return {
      store,
      async reopen() {
        const next = createEsdbEventStore(connection);
        own.push(next);
        return next;
      },
      async cleanup() {
        await Promise.all(own.map((s) => s.close()));
      },
    };
  });

  const event = (type: string): NewEvent => ({
    id: randomUUID(),
    type,
    data: {},
    metadata: {
      correlation_id: randomUUID(),
      causation_id: null,
      actor: { type: 'platform', id: 'esdb-test' },
      occurred_at: '2026-01-02T03:04:05.000Z',
      schema_version: 1,
    },
  });
  const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const prefix = () => `t${randomUUID().replaceAll('-', '').slice(0, 12)}`;

  test('esdb: the append that starts a stream with a max age sets its $maxAge, in seconds rounded up', async (t) => {
    const { url: connection, store } = engine();
    const p = prefix();
    await store.append(`${p}-op`, [event('Claimed')], { expectedRevision: 'no_stream', maxAgeMs: 90_500 });
    await store.append(`${p}-cart`, [event('Created')]);
    const client = connect(connection);
    t.teardown(() => client.dispose());
    t.is((await client.getStreamMetadata(`${p}-op`)).metadata?.maxAge, 91);
    t.is(
      (await client.getStreamMetadata(`${p}-cart`)).metadata?.maxAge,
      undefined,
      'a business stream: none',
    );
    // A later append to the stream leaves the metadata as it is (one write per stream).
    await store.append(`${p}-op`, [event('Recorded')], { expectedRevision: 0, maxAgeMs: 90_500 });
    t.is((await client.getStreamMetadata(`${p}-op`)).metastreamRevision, 0n);
  });

  test('esdb: a replayed parked message carries its event’s own position, not the parked link’s', async (t) => {
    const { store } = engine();
    const p = prefix();
    const original = event('A');
    const a = await store.append(`${p}-a`, [original]);
    const group = `${p}-g`;
    await store.createPersistentSubscription(group, { filter: { streamPrefixes: [p] } });
    const received: PersistentMessage[] = [];
    let park = true;
    const consumer = store.subscribeToPersistent(group, async (m) => {
      received.push(m);
      await (park ? m.nack('park', 'down') : m.ack());
    });
    for (let i = 0; i < 200 && (await store.listParkedMessages(group)).length < 1; i++) await delay(25);
    park = false;
    await store.replayParkedMessages(group);
    for (let i = 0; i < 400 && received.length < 2; i++) await delay(25);
    t.is(received.length, 2);
    t.deepEqual(
      received.map((m) => [m.event.id, m.event.position]),
      [
        [original.id, a.position],
        [original.id, a.position],
      ],
    );
    await consumer.stop();
    await store.deletePersistentSubscription(group);
  });

  test('esdb: filtered $all reads and headPosition find a match behind many other events', async (t) => {
    const { store } = engine();
    const p = prefix();
    const rare = await store.append(`${p}-rare`, [event('Rare')]);
    // Far more events than one page of the unfiltered read, after the match.
    for (let i = 0; i < 5; i++) {
      await store.append(
        `${p}-common-${i}`,
        Array.from({ length: 500 }, () => event('Common')),
      );
    }
    t.is(await store.headPosition({ streamPrefixes: [`${p}-rare`] }), rare.position);
    t.is(await store.headPosition({ eventTypes: [`${p}None`] }), 0);
    const read = await store.readAll({ filter: { streamPrefixes: [`${p}-rare`] } });
    t.deepEqual(
      read.map((e) => e.position),
      [rare.position],
    );
    const after = await store.readAll({ after: rare.position, maxCount: 3, filter: { streamPrefixes: [p] } });
    t.deepEqual(
      after.map((e) => e.streamId),
      [`${p}-common-0`, `${p}-common-0`, `${p}-common-0`],
    );
  });

  test('esdb: the server’s wrong expected version, answered as success:false by such a client, is refused', async (t) => {
    const { url: connection } = engine();
    // connect() refuses throwOnAppendFailure=false; the adapter's appends still never take its answer for a write.
    const client = EventStoreDBClient.connectionString(
      `${connection}${connection.includes('?') ? '&' : '?'}throwOnAppendFailure=false`,
    );
    t.teardown(() => client.dispose());
    const streams = createStreams(client);
    const p = prefix();
    await streams.append(`${p}-s`, [event('A'), event('B')]);
    const stale = await t.throwsAsync(streams.append(`${p}-s`, [event('C')], { expectedRevision: 0 }), {
      instanceOf: WrongExpectedVersionError,
    });
    t.like(stale, { expected: 0, actual: 1 });
    const missing = await t.throwsAsync(streams.append(`${p}-m`, [event('A')], { expectedRevision: 2 }), {
      instanceOf: WrongExpectedVersionError,
    });
    t.like(missing, { expected: 2, actual: 'no_stream' });
    t.deepEqual(
      (await streams.readStream(`${p}-s`)).map((e) => e.type),
      ['A', 'B'],
    );
  });

  test('esdb: a group made with other settings (the client’s defaults) reports them outdated, and an update sets them', async (t) => {
    const { url: connection, store } = engine();
    const p = prefix();
    const group = `${p}-g`;
    // As an earlier version could have made it: round robin, checkpoints after 2 s and 10 messages.
    const client = connect(connection);
    t.teardown(() => client.dispose());
    await client.createPersistentSubscriptionToAll(
      group,
      persistentSubscriptionToAllSettingsFromDefaults({ startFrom: START }),
      { filter: eventTypeFilter({ prefixes: [`${p}Kept`] }) },
    );
    const before = await store.getPersistentSubscriptionInfo(group);
    t.deepEqual(before.outdated.sort(), ['checkPointAfter', 'checkPointLowerBound', 'consumerStrategyName']);
    t.is(before.settings.maxRetryCount, 10);
    await store.updatePersistentSubscription(group, { maxRetryCount: MAX_RETRY_COUNT });
    const after = await store.getPersistentSubscriptionInfo(group);
    t.deepEqual(after.outdated, []);
    t.is(after.settings.maxRetryCount, MAX_RETRY_COUNT);
    t.is((await client.getPersistentSubscriptionToAllInfo(group)).settings.consumerStrategyName, PINNED);
    // The filter, which the server does not report, is kept by the update.
    await store.append(`${p}-a`, [event(`${p}Dropped`), event(`${p}Kept`)]);
    const received: PersistentMessage[] = [];
    const consumer = store.subscribeToPersistent(group, async (m) => {
      received.push(m);
      await m.ack();
    });
    for (let i = 0; i < 200 && received.length < 1; i++) await delay(25);
    await delay(200);
    t.deepEqual(
      received.map((m) => m.event.type),
      [`${p}Kept`],
    );
    await consumer.stop();
    await store.deletePersistentSubscription(group);
  });

  test('esdb: the fan-out meets its group of an earlier definition: made after its checkpoint, its parked message handled, then deleted', async (t) => {
    await migrationScenario(t, engine().store, prefix());
  });

  test('esdb: a message parked in the fan-out’s group is handled from the parked stream, with its own position, before the replay; the group rebuilt right after loses nothing', async (t) => {
    await parkedScenario(t, engine().store, prefix());
  });

  test('esdb: a group of another definition with no checkpoint is migrated from at once when it has handled nothing, and makes the migration wait once events of the new definition follow its start', async (t) => {
    await uncheckpointedScenario(t, engine().store, prefix());
  });
}
