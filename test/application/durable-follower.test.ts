/**
 * The durable follower on a temporary embedded store and the memory read store, with a small fold
 * (a counter per `item-` stream, dropped by a `Done` event): it resumes after its checkpoint with its
 * documents, discards a working set of another version, never moves a shared checkpoint back when
 * another follower is ahead, keeps changes a failed commit did not store for the next one, and
 * commits applied events together.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createDurableFollower, FENCED, GUARD, type GuardIds } from '../../application/durable-follower.ts';
import { manualClock } from '../../domain/clock.ts';
import type { EventStore, RecordedEvent } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import type { Doc, ReadStore } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

const COLLECTION = 'test_items';

async function tempStore(t: ExecutionContext): Promise<EventStore> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-follower-'));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return store;
}

const meta = () => ({
  correlation_id: randomUUID(),
  causation_id: null,
  actor: { type: 'system' as const, id: 'test' },
  occurred_at: '2026-03-01T10:00:00.000Z',
  schema_version: 1,
});
const tick = (store: EventStore, item: string, n = 1) =>
  store.append(
    `item-${item}`,
    Array.from({ length: n }, () => ({ type: 'Tick', data: {}, metadata: meta() })),
  );
const done = (store: EventStore, item: string) =>
  store.append(`item-${item}`, [{ type: 'Done', data: {}, metadata: meta() }]);

/** A store that counts the events its subscriptions hand out and can hold their deliveries back. */
function observed(store: EventStore) {
  const seen = { events: 0 };
  let gate: Promise<void> = Promise.resolve();
  let open: () => void = () => {};
  let arrived = Promise.withResolvers<void>();
  const wrapped: EventStore = Object.create(store);
  wrapped.subscribeToAll = (options, handlers) =>
    store.subscribeToAll(options, {
      ...handlers,
      async onEvents(events) {
        arrived.resolve();
        await gate;
        seen.events += events.length;
        await handlers.onEvents(events);
      },
    });
  return {
    store: wrapped,
    seen,
    hold() {
      arrived = Promise.withResolvers<void>();
      gate = new Promise((r) => {
        open = r;
      });
    },
    /** Resolves once a batch waits at the gate. */
    held: () => arrived.promise,
    /** Lets the batch at the gate through and holds the next one. */
    step() {
      const previous = open;
      this.hold();
      previous();
    },
    release: () => open(),
  };
}

interface ItemDoc extends Doc {
  _id: string;
  count: number;
}

/** The fold: events per `item-` stream, until its `Done`. */
function counter(
  t: ExecutionContext,
  store: EventStore,
  readStore: ReadStore,
  options: {
    version?: string;
    name?: string;
    commitEveryMs?: number;
    commitEveryEvents?: number;
    guard?: GuardIds;
  } = {},
) {
  const items = new Map<string, number>();
  const follower = createDurableFollower<ItemDoc>({
    name: options.name ?? 'test-counter',
    collection: COLLECTION,
    version: options.version ?? '1',
    store,
    readStore,
    clock: manualClock('2026-03-01T10:00:00.000Z'),
    filter: { streamPrefixes: ['item-'] },
    // Every batch committed at its end, unless a test says otherwise.
    commitEveryMs: options.commitEveryMs ?? 0,
    commitEveryEvents: options.commitEveryEvents,
    maxBatchSize: 10,
    guard: options.guard,
    restore: (doc) => items.set(doc._id, doc.count),
    apply(events: RecordedEvent[]) {
      for (const e of events) {
        if (e.type === 'Done') items.delete(e.streamId);
        else items.set(e.streamId, (items.get(e.streamId) ?? 0) + 1);
        follower.changed(e.streamId);
      }
    },
    save: (key) => (items.has(key) ? { _id: key, count: items.get(key) as number } : null),
  });
  t.teardown(() => follower.stop());
  return { follower, items };
}

async function stored(readStore: ReadStore): Promise<Record<string, number>> {
  const docs = await (await readStore.collection<ItemDoc>(COLLECTION)).find({});
  return Object.fromEntries(docs.filter((d) => !d._id.startsWith('$')).map((d) => [d._id, d.count]));
}

test('a restart restores the documents and reads only the events after the checkpoint', async (t) => {
  const store = await tempStore(t);
  const readStore = openSqliteReadStore(':memory:');
  for (let i = 0; i < 50; i++) {
    await tick(store, `settled${i}`, 3);
    await done(store, `settled${i}`);
  }
  await tick(store, 'a', 2);
  await tick(store, 'b');

  const first = counter(t, store, readStore);
  await first.follower.start();
  await first.follower.caughtUp;
  t.deepEqual(first.follower.resumed(), { position: 0, documents: 0 });
  t.deepEqual(await stored(readStore), { 'item-a': 2, 'item-b': 1 }, 'only the working set is stored');
  const head = await store.headPosition();
  t.is((await readStore.getCheckpoint('test-counter'))?.position, head);
  await first.follower.stop();

  // While no follower runs: a changes, b leaves, c arrives.
  await tick(store, 'a');
  await done(store, 'b');
  await tick(store, 'c');

  const o = observed(store);
  const second = counter(t, o.store, readStore);
  await second.follower.start();
  await second.follower.caughtUp;
  t.deepEqual(second.follower.resumed(), { position: head, documents: 2 });
  t.is(o.seen.events, 3, 'the 3 events written after the checkpoint, none of the 203 before');
  t.deepEqual(Object.fromEntries(second.items), { 'item-a': 3, 'item-c': 1 });
  t.deepEqual(await stored(readStore), { 'item-a': 3, 'item-c': 1 });
  t.like(await readStore.getCheckpoint('test-counter'), {
    position: await store.headPosition(),
    events: 206,
    version: '1',
  });
});

test('a working set stored by another version is discarded and rebuilt from the first event', async (t) => {
  const store = await tempStore(t);
  const readStore = openSqliteReadStore(':memory:');
  await tick(store, 'a', 2);
  const first = counter(t, store, readStore);
  await first.follower.start();
  await first.follower.caughtUp;
  await first.follower.stop();
  // A document the new version would not write (its shape changed).
  const c = await readStore.collection<ItemDoc>(COLLECTION);
  await c.bulkWrite([
    { replaceOne: { filter: { _id: 'item-old' }, replacement: { _id: 'item-old', count: 9 }, upsert: true } },
  ]);

  const o = observed(store);
  const second = counter(t, o.store, readStore, { version: '2' });
  await second.follower.start();
  await second.follower.caughtUp;
  t.deepEqual(second.follower.resumed(), { position: 0, documents: 0 });
  t.is(o.seen.events, 2, 'read again from the first event');
  t.deepEqual(await stored(readStore), { 'item-a': 2 });
  t.like(await readStore.getCheckpoint('test-counter'), {
    version: '2',
    position: await store.headPosition(),
  });
});

test('two followers on one read store: the one behind never moves the checkpoint or a document back', async (t) => {
  const store = await tempStore(t);
  const readStore = openSqliteReadStore(':memory:');
  const slow = observed(store);
  const a = counter(t, store, readStore);
  const b = counter(t, slow.store, readStore);
  t.teardown(() => slow.release());
  await a.follower.start();
  await b.follower.start();
  await Promise.all([a.follower.caughtUp, b.follower.caughtUp]);

  // b is held while it has a batch in hand; a applies and stores later events meanwhile.
  slow.hold();
  await tick(store, 'x');
  await Promise.all([a.follower.settle().then(a.follower.flush), slow.held()]);
  await tick(store, 'x');
  await done(store, 'y'); // never held: nothing to delete
  await tick(store, 'z', 2);
  await a.follower.settle();
  await a.follower.flush();
  const ahead = await readStore.getCheckpoint('test-counter');
  t.is(ahead?.position, await store.headPosition());
  t.deepEqual(await stored(readStore), { 'item-x': 2, 'item-z': 2 });

  // b's commit of its first batch (x at 1) is refused: the store is further along than b.
  slow.step();
  await slow.held(); // b's next batch is at the gate: the first one is applied and its commit done
  t.deepEqual(Object.fromEntries(b.items), { 'item-x': 1 });
  t.is((await readStore.getCheckpoint('test-counter'))?.position, ahead?.position);
  t.deepEqual(await stored(readStore), { 'item-x': 2, 'item-z': 2 });
  slow.release();
  await b.follower.settle();
  await b.follower.flush();
  t.is((await readStore.getCheckpoint('test-counter'))?.position, ahead?.position);
  t.deepEqual(await stored(readStore), { 'item-x': 2, 'item-z': 2 });
  t.deepEqual(Object.fromEntries(b.items), { 'item-x': 2, 'item-z': 2 });

  // Both go on; whichever commits, the store follows the log, and a third follower restores it.
  await done(store, 'x');
  await tick(store, 'w');
  await Promise.all([a.follower.settle(), b.follower.settle()]);
  await Promise.all([a.follower.flush(), b.follower.flush()]);
  t.deepEqual(await stored(readStore), { 'item-z': 2, 'item-w': 1 });
  await Promise.all([a.follower.stop(), b.follower.stop()]);
  const c = counter(t, store, readStore);
  await c.follower.start();
  await c.follower.caughtUp;
  t.deepEqual(Object.fromEntries(c.items), { 'item-z': 2, 'item-w': 1 });
});

test('changes a failed commit did not store are stored by the next commit', async (t) => {
  const store = await tempStore(t);
  const memory = openSqliteReadStore(':memory:');
  let failures = 1;
  const failed = Promise.withResolvers<void>();
  const readStore: ReadStore = Object.create(memory);
  readStore.commit = async (commit) => {
    if (commit.checkpoints?.[0]?.checkpoint.position && failures-- > 0) {
      setImmediate(failed.resolve);
      throw new Error('read store unavailable');
    }
    return memory.commit(commit);
  };
  const { follower, items } = counter(t, store, readStore);
  await follower.start();
  await follower.caughtUp;
  await tick(store, 'a', 3);
  await follower.settle();
  await failed.promise;
  t.deepEqual(Object.fromEntries(items), { 'item-a': 3 }, 'the working set itself is intact');
  t.deepEqual(await stored(memory), {}, 'nothing stored: the commit failed');
  t.is(await memory.getCheckpoint('test-counter').then((c) => c?.position), 0);

  await tick(store, 'b');
  await follower.settle();
  await follower.flush();
  t.deepEqual(await stored(memory), { 'item-a': 3, 'item-b': 1 });
  t.is((await memory.getCheckpoint('test-counter'))?.position, await store.headPosition());
});

test('a start that saw no checkpoint while another follower stored one reads that one back, never wipes it', async (t) => {
  const store = await tempStore(t);
  const memory = openSqliteReadStore(':memory:');
  await tick(store, 'a', 2);
  const first = counter(t, store, memory);
  await first.follower.start();
  await first.follower.caughtUp;
  // The second start read the checkpoint just before the first follower's commit (stale by one read).
  let stale = true;
  const readStore: ReadStore = Object.create(memory);
  readStore.getCheckpoint = async (name) => {
    if (stale) {
      stale = false;
      return undefined;
    }
    return memory.getCheckpoint(name);
  };
  const o = observed(store);
  const second = counter(t, o.store, readStore);
  await second.follower.start();
  await second.follower.caughtUp;
  t.deepEqual(second.follower.resumed(), { position: await store.headPosition(), documents: 1 });
  t.is(o.seen.events, 0);
  t.deepEqual(await stored(memory), { 'item-a': 2 });
  t.deepEqual(Object.fromEntries(second.items), { 'item-a': 2 });
});

test('applied events are committed together: after commitEveryEvents events, on flush, and at stop', async (t) => {
  const store = await tempStore(t);
  const readStore = openSqliteReadStore(':memory:');
  const checkpoint = async () => (await readStore.getCheckpoint('test-counter'))?.position;
  const { follower } = counter(t, store, readStore, { commitEveryMs: 3_600_000, commitEveryEvents: 10 });
  await follower.start();
  await follower.caughtUp;
  for (let i = 0; i < 4; i++) await tick(store, 'a');
  await follower.settle();
  t.is(await checkpoint(), 0, 'applied, not committed yet');
  t.deepEqual(await stored(readStore), {});
  await follower.flush();
  t.is(await checkpoint(), await store.headPosition());
  t.deepEqual(await stored(readStore), { 'item-a': 4 });

  const before = await store.headPosition();
  await tick(store, 'b', 12); // batches of 10 and 2: the first is committed without waiting
  await follower.settle();
  t.is(await checkpoint(), before + 10);
  t.deepEqual(await stored(readStore), { 'item-a': 4, 'item-b': 10 });

  await done(store, 'a');
  await follower.settle();
  t.deepEqual(await stored(readStore), { 'item-a': 4, 'item-b': 10 });
  await follower.stop();
  t.is(await checkpoint(), await store.headPosition());
  t.deepEqual(await stored(readStore), { 'item-b': 12 });
});

test("the checkpoint moves past other streams' events the log was read through, so a restart skips them", async (t) => {
  const store = await tempStore(t);
  const readStore = openSqliteReadStore(':memory:');
  await tick(store, 'a');
  for (let i = 0; i < 20; i++) {
    await store.append(`other-${i}`, [{ type: 'Other', data: {}, metadata: meta() }]);
  }
  const head = await store.headPosition();
  // Resolves once the subscription says it has read through the head.
  const readThrough = Promise.withResolvers<void>();
  const told: EventStore = Object.create(store);
  told.subscribeToAll = (options, handlers) =>
    store.subscribeToAll(options, {
      ...handlers,
      async onProgress(position) {
        await handlers.onProgress?.(position);
        if (position >= head) readThrough.resolve();
      },
    });
  const first = counter(t, told, readStore);
  await first.follower.start();
  await first.follower.caughtUp;
  await readThrough.promise;
  await first.follower.stop();
  t.is((await readStore.getCheckpoint('test-counter'))?.position, head);

  const o = observed(store);
  const second = counter(t, o.store, readStore);
  await second.follower.start();
  await second.follower.caughtUp;
  t.deepEqual(second.follower.resumed(), { position: head, documents: 1 });
  t.is(o.seen.events, 0);
});

test('a follower stopped while it restores never subscribes, and says so through caughtUp', async (t) => {
  const store = await tempStore(t);
  const o = observed(store);
  const { follower } = counter(t, o.store, openSqliteReadStore(':memory:'));
  await tick(store, 'a');
  const starting = follower.start();
  await follower.stop();
  await starting;
  await t.throwsAsync(follower.caughtUp, { message: /stopped before it caught up/ });
  t.is(o.seen.events, 0);
});

test('a guard of a new _id keeps the earlier release’s fenced: a follower of that release still running has each commit refused', async (t) => {
  const store = await tempStore(t);
  const readStore = openSqliteReadStore(':memory:');
  const guard = { id: '$guard', retired: [GUARD] };
  await tick(store, 'a', 2);
  const old = counter(t, store, readStore);
  await old.follower.start();
  await old.follower.caughtUp;
  const c = await readStore.collection<Doc>(COLLECTION);

  const next = counter(t, store, readStore, { guard });
  await next.follower.start();
  await next.follower.caughtUp;
  t.deepEqual(await c.findOne({ _id: GUARD }), { _id: GUARD, position: FENCED }, 'the earlier guard fenced');
  await tick(store, 'b');
  await next.follower.settle();
  await next.follower.flush();
  const checkpoint = await readStore.getCheckpoint('test-counter');
  t.deepEqual(await stored(readStore), { 'item-a': 2, 'item-b': 1 });

  await next.follower.stop();

  // The earlier release's follower applies the next event and commits: refused, nothing written.
  await done(store, 'a');
  await old.follower.settle();
  await old.follower.flush();
  t.deepEqual(await stored(readStore), { 'item-a': 2, 'item-b': 1 }, 'its commit wrote nothing');
  t.deepEqual(await readStore.getCheckpoint('test-counter'), checkpoint);
  t.like(await c.findOne({ _id: '$guard' }), { position: checkpoint?.position });

  // A first start with the new guard fences the earlier one from its first commit.
  const fresh = openSqliteReadStore(':memory:');
  const first = counter(t, store, fresh, { guard });
  await first.follower.start();
  await first.follower.caughtUp;
  t.deepEqual(await (await fresh.collection<Doc>(COLLECTION)).findOne({ _id: GUARD }), {
    _id: GUARD,
    position: FENCED,
  });
});
