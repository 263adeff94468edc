/**
 * The delivery worker's bound on requests open (docs/webhooks.md, "Scale"): at most `maxInFlight`
 * over every subscription, each at most its own 8, handed out in turn so a subscription with one due
 * queue is not starved by one with hundreds; a due queue without a slot waits as a ready-list entry
 * (`slots().waiting`), not as an attempt under way; every delivery is still delivered once, each
 * cart's in order, and the first attempt still starts with the scheduling when the budget allows.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { toNewEvents } from '../../application/command-handler.ts';
import { manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { createWebhook, seedCatalog } from '../support/cart-world.ts';
import { attempts, scheduleRequest, workerOn } from '../support/delivery-worker.ts';
import { faultyStore } from '../support/faulty-store.ts';
import { until } from '../support/probes.ts';
import { startService } from '../support/service.ts';
import { type Receiver, startReceiver } from '../support/webhook-receiver.ts';

const SCHEDULED = 'WebhookDeliveryScheduled';
const STARTED = 'WebhookDeliveryAttemptStarted';
const ATTEMPTED = 'WebhookDeliveryAttempted';
const ENV = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h' };

/** `count` subscriptions for store 1 to `receiver`, made by a service then stopped; a worker alone on its data. */
async function workerWithSubscriptions(
  t: ExecutionContext,
  receiver: Receiver,
  count: number,
  options: Parameters<typeof workerOn>[4],
) {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-request-slots-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const clock = manualClock(new Date());
  const s = await startService(t, { dataDir, clock, env: ENV });
  await seedCatalog(s);
  const hookIds: string[] = [];
  for (let i = 0; i < count; i++) hookIds.push((await createWebhook(s, receiver.url, [1])).id);
  await s.service.stop();
  const on = await workerOn(t, dataDir, clock, ENV, options);
  on.worker.start();
  await on.worker.caughtUp;
  return { ...on, hookIds, clock };
}

/** The request of the delivery of `cart`'s revision `revision` to `hookId`, its body naming all three. */
function request(hookId: string, cart: string, revision: number, clock: ReturnType<typeof manualClock>) {
  const r = scheduleRequest(hookId, cart, revision, clock);
  r.command.body = JSON.stringify({ hook: hookId, cart, revision });
  return r;
}

test('with a cap of 4, five subscriptions with 8 slots each have at most 4 requests open; each delivery delivered once, each cart in order', async (t) => {
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 200, delayMs: 15 });
  const { worker, store, hookIds, clock } = await workerWithSubscriptions(t, receiver, 5, { maxInFlight: 4 });
  const carts = Array.from({ length: 8 }, () => randomUUID());
  let scheduled = 0;
  for (const hookId of hookIds)
    for (const cart of carts)
      for (const revision of [1, 2]) {
        t.true(await worker.schedule(request(hookId, cart, revision, clock)));
        scheduled += 1;
      }

  await receiver.waitFor(scheduled, 60_000);
  await attempts(store, scheduled);
  t.true(receiver.open().max <= 4, `at most 4 requests open at once, not ${receiver.open().max}`);
  t.true(receiver.open().max >= 2, 'the requests did overlap');
  const ids = receiver.received.map((r) => r.headers['x-service-webhook-id']);
  t.is(new Set(ids).size, scheduled, 'every delivery sent once');
  for (const hookId of hookIds)
    for (const cart of carts) {
      const revisions = receiver.received
        .filter((r) => r.body.hook === hookId && r.body.cart === cart)
        .map((r) => r.body.revision);
      t.deepEqual(revisions, [1, 2], `cart ${cart} to ${hookId} in order`);
    }
  await until('every queue settled', () => worker.queues() === 0);
  t.deepEqual(worker.slots(), { inFlight: 0, waiting: 0 });
});

test('a subscription with one due queue is served within one round while another has 500 waiting', async (t) => {
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 200, delayMs: 100 });
  const { worker, hookIds, clock } = await workerWithSubscriptions(t, receiver, 2, { maxInFlight: 2 });
  const [busy, lone] = hookIds;
  for (let i = 0; i < 500; i++) await worker.schedule(request(busy, randomUUID(), 1, clock));
  t.true(worker.slots().waiting > 100, `the busy subscription's backlog waits (${worker.slots().waiting})`);
  await worker.schedule(request(lone, randomUUID(), 1, clock));
  const before = receiver.received.length;

  await until('the lone subscription served', () => receiver.received.some((r) => r.body.hook === lone));
  const after = receiver.received.slice(before);
  const turn = after.findIndex((r) => r.body.hook === lone);
  // Two requests of the busy subscription may be on their way when it is scheduled, and it may have one
  // turn before the lone one's.
  t.true(turn <= 3, `served after ${turn} of the busy subscription's requests, not behind its backlog`);
  t.true(receiver.open().max <= 2);
});

test('due queues waiting for a slot are ready-list entries, not attempts under way', async (t) => {
  const receiver = await startReceiver(t);
  receiver.setDefault({ hang: true }); // no answer until the test lets them go
  const { worker, hookIds, clock } = await workerWithSubscriptions(t, receiver, 2, {
    maxInFlight: 3,
    perSubscriptionConcurrency: 2,
  });
  const [first, second] = hookIds;
  for (let i = 0; i < 40; i++) await worker.schedule(request(first, randomUUID(), 1, clock));
  for (let i = 0; i < 10; i++) await worker.schedule(request(second, randomUUID(), 1, clock));
  await receiver.waitFor(3);
  await worker.settle();
  // A queue scheduled while the worker applies a batch of events joins its ready list once the batch is in.
  await until('the other 47 queues wait', () => worker.slots().waiting === 47, 5_000).catch(() => {});

  t.deepEqual(worker.slots(), { inFlight: 3, waiting: 47 });
  t.is(worker.queues(), 50);
  t.is(receiver.open().now, 3, 'three requests open: two of the first subscription, one of the second');
  t.deepEqual(
    [first, second].map((hook) => receiver.received.filter((r) => r.body.hook === hook).length),
    [2, 1],
  );
  await receiver.close(); // the requests end, as failures: the worker stops without waiting for their timeout
});

test('the first attempt starts in the scheduling append only while the dispatcher-wide budget has room', async (t) => {
  const receiver = await startReceiver(t);
  receiver.script({ status: 200, delayMs: 400 });
  const { worker, store, appendsTo, hookIds, clock } = await workerWithSubscriptions(t, receiver, 2, {
    maxInFlight: 1,
  });
  const one = request(hookIds[0], randomUUID(), 1, clock);
  const other = request(hookIds[1], randomUUID(), 1, clock);

  await worker.schedule(one);
  await receiver.waitFor(1);
  await worker.schedule(other);
  t.deepEqual(
    appendsTo(other.stream),
    [[SCHEDULED]],
    'the one request allowed is open, for another subscription',
  );
  t.deepEqual(worker.slots(), { inFlight: 1, waiting: 1 });
  await receiver.waitFor(2);
  await attempts(store, 1, other.stream);
  t.deepEqual(appendsTo(one.stream)[0], [SCHEDULED, STARTED]);
  t.deepEqual(appendsTo(other.stream).slice(0, 2), [[SCHEDULED], [STARTED]]);
  t.true(receiver.open().max <= 1);
});

/**
 * The store around the worker's refusing, as unavailable (test/support/faulty-store.ts), the first
 * append of `types` alone; `refused` counts it.
 */
function refusingFirst(types: string[]) {
  const counted = { refused: 0 };
  const wrap = (inner: EventStore): EventStore => {
    const faults = faultyStore(inner);
    const store: EventStore = Object.create(faults);
    store.append = (streamId, events, options) => {
      if (counted.refused === 0 && events.map((e) => e.type).join() === types.join()) {
        counted.refused += 1;
        faults.failAppends(1);
      }
      return faults.append(streamId, events, options);
    };
    return store;
  };
  return { counted, wrap };
}

test('with a cap of 1, an attempt whose start the store refuses gives its slot back: every delivery arrives, no slot is left taken', async (t) => {
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 200, delayMs: 20 });
  const refusing = refusingFirst([STARTED]);
  const { worker, store, hookIds, clock } = await workerWithSubscriptions(t, receiver, 2, {
    maxInFlight: 1,
    wrap: refusing.wrap,
  });
  let scheduled = 0;
  for (const hookId of hookIds)
    for (let i = 0; i < 3; i++) {
      t.true(await worker.schedule(request(hookId, randomUUID(), 1, clock)));
      scheduled += 1;
    }

  // The first went with its scheduling; the next one the pump starts is refused, its queue tried again
  // later; the others are sent on the slot it gave back.
  await receiver.waitFor(scheduled - 1, 10_000);
  t.is(refusing.counted.refused, 1);
  t.is(worker.stats().errors, 1);
  await until('the other requests answered', () => worker.slots().inFlight === 0);
  clock.advance(5_000);
  await worker.tick();
  await receiver.waitFor(scheduled, 10_000);
  await attempts(store, scheduled);
  t.is(new Set(receiver.received.map((r) => r.headers['x-service-webhook-id'])).size, scheduled);
  t.true(receiver.open().max <= 1);
  await until('every queue settled', () => worker.queues() === 0);
  t.deepEqual(worker.slots(), { inFlight: 0, waiting: 0 });
});

test('a queue waiting for a slot that another dispatcher starts leaves the ready list: it is no longer due', async (t) => {
  const receiver = await startReceiver(t);
  receiver.script({ status: 200, delayMs: 1_000 });
  const { worker, store, hookIds, clock } = await workerWithSubscriptions(t, receiver, 1, {
    maxInFlight: 1,
    leaseMs: 60_000,
  });
  const one = request(hookIds[0], randomUUID(), 1, clock);
  const other = request(hookIds[0], randomUUID(), 1, clock);
  await worker.schedule(one);
  await receiver.waitFor(1);
  await worker.schedule(other);
  t.deepEqual(worker.slots(), { inFlight: 1, waiting: 1 });

  // Another dispatcher starts it (docs/webhooks.md, "Order, isolation, durability"): in flight there
  // until its lease runs out, so here it is due only then.
  const state = (await store.readStream(other.stream))
    .map(
      (e) => eventRegistry.parse(e.type, e.data, e.metadata.schema_version) as delivery.WebhookDeliveryEvent,
    )
    .reduce(delivery.decider.evolve, delivery.decider.initialState);
  const started = delivery.decider.decide(
    {
      type: 'StartAttempt',
      delivery_id: other.command.delivery_id,
      lease_ms: 60_000,
      dispatcher_id: 'dispatcher-other',
      at: clock.now().toISOString(),
    },
    state,
  );
  await store.append(other.stream, toNewEvents(eventRegistry, started, other.metadata), {
    expectedRevision: 0,
  });
  await worker.settle();
  t.deepEqual(
    worker.slots(),
    { inFlight: 1, waiting: 0 },
    'not waiting for a slot while in flight elsewhere',
  );

  // The other dispatcher dies: once the lease runs out the attempt is recorded interrupted and sent here.
  await attempts(store, 1, one.stream);
  clock.advance(61_000);
  await worker.tick();
  await receiver.waitFor(2);
  await attempts(store, 2, other.stream);
  t.deepEqual(
    (await store.readStream(other.stream)).map((e) => e.type),
    [SCHEDULED, STARTED, ATTEMPTED, STARTED, ATTEMPTED],
  );
  await until('every queue settled', () => worker.queues() === 0);
  t.deepEqual(worker.slots(), { inFlight: 0, waiting: 0 });
});
