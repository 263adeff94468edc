/**
 * The cold queues' copies against the store's (dispatcher/cold-queues.ts): a read of the store under
 * way while a commit lands may return the documents as they were before it; the copies changed here
 * and stored by that commit must not be replaced by those.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { ColdQueues, type DeliveryQueueDoc, queueDocument } from '../../dispatcher/cold-queues.ts';
import { manualClock } from '../../domain/clock.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { Collection } from '../../projections/read-store.ts';
import { scheduleRequest } from '../support/delivery-worker.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');

/** A cold queue of `count` deliveries, its head due at T0 + `dueInMs`. */
function coldQueue(stream: string, revision: number, count: number, dueInMs: number) {
  const clock = manualClock(new Date(T0));
  const [hook, cart] = [randomUUID(), randomUUID()];
  let state = delivery.decider.initialState;
  for (let i = 1; i <= count; i++) {
    const r = scheduleRequest(hook, cart, i, clock);
    for (const e of delivery.decider.decide(r.command, state)) state = delivery.decider.evolve(state, e);
  }
  if (!state.exists) throw new Error('no queue');
  const due = new Date(T0 + dueInMs).toISOString();
  const deliveries = state.deliveries.map((d) => ({ ...d, next_attempt_at: due }));
  return {
    stream,
    revision,
    position: revision + 1,
    state: { exists: true as const, deliveries },
    correlation: new Map(),
  };
}

/** A store whose reads answer only when told, with what it held when they were made. */
function slowStore(docs: DeliveryQueueDoc[]) {
  const answers: (() => void)[] = [];
  const collection = {
    async find() {
      const page = [...docs];
      await new Promise<void>((resolve) => answers.push(resolve));
      return page;
    },
    async findOne(filter: { _id: string }) {
      const doc = docs.find((d) => d._id === filter._id) ?? null;
      await new Promise<void>((resolve) => answers.push(resolve));
      return doc;
    },
  } as unknown as Collection<DeliveryQueueDoc>;
  const answer = async () => {
    while (answers.length === 0) await new Promise((r) => setImmediate(r));
    answers.shift()?.();
  };
  return { collection, answer };
}

test('a fill whose page was read before a commit of a queue changed here does not hand over the copy from before it', async (t) => {
  const stream = `webhookdelivery-${randomUUID()}_${randomUUID()}`;
  const before = coldQueue(stream, 0, 1, 0);
  const stored = queueDocument(stream, 0, 1, before.state.deliveries, {});
  const store = slowStore([stored]);
  const cold = new ColdQueues();
  cold.attach(store.collection, 1);
  // A second delivery scheduled on the cold queue (written here), then a fill reads the store.
  const after = coldQueue(stream, 1, 2, 0);
  cold.put(after, 1);
  const saved = cold.save(stream);
  if (!saved) throw new Error('a change to store');
  const pending = cold.due(new Date(T0 + 1_000), 10, () => false);
  // The follower's commit stores the change, then the page read before the commit arrives.
  cold.committed(new Map([[stream, saved]]));
  await store.answer();
  const { docs } = await pending;
  t.deepEqual(
    docs.map((d) => [d._id, d.revision]),
    [[stream, 1]],
    'the current copy, once; not the one from before the commit',
  );
});
