/**
 * Read model `webhook_deliveries`: one document per delivery with every attempt, built from events the
 * delivery decider itself produced; the status agrees with the domain's own fold; no body; a replayed
 * batch changes nothing; and the admin queries (a subscription's deliveries by status, newest first,
 * paged; failed or parked since a time) are index walks, not scans.
 */
import test from 'ava';
import * as delivery from '../../domain/webhook-delivery.ts';
import {
  deliveryById,
  failedOrParkedSince,
  listDeliveries,
  webhookDeliveriesProjection as projectionFor,
  toDeliveryRecord,
  WEBHOOK_DELIVERIES,
  type WebhookDeliveryDoc,
  webhookDeliveryIndexes,
} from '../../projections/read-models/webhook-deliveries.ts';
import {
  oldestQueued,
  queuedInQueues,
  queueKey,
} from '../../projections/read-models/webhook-delivery-queues.ts';
import {
  emptyHistogram,
  latencyBucket,
  latencyQuantile,
  queueOf,
  WEBHOOK_HEALTH,
  WEBHOOK_QUEUES,
  type WebhookHealthDoc,
  type WebhookQueueDoc,
} from '../../projections/read-models/webhook-health.ts';
import { openSqliteReadStore, type SqliteCollection } from '../../projections/sqlite/read-store.ts';
import { append, eventStoreFor, project, recording, resetCheckpoint, snapshot } from './support.ts';

/** The projection with the default retention (30 days): nothing here is that old. */
const webhookDeliveriesProjection = projectionFor(30 * 86_400_000);

const W1 = '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';
const W2 = '2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e';
const CART1 = 'c0000000-0000-4000-8000-000000000001';
const CART2 = 'c0000000-0000-4000-8000-000000000002';
const T0 = Date.parse('2026-05-01T10:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();

type Command = delivery.WebhookDeliveryCommand;

/** Decides each command on the stream's current state and appends what the decider produced. */
function world(es: Awaited<ReturnType<typeof eventStoreFor>>) {
  const states = new Map<string, delivery.DeliveryQueueState>();
  return async (stream: string, commands: Command[]) => {
    let state = states.get(stream) ?? delivery.decider.initialState;
    for (const command of commands) {
      const events = delivery.decider.decide(command, state);
      for (const e of events) state = delivery.decider.evolve(state, e);
      if (events.length > 0) await append(es, stream, events, command.at);
    }
    states.set(stream, state);
    return state;
  };
}

function schedule(
  webhookId: string,
  cartUuid: string,
  sourceEventId: string,
  revision: number,
  seconds: number,
): Command {
  return {
    type: 'ScheduleDelivery',
    delivery_id: delivery.deliveryId(webhookId, sourceEventId),
    webhook_id: webhookId,
    event_kind: 'cart_status_updated',
    cart_uuid: cartUuid,
    store_id: 1,
    source_event_id: sourceEventId,
    source_revision: revision,
    source_position: revision + 1,
    body: '{"webhook_event":"cart_status_updated","cart":{"customer_email_address":"ana@example.com"}}',
    at: at(seconds),
  };
}

const start = (id: string, seconds: number): Command => ({
  type: 'StartAttempt',
  delivery_id: id,
  lease_ms: 30_000,
  dispatcher_id: 'dispatcher-test',
  at: at(seconds),
});

const result = (
  id: string,
  attempt: number,
  seconds: number,
  outcome: 'delivered' | 'failed',
  next: { retry_at?: number; park?: delivery.ParkReason } = {},
): Command => ({
  type: 'RecordAttempt',
  delivery_id: id,
  attempt,
  outcome,
  status: outcome === 'delivered' ? 200 : 500,
  duration_ms: 12,
  response_excerpt: outcome === 'delivered' ? 'ok' : 'boom',
  error_code: outcome === 'delivered' ? null : 'http_status',
  error: outcome === 'delivered' ? null : 'HTTP 500',
  retry_at: next.retry_at === undefined ? null : at(next.retry_at),
  park: next.park ?? null,
  at: at(seconds),
});

const D1 = delivery.deliveryId(W1, 'event-1');
const D2 = delivery.deliveryId(W1, 'event-2');
const D3 = delivery.deliveryId(W1, 'event-3');
const D4 = delivery.deliveryId(W2, 'event-4');

/** D1 failed then delivered; D2 parked after its attempts, redelivered, attempt in flight; D3 pending; D4 failed. */
async function scenario(t: Parameters<typeof eventStoreFor>[0]) {
  const es = await eventStoreFor(t);
  const run = world(es);
  const q1 = delivery.streamId(W1, CART1);
  await run(q1, [
    schedule(W1, CART1, 'event-1', 2, 0),
    start(D1, 0),
    result(D1, 1, 1, 'failed', { retry_at: 5 }),
    start(D1, 5),
    result(D1, 2, 6, 'delivered'),
    schedule(W1, CART1, 'event-2', 3, 10),
    start(D2, 10),
    result(D2, 1, 11, 'failed', { park: 'attempts_exhausted' }),
    { type: 'RequestRedelivery', delivery_id: D2, reason: 'redeliver', at: at(20) },
    start(D2, 21),
  ]);
  await run(delivery.streamId(W1, CART2), [schedule(W1, CART2, 'event-3', 4, 30)]);
  await run(delivery.streamId(W2, CART1), [
    schedule(W2, CART1, 'event-4', 2, 0),
    start(D4, 0),
    result(D4, 1, 2, 'failed', { retry_at: 60 }),
  ]);
  return { es, run };
}

async function deliveriesOf(readStore: ReturnType<typeof openSqliteReadStore>) {
  return readStore.collection<WebhookDeliveryDoc>(WEBHOOK_DELIVERIES, webhookDeliveryIndexes);
}

test('one document per delivery with every attempt, and no body', async (t) => {
  const { es } = await scenario(t);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookDeliveriesProjection);
  const c = await deliveriesOf(readStore);
  t.is(c.size(), 4);

  const d1 = await deliveryById(c, D1);
  if (!d1) throw new Error('no D1');
  t.deepEqual(toDeliveryRecord(d1), {
    delivery_id: D1,
    webhook_id: W1,
    event_kind: 'cart_status_updated',
    cart_uuid: CART1,
    store_id: 1,
    source_event_id: 'event-1',
    status: 'delivered',
    attempts: [
      {
        attempt: 1,
        started_at: at(0),
        attempted_at: at(1),
        outcome: 'failed',
        status: 500,
        duration_ms: 12,
        response_excerpt: 'boom',
        error_code: 'http_status',
        error: 'HTTP 500',
      },
      {
        attempt: 2,
        started_at: at(5),
        attempted_at: at(6),
        outcome: 'delivered',
        status: 200,
        duration_ms: 12,
        response_excerpt: 'ok',
        error_code: null,
        error: null,
      },
    ],
    attempt_count: 2,
    scheduled_at: at(0),
    queued_since: at(0),
    next_attempt_at: null,
    delivered_at: at(6),
    parked_reason: null,
    parked_at: null,
    redeliveries: [],
    updated_at: at(6),
  });
  t.false(
    JSON.stringify(await c.find({})).includes('ana@example.com'),
    'the body (customer data) is not kept',
  );

  const d2 = (await deliveryById(c, D2)) as WebhookDeliveryDoc;
  t.is(d2.status, 'in_flight');
  t.is(d2.attempt_count, 2);
  t.deepEqual(
    d2.attempts.map((a) => [a.attempt, a.outcome, a.attempted_at]),
    [
      [1, 'failed', at(11)],
      [2, null, null],
    ],
  );
  // Who asked is the redelivery event's actor.
  t.deepEqual(d2.redeliveries, [
    { reason: 'redeliver', requested_at: at(20), requested_by: { type: 'platform', id: 'platform-test' } },
  ]);
  t.is(d2.parked_reason, null, 'a redelivery clears the park');
  t.like(d2, { scheduled_at: at(10), queued_since: at(20), source_revision: 3 }, 'queued anew when asked');

  const d3 = (await deliveryById(c, D3)) as WebhookDeliveryDoc;
  t.like(d3, { status: 'pending', attempt_count: 0, attempts: [], next_attempt_at: at(30) });
  const d4 = (await deliveryById(c, D4)) as WebhookDeliveryDoc;
  t.like(d4, { status: 'failed', next_attempt_at: at(60), attempt_count: 1 });
});

test('the status, attempts and times agree with the domain fold of each stream', async (t) => {
  const { es, run } = await scenario(t);
  // More moves: D2's attempt fails for good and is parked again; D3 is delivered.
  const d2State = await run(delivery.streamId(W1, CART1), [
    result(D2, 2, 22, 'failed', { park: 'attempts_exhausted' }),
  ]);
  const d3State = await run(delivery.streamId(W1, CART2), [start(D3, 31), result(D3, 1, 32, 'delivered')]);
  const d4State = await run(delivery.streamId(W2, CART1), []);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookDeliveriesProjection, { batchSize: 2 });
  const c = await deliveriesOf(readStore);
  for (const state of [d2State, d3State, d4State]) {
    if (!state.exists) throw new Error('no queue');
    for (const d of state.deliveries) {
      const doc = (await deliveryById(c, d.delivery_id)) as WebhookDeliveryDoc;
      t.is(doc.status, d.status, d.delivery_id);
      t.is(doc.attempt_count, d.attempts);
      t.is(doc.attempts.length, d.attempts);
      t.is(doc.next_attempt_at, d.next_attempt_at);
      t.is(doc.delivered_at, d.delivered_at);
      t.is(doc.parked_reason, d.parked_reason);
      t.is(doc.parked_at, d.parked_at);
      t.is(doc.attempts.at(-1)?.outcome ?? null, d.last_attempt?.outcome ?? null);
    }
  }
  t.like(await deliveryById(c, D2), { status: 'parked', parked_reason: 'attempts_exhausted' });
});

test('applying the same events again changes nothing, whatever the batch size', async (t) => {
  const { es } = await scenario(t);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookDeliveriesProjection);
  const first = await snapshot(readStore, webhookDeliveriesProjection);
  for (const batchSize of [1, 3, 1000]) {
    await resetCheckpoint(readStore, webhookDeliveriesProjection.name);
    const { readStore: watched, writes } = recording(readStore);
    await project(es, watched, webhookDeliveriesProjection, { batchSize });
    t.deepEqual(writes, []);
    t.deepEqual(await snapshot(readStore, webhookDeliveriesProjection), first);
  }
  const fresh = openSqliteReadStore(':memory:');
  await project(es, fresh, webhookDeliveriesProjection, { batchSize: 1 });
  t.deepEqual(await snapshot(fresh, webhookDeliveriesProjection), first);
});

test('deliveries finished a retention before an event’s time, and health minutes as old, go; a rebuild of any batch size agrees', async (t) => {
  const DAY = 86_400_000;
  const { es, run } = await scenario(t);
  const pruning = projectionFor(DAY);
  const D5 = delivery.deliveryId(W2, 'event-5');
  const later = DAY / 1000 + 2 * 3_600;
  await run(delivery.streamId(W2, CART2), [
    schedule(W2, CART2, 'event-5', 2, later),
    start(D5, later),
    result(D5, 1, later + 1, 'delivered'),
  ]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, pruning);
  const c = await deliveriesOf(readStore);
  const kept = (await c.find({}, { sort: [['_id', 1]] })).map((d) => d.delivery_id);
  // D1 was delivered a day and more before D5's events; D2 (redelivered, in flight), D3 (pending) and
  // D4 (failed, retrying) are not finished, whatever their age; D5 is new.
  t.deepEqual(kept, [D2, D3, D4, D5].sort());
  const health = await readStore.collection<{ _id: string; minute: string }>('webhook_health');
  const minutes = (await health.find({}, { sort: [['_id', 1]] })).map((m) => m.minute);
  t.true(minutes.length > 0);
  t.true(
    minutes.every((m) => Date.parse(m) >= T0 + later * 1000 - DAY - 3_600_000),
    'the minutes of a day before are gone',
  );
  const first = await snapshot(readStore, pruning);
  for (const batchSize of [1, 2, 1000]) {
    const fresh = openSqliteReadStore(':memory:');
    await project(es, fresh, pruning, { batchSize });
    t.deepEqual(await snapshot(fresh, pruning), first, `batch size ${batchSize}`);
  }
  // With the default retention, nothing here is old enough.
  const whole = openSqliteReadStore(':memory:');
  await project(es, whole, webhookDeliveriesProjection);
  t.is((await (await deliveriesOf(whole)).find({})).length, 5);
});

test('a delivery the admin API still showed keeps its document until its redelivery is applied, after another process’s later event', async (t) => {
  const DAY = 86_400_000;
  const es = await eventStoreFor(t);
  const run = world(es);
  // D1 delivered at 10:59:59, a second before an hour's end.
  const f = 3_599;
  await run(delivery.streamId(W1, CART1), [
    schedule(W1, CART1, 'event-1', 2, 0),
    start(D1, f - 1),
    result(D1, 1, f, 'delivered'),
  ]);
  // A retention later the API shows it (finished after pruned_before) and an operator redelivers it;
  // meanwhile a dispatcher whose clock is 3 s ahead appends another subscription's delivery first.
  const r = f + DAY / 1000 - 1;
  await run(delivery.streamId(W2, CART2), [schedule(W2, CART2, 'event-5', 2, r + 3)]);
  await run(delivery.streamId(W1, CART1), [
    { type: 'RequestRedelivery', delivery_id: D1, reason: 'redeliver', at: at(r) },
  ]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, projectionFor(DAY));
  const doc = (await (await deliveriesOf(readStore)).find({})).find((d) => d.delivery_id === D1);
  t.like(doc, { status: 'pending', finished_at: null }, 'the redelivery applied, the document kept');
  t.is(doc?.redeliveries.length, 1);
});

test('the latency histogram counts only attempts that got an answer: no timeout, refused connection or interrupted attempt', async (t) => {
  const es = await eventStoreFor(t);
  const run = world(es);
  const D = delivery.deliveryId(W1, 'event-9');
  type Recorded = Extract<Command, { type: 'RecordAttempt' }>;
  const answered = (attempt: number, seconds: number, status: number, durationMs: number): Recorded => ({
    ...(result(D, attempt, seconds, status === 200 ? 'delivered' : 'failed', {
      retry_at: seconds + 1,
    }) as Recorded),
    status,
    duration_ms: durationMs,
  });
  const unanswered = (attempt: number, seconds: number, code: string, durationMs: number): Recorded => ({
    ...(result(D, attempt, seconds, 'failed', { retry_at: seconds + 1 }) as Recorded),
    status: null,
    duration_ms: durationMs,
    response_excerpt: '',
    error_code: code,
    error: code,
  });
  await run(delivery.streamId(W1, CART1), [
    schedule(W1, CART1, 'event-9', 2, 0),
    start(D, 0),
    unanswered(1, 10, 'timeout', 10_000),
    start(D, 11),
    unanswered(2, 11, 'connection_refused', 2),
    start(D, 12),
    answered(3, 12, 503, 300),
    // The dispatcher died during this one: it is recorded as interrupted after its lease.
    { type: 'StartAttempt', delivery_id: D, lease_ms: 1_000, dispatcher_id: 'gone', at: at(13) },
    { type: 'RecordInterruption', delivery_id: D, retry_at: at(15), park: null, at: at(15) },
    start(D, 16),
    answered(5, 16, 200, 40),
  ]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookDeliveriesProjection);
  const [minute] = await (await readStore.collection<WebhookHealthDoc>(WEBHOOK_HEALTH)).find({});
  t.like(minute.attempts, { delivered: 1, failed: 3, interrupted: 1 });
  const counted = emptyHistogram();
  counted[latencyBucket(40)] += 1;
  counted[latencyBucket(300)] += 1;
  t.deepEqual(minute.latency_ms, counted, 'the 503 and the 200, nothing else');
  t.true((latencyQuantile(minute.latency_ms, 0.99) ?? 0) <= 400, 'p99 is not the 10 s timeout');
  t.true((latencyQuantile(minute.latency_ms, 0.5) ?? 0) > 10, 'p50 is not the refused connection');
});

test('a delivery sent again is queued from when it was asked for: the oldest queued is the one queued longest', async (t) => {
  const { es, run } = await scenario(t);
  // D2 (scheduled at 10) is parked again, and redelivered at 40; D3 was scheduled at 30.
  await run(delivery.streamId(W1, CART1), [
    result(D2, 2, 22, 'failed', { park: 'attempts_exhausted' }),
    { type: 'RequestRedelivery', delivery_id: D2, reason: 'recover', at: at(40) },
  ]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookDeliveriesProjection);
  const c = await deliveriesOf(readStore);
  t.like(await deliveryById(c, D2), { status: 'pending', scheduled_at: at(10), queued_since: at(40) });
  t.like(await deliveryById(c, D3), { status: 'pending', scheduled_at: at(30), queued_since: at(30) });
  t.is((await oldestQueued(c, W1))?.delivery_id, D3);
  t.is((await oldestQueued(c, W2))?.delivery_id, D4);
});

test('a failed delivery sent again keeps its age: it was still queued, so only a delivered or parked one is queued anew', async (t) => {
  const { es, run } = await scenario(t);
  // D4 (scheduled at 0) failed and waits for its retry; an operator recovers it at 50.
  await run(delivery.streamId(W2, CART1), [
    { type: 'RequestRedelivery', delivery_id: D4, reason: 'recover', at: at(50) },
  ]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookDeliveriesProjection);
  const c = await deliveriesOf(readStore);
  t.like(await deliveryById(c, D4), { status: 'pending', scheduled_at: at(0), queued_since: at(0) });
  t.is((await oldestQueued(c, W2))?.queued_since, at(0));
});

test('on the version 6 copy served while version 7 is built, the oldest queued is the oldest, with or without queued_since', async (t) => {
  const W = 'aaaaaaaa-0000-4000-8000-000000000000';
  // A version 6 document: no queued_since, no source_revision.
  const v6 = (
    id: string,
    scheduled: number,
    status: delivery.DeliveryStatus = 'pending',
  ): WebhookDeliveryDoc => {
    const { queued_since: _, source_revision: __, ...doc } = planDoc(0);
    // The type is version 7's; the stored document is not.
    return {
      ...doc,
      _id: id,
      delivery_id: id,
      webhook_id: W,
      status,
      scheduled_at: at(scheduled),
    } as WebhookDeliveryDoc;
  };
  // One the version 7 code wrote to the copy since.
  const v7 = (id: string, queued: number): WebhookDeliveryDoc => ({
    ...planDoc(0),
    _id: id,
    delivery_id: id,
    webhook_id: W,
    status: 'failed',
    scheduled_at: at(queued),
    queued_since: at(queued),
  });
  const v6Indexes = webhookDeliveryIndexes.filter(
    (i) => !i.keys.some(([f]) => f === 'queued_since' || f === 'source_revision'),
  );
  for (const [label, indexes] of [
    ['the version 6 indexes', v6Indexes],
    ['the version 7 indexes', webhookDeliveryIndexes],
  ] as const) {
    const oldestOf = async (docs: WebhookDeliveryDoc[]) => {
      const c = await openSqliteReadStore(':memory:').collection<WebhookDeliveryDoc>(
        WEBHOOK_DELIVERIES,
        indexes,
      );
      await c.bulkWrite(
        docs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
      );
      return (await oldestQueued(c, W))?.delivery_id;
    };
    // By _id the first of the old ones is 'a-…', scheduled last of them.
    const a = v6('a0000000-0000-4000-8000-000000000001', 30);
    const b = v6('b0000000-0000-4000-8000-000000000002', 10, 'failed');
    const parked = v6('00000000-0000-4000-8000-000000000000', 0, 'parked');
    const c = v7('c0000000-0000-4000-8000-000000000003', 20);
    t.is(await oldestOf([a, b, c, parked]), b.delivery_id, `${label}: an old one, the oldest scheduled`);
    t.is(await oldestOf([a, c, parked]), c.delivery_id, `${label}: a new one, queued before the old one`);
    t.is(await oldestOf([a, parked]), a.delivery_id, `${label}: old ones only`);
    t.is(await oldestOf([c]), c.delivery_id, `${label}: new ones only`);
    t.is(await oldestOf([parked]), undefined, `${label}: none queued`);
  }
});

test("each subscription's queue keeps the outcome of its last attempt, an interrupted one not counted", async (t) => {
  const es = await eventStoreFor(t);
  const run = world(es);
  const readStore = openSqliteReadStore(':memory:');
  const queues = async () => {
    await project(es, readStore, webhookDeliveriesProjection);
    return queueOf(await readStore.collection<WebhookQueueDoc>(WEBHOOK_QUEUES), W1);
  };
  const q = delivery.streamId(W1, CART1);
  await run(q, [schedule(W1, CART1, 'event-1', 2, 0)]);
  t.deepEqual(await queues(), { depth: 1, last_outcome: null });
  await run(q, [
    start(D1, 0),
    result(D1, 1, 1, 'failed', { retry_at: 5 }),
    { type: 'StartAttempt', delivery_id: D1, lease_ms: 1_000, dispatcher_id: 'gone', at: at(5) },
    { type: 'RecordInterruption', delivery_id: D1, retry_at: at(7), park: null, at: at(7) },
  ]);
  t.deepEqual(await queues(), { depth: 1, last_outcome: 'failed' }, 'the interruption is not the last');
  await run(q, [start(D1, 8), result(D1, 3, 9, 'delivered')]);
  t.deepEqual(await queues(), { depth: 0, last_outcome: 'delivered' });
});

test('the queued deliveries of some queues, in queue order (the cart event order), whatever order they were scheduled in', async (t) => {
  const es = await eventStoreFor(t);
  const run = world(es);
  const q = delivery.streamId(W1, CART1);
  const E = (n: number) => delivery.deliveryId(W1, `event-${n}`);
  // The fan-out wrote revision 7 before revision 5; revision 3 is delivered.
  await run(q, [
    schedule(W1, CART1, 'event-3', 3, 0),
    start(E(3), 0),
    result(E(3), 1, 1, 'delivered'),
    schedule(W1, CART1, 'event-7', 7, 2),
    schedule(W1, CART1, 'event-5', 5, 3),
  ]);
  await run(delivery.streamId(W1, CART2), [schedule(W1, CART2, 'event-8', 1, 4)]);
  await run(delivery.streamId(W2, CART2), [schedule(W2, CART2, 'event-9', 1, 4)]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookDeliveriesProjection);
  const c = await deliveriesOf(readStore);
  const asked = [
    { webhook_id: W1, cart_uuid: CART1 },
    { webhook_id: W2, cart_uuid: CART2 },
  ];
  const found = await queuedInQueues(c, asked);
  t.deepEqual(
    [...found.keys()].sort(),
    asked.map(queueKey).sort(),
    "W1's queue for CART2 and W2's for CART1 were not asked for",
  );
  t.deepEqual(
    found.get(queueKey(asked[0]))?.map((d) => d.delivery_id),
    [E(5), E(7)],
  );
  t.deepEqual(
    found.get(queueKey(asked[1]))?.map((d) => d.delivery_id),
    [delivery.deliveryId(W2, 'event-9')],
  );
  t.deepEqual(await queuedInQueues(c, []), new Map());
});

// ---- query plans ------------------------------------------------------------------------------------

const N = 10_000;
/** Entries a plan may look at beyond what it returns (the cursor's own entry). */
const SLACK = 2;
const STATUSES = delivery.deliveryStatuses;
const hex = (n: number) => n.toString(16).padStart(12, '0');

/** 10,000 documents: 100 subscriptions × 100 deliveries, statuses and times spread out. */
function planDoc(i: number): WebhookDeliveryDoc {
  const webhook = `aaaaaaaa-0000-4000-8000-${hex(i % 100)}`;
  const id = `dddddddd-0000-4000-8000-${hex(i)}`;
  const scheduled = at(i * 7);
  return {
    _id: id,
    delivery_id: id,
    webhook_id: webhook,
    event_kind: 'cart_status_updated',
    cart_uuid: `cccccccc-0000-4000-8000-${hex(i % 997)}`,
    store_id: 1,
    source_event_id: `event-${i}`,
    source_revision: i,
    status: STATUSES[Math.floor(i / 100) % STATUSES.length],
    attempts: [],
    attempt_count: 0,
    scheduled_at: scheduled,
    queued_since: scheduled,
    next_attempt_at: null,
    delivered_at: null,
    parked_reason: null,
    parked_at: null,
    redeliveries: [],
    updated_at: scheduled,
  };
}

const planDocs = Array.from({ length: N }, (_, i) => planDoc(i));
const planCollection = (async () => {
  const c = await openSqliteReadStore(':memory:').collection<WebhookDeliveryDoc>(
    WEBHOOK_DELIVERIES,
    webhookDeliveryIndexes,
  );
  await c.bulkWrite(
    planDocs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
  );
  return c as SqliteCollection<WebhookDeliveryDoc>;
})();

const newestFirst = (a: WebhookDeliveryDoc, b: WebhookDeliveryDoc) =>
  b.scheduled_at.localeCompare(a.scheduled_at) || a._id.localeCompare(b._id);
const HOOK = 'aaaaaaaa-0000-4000-8000-00000000002a';

test.serial(
  "a subscription's deliveries, newest first, page by page: each page examines only itself",
  async (t) => {
    const c = await planCollection;
    const all = planDocs.filter((d) => d.webhook_id === HOOK).sort(newestFirst);
    t.is(all.length, 100);
    const seen: string[] = [];
    let after: { scheduled_at: string; delivery_id: string } | undefined;
    for (let page = 0; page < 5; page++) {
      const found = await listDeliveries(c, HOOK, { limit: 20, after });
      t.true(c.lastExamined() <= 20 + SLACK, `examined ${c.lastExamined()}`);
      seen.push(...found.map((d) => d._id));
      const last = found[found.length - 1];
      after = { scheduled_at: last.scheduled_at, delivery_id: last.delivery_id };
    }
    t.deepEqual(
      seen,
      all.map((d) => d._id),
    );
  },
);

test.serial('filtered by one or several statuses: an index walk per status, merged in order', async (t) => {
  const c = await planCollection;
  for (const statuses of [['failed'], ['failed', 'parked'], ['pending', 'in_flight', 'delivered']] as const) {
    const want = planDocs
      .filter((d) => d.webhook_id === HOOK && (statuses as readonly string[]).includes(d.status))
      .sort(newestFirst);
    t.true(want.length > 10, statuses.join());
    const found = await listDeliveries(c, HOOK, { statuses, limit: 10 });
    t.deepEqual(
      found.map((d) => d._id),
      want.slice(0, 10).map((d) => d._id),
    );
    t.true(c.lastExamined() <= 10 + statuses.length + SLACK, `examined ${c.lastExamined()}`);
  }
});

test.serial('failed or parked since a time: index ranges, oldest first', async (t) => {
  const c = await planCollection;
  const since = at(5000 * 7);
  const want = planDocs
    .filter(
      (d) =>
        d.webhook_id === HOOK && (d.status === 'failed' || d.status === 'parked') && d.scheduled_at >= since,
    )
    .sort((a, b) => a.scheduled_at.localeCompare(b.scheduled_at) || a._id.localeCompare(b._id));
  t.true(want.length > 5);
  const found = await failedOrParkedSince(c, HOOK, since, 10_001);
  t.deepEqual(
    found.map((d) => d._id),
    want.map((d) => d._id),
  );
  t.true(c.lastExamined() <= want.length + SLACK, `examined ${c.lastExamined()} for ${want.length}`);
  const bounded = await failedOrParkedSince(c, HOOK, since, 3);
  t.deepEqual(
    bounded.map((d) => d._id),
    want.slice(0, 3).map((d) => d._id),
  );
});

test.serial("the queued deliveries of a page's queues: one query that examines only them", async (t) => {
  const c = await planCollection;
  const page = planDocs.filter((d) => d.webhook_id === HOOK).slice(0, 40);
  const queues = page.map((d) => ({ webhook_id: d.webhook_id, cart_uuid: d.cart_uuid }));
  const queued = new Set(['pending', 'in_flight', 'failed']);
  const want = planDocs.filter(
    (d) => queued.has(d.status) && queues.some((q) => queueKey(q) === queueKey(d)),
  );
  t.true(want.length > 5, `${want.length} queued`);
  const found = await queuedInQueues(c, queues);
  t.deepEqual(
    [...found.values()]
      .flat()
      .map((d) => d._id)
      .sort(),
    want.map((d) => d._id).sort(),
  );
  t.true(c.lastExamined() <= want.length + SLACK, `examined ${c.lastExamined()} for ${want.length}`);
});
