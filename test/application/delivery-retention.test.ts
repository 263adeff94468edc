/**
 * Finished deliveries' retention in the log (docs/operations.md, "Retention"): the retention job
 * deletes a delivery queue once every delivery in it is delivered or parked and its last event happened
 * `PDS_DELIVERY_LOG_RETENTION` ago, never a queue with a delivery still owed, nor a business stream;
 * a queue written meanwhile stays; each run starts where the last one stopped.
 */
import test from 'ava';
import { DELIVERY_RETENTION_CURSOR } from '../../application/delivery-retention.ts';
import { createRetention } from '../../application/retention.ts';
import { manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import * as retention from '../../domain/webhook-delivery-retention.ts';
import { type EventStore, StreamNotFoundError } from '../../eventstore/port.ts';
import { webhookDeliveriesProjection } from '../../projections/read-models/webhook-deliveries.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { append, eventStoreFor, project } from '../projections/support.ts';

const DAY = 86_400_000;
const W = '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';
const cart = (n: number) => `c0000000-0000-4000-8000-00000000000${n}`;
const T0 = Date.parse('2026-05-01T10:00:00.000Z');

/** Decides each command on the queue as stored and appends what the decider produced, at the command's time. */
async function run(store: EventStore, stream: string, commands: delivery.WebhookDeliveryCommand[]) {
  for (const command of commands) {
    let state: delivery.DeliveryQueueState = delivery.decider.initialState;
    try {
      for (const e of await store.readStream(stream)) {
        state = delivery.decider.evolve(
          state,
          eventRegistry.read(e.type, e.data, 1) as delivery.WebhookDeliveryEvent,
        );
      }
    } catch (err) {
      if (!(err instanceof StreamNotFoundError)) throw err;
    }
    const events = delivery.decider.decide(command, state);
    if (events.length > 0) await append(store, stream, events, command.at);
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

function scheduled(n: number, at: number): delivery.WebhookDeliveryCommand {
  return {
    type: 'ScheduleDelivery',
    delivery_id: delivery.deliveryId(W, `event-${n}`),
    webhook_id: W,
    event_kind: 'cart_status_updated',
    cart_uuid: cart(n),
    store_id: 1,
    source_event_id: `event-${n}`,
    source_revision: 1,
    source_position: 1,
    body: '{"webhook_event":"cart_status_updated"}',
    at: iso(at),
  };
}

/** An attempt started and its result: delivered, or failed with a retry (or parked). */
function attempt(
  n: number,
  number: number,
  at: number,
  outcome: 'delivered' | 'failed',
  next: { retryAt?: number; park?: delivery.ParkReason } = {},
): delivery.WebhookDeliveryCommand[] {
  const id = delivery.deliveryId(W, `event-${n}`);
  return [
    { type: 'StartAttempt', delivery_id: id, lease_ms: 30_000, dispatcher_id: 'd', at: iso(at) },
    {
      type: 'RecordAttempt',
      delivery_id: id,
      attempt: number,
      outcome,
      status: outcome === 'delivered' ? 200 : 500,
      duration_ms: 5,
      response_excerpt: outcome === 'delivered' ? 'ok' : 'boom',
      error_code: outcome === 'delivered' ? null : 'http_status',
      error: outcome === 'delivered' ? null : 'HTTP 500',
      retry_at: next.retryAt === undefined ? null : iso(next.retryAt),
      park: next.park ?? null,
      at: iso(at + 1),
    },
  ];
}

/** The retention job keeping finished deliveries 7 days, its clock at `at`, its cursor in `state`. */
function retentionJob(
  store: EventStore,
  { at = T0, queuesPerRun }: { at?: number; queuesPerRun?: number } = {},
) {
  const state = openSqliteReadStore(':memory:');
  const clock = manualClock(iso(at));
  const job = createRetention({
    store,
    clock,
    deliveries: { state, registry: eventRegistry, retentionMs: 7 * DAY, queuesPerRun },
  });
  return { state, clock, job };
}

/** A business event: the cart's creation. */
const cartCreated = (store: EventStore, n: number) =>
  store.append(`cart-${cart(n)}`, [{ type: 'CartCreated', data: {}, metadata: metadata() }]);

const present = async (store: EventStore, stream: string) =>
  store.readStream(stream).then(
    () => true,
    (err) => (err instanceof StreamNotFoundError ? false : Promise.reject(err)),
  );

test('a queue goes once all its deliveries are finished and its last event is a retention old, and nothing else', async (t) => {
  const store = await eventStoreFor(t);
  const { state, clock, job } = retentionJob(store);
  const q = (n: number) => delivery.streamId(W, cart(n));
  await cartCreated(store, 1);
  await run(store, q(1), [scheduled(1, T0), ...attempt(1, 1, T0, 'delivered')]);
  await run(store, q(2), [scheduled(2, T0), ...attempt(2, 1, T0, 'failed', { retryAt: T0 + 9 * DAY })]);
  await run(store, q(3), [scheduled(3, T0), ...attempt(3, 1, T0, 'failed', { park: 'attempts_exhausted' })]);
  // In the log's order, as times go (each taken as its command is decided, just before its append).
  await run(store, q(4), [scheduled(4, T0), ...attempt(4, 1, T0, 'failed', { park: 'receiver_gone' })]);
  await run(store, q(3), [
    {
      type: 'RequestRedelivery',
      delivery_id: delivery.deliveryId(W, 'event-3'),
      reason: 'redeliver',
      at: iso(T0 + 5 * DAY),
    },
    ...attempt(3, 2, T0 + 5 * DAY, 'delivered'),
  ]);
  await cartCreated(store, 2);

  clock.advance(7 * DAY - 10_000); // not a retention yet
  t.deepEqual((await job.run()).deliveries, { queues: 0, deliveries: 0, events: 0 });

  clock.advance(10_000 + 1_000);
  // q1 delivered and q4 parked a retention ago go; q2 still owes its delivery; q3 was redelivered since.
  t.deepEqual((await job.run()).deliveries, { queues: 2, deliveries: 2, events: 7 });
  t.deepEqual(await Promise.all([1, 2, 3, 4].map((n) => present(store, q(n)))), [false, true, true, false]);
  t.is((await store.readStream(`cart-${cart(1)}`)).length, 1, 'business events stay');
  t.deepEqual((await job.run()).deliveries, { queues: 0, deliveries: 0, events: 0 }, 'nothing twice');

  clock.advance(5 * DAY);
  t.deepEqual(
    (await job.run()).deliveries,
    { queues: 1, deliveries: 1, events: 7 },
    'q3, a retention after its redelivery',
  );
  t.true(await present(store, q(2)), 'still owed, however old');

  await run(store, q(2), attempt(2, 2, T0 + 9 * DAY, 'delivered'));
  await cartCreated(store, 3);
  clock.advance(4 * DAY);
  t.deepEqual((await job.run()).deliveries, { queues: 1, deliveries: 1, events: 5 });
  t.false(await present(store, q(2)));
  t.is((await store.readAll({ filter: { streamPrefixes: ['cart-'] } })).length, 3);
  t.true(((await state.getCheckpoint(DELIVERY_RETENTION_CURSOR))?.position ?? 0) > 0, 'the cursor is kept');
});

test('a queue that held the log’s last event goes, its record following it; one started again is owed again', async (t) => {
  const store = await eventStoreFor(t);
  const { clock, job } = retentionJob(store);
  const q = (n: number) => delivery.streamId(W, cart(n));
  await run(store, q(1), [scheduled(1, T0), ...attempt(1, 1, T0, 'delivered')]);
  clock.advance(8 * DAY);
  // The record of the deletion is appended first: the queue no longer holds the log's last event.
  t.deepEqual((await job.run()).deliveries, { queues: 1, deliveries: 1, events: 3 });
  t.false(await present(store, q(1)));
  const [record] = await store.readStream(retention.streamId(clock.now()));
  t.like(record, {
    type: 'WebhookDeliveryQueuePruned',
    data: { queue: q(1), delivery_ids: [delivery.deliveryId(W, 'event-1')], revision: 2 },
  });
  await cartCreated(store, 1);

  // A queue started again after its deletion is a queue like any other.
  await run(store, q(1), [scheduled(5, T0 + 8 * DAY)]);
  t.deepEqual(
    (await store.readStream(q(1))).map((e) => [e.revision, e.type]),
    [[0, 'WebhookDeliveryScheduled']],
  );
  await cartCreated(store, 2);
  clock.advance(8 * DAY);
  t.deepEqual((await job.run()).deliveries, { queues: 0, deliveries: 0, events: 0 }, 'owed: kept');
});

function metadata() {
  return {
    correlation_id: 'c',
    causation_id: null,
    actor: { type: 'system' as const, id: 'test' },
    occurred_at: iso(T0),
    schema_version: 1,
  };
}

test('a queue written between the job’s read and its deletion stays', async (t) => {
  const inner = await eventStoreFor(t);
  const q = delivery.streamId(W, cart(1));
  // A redelivery lands just as the job deletes: the deletion expects the revision the job read.
  const store: EventStore = Object.create(inner);
  store.deleteStream = async (streamId, expected) => {
    await run(inner, q, [
      {
        type: 'RequestRedelivery',
        delivery_id: delivery.deliveryId(W, 'event-1'),
        reason: 'redeliver',
        at: iso(T0 + 8 * DAY),
      },
    ]);
    await cartCreated(inner, 2);
    return inner.deleteStream(streamId, expected);
  };
  const { clock, job } = retentionJob(store);
  await run(inner, q, [scheduled(1, T0), ...attempt(1, 1, T0, 'delivered')]);
  await cartCreated(inner, 1);
  clock.advance(8 * DAY);
  t.deepEqual((await job.run()).deliveries, { queues: 0, deliveries: 0, events: 0 });
  t.deepEqual(
    (await inner.readStream(q)).map((e) => e.type).at(-1),
    'WebhookRedeliveryRequested',
    'the redelivery and what it stands on are kept',
  );
  t.is((await inner.readStream(q)).length, 4);
});

/** The documents of the deliveries projection, and the subscription's queue depth. */
async function deliveriesOf(readStore: ReturnType<typeof openSqliteReadStore>) {
  const docs = await (await readStore.collection<{ _id: string; status: string }>('webhook_deliveries')).find(
    {},
  );
  const queues = await (await readStore.collection<{ _id: string; depth: number }>('webhook_queues')).find(
    {},
  );
  return { docs: docs.map((d) => d.status), depth: queues.map((q) => q.depth) };
}

test('a rebuild that read a queue in part before the job deleted it keeps nothing of it: the job’s record deletes what it read', async (t) => {
  const store = await eventStoreFor(t);
  const projection = webhookDeliveriesProjection(7 * DAY);
  const q = delivery.streamId(W, cart(1));
  // The rebuild has read the scheduling and the attempt's start: the delivery is in flight.
  await run(store, q, [
    scheduled(1, T0),
    ...attempt(1, 1, T0, 'failed', { retryAt: T0 + 3_600_000 }).slice(0, 1),
  ]);
  const rebuilding = openSqliteReadStore(':memory:');
  await project(store, rebuilding, projection);
  t.deepEqual(await deliveriesOf(rebuilding), { docs: ['in_flight'], depth: [1] });
  // The rest of the queue, then the job deletes it (the attempt's result and the delivery gone with it).
  await run(store, q, [
    ...attempt(1, 1, T0, 'failed', { retryAt: T0 + 3_600_000 }).slice(1),
    ...attempt(1, 2, T0 + 3_600_000, 'delivered'),
  ]);
  await cartCreated(store, 2);
  const { job } = retentionJob(store, { at: T0 + 9 * DAY });
  t.is((await job.run()).deliveries.queues, 1);
  // The rebuild goes on: it never sees the queue's later events, but meets the job's record.
  await project(store, rebuilding, projection);
  t.deepEqual(await deliveriesOf(rebuilding), { docs: [], depth: [0] }, 'no delivery stuck in flight');
  const fresh = openSqliteReadStore(':memory:');
  await project(store, fresh, projection);
  t.deepEqual((await deliveriesOf(fresh)).docs, [], 'as a rebuild from now');
});

test('a run reads a bounded number of queues and saves its cursor; the next run goes on from there', async (t) => {
  const store = await eventStoreFor(t);
  const { state, clock, job } = retentionJob(store, { queuesPerRun: 2 });
  for (const n of [1, 2, 3, 4, 5]) {
    await run(store, delivery.streamId(W, cart(n)), [scheduled(n, T0), ...attempt(n, 1, T0, 'delivered')]);
  }
  await cartCreated(store, 1);
  clock.advance(8 * DAY);
  t.is((await job.run()).deliveries.queues, 2);
  const cursor = (await state.getCheckpoint(DELIVERY_RETENTION_CURSOR))?.position ?? 0;
  t.true(cursor > 0, 'the cursor saved after the run’s share');
  t.is((await job.run()).deliveries.queues, 2);
  t.is((await job.run()).deliveries.queues, 1);
  t.is((await job.run()).deliveries.queues, 0);
  t.is((await store.readAll({ filter: { streamPrefixes: [delivery.STREAM_PREFIX] } })).length, 0);
});

test('the cursor moves past the other streams the walk read: to before a queue within its time, or to the head', async (t) => {
  const store = await eventStoreFor(t);
  const { state, clock, job } = retentionJob(store);
  const cursorNow = async () => (await state.getCheckpoint(DELIVERY_RETENTION_CURSOR))?.position ?? 0;
  for (let n = 1; n <= 5; n++) await cartCreated(store, n);
  t.deepEqual((await job.run()).deliveries, { queues: 0, deliveries: 0, events: 0 });
  t.is(await cursorNow(), await store.headPosition(), 'no queue event: the head, not the start');
  for (let n = 6; n <= 9; n++) await cartCreated(store, n);
  const q = delivery.streamId(W, cart(1));
  await run(store, q, [scheduled(1, T0), ...attempt(1, 1, T0, 'delivered')]);
  const [first] = await store.readAll({ filter: { streamPrefixes: [delivery.STREAM_PREFIX] }, maxCount: 1 });
  clock.advance(DAY); // within the retention: kept
  t.is((await job.run()).deliveries.queues, 0);
  t.is(await cursorNow(), first.position - 1, 'just before the queue, past the carts before it');
  clock.advance(7 * DAY);
  t.is((await job.run()).deliveries.queues, 1, 'and the queue goes once its time has come');
});
