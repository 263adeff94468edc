/**
 * Durable followers sharing one collection, each with its part of the working set (`owns`) and a
 * guard and checkpoint of its own, as the delivery shards do (dispatcher/shards.ts): each restores only
 * its own documents, and a working set of another version is discarded part by part, so that one
 * follower's rebuild never deletes what another has rebuilt already.
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

const COLLECTION = 'test_shared_items';

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

/** Part `part` (`even` or `odd`: the item's number) of a count of events per `item-` stream. */
function counter(
  t: ExecutionContext,
  store: EventStore,
  readStore: ReadStore,
  part: string,
  version: string,
) {
  const items = new Map<string, number>();
  const owns = (key: string) => (Number(key.split('-')[1]) % 2 === 0) === (part === 'even');
  const follower = createDurableFollower<ItemDoc>({
    name: `test-counter/${part}`,
    guard: `$checkpoint/${part}`,
    owns,
    collection: COLLECTION,
    version,
    store,
    readStore,
    clock: manualClock('2026-03-01T10:00:00.000Z'),
    filter: { streamPrefixes: ['item-'] },
    commitEveryMs: 0,
    restore: (doc) => items.set(doc._id, doc.count),
    apply(events: RecordedEvent[]) {
      for (const e of events.filter((event) => owns(event.streamId))) {
        items.set(e.streamId, (items.get(e.streamId) ?? 0) + 1);
        follower.changed(e.streamId);
      }
    },
    save: (key) => (items.has(key) ? { _id: key, count: items.get(key) as number } : null),
  });
  t.teardown(() => follower.stop());
  return { follower, items };
}

/** Starts the part's follower, waits for it to catch up, and stops it: what it restored and holds. */
async function run(
  t: ExecutionContext,
  store: EventStore,
  readStore: ReadStore,
  part: string,
  version: string,
) {
  const { follower, items } = counter(t, store, readStore, part, version);
  await follower.start();
  await follower.caughtUp;
  await follower.stop();
  return { resumed: follower.resumed(), items: Object.fromEntries(items) };
}

test('followers sharing a collection each restore their own documents, and a new version rebuilds each part without deleting the other’s', async (t) => {
  const store = await tempStore(t);
  const readStore = openSqliteReadStore(':memory:');
  for (const item of ['0', '1', '2', '3', '1']) await tick(store, item);
  const even = { 'item-0': 1, 'item-2': 1 };
  const odd = { 'item-1': 2, 'item-3': 1 };
  t.deepEqual((await run(t, store, readStore, 'even', '1')).items, even);
  t.deepEqual((await run(t, store, readStore, 'odd', '1')).items, odd);
  const again = await run(t, store, readStore, 'even', '1');
  t.deepEqual(again.resumed.documents, 2, 'its own two documents, not the other part’s');
  t.deepEqual(again.items, even);

  // A new version: each part is discarded and rebuilt in turn.
  t.deepEqual(await run(t, store, readStore, 'even', '2'), {
    resumed: { position: 0, documents: 0 },
    items: even,
  });
  t.deepEqual(await run(t, store, readStore, 'odd', '2'), {
    resumed: { position: 0, documents: 0 },
    items: odd,
  });
  // Each restarts on its own documents: the odd part's rebuild left the even part's in place.
  const head = await store.headPosition();
  t.deepEqual(await run(t, store, readStore, 'even', '2'), {
    resumed: { position: head, documents: 2 },
    items: even,
  });
  t.deepEqual(await run(t, store, readStore, 'odd', '2'), {
    resumed: { position: head, documents: 2 },
    items: odd,
  });
});
