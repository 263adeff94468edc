/**
 * Delivery workers sharing the queues by subscription (dispatcher/shards.ts; docs/webhooks.md,
 * "Scale"): a stable hash spreads the subscriptions, each worker sends only its shard's queues (the
 * others' it schedules for their owners), every delivery is delivered once and each cart's in order,
 * and a restart with another number of workers loses no pending delivery and reads no history.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { manualClock } from '../../domain/clock.ts';

type ManualClock = ReturnType<typeof manualClock>;

import { QUEUE_GUARD, upgradedDocument } from '../../dispatcher/cold-queues.ts';
import { DELIVERY_FOLLOWER } from '../../dispatcher/delivery-worker.ts';
import {
  FENCED,
  fnv1a,
  LAYOUT,
  LAYOUT_COLLECTION,
  type Shard,
  shardCheckpoint,
  shardOf,
  takeLayout,
} from '../../dispatcher/shards.ts';
import type { EventStore, RecordedEvent } from '../../eventstore/port.ts';
import type { Checkpoint } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { createWebhook, seedCatalog } from '../support/cart-world.ts';
import { attempts, scheduleRequest, workerOn } from '../support/delivery-worker.ts';
import { until } from '../support/probes.ts';
import { startService } from '../support/service.ts';
import { type Receiver, revisionsByQueue, startReceiver } from '../support/webhook-receiver.ts';

const STARTED = 'WebhookDeliveryAttemptStarted';
const ATTEMPTED = 'WebhookDeliveryAttempted';
/** A failed attempt is tried again an hour later, up to 6 attempts: the test moves the clock. */
const ENV = { PDS_WEBHOOK_RETRY_SCHEDULE: '1h,1h,1h,1h,1h,1h' };
/** Past the next attempt of every failed head: an hour, ±10 % of jitter (webhooks/deliver.ts). */
const HOUR = 1.2 * 3_600_000;

test('the shard of a subscription is stable, and 1,000 subscriptions spread over 4 shards 200-300 each', (t) => {
  t.is(fnv1a(''), 0x811c9dc5);
  t.is(fnv1a('a'), 0xe40c292c, 'the published FNV-1a test vector');
  t.is(fnv1a('foobar'), 0xbf9cf968);
  const id = randomUUID();
  t.is(shardOf(id, 4), shardOf(id, 4));
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 1_000; i++) counts[shardOf(randomUUID(), 4)] += 1;
  for (const count of counts) t.true(count >= 200 && count <= 300, `${counts.join(', ')}`);
});

/**
 * Subscriptions for store 1 to `receiver`, made by a service then stopped, until each of `count`
 * shards has at least `each` of them.
 */
async function subscriptionsInShards(t: ExecutionContext, receiver: Receiver, count: number, each: number) {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-shards-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const clock = manualClock(new Date());
  const s = await startService(t, { dataDir, clock, env: ENV });
  await seedCatalog(s);
  const hookIds: string[] = [];
  const inShard = (i: number) => hookIds.filter((id) => shardOf(id, count) === i).length;
  while (Array.from({ length: count }, (_, i) => inShard(i)).some((n) => n < each))
    hookIds.push((await createWebhook(s, receiver.url, [1])).id);
  await s.service.stop();
  return { dataDir, clock, hookIds };
}

/** A started worker of `shard` on the data dir, sending as `shard-<index>`. */
async function shardWorker(t: ExecutionContext, dataDir: string, clock: ManualClock, shard: Shard) {
  const on = await workerOn(t, dataDir, clock, ENV, {
    shard,
    dispatcherId: `shard-${shard.index}-of-${shard.count}`,
  });
  on.worker.start();
  await on.worker.caughtUp;
  return on;
}

/** The request of the delivery of `cart`'s revision to `hookId`, its body naming all three. */
function request(hookId: string, cart: string, revision: number, clock: ManualClock) {
  const r = scheduleRequest(hookId, cart, revision, clock);
  r.command.body = JSON.stringify({ hook: hookId, cart, revision });
  return r;
}

/** A queue collection of a previous layout: its guard and version 1's, both fenced. */
const bothFenced = [
  { _id: '$checkpoint', position: FENCED },
  { _id: '$guard', position: FENCED },
];

const deliveryEvents = (store: EventStore, type: string) =>
  store.readAll({ filter: { eventTypes: [type] } }) as Promise<
    Array<RecordedEvent & { data: Record<string, unknown> }>
  >;

test('two workers of two shards on one store: each sends only its subscriptions; every delivery once, each cart in order', async (t) => {
  const receiver = await startReceiver(t);
  const { dataDir, clock, hookIds } = await subscriptionsInShards(t, receiver, 2, 2);
  const first = await shardWorker(t, dataDir, clock, { index: 0, count: 2 });
  const second = await shardWorker(t, dataDir, clock, { index: 1, count: 2 });
  const carts = [randomUUID(), randomUUID(), randomUUID()];
  // The fan-out's worker (the first) schedules every delivery, interleaving the subscriptions.
  let scheduled = 0;
  for (const revision of [1, 2, 3])
    for (const cart of carts)
      for (const hookId of hookIds) {
        t.true(await first.worker.schedule(request(hookId, cart, revision, clock)));
        scheduled += 1;
      }

  await receiver.waitFor(scheduled, 30_000);
  await attempts(first.store, scheduled);
  const ids = receiver.received.map((r) => r.headers['x-service-webhook-id']);
  t.is(new Set(ids).size, scheduled, 'every delivery sent once');
  for (const revisions of revisionsByQueue(receiver.received).values()) t.deepEqual(revisions, [1, 2, 3]);
  const started = await deliveryEvents(first.store, STARTED);
  t.is(started.length, scheduled);
  for (const event of started) {
    const hookId = event.streamId.slice('webhookdelivery-'.length, 'webhookdelivery-'.length + 36);
    t.is(event.data.dispatcher_id, `shard-${shardOf(hookId, 2)}-of-2`, 'sent by the worker of its shard');
  }
  t.true(
    started.some((e) => e.data.dispatcher_id === 'shard-1-of-2'),
    'the second worker sent what the first scheduled for it',
  );
  t.is(first.worker.pending().depth + second.worker.pending().depth, 0);
});

test('1 → 2 → 3 → 1 workers across restarts: every pending delivery is delivered once, in order, and no layout reads the history', async (t) => {
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503 });
  const { dataDir, clock, hookIds } = await subscriptionsInShards(t, receiver, 3, 1);
  let revision = 0;
  let scheduled = 0;
  /** Schedules the next revision of `carts` for every subscription, through the layout's first worker. */
  async function scheduleOn(worker: Awaited<ReturnType<typeof shardWorker>>['worker'], carts: string[]) {
    revision += 1;
    for (const cart of carts)
      for (const hookId of hookIds) {
        t.true(await worker.schedule(request(hookId, cart, revision, clock)));
        scheduled += 1;
      }
  }
  const carts = [randomUUID(), randomUUID()];
  /** Where the previous layout's schedules ended, and how many delivery events the log held at its stop. */
  let scheduledBy = 0;
  let history = 0;
  /**
   * A new layout's worker resumed after the previous layout's checkpoints: past its schedules, reading
   * at most the results its workers appended last (a worker's own appends need not be read back).
   */
  function fromTheCheckpoints(w: Awaited<ReturnType<typeof shardWorker>>) {
    t.true(w.worker.resumed().position >= scheduledBy, 'resumed from a checkpoint, not the first event');
    t.true(w.counted.events < history / 4, `read ${w.counted.events} of ${history} delivery events`);
  }
  /** Runs a layout of `count` workers: schedules a revision, lets an hour pass (every head fails again), stops. */
  async function layout(count: number) {
    const workers = [];
    for (let index = 0; index < count; index++)
      workers.push(await shardWorker(t, dataDir, clock, { index, count }));
    if (revision > 0) {
      const held = workers.reduce((sum, w) => sum + w.worker.pending().depth, 0);
      t.is(held, scheduled, `the ${count} workers hold every pending delivery`);
      for (const w of workers) fromTheCheckpoints(w);
    }
    const queues = carts.length * hookIds.length;
    const before = (await deliveryEvents(workers[0].store, ATTEMPTED)).length;
    await scheduleOn(workers[0].worker, carts);
    const position = await workers[0].store.headPosition();
    // The first revision is each queue's head, tried at once; later ones wait behind it.
    const atOnce = revision === 1 ? queues : 0;
    await attempts(workers[0].store, before + atOnce);
    clock.advance(HOUR);
    for (const w of workers) await w.worker.tick();
    // Each queue's head failed once more (503): one attempt per queue.
    await attempts(workers[0].store, before + atOnce + queues);
    t.is((await deliveryEvents(workers[0].store, ATTEMPTED)).length, before + atOnce + queues);
    for (const w of workers) await w.worker.stop();
    scheduledBy = position;
    history = (await workers[0].store.readAll({ filter: { streamPrefixes: ['webhookdelivery-'] } })).length;
  }
  await layout(1);
  await layout(2);
  await layout(3);

  receiver.setDefault({ status: 200 });
  const last = await shardWorker(t, dataDir, clock, { index: 0, count: 1 });
  t.is(last.worker.pending().depth, scheduled, 'one worker holds every pending delivery again');
  fromTheCheckpoints(last);
  const answered = receiver.received.length;
  for (let hours = 0; last.worker.pending().depth > 0 && hours < 10; hours++) {
    clock.advance(HOUR);
    await last.worker.tick();
    await last.worker.settle();
  }
  t.is(last.worker.pending().depth, 0);
  const delivered = (await deliveryEvents(last.store, ATTEMPTED)).filter(
    (e) => e.data.outcome === 'delivered',
  );
  t.is(delivered.length, scheduled, 'every delivery delivered');
  t.is(new Set(delivered.map((e) => e.data.delivery_id)).size, scheduled, 'each once');
  const afterOutage = receiver.received.slice(answered);
  for (const revisions of revisionsByQueue(afterOutage).values()) t.deepEqual(revisions, [1, 2, 3]);
});

test('a new layout resumes every shard from the lowest checkpoint of the previous one, in a collection of its own, changed once however many workers start at once', async (t) => {
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(() => readStore.close());
  const clock = manualClock(new Date());
  const base = { name: 'webhook-delivery-worker', version: '1', updated_at: clock.now().toISOString() };
  const layout = (count: number) =>
    takeLayout({ readStore, collection: 'webhook_delivery_queues', ...base, count, clock });
  const guardOf = async (collection: string) =>
    (await readStore.collection(collection)).findOne({ _id: QUEUE_GUARD.id });
  const retiredOf = async (collection: string) =>
    (await readStore.collection(collection)).findOne({ _id: '$checkpoint' });
  // Two shards stored apart: the second is behind the first.
  t.deepEqual(await layout(2), { changed: true, previous: 1, from: 0 }, 'a first start: nothing to resume');
  await readStore.setCheckpoint('webhook-delivery-worker/1-of-2', { position: 40, events: 9, ...base });
  await readStore.setCheckpoint('webhook-delivery-worker/2-of-2', { position: 25, events: 6, ...base });

  const starts = await Promise.all([layout(3), layout(3), layout(3)]);
  t.deepEqual(
    starts.filter((s) => s.changed),
    [{ changed: true, previous: 2, from: 25 }],
    'one of the three workers changed it',
  );
  for (const part of ['1_of_3', '2_of_3', '3_of_3']) {
    t.like(await readStore.getCheckpoint(`webhook-delivery-worker/${part.replaceAll('_', '-')}`), {
      position: 25,
      version: '1',
    });
    t.like(await guardOf(`webhook_delivery_queues_${part}`), { position: 25, pending_deliveries: 0 });
    t.like(
      await retiredOf(`webhook_delivery_queues_${part}`),
      { position: FENCED },
      'version 1’s guard fenced',
    );
  }
  const layouts = await readStore.collection(LAYOUT_COLLECTION);
  t.like(await layouts.findOne({ _id: LAYOUT }), { count: 3, draining: null });
  t.is(
    await (await readStore.collection('webhook_delivery_queues')).count(),
    2,
    'no layout among the queues: only the guards',
  );
  for (const part of ['1_of_2', '2_of_2']) {
    t.like(
      await guardOf(`webhook_delivery_queues_${part}`),
      { position: FENCED },
      'the previous layout fenced',
    );
    t.like(await retiredOf(`webhook_delivery_queues_${part}`), { position: FENCED });
  }

  // Back to one worker: the unsharded names, from the lowest of the three.
  await readStore.setCheckpoint('webhook-delivery-worker/2-of-3', { position: 70, events: 1, ...base });
  await readStore.setCheckpoint('webhook-delivery-worker/3-of-3', { position: 60, events: 1, ...base });
  t.deepEqual(await layout(1), { changed: true, previous: 3, from: 25 });
  t.like(await readStore.getCheckpoint('webhook-delivery-worker'), { position: 25 });
  t.like(await guardOf('webhook_delivery_queues'), { position: 25 }, 'fenced at 1 → 2, reset');
  t.like(await guardOf('webhook_delivery_queues_3_of_3'), { position: FENCED });
  t.like(await retiredOf('webhook_delivery_queues'), { position: FENCED }, 'version 1’s guard stays fenced');
  t.deepEqual(await layout(1), { changed: false });
});

test('two layouts at once: a worker of the previous layout still running when a new one takes over has its next commit refused, and the new layout loses no pending delivery', async (t) => {
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503 });
  const { dataDir, clock, hookIds } = await subscriptionsInShards(t, receiver, 2, 1);
  const old = await shardWorker(t, dataDir, clock, { index: 0, count: 1 });
  const hookId = hookIds[0];
  const cart = randomUUID();
  const r = request(hookId, cart, 1, clock);
  t.true(await old.worker.schedule(r));
  await attempts(old.store, 1);
  const queues = await old.readStore.collection('webhook_delivery_queues');
  const stored = await until('the failed delivery is stored', () => queues.findOne({ _id: r.stream }));
  const checkpoint = await old.readStore.getCheckpoint('webhook-delivery-worker');
  const shard = { index: shardOf(hookId, 2), count: 2 };
  const moved = await old.readStore.collection(shardCheckpoint(DELIVERY_FOLLOWER, shard).collection);

  // The new layout's first worker takes it over while the old worker still runs.
  const taken = await takeLayout({
    readStore: old.readStore,
    ...DELIVERY_FOLLOWER,
    count: 2,
    clock,
  });
  t.like(taken, { changed: true, previous: 1 });
  t.deepEqual(await queues.find({}), bothFenced, 'only its fenced guards left');
  t.deepEqual(await moved.findOne({ _id: r.stream }), stored, 'the document moved to its shard');

  // The old worker delivers the head and settles the queue, which would delete its document.
  receiver.setDefault({ status: 200 });
  clock.advance(HOUR);
  await old.worker.tick();
  await attempts(old.store, 2);
  await old.worker.settle();
  t.is(old.worker.pending().depth, 0);
  await old.worker.stop(); // commits what it applied: refused
  t.deepEqual(await queues.find({}), bothFenced, 'its commit wrote nothing');
  t.deepEqual(await moved.findOne({ _id: r.stream }), stored, 'nor moved the new layout’s document back');
  t.deepEqual(await old.readStore.getCheckpoint('webhook-delivery-worker'), checkpoint);

  // The new layout resumes before the delivery and applies it: nothing pending, nothing sent again.
  const workers = [
    await shardWorker(t, dataDir, clock, { index: 0, count: 2 }),
    await shardWorker(t, dataDir, clock, { index: 1, count: 2 }),
  ];
  for (const w of workers) await w.worker.settle();
  t.is(workers[0].worker.pending().depth + workers[1].worker.pending().depth, 0);
  t.is(receiver.received.length, 2);
});

test('a layout change over documents of another version: each new shard discards its own share of them and rebuilds it from the first event', async (t) => {
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503 });
  const { dataDir, clock, hookIds } = await subscriptionsInShards(t, receiver, 2, 1);
  const old = await shardWorker(t, dataDir, clock, { index: 0, count: 1 });
  const cart = randomUUID();
  for (const hookId of hookIds) t.true(await old.worker.schedule(request(hookId, cart, 1, clock)));
  await attempts(old.store, hookIds.length);
  await old.worker.stop();
  // The working set as a release of another shape left it: its documents unreadable by this one.
  const queues = await old.readStore.collection('webhook_delivery_queues');
  const documents = (await queues.find({})).filter((d) => !String(d._id).startsWith('$'));
  t.is(documents.length, hookIds.length);
  await queues.bulkWrite(
    documents.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: { _id: d._id, shape: 0 } } })),
  );
  const stored = await old.readStore.getCheckpoint('webhook-delivery-worker');
  await old.readStore.setCheckpoint('webhook-delivery-worker', { ...(stored as Checkpoint), version: '0' });

  const workers = [
    await shardWorker(t, dataDir, clock, { index: 0, count: 2 }),
    await shardWorker(t, dataDir, clock, { index: 1, count: 2 }),
  ];
  for (const w of workers) {
    t.is(w.worker.resumed().position, 0, 'rebuilt from the first event');
    t.is(w.worker.resumed().documents, 0);
  }
  t.is(workers[0].worker.pending().depth + workers[1].worker.pending().depth, hookIds.length);
  for (const w of workers) await w.worker.stop();
  t.deepEqual(
    (await queues.find({})).map((d) => d._id),
    ['$checkpoint', '$guard'],
    'the old documents deleted',
  );
  const rebuilt = [];
  for (const index of [0, 1]) {
    const names = shardCheckpoint(DELIVERY_FOLLOWER, { index, count: 2 });
    const docs = await (await old.readStore.collection(names.collection)).find({});
    const own = docs.filter((d) => !String(d._id).startsWith('$'));
    t.true(
      own.every((d) => shardOf(String(d._id).slice(16, 52), 2) === index),
      'only its shard’s',
    );
    rebuilt.push(...own);
  }
  t.is(rebuilt.length, hookIds.length);
  t.false(
    rebuilt.some((d) => 'shape' in d),
    'every document of the other version discarded',
  );
  for (const part of ['1-of-2', '2-of-2'])
    t.like(await old.readStore.getCheckpoint(`webhook-delivery-worker/${part}`), {
      version: DELIVERY_FOLLOWER.version,
    });
});

test('a layout change that fails before its commit leaves the previous layout as it was, and the next start does it again from the documents then', async (t) => {
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(() => readStore.close());
  const clock = manualClock(new Date());
  const at = clock.now().toISOString();
  const one = await readStore.collection(DELIVERY_FOLLOWER.collection);
  const streams = Array.from(
    { length: 12 },
    (_, i) => `webhookdelivery-${randomUUID()}_cccccccc-0000-4000-8000-${String(i).padStart(12, '0')}`,
  );
  const doc = (stream: string) => ({
    _id: stream,
    revision: 0,
    position: 5,
    deliveries: [{}, {}],
    correlation: {},
  });
  await one.bulkWrite([
    {
      replaceOne: {
        filter: { _id: QUEUE_GUARD.id },
        replacement: { _id: QUEUE_GUARD.id, position: 9 },
        upsert: true,
      },
    },
    ...streams.map((s) => ({ replaceOne: { filter: { _id: s }, replacement: doc(s), upsert: true } })),
  ]);
  await readStore.setCheckpoint(DELIVERY_FOLLOWER.name, {
    position: 9,
    events: 3,
    updated_at: at,
    version: '2',
  });
  // The store refuses the change's last commit (the one moving the layout) once.
  let refuse = true;
  const failing = {
    ...readStore,
    async commit(commit: Parameters<typeof readStore.commit>[0]) {
      if (refuse && commit.writes.some((w) => w.collection.name === LAYOUT_COLLECTION)) {
        refuse = false;
        throw new Error('store unavailable');
      }
      return readStore.commit(commit);
    },
  };
  const layout = () => takeLayout({ ...DELIVERY_FOLLOWER, readStore: failing, count: 2, clock, pageSize: 5 });
  await t.throwsAsync(layout(), { message: 'store unavailable' });
  t.is(
    await (await readStore.collection(LAYOUT_COLLECTION)).findOne({ _id: LAYOUT }),
    null,
    'still one shard',
  );
  t.like(await one.findOne({ _id: QUEUE_GUARD.id }), { position: 9 }, 'not fenced');
  t.is(await one.count(), streams.length + 1, 'every document still there');
  t.is(await readStore.getCheckpoint('webhook-delivery-worker/1-of-2'), undefined);

  // Meanwhile the one worker settles a queue: its document goes.
  await one.bulkWrite([{ deleteOne: { filter: { _id: streams[0] } } }]);
  t.like(await layout(), { changed: true, previous: 1, from: 9 });
  const moved: string[] = [];
  for (const index of [0, 1]) {
    const names = shardCheckpoint(DELIVERY_FOLLOWER, { index, count: 2 });
    const docs = await (await readStore.collection(names.collection)).find({});
    const own = docs.filter((d) => !String(d._id).startsWith('$'));
    t.true(own.every((d) => shardOf(String(d._id).slice(16, 52), 2) === index));
    t.like(
      docs.find((d) => d._id === QUEUE_GUARD.id),
      { position: 9, pending_deliveries: own.length * 2 },
      'its guard at the previous checkpoint, with its count',
    );
    t.like(await readStore.getCheckpoint(names.name), { position: 9, version: '2' });
    moved.push(...own.map((d) => String(d._id)));
  }
  t.deepEqual(moved.sort(), streams.slice(1).sort(), 'the settled queue not copied back');
  t.deepEqual(await one.find({}), bothFenced);
});

test('a layout change over shards of both versions upgrades the documents of version 1 as it copies them, and the new layout is of this version', async (t) => {
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(() => readStore.close());
  const clock = manualClock(new Date());
  const updated_at = clock.now().toISOString();
  const stream = (i: number) =>
    `webhookdelivery-${randomUUID()}_cccccccc-0000-4000-8000-${String(i).padStart(12, '0')}`;
  const v1 = { revision: 0, position: 3, deliveries: [], correlation: {} };
  for (const index of [0, 1]) {
    const names = shardCheckpoint(DELIVERY_FOLLOWER, { index, count: 2 });
    const c = await readStore.collection(names.collection);
    const docs = [0, 1, 2].map((i) => ({
      _id: stream(index * 10 + i),
      ...v1,
      ...(index === 0 && { due_at: null, queued_since: null }),
    }));
    await c.bulkWrite(
      docs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
    );
    const version = index === 0 ? DELIVERY_FOLLOWER.version : '1';
    await readStore.setCheckpoint(names.name, { position: 5, events: 1, updated_at, version });
  }
  await (await readStore.collection(LAYOUT_COLLECTION)).bulkWrite([
    { replaceOne: { filter: { _id: LAYOUT }, replacement: { _id: LAYOUT, count: 2 }, upsert: true } },
  ]);
  t.like(
    await takeLayout({
      ...DELIVERY_FOLLOWER,
      upgrade: { from: '1', document: upgradedDocument },
      readStore,
      count: 1,
      clock,
    }),
    { changed: true, previous: 2, from: 5 },
  );
  t.like(await readStore.getCheckpoint(DELIVERY_FOLLOWER.name), { version: DELIVERY_FOLLOWER.version });
  const docs = (await (await readStore.collection(DELIVERY_FOLLOWER.collection)).find({})).filter(
    (d) => !String(d._id).startsWith('$'),
  );
  t.is(docs.length, 6);
  t.true(
    docs.every((d) => 'due_at' in d && 'queued_since' in d),
    'every document of this version',
  );
});
