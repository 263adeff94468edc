/**
 * A dispatcher meets the fan-out group of another definition, a later version's after a rollback
 * (docs/operations.md, "The fan-out's group"). It migrates at once when that group reports its
 * checkpoint; while the group reports none but has handled events (EventStoreDB loading it after a
 * restart: `loadingCheckpoint` of support/faulty-store.ts), it waits instead of fanning out the whole
 * log again, and takes the group from its start only once a minute has passed on its clock. One with
 * nothing of this definition after its start has handled nothing: migrated from at once.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { CHECKPOINT_WAIT_MS } from '../../dispatcher/fan-out-group.ts';
import { manualClock } from '../../domain/clock.ts';
import {
  type EventStore,
  PersistentSubscriptionNotFoundError,
  type RecordedEvent,
} from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { FAN_OUT_DEFINITION, FAN_OUT_GROUP, isGroupOf } from '../../webhooks/fan-out-group.ts';
import { checkedOut, createWebhook, idle, seedCatalog } from '../support/cart-world.ts';
import { standaloneFanOut } from '../support/delivery-worker.ts';
import { uncheckpointedScenario } from '../support/fan-out-migration.ts';
import { faultyStore } from '../support/faulty-store.ts';
import { until } from '../support/probes.ts';
import { rawEvent } from '../support/raw-events.ts';
import { startService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

/** The group a later version made, which a rollback meets. */
const LATER = 'webhook-fan-out-0badc0de';

/**
 * Two checked-out carts, and the group a later version made: it handled the first checkout and parked
 * the second, and checkpointed past both. No dispatcher of this version has run.
 */
async function afterRollback(t: ExecutionContext) {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-fan-out-group-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  // The platform and admin APIs alone: no dispatcher hands anything out yet.
  const api = await startService(t, { role: 'api', dataDir, env: { PDS_READ_STORE: 'memory' } });
  await seedCatalog(api);
  const receiver = await startReceiver(t);
  await createWebhook(api, receiver.url, [1]);
  const handled = await checkedOut(api);
  const parked = await checkedOut(api);
  const store = await api.openStore();
  await store.createPersistentSubscription(LATER, FAN_OUT_DEFINITION);
  const consumer = store.subscribeToPersistent(LATER, (m) =>
    m.event.streamId === `cart-${parked.uuid}` ? m.nack('park', 'poison') : m.ack(),
  );
  const last = await store.headPosition(FAN_OUT_DEFINITION.filter);
  await until(
    'the later group checkpointed past both checkouts',
    async () => ((await store.getPersistentSubscriptionInfo(LATER)).lastCheckpointedPosition ?? 0) >= last,
  );
  await consumer.stop();
  const checkoutOf = async (uuid: string) =>
    (await store.readStream(`cart-${uuid}`)).find((e) => e.type === 'CartStatusChanged') as RecordedEvent;
  return {
    api,
    dataDir,
    receiver,
    store,
    last,
    handled: await checkoutOf(handled.uuid),
    parked: await checkoutOf(parked.uuid),
  };
}

const scheduledFor = async (store: EventStore, cartEvent: RecordedEvent) =>
  (await store.readAll({ filter: { eventTypes: ['WebhookDeliveryScheduled'] } })).filter(
    (e) => (e.data as { source_event_id: string }).source_event_id === cartEvent.id,
  );

const fanOutGroups = async (store: EventStore) =>
  (await store.listPersistentSubscriptions())
    .filter((g) => isGroupOf(FAN_OUT_GROUP, g.group))
    .map((g) => g.group);

test('a dispatcher that meets the group of another definition (a rollback) migrates: what that group handled is not sent again, what it parked is sent, and it is deleted', async (t) => {
  const { dataDir, receiver, store, parked } = await afterRollback(t);
  const dispatcher = await startService(t, { role: 'dispatcher', dataDir });
  const [sent] = await receiver.waitFor(1);
  await idle(dispatcher, 500);
  t.is(receiver.received.length, 1, 'what the other group handled is not sent again');
  t.is(sent.body.cart.uuid, parked.streamId.slice('cart-'.length));
  t.deepEqual(await fanOutGroups(store), ['webhook-fan-out']);
  t.regex(dispatcher.logs(), /webhook fan-out group of another definition found/);
});

test('while the other group reports no checkpoint (EventStoreDB loading it), the migration waits; once it shows, nothing that group handled is sent again', async (t) => {
  const { api, receiver, store, last, handled, parked } = await afterRollback(t);
  const faulty = faultyStore(await api.openStore());
  const loading = faulty.loadingCheckpoint(LATER);
  const clock = manualClock(new Date());
  const { tick } = await standaloneFanOut(t, faulty, api.dataDir, { clock });
  t.true(loading.looks > 0);
  await t.throwsAsync(store.getPersistentSubscriptionInfo('webhook-fan-out'), {
    instanceOf: PersistentSubscriptionNotFoundError,
  });
  // It looks again after each pause, and keeps waiting while the checkpoint does not show.
  const looked = loading.looks;
  await until('looked again', async () => {
    clock.advance(1_000);
    await tick();
    return loading.looks > looked + 2;
  });
  t.deepEqual(await fanOutGroups(store), [LATER], 'nothing made, nothing deleted');

  loading.loaded();
  await until('the group of this definition made', async () => {
    clock.advance(1_000);
    await tick();
    return (await fanOutGroups(store)).includes('webhook-fan-out');
  });
  t.like((await store.getPersistentSubscriptionInfo('webhook-fan-out')).settings, { from: { after: last } });
  const [sent] = await receiver.waitFor(1);
  t.is(sent.body.cart.uuid, parked.streamId.slice('cart-'.length), 'what the other group parked is sent');
  await until('the other group deleted', async () => !(await fanOutGroups(store)).includes(LATER));
  t.deepEqual(await scheduledFor(store, handled), [], 'what the other group handled is not fanned out again');
  t.is(receiver.received.length, 1);
});

test('a group of another definition that never shows a checkpoint is taken from its start once a minute has passed on the clock', async (t) => {
  const { api, receiver, store, handled } = await afterRollback(t);
  const faulty = faultyStore(await api.openStore());
  faulty.loadingCheckpoint(LATER); // for good: as a group that has none
  const clock = manualClock(new Date());
  const { tick } = await standaloneFanOut(t, faulty, api.dataDir, { clock });
  clock.advance(CHECKPOINT_WAIT_MS - 1_000);
  await tick();
  t.deepEqual(await fanOutGroups(store), [LATER], 'still waiting just before the minute');
  await until('the group of this definition made', async () => {
    clock.advance(1_000);
    await tick();
    return (await fanOutGroups(store)).includes('webhook-fan-out');
  });
  t.like((await store.getPersistentSubscriptionInfo('webhook-fan-out')).settings, { from: { after: 0 } });
  // From the start: the handled checkout comes again, and its delivery is scheduled (here, where the
  // later version's dispatcher never scheduled it); the parked one is sent too.
  await receiver.waitFor(2);
  t.is((await scheduledFor(store, handled)).length, 1);
});

test('a group of another definition with nothing of this definition after its start has handled nothing: migrated from at once, from its start; with something, the migration waits', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-fan-out-group-'));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  await store.append('p6-other-1', [rawEvent('p6Other', {})]);
  await uncheckpointedScenario(t, store, 'p6');
});
