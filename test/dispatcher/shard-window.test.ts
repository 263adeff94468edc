/**
 * The delivery shards with the window of queues (docs/webhooks.md, "Scale"): each shard's worker
 * keeps its queues in a collection of its own and holds at most its part of
 * `PDS_WEBHOOK_QUEUE_WINDOW`, the others cold there; a layout change moves cold queues to the
 * collections of their new shards, and the previous collection keeps only its fenced guard.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { DELIVERY_FOLLOWER, type DeliveryWorker } from '../../dispatcher/delivery-worker.ts';
import { FENCED, type Shard, shardCheckpoint, shardOf, shardWindow } from '../../dispatcher/shards.ts';
import { manualClock } from '../../domain/clock.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import type { ReadStore } from '../../projections/read-store.ts';
import { createWebhook, seedCatalog } from '../support/cart-world.ts';
import { scheduleRequest, workerOn } from '../support/delivery-worker.ts';
import { startService } from '../support/service.ts';
import { type Receiver, revisionsByQueue, startReceiver } from '../support/webhook-receiver.ts';

type ManualClock = ReturnType<typeof manualClock>;

/** Subscriptions for store 1 to `receiver`, made by a service then stopped: `each` in each of 2 shards. */
async function subscriptionsInTwoShards(
  t: ExecutionContext,
  receiver: Receiver,
  each: number,
  env: Record<string, string>,
) {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-shard-window-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const clock = manualClock(new Date());
  const s = await startService(t, { dataDir, clock, env });
  await seedCatalog(s);
  const byShard: string[][] = [[], []];
  while (byShard.some((ids) => ids.length < each)) {
    const id = (await createWebhook(s, receiver.url, [1])).id;
    const ids = byShard[shardOf(id, 2)];
    if (ids.length < each) ids.push(id);
  }
  await s.service.stop();
  return { dataDir, clock, hookIds: byShard.flat() };
}

/** The request of the delivery of `cart`'s revision to `hookId`, its body naming all three. */
function request(hookId: string, cart: string, revision: number, clock: ManualClock) {
  const r = scheduleRequest(hookId, cart, revision, clock);
  r.command.body = JSON.stringify({ hook: hookId, cart, revision });
  return r;
}

/** A started worker of `shard` holding at most `window` queues, sending as `shard-<index>-of-<count>`. */
async function shardWorker(
  t: ExecutionContext,
  on: { dataDir: string; clock: ManualClock; env: Record<string, string> },
  shard: Shard,
  window: number,
) {
  const w = await workerOn(t, on.dataDir, on.clock, on.env, {
    shard,
    queueWindow: window,
    dispatcherId: `shard-${shard.index}-of-${shard.count}`,
  });
  w.worker.start();
  await w.worker.caughtUp;
  return w;
}

/** Runs what falls due in every worker until `done`, noting the most queues each held meanwhile. */
async function pump(workers: DeliveryWorker[], done: () => boolean, held: number[], timeoutMs = 150_000) {
  const deadline = Date.now() + timeoutMs;
  const note = () => {
    workers.forEach((w, i) => {
      held[i] = Math.max(held[i], w.queues());
    });
  };
  for (;;) {
    note();
    if (done()) return;
    if (Date.now() > deadline)
      throw new Error(`timed out: ${workers.map((w) => JSON.stringify(w.pending())).join(', ')}`);
    for (const w of workers) await w.tick();
    note();
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The documents of shard `shard`'s collection (`$`-prefixed ones too). */
async function shardDocuments(readStore: ReadStore, shard: Shard) {
  const c = await readStore.collection(shardCheckpoint(DELIVERY_FOLLOWER, shard).collection);
  return c.find({});
}

const hookOf = (stream: string) => stream.slice('webhookdelivery-'.length, 'webhookdelivery-'.length + 36);

test('PDS_WEBHOOK_QUEUE_WINDOW is the process’s: each of K shard workers holds its part, at least one', (t) => {
  t.is(shardWindow(10_000, 1), 10_000);
  t.is(shardWindow(10_000, 3), 3_333);
  t.is(shardWindow(20, 16), 1);
  t.is(shardWindow(1, 4), 1);
});

test('two shards, window 10 each, 400 queues pending over 8 subscriptions: each worker holds at most 10 and sends only its own, every delivery once, each queue in cart order', async (t) => {
  t.timeout(240_000);
  const receiver = await startReceiver(t);
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h' };
  const { dataDir, clock, hookIds } = await subscriptionsInTwoShards(t, receiver, 4, env);
  const on = { dataDir, clock, env };
  const workers = [await shardWorker(t, on, { index: 0, count: 2 }, 10)];
  workers.push(await shardWorker(t, on, { index: 1, count: 2 }, 10));
  const held = [0, 0];
  const sampler = setInterval(() => {
    workers.forEach((w, i) => {
      held[i] = Math.max(held[i], w.worker.queues());
    });
  }, 1);
  t.teardown(() => clearInterval(sampler));

  const queues: { hook: string; cart: string }[] = [];
  for (const hook of hookIds) for (let i = 0; i < 50; i++) queues.push({ hook, cart: randomUUID() });
  let scheduled = 0;
  // The fan-out's worker (the first) schedules every delivery; the second picks its own up from the log.
  for (const revision of [1, 2])
    for (const { hook, cart } of queues) {
      t.true(await workers[0].worker.schedule(request(hook, cart, revision, clock)));
      scheduled += 1;
    }
  const pending = () => workers.reduce((n, w) => n + w.worker.pending().depth, 0);
  await pump(
    workers.map((w) => w.worker),
    () => receiver.received.length >= scheduled && pending() === 0,
    held,
  );

  t.true(
    held.every((n) => n <= 10),
    `at most 10 queues held by each, not ${held.join(', ')}`,
  );
  t.true(
    held.every((n) => n > 0),
    'both workers sent',
  );
  const ids = receiver.received.map((r) => r.headers['x-service-webhook-id']);
  t.is(ids.length, scheduled);
  t.is(new Set(ids).size, scheduled, 'every delivery sent once');
  const byQueue = revisionsByQueue(receiver.received);
  t.is(byQueue.size, 400);
  t.true(
    [...byQueue.values()].every((revisions) => revisions.join() === '1,2'),
    'each queue in cart order',
  );
  const started = (await workers[0].store.readAll({
    filter: { eventTypes: ['WebhookDeliveryAttemptStarted'] },
  })) as Array<RecordedEvent & { data: Record<string, unknown> }>;
  t.is(started.length, scheduled);
  t.true(
    started.every((e) => e.data.dispatcher_id === `shard-${shardOf(hookOf(e.streamId), 2)}-of-2`),
    'each attempt sent by the worker of its shard',
  );
});

test('1 → 2 shards with more queues pending than the window: each new collection holds only its shard’s documents, the old one only its fenced guard, and every delivery is delivered once', async (t) => {
  t.timeout(240_000);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503 });
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '1h,1h,1h' };
  const { dataDir, clock, hookIds } = await subscriptionsInTwoShards(t, receiver, 2, env);
  const on = { dataDir, clock, env };
  const old = await shardWorker(t, on, { index: 0, count: 1 }, 5);
  let scheduled = 0;
  for (const hook of hookIds)
    for (let i = 0; i < 10; i++) {
      t.true(await old.worker.schedule(request(hook, randomUUID(), 1, clock)));
      scheduled += 1;
    }
  t.is(old.worker.pending().depth, scheduled);
  t.true(old.worker.queues() <= 5, 'the others cold');
  await old.worker.stop();
  const before = await shardDocuments(old.readStore, { index: 0, count: 1 });
  t.is(before.filter((d) => !String(d._id).startsWith('$')).length, scheduled);

  const workers = [await shardWorker(t, on, { index: 0, count: 2 }, 5)];
  workers.push(await shardWorker(t, on, { index: 1, count: 2 }, 5));
  t.deepEqual(
    await shardDocuments(old.readStore, { index: 0, count: 1 }),
    [
      { _id: '$checkpoint', position: FENCED },
      { _id: '$guard', position: FENCED },
    ],
    'the old collection holds only its fenced guards',
  );
  let moved = 0;
  for (const index of [0, 1]) {
    const docs = (await shardDocuments(old.readStore, { index, count: 2 })).filter(
      (d) => !String(d._id).startsWith('$'),
    );
    t.true(
      docs.every((d) => shardOf(hookOf(String(d._id)), 2) === index),
      `shard ${index + 1}'s collection holds only its documents`,
    );
    moved += docs.length;
  }
  t.is(moved, scheduled, 'every pending queue moved');
  t.is(workers[0].worker.pending().depth + workers[1].worker.pending().depth, scheduled);

  receiver.setDefault({ status: 200 });

  const held = [0, 0];
  const pending = () => workers.reduce((n, w) => n + w.worker.pending().depth, 0);
  const answered = receiver.received.length;
  await pump(
    workers.map((w) => w.worker),
    () => {
      // Past every retry of a head the outage failed.
      clock.advance(60_000);
      return pending() === 0;
    },
    held,
  );
  t.true(
    held.every((n) => n <= 5),
    `at most 5 queues held by each, not ${held.join(', ')}`,
  );
  const delivered = receiver.received.slice(answered).filter((r) => r.body.revision === 1);
  t.is(
    new Set(delivered.map((r) => r.headers['x-service-webhook-id'])).size,
    scheduled,
    'every one delivered',
  );
  t.is(delivered.length, scheduled, 'each once');
});

test('1 → 2 shards over queues stored by version 1: each new shard upgrades its copy in place, every pending delivery kept and delivered', async (t) => {
  t.timeout(120_000);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503 });
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '1h,1h,1h' };
  const { dataDir, clock, hookIds } = await subscriptionsInTwoShards(t, receiver, 2, env);
  const on = { dataDir, clock, env };
  const old = await shardWorker(t, on, { index: 0, count: 1 }, 3);
  let scheduled = 0;
  for (const hook of hookIds)
    for (let i = 0; i < 3; i++) {
      t.true(await old.worker.schedule(request(hook, randomUUID(), 1, clock)));
      scheduled += 1;
    }
  await old.worker.stop();
  // The queues as version 1 stored them: without `due_at` and `queued_since`.
  const c = await old.readStore.collection(DELIVERY_FOLLOWER.collection);
  const docs = (await c.find({})).filter((d) => !String(d._id).startsWith('$'));
  t.is(docs.length, scheduled);
  await c.bulkWrite(
    docs.map(({ due_at: _due, queued_since: _since, ...doc }) => ({
      replaceOne: { filter: { _id: doc._id }, replacement: doc },
    })),
  );
  const stored = await old.readStore.getCheckpoint(DELIVERY_FOLLOWER.name);
  if (!stored) throw new Error('the worker stored a checkpoint');
  await old.readStore.setCheckpoint(DELIVERY_FOLLOWER.name, { ...stored, version: '1' });

  const workers = [await shardWorker(t, on, { index: 0, count: 2 }, 3)];
  workers.push(await shardWorker(t, on, { index: 1, count: 2 }, 3));
  t.is(workers[0].worker.pending().depth + workers[1].worker.pending().depth, scheduled, 'nothing lost');
  for (const index of [0, 1]) {
    const names = shardCheckpoint(DELIVERY_FOLLOWER, { index, count: 2 });
    t.like(await old.readStore.getCheckpoint(names.name), { version: DELIVERY_FOLLOWER.version });
    t.true(workers[index].worker.resumed().position > 0, 'upgraded, not rebuilt from the first event');
    const own = (await shardDocuments(old.readStore, { index, count: 2 })).filter(
      (d) => !String(d._id).startsWith('$'),
    );
    t.true(own.length > 0);
    t.true(
      own.every((d) => typeof d.due_at === 'string' && typeof d.queued_since === 'string'),
      'upgraded to version 2',
    );
  }

  receiver.setDefault({ status: 200 });
  const answered = receiver.received.length;
  await pump(workers.map((w) => w.worker), () => {
    clock.advance(60_000);
    return workers.every((w) => w.worker.pending().depth === 0);
  }, [0, 0]);
  const delivered = receiver.received.slice(answered);
  t.is(new Set(delivered.map((r) => r.headers['x-service-webhook-id'])).size, scheduled);
});
