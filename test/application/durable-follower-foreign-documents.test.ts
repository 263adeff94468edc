/**
 * A durable follower's collection may hold documents that are no item of its working set: its guard,
 * and what a layout change keeps there (the delivery shards' fenced guards, dispatcher/shards.ts). An
 * item's key never starts with `$`, so a start restores none of those.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createDurableFollower } from '../../application/durable-follower.ts';
import { manualClock } from '../../domain/clock.ts';
import type { EventStore, RecordedEvent } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import type { Doc, ReadStore } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

const COLLECTION = 'test_items';

interface ItemDoc extends Doc {
  _id: string;
  count: number;
}

async function tempStore(t: ExecutionContext): Promise<EventStore> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-follower-shares-'));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return store;
}

const tick = (store: EventStore, item: string) =>
  store.append(`item-${item}`, [
    {
      type: 'Tick',
      data: {},
      metadata: {
        correlation_id: randomUUID(),
        causation_id: null,
        actor: { type: 'system' as const, id: 'test' },
        occurred_at: '2026-03-01T10:00:00.000Z',
        schema_version: 1,
      },
    },
  ]);

/** A count of events per `item-` stream. */
function counter(t: ExecutionContext, store: EventStore, readStore: ReadStore) {
  const items = new Map<string, number>();
  const follower = createDurableFollower<ItemDoc>({
    name: 'test-counter',
    collection: COLLECTION,
    version: '1',
    store,
    readStore,
    clock: manualClock('2026-03-01T10:00:00.000Z'),
    filter: { streamPrefixes: ['item-'] },
    commitEveryMs: 0,
    restore(doc) {
      if (typeof doc.count !== 'number') throw new Error(`not an item: ${doc._id}`);
      items.set(doc._id, doc.count);
    },
    apply(events: RecordedEvent[]) {
      for (const e of events) {
        items.set(e.streamId, (items.get(e.streamId) ?? 0) + 1);
        follower.changed(e.streamId);
      }
    },
    save: (key) => (items.has(key) ? { _id: key, count: items.get(key) as number } : null),
  });
  t.teardown(() => follower.stop());
  return { follower, items };
}

/** Starts the follower, waits for it to catch up, and stops it: what it restored and holds. */
async function run(t: ExecutionContext, store: EventStore, readStore: ReadStore) {
  const { follower, items } = counter(t, store, readStore);
  await follower.start();
  await follower.caughtUp;
  await follower.stop();
  return { resumed: follower.resumed(), items: Object.fromEntries(items) };
}

test('a start restores the items of the collection, not the $-prefixed documents kept beside them', async (t) => {
  const store = await tempStore(t);
  const readStore = openSqliteReadStore(':memory:');
  for (const item of ['0', '1', '2', '1']) await tick(store, item);
  const items = { 'item-0': 1, 'item-1': 2, 'item-2': 1 };
  t.deepEqual((await run(t, store, readStore)).items, items);
  const c = await readStore.collection(COLLECTION);
  await c.bulkWrite([
    { replaceOne: { filter: { _id: '$layout' }, replacement: { _id: '$layout', count: 2 }, upsert: true } },
    {
      replaceOne: {
        filter: { _id: '$checkpoint/1-of-2' },
        replacement: { _id: '$checkpoint/1-of-2', position: 7 },
        upsert: true,
      },
    },
  ]);
  const again = await run(t, store, readStore);
  t.deepEqual(again, { resumed: { position: await store.headPosition(), documents: 3 }, items });
});
