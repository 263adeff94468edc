/**
 * When the delivery worker's window fills (dispatcher/queue-window.ts; docs/webhooks.md, "Scale"):
 * cold queues due while the window is full of due queues are taken as soon as a queue leaves it.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import {
  ColdQueues,
  type DeliveryQueueDoc,
  QUEUE_INDEXES,
  queueDocument,
} from '../../dispatcher/cold-queues.ts';
import { DeliveryQueues } from '../../dispatcher/delivery-queues.ts';
import { createQueueWindow } from '../../dispatcher/queue-window.ts';
import { createScheduler } from '../../dispatcher/scheduler.ts';
import { manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { scheduleRequest } from '../support/delivery-worker.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');

/** A queue of one delivery whose head is due at T0 + `dueInMs`. */
function queueDue(dueInMs: number): DeliveryQueueDoc {
  const r = scheduleRequest(randomUUID(), randomUUID(), 1, manualClock(new Date(T0)));
  let state = delivery.decider.initialState;
  for (const e of delivery.decider.decide(r.command, state)) state = delivery.decider.evolve(state, e);
  if (!state.exists) throw new Error('no queue');
  const due = new Date(T0 + dueInMs).toISOString();
  const deliveries = state.deliveries.map((d) => ({ ...d, next_attempt_at: due }));
  return queueDocument(r.stream, 0, 1, deliveries, {});
}

test('a window full of due queues (none to make room with) takes a due cold queue as soon as one queue leaves it, not only once a sixteenth has', async (t) => {
  const clock = manualClock(new Date(T0 + 60_000));
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(() => readStore.close());
  const c = await readStore.collection<DeliveryQueueDoc>('webhook_delivery_queues', QUEUE_INDEXES);
  const colds = Array.from({ length: 5 }, () => queueDue(0));
  await c.bulkWrite(
    colds.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
  );
  const cold = new ColdQueues();
  cold.attach(c, colds.length + 32);
  const scheduler = createScheduler(clock);
  t.teardown(() => scheduler.stop());
  const queues: DeliveryQueues = new DeliveryQueues({
    store: {} as EventStore,
    registry: eventRegistry,
    cold,
    window: 32,
    onChanged() {},
    onDropped: () => window.freed(),
    onCold: (dueAt) => window.cooled(dueAt),
  });
  const window = createQueueWindow({
    queues,
    cold,
    scheduler,
    now: () => clock.now(),
    reschedule() {},
    stopped: () => false,
    errorRetryMs: 1_000,
  });
  // The window (32, a sixteenth of it 2) holds queues due now, waiting for a request slot.
  const held = Array.from({ length: 32 }, () => queues.restore(queueDue(30_000)));
  window.ready();
  await window.idle();
  await scheduler.tick();
  await window.idle();
  t.is(queues.held.size, 32);
  t.is(scheduler.dueAt('$cold-queues'), undefined, 'no timer: the next queue to leave fills');

  // One queue's delivery is delivered: it leaves the window.
  held[0].state = { exists: true, deliveries: [] };
  queues.keepOrDrop(held[0]);
  t.is(queues.held.size, 31);
  await window.idle();
  t.is(queues.held.size, 32, 'a due cold queue took its place');
  t.is(colds.filter((d) => queues.held.has(d._id)).length, 1);
});
