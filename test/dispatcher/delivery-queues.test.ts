/**
 * The delivery worker's working set (dispatcher/delivery-queues.ts) as the log hands it events: what
 * `pds_webhook_oldest_pending_seconds` reads (docs/operations.md, "Health").
 */
import test from 'ava';
import { DeliveryQueues } from '../../dispatcher/delivery-queues.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { append, eventStoreFor } from '../projections/support.ts';

const W1 = '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';
const CART1 = 'c0000000-0000-4000-8000-000000000001';
const CART2 = 'c0000000-0000-4000-8000-000000000002';
const T0 = Date.parse('2026-05-01T10:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();

/** Decides each command on its queue's state and appends what the decider produced. */
function world(es: EventStore) {
  const states = new Map<string, delivery.DeliveryQueueState>();
  return async (stream: string, commands: delivery.WebhookDeliveryCommand[]) => {
    let state = states.get(stream) ?? delivery.decider.initialState;
    for (const command of commands) {
      const events = delivery.decider.decide(command, state);
      for (const e of events) state = delivery.decider.evolve(state, e);
      if (events.length > 0) await append(es, stream, events, command.at);
    }
    states.set(stream, state);
  };
}

const schedule = (cartUuid: string, eventId: string, seconds: number): delivery.WebhookDeliveryCommand => ({
  type: 'ScheduleDelivery',
  delivery_id: delivery.deliveryId(W1, eventId),
  webhook_id: W1,
  event_kind: 'cart_status_updated',
  cart_uuid: cartUuid,
  store_id: 1,
  source_event_id: eventId,
  source_revision: 1,
  source_position: 1,
  body: '{}',
  at: at(seconds),
});

test('a parked delivery sent again is aged from its redelivery, not from when it was scheduled', async (t) => {
  const es = await eventStoreFor(t);
  const run = world(es);
  const queues = new DeliveryQueues({
    store: es,
    registry: eventRegistry,
    onChanged: () => {},
    onDropped: () => {},
  });
  let followed = 0;
  const follow = async () => {
    const events = await es.readAll({ after: followed });
    if (events.length === 0) return;
    await queues.applyAll(events, () => {});
    followed = events[events.length - 1].position;
  };
  const D1 = delivery.deliveryId(W1, 'event-1');
  const q1 = delivery.streamId(W1, CART1);
  // D1 (scheduled at 0) parks; D2 (scheduled at 10) waits.
  await run(q1, [
    schedule(CART1, 'event-1', 0),
    { type: 'StartAttempt', delivery_id: D1, lease_ms: 30_000, dispatcher_id: 'd', at: at(0) },
    {
      type: 'RecordAttempt',
      delivery_id: D1,
      attempt: 1,
      outcome: 'failed',
      status: 500,
      duration_ms: 12,
      response_excerpt: 'boom',
      error_code: 'http_status',
      error: 'HTTP 500',
      retry_at: null,
      park: 'attempts_exhausted',
      at: at(1),
    },
  ]);
  await run(delivery.streamId(W1, CART2), [schedule(CART2, 'event-2', 10)]);
  await follow();
  t.deepEqual(queues.pending(), { depth: 1, oldestQueuedSince: at(10) }, 'the parked one left the queue');
  // An operator recovers D1 at 60: queued again, from then.
  await run(q1, [{ type: 'RequestRedelivery', delivery_id: D1, reason: 'recover', at: at(60) }]);
  await follow();
  t.deepEqual(queues.pending(), { depth: 2, oldestQueuedSince: at(10) });
});
