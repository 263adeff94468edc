/**
 * Scheduling a delivery (dispatcher/schedule-delivery.ts, docs/webhooks.md): on an idle queue the
 * first attempt starts in the append that schedules it; behind an attempt in flight, or with every
 * slot of the subscription taken, the delivery is only scheduled, and its attempt starts in the
 * append of the delivered result before it (not of a failed one), or alone once a slot frees;
 * a repeated request writes nothing, even once the delivery is settled and out of the working set;
 * and an attempt started with its scheduling whose sender died is recorded interrupted and sent again.
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
import { addItem, checkOut, createCart, createWebhook, move, seedCatalog } from '../support/cart-world.ts';
import { attempts, observe, scheduleRequest, workerOn } from '../support/delivery-worker.ts';
import { until } from '../support/probes.ts';
import { startService } from '../support/service.ts';
import { type Receiver, startReceiver } from '../support/webhook-receiver.ts';

const SCHEDULED = 'WebhookDeliveryScheduled';
const STARTED = 'WebhookDeliveryAttemptStarted';
const ATTEMPTED = 'WebhookDeliveryAttempted';
type ManualClock = ReturnType<typeof manualClock>;
const ENV = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h' };

/** A subscription for store 1 to `receiver`, made by a service that is then stopped; a worker alone on its data. */
async function workerWithSubscription(
  t: ExecutionContext,
  receiver: Receiver,
  options: Parameters<typeof workerOn>[4] = {},
): Promise<Awaited<ReturnType<typeof workerOn>> & { hookId: string; clock: ManualClock }> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-schedule-delivery-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const clock = manualClock(new Date());
  const s = await startService(t, { dataDir, clock, env: ENV });
  await seedCatalog(s);
  const hook = await createWebhook(s, receiver.url, [1]);
  await s.service.stop();
  const on = await workerOn(t, dataDir, clock, ENV, options);
  on.worker.start();
  await on.worker.caughtUp;
  return { ...on, hookId: hook.id, clock };
}

/** `workerWithSubscription`, and the requests of two deliveries of one cart (revisions 1 and 2). */
async function twoDeliveriesOfOneCart(t: ExecutionContext, receiver: Receiver) {
  const on = await workerWithSubscription(t, receiver);
  const cart = randomUUID();
  const first = scheduleRequest(on.hookId, cart, 1, on.clock);
  const second = scheduleRequest(on.hookId, cart, 2, on.clock);
  return { ...on, first, second };
}

const revisionsOf = (r: Receiver) => r.received.map((x) => x.body.revision);

test('on an idle queue, the first attempt starts in the append that schedules the delivery', async (t) => {
  const receiver = await startReceiver(t);
  const { worker, store, appendsTo, hookId, clock } = await workerWithSubscription(t, receiver);
  const request = scheduleRequest(hookId, randomUUID(), 1, clock);

  t.true(await worker.schedule(request));
  await receiver.waitFor(1);
  await attempts(store, 1, request.stream);
  t.deepEqual(appendsTo(request.stream), [[SCHEDULED, STARTED], [ATTEMPTED]], 'two appends, not three');
  const [scheduled, started] = await store.readStream(request.stream);
  t.is(started.metadata.correlation_id, request.metadata.correlationId);
  t.is(scheduled.metadata.causation_id, request.metadata.causationId);
  t.like(started.data, { delivery_id: request.command.delivery_id, attempt: 1 });
  t.is(receiver.received[0].headers['x-service-webhook-id'], request.command.delivery_id);
  t.is(receiver.received[0].headers['x-service-delivery-attempt'], '1');
});

test('behind an attempt in flight, a delivery is only scheduled; it starts in the append of that attempt’s result and is sent next, in order', async (t) => {
  const receiver = await startReceiver(t);
  receiver.script({ status: 200, delayMs: 400 });
  const { worker, store, appendsTo, first, second } = await twoDeliveriesOfOneCart(t, receiver);

  await worker.schedule(first);
  await receiver.waitFor(1); // its answer takes 400 ms
  await worker.schedule(second);
  await receiver.waitFor(2);
  await attempts(store, 2, first.stream);
  t.deepEqual(revisionsOf(receiver), [1, 2]);
  t.deepEqual(appendsTo(first.stream), [
    [SCHEDULED, STARTED],
    [SCHEDULED],
    [ATTEMPTED, STARTED],
    [ATTEMPTED],
  ]);
  const [, , , , started] = await store.readStream(first.stream);
  t.like(started.data, { delivery_id: second.command.delivery_id, attempt: 1 });
  t.is(started.metadata.correlation_id, second.metadata.correlationId, 'the second delivery’s correlation');
});

test('a failed attempt’s result starts nothing: the next delivery of the queue waits for the retry', async (t) => {
  const receiver = await startReceiver(t);
  receiver.script({ status: 500, delayMs: 300 });
  const { worker, store, appendsTo, clock, first, second } = await twoDeliveriesOfOneCart(t, receiver);

  await worker.schedule(first);
  await receiver.waitFor(1);
  await worker.schedule(second);
  await attempts(store, 1, first.stream);
  await worker.settle();
  t.deepEqual(appendsTo(first.stream), [[SCHEDULED, STARTED], [SCHEDULED], [ATTEMPTED]]);
  t.is(receiver.received.length, 1);

  clock.advance(2 * 3_600_000); // past the retry (1 h, and its jitter)
  await worker.tick();
  await receiver.waitFor(3);
  await attempts(store, 3, first.stream);
  t.deepEqual(revisionsOf(receiver), [1, 1, 2]);
  t.deepEqual(appendsTo(first.stream).slice(3), [[STARTED], [ATTEMPTED, STARTED], [ATTEMPTED]]);
});

test('with every slot of the subscription taken, a delivery is only scheduled, and started once a slot frees', async (t) => {
  const receiver = await startReceiver(t);
  receiver.script({ status: 200, delayMs: 400 });
  const { worker, store, appendsTo, hookId, clock } = await workerWithSubscription(t, receiver, {
    perSubscriptionConcurrency: 1,
  });
  const busy = scheduleRequest(hookId, randomUUID(), 1, clock);
  const other = scheduleRequest(hookId, randomUUID(), 1, clock);

  await worker.schedule(busy);
  await receiver.waitFor(1);
  await worker.schedule(other);
  t.deepEqual(appendsTo(other.stream), [[SCHEDULED]], 'the one slot is held by the other cart');
  await receiver.waitFor(2);
  await attempts(store, 1, other.stream);
  t.deepEqual(appendsTo(other.stream), [[SCHEDULED], [STARTED], [ATTEMPTED]]);
  t.deepEqual(appendsTo(busy.stream), [[SCHEDULED, STARTED], [ATTEMPTED]]);
});

test('a repeated request writes nothing, also once the delivery is settled and out of the working set', async (t) => {
  const receiver = await startReceiver(t);
  const { worker, store, appendsTo, hookId, clock } = await workerWithSubscription(t, receiver);
  const request = scheduleRequest(hookId, randomUUID(), 1, clock);

  t.true(await worker.schedule(request));
  t.false(await worker.schedule(request), 'in flight');
  await attempts(store, 1, request.stream);
  await worker.settle();
  t.is(worker.queues(), 0, 'delivered: the queue left the working set');
  t.false(await worker.schedule(request), 'delivered');
  t.is(appendsTo(request.stream).length, 2);
  t.is(receiver.received.length, 1);
});

test('an attempt started with its scheduling whose sender died is recorded interrupted when its lease runs out, and sent again', async (t) => {
  const receiver = await startReceiver(t);
  const { worker, store, hookId, clock } = await workerWithSubscription(t, receiver, { leaseMs: 60_000 });
  const request = scheduleRequest(hookId, randomUUID(), 1, clock);
  // What a dispatcher that died between its append and its request leaves behind.
  const events = [...delivery.decider.decide(request.command, delivery.decider.initialState)];
  const scheduledState = events.reduce(delivery.decider.evolve, delivery.decider.initialState);
  events.push(
    ...delivery.decider.decide(
      {
        type: 'StartAttempt',
        delivery_id: request.command.delivery_id,
        lease_ms: 60_000,
        dispatcher_id: 'dispatcher-gone',
        at: request.command.at,
      },
      scheduledState,
    ),
  );
  await store.append(request.stream, toNewEvents(eventRegistry, events, request.metadata), {
    expectedRevision: 'no_stream',
  });
  await worker.settle();
  t.is(worker.queues(), 1);
  t.is(receiver.received.length, 0, 'in flight elsewhere until its lease runs out');

  clock.advance(61_000);
  await worker.tick();
  const [got] = await receiver.waitFor(1);
  t.is(got.headers['x-service-webhook-id'], request.command.delivery_id);
  t.is(got.headers['x-service-delivery-attempt'], '2');
  await attempts(store, 1, request.stream);
  t.deepEqual(
    (await store.readStream(request.stream)).map((e) => [e.type, (e.data as { outcome?: string }).outcome]),
    [
      [SCHEDULED, undefined],
      [STARTED, undefined],
      [ATTEMPTED, 'interrupted'],
      [STARTED, undefined],
      [ATTEMPTED, 'delivered'],
    ],
  );
});

test('while a delivery’s body cannot be opened (the key store down) no attempt starts: the queue is tried again later', async (t) => {
  const receiver = await startReceiver(t);
  const opens = { count: 0, down: true };
  const { worker, store, hookId, clock } = await workerWithSubscription(t, receiver, {
    leaseMs: 60_000,
    async openBody(body) {
      opens.count += 1;
      if (opens.down) throw new Error('key store unreachable');
      return body;
    },
  });
  const request = scheduleRequest(hookId, randomUUID(), 1, clock);
  // An attempt started by a dispatcher that died, so that this worker's first turn is its own attempt.
  const events = [...delivery.decider.decide(request.command, delivery.decider.initialState)];
  const scheduledState = events.reduce(delivery.decider.evolve, delivery.decider.initialState);
  events.push(
    ...delivery.decider.decide(
      {
        type: 'StartAttempt',
        delivery_id: request.command.delivery_id,
        lease_ms: 60_000,
        dispatcher_id: 'dispatcher-gone',
        at: request.command.at,
      },
      scheduledState,
    ),
  );
  await store.append(request.stream, toNewEvents(eventRegistry, events, request.metadata), {
    expectedRevision: 'no_stream',
  });
  await worker.settle();
  clock.advance(61_000);
  for (let turn = 1; turn <= 3; turn++) {
    await worker.tick();
    await until(`open ${turn} tried`, () => opens.count >= turn);
    clock.advance(5_000);
  }
  await attempts(store, 1, request.stream);
  const types = async () => (await store.readStream(request.stream)).map((e) => e.type);
  t.deepEqual(
    await types(),
    [SCHEDULED, STARTED, ATTEMPTED],
    'the interruption only: no attempt started while down',
  );
  opens.down = false;
  await worker.tick();
  const [got] = await receiver.waitFor(1);
  t.is(got.headers['x-service-delivery-attempt'], '2');
  await attempts(store, 2, request.stream);
  t.deepEqual(await types(), [SCHEDULED, STARTED, ATTEMPTED, STARTED, ATTEMPTED]);
});

test('a cart’s status moves on a running service: two appends per webhook, none refused', async (t) => {
  let observed: ReturnType<typeof observe> | undefined;
  const s = await startService(t, {
    wrapStore: (inner) => {
      observed = observe(inner);
      return observed.store;
    },
  });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  const hook = await createWebhook(s, receiver.url, [1]);
  const cart = await createCart(s, 1);
  await addItem(s, cart);
  await checkOut(s, cart);
  await receiver.waitFor(1);
  const moves = ['preparing', 'ready_for_pickup', 'finished'];
  for (const [i, status] of moves.entries()) {
    await move(s, cart, status);
    await receiver.waitFor(i + 2);
  }
  const o = observed as ReturnType<typeof observe>;
  const stream = delivery.streamId(hook.id, cart.uuid);
  await attempts(o.store, 4, stream);
  t.deepEqual(
    o.appendsTo(stream),
    Array(4)
      .fill([[SCHEDULED, STARTED], [ATTEMPTED]])
      .flat(),
  );
  // The fan-out once decided on its own last write to the queue, which the worker had moved on since.
  t.deepEqual(o.refused, []);
  t.deepEqual(
    receiver.received.map((r) => r.body.cart.status),
    ['verification', ...moves],
  );
});
