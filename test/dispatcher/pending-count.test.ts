/**
 * The count of deliveries pending (dispatcher/delivery-queues.ts, `pending`; dispatcher/cold-queues.ts,
 * its cold part) as queues go cold and come back: what `pds_webhook_deliveries_pending` reads and the
 * guard stores (docs/operations.md, "Health").
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { ColdQueues, type DeliveryQueueDoc, queueDocument } from '../../dispatcher/cold-queues.ts';
import { DeliveryQueues, type Queue } from '../../dispatcher/delivery-queues.ts';
import { manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { EventStore } from '../../eventstore/port.ts';
import type { Collection } from '../../projections/read-store.ts';
import { scheduleRequest } from '../support/delivery-worker.ts';

const HOUR = 3_600_000;

/** A queue of one delivery whose head waits for a retry an hour on, as its cold document stores it. */
function queueInRetry(clock: ReturnType<typeof manualClock>) {
  const hook = randomUUID();
  const cart = randomUUID();
  const first = scheduleRequest(hook, cart, 1, clock);
  let state = delivery.decider.initialState;
  const events = delivery.decider.decide(first.command, state);
  for (const e of events) state = delivery.decider.evolve(state, e);
  if (!state.exists) throw new Error('no queue');
  const retryAt = new Date(clock.now().getTime() + HOUR).toISOString();
  const deliveries = state.deliveries.map((d) => ({ ...d, next_attempt_at: retryAt }));
  const doc = queueDocument(first.stream, events.length - 1, 10, deliveries, {});
  return { hook, cart, doc };
}

/** A store read only for documents it does not hold. */
const noStore = { findOne: async () => null } as unknown as Collection<DeliveryQueueDoc>;

/** Working-set queues over cold ones whose store holds nothing (all cold ones are in memory). */
function queuesOf(window: number, stored: number) {
  const cold = new ColdQueues();
  cold.attach(noStore, stored);
  const queues = new DeliveryQueues({
    store: {} as EventStore,
    registry: eventRegistry,
    cold,
    window,
    onChanged() {},
    onDropped() {},
  });
  return { cold, queues };
}

/** What this worker appended to the queue: a second delivery scheduled on it. */
function scheduleSecond(
  queues: DeliveryQueues,
  queue: Queue,
  hook: string,
  cart: string,
  clock: ReturnType<typeof manualClock>,
) {
  const events = delivery.decider.decide(scheduleRequest(hook, cart, 2, clock).command, queue.state);
  queues.recordOwnAfterRead(
    queue,
    { state: queue.state, revision: queue.revision, position: queue.position, events: [] },
    { events, revision: queue.revision + events.length, position: 11, correlationId: randomUUID() },
  );
}

test('a held queue evicted while a scheduling on it is appended, then back in the window: each delivery counted once', (t) => {
  const clock = manualClock(new Date('2026-01-01T00:00:00Z'));
  const { hook, cart, doc } = queueInRetry(clock);
  const { cold, queues } = queuesOf(1, 1);
  const queue = queues.restore(doc);
  t.is(queues.pending().depth, 1);
  // The scheduling read the held queue and appends; meanwhile the window makes room for a due one.
  queues.evict(queue);
  t.is(queues.pending().depth, 1);
  scheduleSecond(queues, queue, hook, cart, clock);
  queues.keepOrDrop(queue);
  t.is(queues.held.get(doc._id), queue);
  t.is(queues.pending().depth, 2);
  // Evicted once more: its two deliveries are cold now.
  queues.evict(queue);
  t.is(queues.pending().depth, 2);
  t.is(cold.coldDepth(), 2);
});

test('a held queue evicted while a scheduling on it is appended, and cold again after it: each delivery counted once', (t) => {
  const clock = manualClock(new Date('2026-01-01T00:00:00Z'));
  const { hook, cart, doc } = queueInRetry(clock);
  const other = queueInRetry(clock);
  const { queues } = queuesOf(1, 2);
  const queue = queues.restore(doc);
  t.is(queues.pending().depth, 2);
  queues.evict(queue);
  // Another queue takes the window meanwhile: the scheduled one stays cold.
  queues.restore(other.doc);
  scheduleSecond(queues, queue, hook, cart, clock);
  queues.keepOrDrop(queue);
  t.false(queues.held.has(doc._id));
  t.is(queues.pending().depth, 3);
});

test('a cold queue written twice at the same revision (the log and the own append, one after the other) is counted once', (t) => {
  const clock = manualClock(new Date('2026-01-01T00:00:00Z'));
  const { doc } = queueInRetry(clock);
  const cold = new ColdQueues();
  cold.attach(noStore, 1);
  const stateOf = () => ({
    stream: doc._id,
    revision: doc.revision + 1,
    position: 11,
    state: {
      exists: true as const,
      deliveries: [...doc.deliveries, { ...doc.deliveries[0], delivery_id: randomUUID() }],
    },
    correlation: new Map<string, string>(),
  });
  // Each a copy read from the same document (1 delivery cold), each with the second delivery applied.
  cold.put(stateOf(), 1);
  cold.put(stateOf(), 1);
  t.is(cold.coldDepth(), 2);
});

test('a held queue evicted, its document stored by a commit, then back in the window with a scheduling: each delivery counted once', (t) => {
  const clock = manualClock(new Date('2026-01-01T00:00:00Z'));
  const { hook, cart, doc } = queueInRetry(clock);
  const { cold, queues } = queuesOf(1, 1);
  const queue = queues.restore(doc);
  queues.evict(queue);
  // The follower's commit stores its cold document while the scheduling's append is under way.
  const saved = cold.save(doc._id);
  if (!saved) throw new Error('a change to store');
  cold.committed(new Map([[doc._id, saved]]));
  scheduleSecond(queues, queue, hook, cart, clock);
  queues.keepOrDrop(queue);
  t.is(queues.held.get(doc._id), queue);
  t.is(queues.pending().depth, 2);
});
