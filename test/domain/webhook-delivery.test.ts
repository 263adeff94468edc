import test from 'ava';
import { fold } from '../../domain/decider.ts';
import {
  type DeliveryQueueState,
  decider,
  deliveryId,
  events,
  head,
  headDueAt,
  parseStreamId,
  streamId,
  type WebhookDeliveryCommand,
} from '../../domain/webhook-delivery.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-01T10:00:05.000Z';
const webhook_id = '4f1c2a3b-6d7e-4f80-9a1b-2c3d4e5f6071';
const cart_uuid = '9d7f2b1c-3a4e-4c5d-8e6f-7a8b9c0d1e2f';
const queue = scenario(decider);
const idA = deliveryId(webhook_id, 'event-a');
const idB = deliveryId(webhook_id, 'event-b');

const scheduled = (delivery_id: string, source_revision: number) =>
  events.WebhookDeliveryScheduled({
    delivery_id,
    webhook_id,
    event_kind: 'cart_status_updated',
    cart_uuid,
    store_id: 1,
    source_event_id: delivery_id === idA ? 'event-a' : 'event-b',
    source_revision,
    source_position: 100 + source_revision,
    body: '{"webhook_event":"cart_status_updated"}',
    scheduled_at: at,
  });
const started = (delivery_id: string, attempt: number, started_at = at) =>
  events.WebhookDeliveryAttemptStarted({
    delivery_id,
    attempt,
    started_at,
    lease_until: new Date(Date.parse(started_at) + 3_000).toISOString(),
    dispatcher_id: 'd-1',
  });
const failed = (delivery_id: string, attempt: number, next: string | null) =>
  events.WebhookDeliveryAttempted({
    delivery_id,
    attempt,
    outcome: 'failed',
    status: 500,
    duration_ms: 12,
    response_excerpt: 'boom',
    error_code: 'http_status',
    error: 'HTTP 500',
    attempted_at: at,
    next_attempt_at: next,
  });
const record = (over: Partial<Extract<WebhookDeliveryCommand, { type: 'RecordAttempt' }>> = {}) =>
  ({
    type: 'RecordAttempt',
    delivery_id: idA,
    attempt: 1,
    outcome: 'failed',
    status: 500,
    duration_ms: 12,
    response_excerpt: 'boom',
    error_code: 'http_status',
    error: 'HTTP 500',
    retry_at: later,
    park: null,
    at,
    ...over,
  }) as const;

test('ids: the delivery id is a stable name-based UUID of subscription and event; stream ids round-trip', (t) => {
  t.is(deliveryId(webhook_id, 'event-a'), idA);
  t.not(idA, idB);
  t.not(deliveryId('5f1c2a3b-6d7e-4f80-9a1b-2c3d4e5f6071', 'event-a'), idA);
  t.regex(idA, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  t.deepEqual(parseStreamId(streamId(webhook_id, cart_uuid)), { webhook_id, cart_uuid });
  t.is(parseStreamId(`webhooksub-${webhook_id}`), null);
  t.is(parseStreamId(`webhookdelivery-${webhook_id}_x`), null);
});

test('ScheduleDelivery: scheduled once; a repeat (fan-out after a crash) appends nothing', (t) => {
  const command: WebhookDeliveryCommand = {
    type: 'ScheduleDelivery',
    delivery_id: idA,
    webhook_id,
    event_kind: 'cart_status_updated',
    cart_uuid,
    store_id: 1,
    source_event_id: 'event-a',
    source_revision: 3,
    source_position: 103,
    body: '{"webhook_event":"cart_status_updated"}',
    at,
  };
  queue
    .given([])
    .when(command)
    .thenEmits(t, [scheduled(idA, 3)]);
  queue
    .given([scheduled(idA, 3)])
    .when(command)
    .thenEmits(t, []);
});

test('the head is the earliest unsettled delivery in cart event order, whatever the write order', (t) => {
  const state = fold(decider, [scheduled(idB, 5), scheduled(idA, 3)]);
  t.is(head(state)?.delivery_id, idA);
  t.is(headDueAt(state), at);
  queue
    .given([scheduled(idB, 5), scheduled(idA, 3)])
    .when({ type: 'StartAttempt', delivery_id: idB, lease_ms: 3_000, dispatcher_id: 'd-1', at })
    .thenRefused(t, 'delivery_not_next', 'conflict');
});

test('StartAttempt: numbered from 1 with a lease; refused while one is in flight or before it is due', (t) => {
  queue
    .given([scheduled(idA, 3)])
    .when({ type: 'StartAttempt', delivery_id: idA, lease_ms: 3_000, dispatcher_id: 'd-1', at })
    .thenEmits(t, [started(idA, 1)]);
  queue
    .given([scheduled(idA, 3), started(idA, 1)])
    .when({ type: 'StartAttempt', delivery_id: idA, lease_ms: 3_000, dispatcher_id: 'd-2', at })
    .thenRefused(t, 'attempt_in_flight', 'conflict');
  const err = queue
    .given([scheduled(idA, 3), started(idA, 1), failed(idA, 1, later)])
    .when({ type: 'StartAttempt', delivery_id: idA, lease_ms: 3_000, dispatcher_id: 'd-1', at })
    .thenRefused(t, 'attempt_not_due', 'conflict');
  t.deepEqual(err?.details, { due_at: later });
  queue
    .given([scheduled(idA, 3), started(idA, 1), failed(idA, 1, later)])
    .when({ type: 'StartAttempt', delivery_id: idA, lease_ms: 3_000, dispatcher_id: 'd-1', at: later })
    .thenEmits(t, [started(idA, 2, later)]);
});

test('RecordAttempt: a failure schedules the next attempt; the last parks; delivered settles', (t) => {
  queue
    .given([scheduled(idA, 3), started(idA, 1)])
    .when(record())
    .thenEmits(t, [failed(idA, 1, later)]);
  queue
    .given([scheduled(idA, 3), started(idA, 1)])
    .when(record({ retry_at: null, park: 'attempts_exhausted' }))
    .thenEmits(t, [
      failed(idA, 1, null),
      events.WebhookDeliveryParked({ delivery_id: idA, reason: 'attempts_exhausted', parked_at: at }),
    ]);
  queue
    .given([scheduled(idA, 3), started(idA, 1)])
    .when(record({ retry_at: null }))
    .thenRefused(t, 'retry_time_required', 'invalid');
  queue
    .given([scheduled(idA, 3)])
    .when(record())
    .thenRefused(t, 'attempt_not_in_flight', 'conflict');
  const done = fold(decider, [
    scheduled(idA, 3),
    scheduled(idB, 5),
    started(idA, 1),
    ...decider.decide(
      record({ outcome: 'delivered', status: 200, retry_at: null }),
      fold(decider, [scheduled(idA, 3), started(idA, 1)]),
    ),
  ]) as Extract<DeliveryQueueState, { exists: true }>;
  t.is(done.deliveries[0].status, 'delivered');
  t.is(head(done)?.delivery_id, idB, 'the next delivery of the cart is up');
});

test('RecordInterruption: only after the lease ran out; the interrupted attempt is retried', (t) => {
  const given = [scheduled(idA, 3), started(idA, 1)];
  queue
    .given(given)
    .when({ type: 'RecordInterruption', delivery_id: idA, retry_at: at, park: null, at })
    .thenRefused(t, 'lease_not_expired', 'conflict');
  const afterLease = '2026-03-01T10:00:03.000Z';
  const [event] = decider.decide(
    { type: 'RecordInterruption', delivery_id: idA, retry_at: afterLease, park: null, at: afterLease },
    fold(decider, given),
  );
  t.like(event.data, {
    attempt: 1,
    outcome: 'interrupted',
    status: null,
    error_code: 'interrupted',
    duration_ms: 3_000,
  });
  const state = fold(decider, [...given, event]) as Extract<DeliveryQueueState, { exists: true }>;
  t.like(state.deliveries[0], {
    status: 'failed',
    next_attempt_at: afterLease,
    in_flight: null,
    attempts: 1,
  });
});

test('RequestRedelivery: a parked or delivered delivery starts a new cycle, keeping its attempt count; refused while pending', (t) => {
  const parked = [
    scheduled(idA, 3),
    started(idA, 1),
    failed(idA, 1, null),
    events.WebhookDeliveryParked({ delivery_id: idA, reason: 'attempts_exhausted', parked_at: at }),
  ];
  queue
    .given(parked)
    .when({ type: 'RequestRedelivery', delivery_id: idA, reason: 'redeliver', at: later })
    .thenEmits(t, [
      events.WebhookRedeliveryRequested({ delivery_id: idA, reason: 'redeliver', requested_at: later }),
    ]);
  const state = fold(decider, [
    ...parked,
    events.WebhookRedeliveryRequested({ delivery_id: idA, reason: 'redeliver', requested_at: later }),
  ]) as Extract<DeliveryQueueState, { exists: true }>;
  t.like(state.deliveries[0], {
    status: 'pending',
    cycle_attempts: 0,
    attempts: 1,
    next_attempt_at: later,
    queued_since: later,
    scheduled_at: at,
    parked_reason: null,
  });
  queue
    .given([scheduled(idA, 3)])
    .when({ type: 'RequestRedelivery', delivery_id: idA, reason: 'redeliver', at })
    .thenRefused(t, 'delivery_in_progress', 'conflict');
  queue
    .given([])
    .when({ type: 'RequestRedelivery', delivery_id: idA, reason: 'redeliver', at })
    .thenRefused(t, 'delivery_not_found', 'not_found');
});

test('RequestRedelivery: a failed delivery, still queued, keeps its queued_since; a delivered one is queued anew', (t) => {
  const failedOnce = [scheduled(idA, 3), started(idA, 1), failed(idA, 1, later)];
  const recovered = fold(decider, [
    ...failedOnce,
    events.WebhookRedeliveryRequested({ delivery_id: idA, reason: 'recover', requested_at: later }),
  ]) as Extract<DeliveryQueueState, { exists: true }>;
  t.like(recovered.deliveries[0], { status: 'pending', next_attempt_at: later, queued_since: at });
  const delivered = [
    ...failedOnce,
    started(idA, 2),
    events.WebhookDeliveryAttempted({
      delivery_id: idA,
      attempt: 2,
      outcome: 'delivered',
      status: 200,
      duration_ms: 12,
      response_excerpt: 'ok',
      error_code: null,
      error: null,
      attempted_at: at,
      next_attempt_at: null,
    }),
  ];
  const redelivered = fold(decider, [
    ...delivered,
    events.WebhookRedeliveryRequested({ delivery_id: idA, reason: 'redeliver', requested_at: later }),
  ]) as Extract<DeliveryQueueState, { exists: true }>;
  t.like(redelivered.deliveries[0], { status: 'pending', queued_since: later });
});

test('ParkDelivery: parks an unsettled delivery (subscription gone); nothing for a settled one', (t) => {
  queue
    .given([scheduled(idA, 3)])
    .when({ type: 'ParkDelivery', delivery_id: idA, reason: 'subscription_disabled', at })
    .thenEmits(t, [
      events.WebhookDeliveryParked({ delivery_id: idA, reason: 'subscription_disabled', parked_at: at }),
    ]);
  queue
    .given([
      scheduled(idA, 3),
      events.WebhookDeliveryParked({ delivery_id: idA, reason: 'subscription_disabled', parked_at: at }),
    ])
    .when({ type: 'ParkDelivery', delivery_id: idA, reason: 'subscription_removed', at })
    .thenEmits(t, []);
});
