/**
 * What a fill of the delivery worker's window reads (dispatcher/cold-queues.ts, `due`;
 * docs/webhooks.md, "Scale"): the held queues due first are read once, not by every fill, so a fill
 * reads about as many documents as the room it fills, whatever the window.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import {
  ColdQueues,
  type DeliveryQueueDoc,
  QUEUE_INDEXES,
  queueDocument,
} from '../../dispatcher/cold-queues.ts';
import { manualClock } from '../../domain/clock.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { Collection } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { scheduleRequest } from '../support/delivery-worker.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0 + ms).toISOString();

/** One delivery whose head next needs the worker at `due`. */
function deliveriesDueAt(due: string): delivery.Delivery[] {
  const r = scheduleRequest(randomUUID(), randomUUID(), 1, manualClock(new Date(T0)));
  let state = delivery.decider.initialState;
  for (const e of delivery.decider.decide(r.command, state)) state = delivery.decider.evolve(state, e);
  if (!state.exists) throw new Error('no queue');
  return state.deliveries.map((d) => ({ ...d, next_attempt_at: due }));
}

const stream = (i: number) =>
  `webhookdelivery-${randomUUID()}_c0000000-0000-4000-8000-${String(i).padStart(12, '0')}`;

/** The collection, counting the documents its reads return. */
function counting(c: Collection<DeliveryQueueDoc>) {
  const reads = { rows: 0 };
  const wrapped = Object.create(c) as Collection<DeliveryQueueDoc>;
  wrapped.find = async (filter, options) => {
    const rows = await c.find(filter, options);
    reads.rows += rows.length;
    return rows;
  };
  return { wrapped, reads };
}

/** 2,000 queues due first (held), then 2,000 cold ones due after them, all due at T0 + 1 h. */
async function world(t: { teardown(f: () => unknown): void }) {
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(() => readStore.close());
  const c = await readStore.collection<DeliveryQueueDoc>('webhook_delivery_queues', QUEUE_INDEXES);
  const doc = (i: number) => queueDocument(stream(i), 0, i + 1, deliveriesDueAt(at(i * 1000)), {});
  const heldDocs = Array.from({ length: 2_000 }, (_, i) => doc(i));
  const coldDocs = Array.from({ length: 2_000 }, (_, i) => doc(2_000 + i));
  await c.bulkWrite(
    [...heldDocs, ...coldDocs].map((d) => ({
      replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true },
    })),
  );
  const { wrapped, reads } = counting(c);
  const cold = new ColdQueues();
  cold.attach(wrapped, 4_000);
  const held = new Set(heldDocs.map((d) => d._id));
  /** A fill: the due documents up to `room`, each then taken into the window as the fill does. */
  const fill = async (room: number) => {
    reads.rows = 0;
    const { docs } = await cold.due(new Date(T0 + 3_600_000 * 2), room, (s) => held.has(s));
    for (const d of docs) {
      cold.take(d._id, d.deliveries.length, true);
      held.add(d._id);
    }
    return { docs, rows: reads.rows };
  };
  /** A held queue leaves the window at its next revision (its head due as before): cold again. */
  const goCold = (d: DeliveryQueueDoc) => {
    held.delete(d._id);
    cold.put(
      {
        stream: d._id,
        revision: d.revision + 1,
        position: 9_999,
        state: { exists: true, deliveries: d.deliveries },
        correlation: new Map(),
      },
      0,
    );
  };
  return { c, cold, held, heldDocs, coldDocs, fill, goCold };
}

test('with 2,000 held queues due ahead of the cold ones, a fill after the first reads the room and one more, not the window', async (t) => {
  const { coldDocs, fill } = await world(t);
  const first = await fill(125);
  t.deepEqual(
    first.docs.map((d) => d._id),
    coldDocs.slice(0, 125).map((d) => d._id),
  );
  const second = await fill(125);
  t.deepEqual(
    second.docs.map((d) => d._id),
    coldDocs.slice(125, 250).map((d) => d._id),
    'the next due ones, in due order',
  );
  t.true(second.rows <= 125 + 1, `${second.rows} documents read for 125 queues`);
  const third = await fill(10);
  t.is(third.docs.length, 10);
  t.true(third.rows <= 10 + 1, `${third.rows} documents read for 10 queues`);
});

test('a held queue going cold due before where the walk resumes is found by the next fill', async (t) => {
  const { c, cold, heldDocs, coldDocs, fill, goCold } = await world(t);
  await fill(125);
  // A held queue due among the first leaves the window (evicted, its head due now): cold again.
  const leaving = heldDocs[10];
  goCold(leaving);
  const next = await fill(3);
  t.deepEqual(
    next.docs.map((d) => d._id),
    [leaving._id, ...coldDocs.slice(125, 127).map((d) => d._id)],
  );
  // Stored (the follower's commit) and forgotten here: the store's copy is then the only one.
  const again = heldDocs[20];
  goCold(again);
  const saved = cold.save(again._id);
  if (!saved) throw new Error('a change to store');
  await c.bulkWrite([{ replaceOne: { filter: { _id: saved._id }, replacement: saved, upsert: true } }]);
  cold.committed(new Map([[again._id, saved]]));
  t.deepEqual(
    (await fill(1)).docs.map((d) => d._id),
    [again._id],
  );
});

test('a document a fill handed over and the window did not take is found again after a rewind', async (t) => {
  const { cold, coldDocs, held } = await world(t);
  const { docs } = await cold.due(new Date(T0 + 3_600_000 * 2), 5, (s) => held.has(s));
  t.is(docs.length, 5);
  // Only the first two taken (the room shrank meanwhile).
  for (const d of docs.slice(0, 2)) {
    cold.take(d._id, d.deliveries.length, true);
    held.add(d._id);
  }
  cold.rewind();
  const after = await cold.due(new Date(T0 + 3_600_000 * 2), 3, (s) => held.has(s));
  t.deepEqual(
    after.docs.map((d) => d._id),
    coldDocs.slice(2, 5).map((d) => d._id),
  );
});
