/**
 * The fan-out of one cart event to many subscriptions (dispatcher/fan-out-schedule.ts;
 * docs/webhooks.md, "How a delivery flows"): its schedules are requested together, so the embedded store commits them
 * together, and every guarantee holds when one of them fails in the middle
 * (docs/webhooks.md, "Order, isolation, durability"): the handling is tried again, each subscription
 * gets one delivery per cart event with its name-based id, in the cart's order.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { loadConfig } from '../../cli/config.ts';
import { eventStoreOptionsOf } from '../../cli/store-options.ts';
import { createDeliveryWorker } from '../../dispatcher/delivery-worker.ts';
import {
  createOwedDeliveries,
  FAN_OUT_PARALLEL,
  type ScheduleRequest,
} from '../../dispatcher/fan-out-schedule.ts';
import { createSubscriptionTracker } from '../../dispatcher/subscription-tracker.ts';
import { type Clock, manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import { type EventStore, EventStoreUnavailableError } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import {
  addItem,
  checkedOut,
  checkOut,
  createCart,
  createWebhook,
  idle,
  move,
  seedCatalog,
} from '../support/cart-world.ts';
import { scheduledDeliveryIds } from '../support/delivery-worker.ts';
import { type FaultyStore, faultyStore } from '../support/faulty-store.ts';
import { until } from '../support/probes.ts';
import { startService } from '../support/service.ts';
import { walCommits } from '../support/wal-commits.ts';
import { type Receiver, startReceiver } from '../support/webhook-receiver.ts';

const SUBSCRIPTIONS = 50;

async function dataDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-fan-out-schedule-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** `SUBSCRIPTIONS` subscriptions for store 1 to `receiver`, made by a service that is then stopped. */
async function subscribed(
  t: ExecutionContext,
  dir: string,
  receiver: Receiver,
  clock = manualClock(new Date()),
) {
  const s = await startService(t, { dataDir: dir, clock });
  await seedCatalog(s);
  const hooks: string[] = [];
  for (let i = 0; i < SUBSCRIPTIONS; i++) hooks.push((await createWebhook(s, receiver.url, [1])).id);
  return { s, hooks, clock };
}

/**
 * The embedded store of `dir` as the dispatcher thread opens it (wrapped by `wrap`), with a
 * subscription tracker and a delivery worker on it, caught up; all stopped after the test.
 */
async function dispatcherOn<S extends EventStore>(
  t: ExecutionContext,
  dir: string,
  clock: Clock,
  wrap: (store: EventStore) => S = (store) => store as S,
) {
  const store = wrap(
    await openSqliteEventStore(
      path.join(dir, 'events.db'),
      eventStoreOptionsOf({ role: 'all', thread: 'dispatcher' }, true),
    ),
  );
  const readStore = openSqliteReadStore(':memory:');
  const config = await loadConfig({ PDS_DATA_DIR: dir });
  const tracker = createSubscriptionTracker({ store });
  tracker.start();
  await tracker.caughtUp;
  const worker = createDeliveryWorker({
    store,
    readStore,
    clock,
    tracker,
    secretKey: config.secretKey,
    allowPrivate: true,
    timeoutMs: 5_000,
    scheduleMs: config.webhookRetryScheduleMs,
  });
  t.teardown(async () => {
    await worker.stop();
    await tracker.stop();
    await readStore.close();
    await store.close();
  });
  worker.start();
  await worker.caughtUp;
  return { store, tracker, worker };
}

test('a cart event owed to 50 subscriptions is scheduled in at most two commits of the embedded store, as the dispatcher thread opens it', async (t) => {
  const dir = await dataDir(t);
  const receiver = await startReceiver(t);
  const { s, hooks, clock } = await subscribed(t, dir, receiver);
  const cart = await checkedOut(s);
  await s.service.stop();

  const file = path.join(dir, 'events.db');
  const { store, tracker, worker } = await dispatcherOn(t, dir, clock);
  const scheduleOwed = createOwedDeliveries({
    store,
    registry: eventRegistry,
    clock,
    tracker,
    deliveries: worker,
  });
  const [checkout] = (await store.readStream(`cart-${cart.uuid}`)).filter(
    (e) => e.type === 'CartStatusChanged',
  );

  const before = walCommits(file);
  t.is(await scheduleOwed(checkout), SUBSCRIPTIONS);
  const commits = walCommits(file) - before;
  t.log(`${commits} commits for ${SUBSCRIPTIONS} schedules`);
  t.true(commits >= 1 && commits <= 2, `${commits} commits for ${SUBSCRIPTIONS} schedules`);

  // Each subscription's queue holds the one delivery, with its name-based id, and it is sent.
  for (const hook of hooks) {
    t.deepEqual(await scheduledDeliveryIds(store, hook, cart.uuid), [delivery.deliveryId(hook, checkout.id)]);
  }
  await receiver.waitFor(SUBSCRIPTIONS);
  t.is(await scheduleOwed(checkout), 0, 'a repeat writes nothing');
});

test('an append refused in the middle of a fan-out: the cart event is tried again, and each of 50 subscriptions gets each of the cart’s events once, with its id, in order', async (t) => {
  t.timeout(60_000);
  const dir = await dataDir(t);
  const receiver = await startReceiver(t);
  const clock = manualClock(new Date());
  const api = await startService(t, { role: 'api', dataDir: dir, clock, env: { PDS_READ_STORE: 'memory' } });
  await seedCatalog(api);
  const hooks: string[] = [];
  // A path per subscription, so that the receiver tells them apart.
  for (let i = 0; i < SUBSCRIPTIONS; i++)
    hooks.push((await createWebhook(api, `${receiver.url}/${i}`, [1])).id);
  let faulty: FaultyStore | undefined;
  /** The schedules the dispatcher appended (or tried to), by cart event: the 17th of each is refused. */
  const tried = new Map<string, number>();
  const dispatcher = await startService(t, {
    role: 'dispatcher',
    dataDir: dir,
    clock,
    wrapStore: (inner) => {
      const store = faultyStore(inner);
      const append = store.append;
      store.append = (streamId, events, options) => {
        if (events[0]?.type === 'WebhookDeliveryScheduled') {
          const source = (events[0].data as { source_event_id: string }).source_event_id;
          const n = (tried.get(source) ?? 0) + 1;
          tried.set(source, n);
          if (n === 17) store.failAppends(1);
        }
        return append(streamId, events, options);
      };
      faulty = store;
      return store;
    },
  });
  const cart = await createCart(api);
  await addItem(api, cart);
  await checkOut(api, cart);
  await move(api, cart, 'preparing');
  const store: EventStore = await api.openStore();
  const cartEvents = (await store.readStream(`cart-${cart.uuid}`)).filter(
    (e) => e.type === 'CartStatusChanged',
  );
  t.is(cartEvents.length, 2);

  // The retries' pauses are on the dispatcher's clock: moved on by a second per look.
  await until(
    `${2 * SUBSCRIPTIONS} webhooks received`,
    async () => {
      clock.advance(1_000);
      await dispatcher.tick();
      return receiver.received.length >= 2 * SUBSCRIPTIONS;
    },
    30_000,
  );
  await idle(dispatcher);
  t.is(faulty?.injected.failedAppends, 2, 'one append refused in each of the two fan-outs');
  t.deepEqual(
    cartEvents.map((e) => tried.get(e.id)),
    [SUBSCRIPTIONS + 1, SUBSCRIPTIONS + 1],
    'each fan-out tried again wrote only the refused one',
  );

  for (const [i, hook] of hooks.entries()) {
    const ids = cartEvents.map((e) => delivery.deliveryId(hook, e.id));
    t.deepEqual(
      await scheduledDeliveryIds(store, hook, cart.uuid),
      ids,
      `subscription ${i}: one delivery per cart event, in the cart's order`,
    );
    t.deepEqual(
      receiver.received
        .filter((r) => r.path === `/hooks/${i}`)
        .map((r) => [r.body.cart.status, r.headers['x-service-webhook-id']]),
      [
        ['verification', ids[0]],
        ['preparing', ids[1]],
      ],
      `subscription ${i}: sent once each, in the cart's order`,
    );
  }
});

test('at most 256 schedules are under way at once, over every cart event handled together; a failure is answered once every one started has settled', async (t) => {
  const dir = await dataDir(t);
  const receiver = await startReceiver(t);
  const clock = manualClock(new Date());
  const s = await startService(t, { dataDir: dir, clock });
  await seedCatalog(s);
  await createWebhook(s, receiver.url, [1]);
  const cart = await checkedOut(s);
  const store = await s.openStore();
  const tracker = createSubscriptionTracker({ store });
  tracker.start();
  await tracker.caughtUp;
  t.teardown(() => tracker.stop());
  // 600 subscriptions covering the cart's store: more than are requested at once.
  const many = Array.from({ length: 600 }, () => ({
    ...tracker.covering(1, 'cart_status_updated', Number.MAX_SAFE_INTEGER)[0],
    webhook_id: randomUUID(),
  }));
  let failing: string | null = many[300].webhook_id;
  const seen = { underWay: 0, most: 0, settled: 0, requested: [] as ScheduleRequest[] };
  const scheduleOwed = createOwedDeliveries({
    store,
    registry: eventRegistry,
    clock,
    tracker: { ...tracker, covering: () => many },
    deliveries: {
      async schedule(request) {
        seen.requested.push(request);
        seen.underWay += 1;
        seen.most = Math.max(seen.most, seen.underWay);
        try {
          await new Promise((r) => setImmediate(r));
          if (request.command.webhook_id === failing) throw new Error('the store is out of reach');
          return true;
        } finally {
          seen.underWay -= 1;
          seen.settled += 1;
        }
      },
    },
  });
  const [checkout] = (await store.readStream(`cart-${cart.uuid}`)).filter(
    (e) => e.type === 'CartStatusChanged',
  );
  await t.throwsAsync(scheduleOwed(checkout), { message: 'the store is out of reach' });
  t.is(seen.underWay, 0, 'every request started settled before the answer');
  t.is(seen.settled, seen.requested.length);
  t.true(seen.requested.length > 300 && seen.requested.length < many.length, 'the rest not started');
  t.is(seen.most, FAN_OUT_PARALLEL);
  t.deepEqual(
    seen.requested.map((r) => [r.stream, r.command.delivery_id]),
    many
      .slice(0, seen.requested.length)
      .map((sub) => [
        delivery.streamId(sub.webhook_id, cart.uuid),
        delivery.deliveryId(sub.webhook_id, checkout.id),
      ]),
    'each subscription once, in order, with its queue and its delivery id',
  );
  // Two cart events handled at once (the group hands out up to 32) share the one bound.
  failing = null;
  seen.most = 0;
  seen.requested = [];
  const written = await Promise.all([scheduleOwed(checkout), scheduleOwed(checkout)]);
  t.deepEqual(written, [many.length, many.length]);
  t.is(seen.most, FAN_OUT_PARALLEL, 'the bound is the fan-out’s, not each event’s');
  const each = many.map((sub) => [
    delivery.streamId(sub.webhook_id, cart.uuid),
    delivery.deliveryId(sub.webhook_id, checkout.id),
  ]);
  t.deepEqual(
    seen.requested.map((r) => [r.stream, r.command.delivery_id]).sort(),
    [...each, ...each].sort(),
    'each subscription once per handling, with its queue and its delivery id',
  );
});

test('once a schedule has failed, those of the cart event still waiting for a place are not started: with every append refused, at most 256 of 600 are tried; the retry writes all 600', async (t) => {
  const dir = await dataDir(t);
  const receiver = await startReceiver(t);
  const { s, clock } = await subscribed(t, dir, receiver);
  const cart = await checkedOut(s);
  await s.service.stop();
  const { store, tracker, worker } = await dispatcherOn(t, dir, clock, faultyStore);
  // 600 subscriptions covering the cart's store, none of them known to the worker (no head start).
  const many = Array.from({ length: 600 }, () => ({
    ...tracker.covering(1, 'cart_status_updated', Number.MAX_SAFE_INTEGER)[0],
    webhook_id: randomUUID(),
  }));
  const scheduleOwed = createOwedDeliveries({
    store,
    registry: eventRegistry,
    clock,
    tracker: { ...tracker, covering: () => many },
    deliveries: worker,
  });
  const [checkout] = (await store.readStream(`cart-${cart.uuid}`)).filter(
    (e) => e.type === 'CartStatusChanged',
  );

  // The store out of reach for appends: every one tried fails.
  store.failAppends(Number.MAX_SAFE_INTEGER);
  await t.throwsAsync(scheduleOwed(checkout), { instanceOf: EventStoreUnavailableError });
  const tried = store.injected.failedAppends;
  t.log(`${tried} of ${many.length} appends tried`);
  t.true(tried >= 1 && tried <= FAN_OUT_PARALLEL, `${tried} appends tried`);

  // Back: the retry writes every one, those never tried included, each once.
  store.failAppends(0);
  t.is(await scheduleOwed(checkout), many.length);
  t.is(await scheduleOwed(checkout), 0, 'a repeat writes nothing');
});
