/**
 * Nothing parks silently (docs/operations.md, "The fan-out's group"): a cart event whose fan-out
 * fails is tried again in place, far past the bound at which the group used to park it, shown by the
 * dispatcher's `/metrics`, and sent once, in its cart's order, when the cause is gone. The poison is a
 * store double around the embedded store (`support/faulty-store.ts`) that fails the reads the fan-out
 * makes of one cart until told to stop.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { manualClock } from '../../domain/clock.ts';
import { type EventStore, MAX_RETRY_COUNT, type RecordedEvent } from '../../eventstore/port.ts';
import {
  addItem,
  checkedOut,
  checkOut,
  createCart,
  createWebhook,
  idle,
  move,
  seedCatalog,
  ticking,
} from '../support/cart-world.ts';
import { standaloneFanOut } from '../support/delivery-worker.ts';
import { type FaultyStore, faultyStore } from '../support/faulty-store.ts';
import { until } from '../support/probes.ts';
import { startService, type TestService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

/** The old bound: 5 tries per hand-out, and the group parked a message after 10 retries. */
const OLD_TRIES_BEFORE_PARKING = 5 * (10 + 1);

async function dataDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-never-parks-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** The `api` and `dispatcher` roles of a split deployment on one data dir, the dispatcher's store faulty. */
async function splitDeployment(t: ExecutionContext, clock: ReturnType<typeof manualClock>) {
  const dir = await dataDir(t);
  const api = await startService(t, { role: 'api', dataDir: dir, clock, env: { PDS_READ_STORE: 'memory' } });
  let faulty: FaultyStore | undefined;
  const dispatcher = await startService(t, {
    role: 'dispatcher',
    dataDir: dir,
    clock,
    wrapStore: (inner) => {
      faulty = faultyStore(inner);
      return faulty;
    },
  });
  return { api, dispatcher, faulty: faulty as FaultyStore, store: await api.openStore() };
}

const fanOutFrom = async (s: TestService) => {
  const res = await s.call('GET', '/admin/v1/webhook-fan-out');
  if (res.status !== 200) throw new Error(`GET /admin/v1/webhook-fan-out answered ${res.status}`);
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field
  return (await res.json()) as { fan_out: Record<string, any> };
};

const metric = async (s: TestService, name: string) => {
  const text = await (await fetch(`${s.base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
};

const scheduledFor = async (store: EventStore, cartEvent: RecordedEvent) =>
  (await store.readAll({ filter: { eventTypes: ['WebhookDeliveryScheduled'] } })).filter(
    (e) => (e.data as { source_event_id: string }).source_event_id === cartEvent.id,
  );

test('a cart event whose fan-out keeps failing is never parked: tried again far past the old bound, shown in /metrics, then sent once, in its cart’s order', async (t) => {
  t.timeout(60_000);
  const clock = manualClock(new Date());
  const { api, dispatcher, faulty, store } = await splitDeployment(t, clock);
  await seedCatalog(api);
  const receiver = await startReceiver(t);
  await createWebhook(api, receiver.url, [1]);

  const poisoned = await createCart(api);
  await addItem(api, poisoned);
  const poison = faulty.failReads(`cart-${poisoned.uuid}`);
  await checkOut(api, poisoned);
  await move(api, poisoned, 'preparing');
  const [checkout, preparing] = (await store.readStream(`cart-${poisoned.uuid}`)).filter(
    (e) => e.type === 'CartStatusChanged',
  );
  // Another cart goes on meanwhile.
  const healthy = await checkedOut(api);
  const [first] = await receiver.waitFor(1);
  t.is(first.body.cart.uuid, healthy.uuid);

  // Each pause of the retries is on the dispatcher's clock: moved on by its longest, 30 s, per turn.
  await until(
    `${OLD_TRIES_BEFORE_PARKING * 4} failed tries`,
    async () => {
      clock.advance(30_000);
      await dispatcher.tick();
      return poison.failed >= OLD_TRIES_BEFORE_PARKING * 4;
    },
    30_000,
  );
  t.is(receiver.received.length, 1, 'nothing of the poisoned cart left');
  t.is(await metric(dispatcher, 'pds_webhook_fan_out_retrying'), 1);
  const age = (await metric(dispatcher, 'pds_webhook_fan_out_retrying_oldest_seconds')) ?? 0;
  const recorded = (clock.now().getTime() - Date.parse(checkout.recordedAt)) / 1000;
  t.true(age > 60 * 60 && Math.abs(age - recorded) < 1, `the age of the checkout: ${age} s`);
  const info = await store.getPersistentSubscriptionInfo('webhook-fan-out');
  t.is(info.settings.maxRetryCount, MAX_RETRY_COUNT);
  t.is(info.parkedCount, 0, 'nothing parked');
  t.deepEqual(await store.listParkedMessages('webhook-fan-out'), []);
  t.is((await scheduledFor(store, preparing)).length, 0, 'the later move waits behind the poisoned checkout');
  // The api process, which runs no dispatcher, sees it too: the group's oldest pending cart event.
  t.like((await fanOutFrom(api)).fan_out, {
    group: 'webhook-fan-out',
    state: 'behind',
    oldest_pending: {
      event_id: checkout.id,
      stream_id: `cart-${poisoned.uuid}`,
      age_seconds: Math.round(recorded),
    },
    parked: 0,
    behind_after_seconds: 300,
  });

  poison.cure();
  await ticking(dispatcher, async () => {
    clock.advance(30_000);
    return receiver.waitFor(3);
  });
  await idle(dispatcher, 300);
  t.deepEqual(
    receiver.received.slice(1).map((r) => [r.body.cart.uuid, r.body.cart.status]),
    [
      [poisoned.uuid, 'verification'],
      [poisoned.uuid, 'preparing'],
    ],
    'sent once each, in the cart’s order',
  );
  t.is((await scheduledFor(store, checkout)).length, 1, 'scheduled once');
  t.is(await metric(dispatcher, 'pds_webhook_fan_out_retrying'), 0);
  t.is(await metric(dispatcher, 'pds_webhook_fan_out_retrying_oldest_seconds'), 0);
  t.regex(dispatcher.logs(), /webhook fan-out of a cart event succeeded after failures/);
  await until('the group checkpointed past the cart', async () => {
    const { fan_out } = await fanOutFrom(api);
    return fan_out.state === 'current' && fan_out.oldest_pending === null;
  });
});

test('a message held past the group’s timeout is handed out again: the copies join the handling under way, so they take no place from other carts, schedule nothing twice, and are all acknowledged', async (t) => {
  t.timeout(60_000);
  const dir = await dataDir(t);
  const api = await startService(t, { role: 'api', dataDir: dir, env: { PDS_READ_STORE: 'memory' } });
  await seedCatalog(api);
  const receiver = await startReceiver(t);
  await createWebhook(api, receiver.url, [1]);
  // A dispatcher of its own on the same events, whose consumer runs its handlers as the EventStoreDB
  // adapter does: two at a time, the buffer it asks for. Its retries wait on a clock only the test
  // moves; the group's message timeout is the embedded store's own (real time), so what it hands out
  // again is waited for as it shows, never for a time.
  const clock = manualClock(new Date());
  const faulty = faultyStore(await api.openStore());
  faulty.limitRunningHandlers(2);
  const { fanOut, tick } = await standaloneFanOut(t, faulty, api.dataDir, {
    clock,
    bufferSize: 2,
    messageTimeoutMs: 150,
    retry: { baseMs: 5, capMs: 20 },
  });
  const poisoned = await createCart(api);
  await addItem(api, poisoned);
  const poison = faulty.failReads(`cart-${poisoned.uuid}`);
  await checkOut(api, poisoned);
  const [checkout] = (await faulty.readAll({ filter: { eventTypes: ['CartStatusChanged'] } })).filter(
    (e) => e.streamId === `cart-${poisoned.uuid}`,
  );
  await until('the checkout failed once and three copies were handed out after timeouts', () => {
    return poison.failed >= 1 && faulty.handedOut(checkout.id) >= 4;
  });
  t.is(
    poison.failed,
    1,
    'one try: its handling waits for its pause on the clock, and the copies try nothing',
  );

  const healthy = await checkedOut(api);
  const [sent] = await receiver.waitFor(1);
  t.is(sent.body.cart.uuid, healthy.uuid, 'the copies held no place another cart needed');
  t.is(fanOut.retrying().events, 1);

  poison.cure();
  await until('the poisoned checkout sent', async () => {
    clock.advance(1_000);
    await tick();
    return receiver.received.length >= 2;
  });
  await until('the group finished with the checkout: its checkpoint passed it', async () => {
    const info = await faulty.getPersistentSubscriptionInfo('webhook-fan-out');
    return (info.lastCheckpointedPosition ?? 0) >= checkout.position;
  });
  t.true(faulty.handedOut(checkout.id) >= 4);
  t.is(faulty.acked(checkout.id), faulty.handedOut(checkout.id), 'every copy was acknowledged');
  t.is((await scheduledFor(faulty, checkout)).length, 1);
  t.is(receiver.received.length, 2);
  t.is((await faulty.getPersistentSubscriptionInfo('webhook-fan-out')).parkedCount, 0);
});

test('the group an earlier version made is set never to park at start, and the messages it parked are scheduled before the replay that clears them, so a replay the server loses loses nothing', async (t) => {
  const dir = await dataDir(t);
  const api = await startService(t, { role: 'api', dataDir: dir, env: { PDS_READ_STORE: 'memory' } });
  await seedCatalog(api);
  const receiver = await startReceiver(t);
  await createWebhook(api, receiver.url, [1]);
  const cart = await checkedOut(api);

  // As an earlier dispatcher left it: the store's default bound of 10 retries, the checkout parked.
  const store = await api.openStore();
  await store.createPersistentSubscription('webhook-fan-out', {
    from: 'start',
    filter: { eventTypes: ['CartStatusChanged', 'CartAbandoned'] },
  });
  const consumer = store.subscribeToPersistent('webhook-fan-out', (m) =>
    m.nack('park', 'max retry count exceeded'),
  );
  await until(
    'the checkout parked',
    async () => (await store.listParkedMessages('webhook-fan-out')).length === 1,
  );
  await consumer.stop();
  t.is(receiver.received.length, 0);
  const [checkout] = (await store.readStream(`cart-${cart.uuid}`)).filter(
    (e) => e.type === 'CartStatusChanged',
  );

  // Every replay at its worst on EventStoreDB: the group is rebuilt before the replayed copies are
  // acknowledged (another dispatcher's settings update, a restart), and they are gone.
  let scheduledAtReplay: number | undefined;
  let lost: { readonly lost: string[] } | undefined;
  const dispatcher = await startService(t, {
    role: 'dispatcher',
    dataDir: dir,
    wrapStore: (inner) => {
      const faulty = faultyStore(inner);
      lost = faulty.loseReplayedParkedMessages(async () => {
        scheduledAtReplay = (await scheduledFor(faulty, checkout)).length;
      });
      return faulty;
    },
  });
  const [sent] = await receiver.waitFor(1);
  t.like(sent.body.cart, { uuid: cart.uuid, status: 'verification' });
  await until('the parked message replayed', () => scheduledAtReplay !== undefined);
  t.is(scheduledAtReplay, 1, 'its delivery was scheduled before the replay');
  await until('the replayed copy dropped', () => lost?.lost.includes(checkout.id));
  await idle(dispatcher, 300);
  t.is(receiver.received.length, 1, 'sent once');
  t.is((await scheduledFor(store, checkout)).length, 1);
  const info = await store.getPersistentSubscriptionInfo('webhook-fan-out');
  t.is(info.settings.maxRetryCount, MAX_RETRY_COUNT);
  t.is(info.parkedCount, 0, 'the replay cleared the parked list');
  t.regex(dispatcher.logs(), /webhook fan-out group settings updated/);
  t.regex(dispatcher.logs(), /webhook fan-out group holds parked messages: scheduling their webhooks/);
  t.regex(
    dispatcher.logs(),
    /the deliveries of its parked messages are scheduled, and the messages replayed/,
  );
});
