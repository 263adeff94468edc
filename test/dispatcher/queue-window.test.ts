/**
 * The delivery worker's window of queues (docs/webhooks.md, "Scale"): at most `queueWindow` queues
 * held whatever the backlog, the others cold in `webhook_delivery_queues`, loaded in due order as the
 * window has room; events of a cold queue applied to its document in order; a crash with cold queues
 * loses nothing; documents of version 1 are upgraded in place; the pending counts cover cold queues.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createCommandHandler } from '../../application/command-handler.ts';
import { GUARD } from '../../application/durable-follower.ts';
import {
  DELIVERY_FOLLOWER,
  type DeliveryQueueDoc,
  type DeliveryWorker,
} from '../../dispatcher/delivery-worker.ts';
import { manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { ReadStore } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { createWebhook, seedCatalog } from '../support/cart-world.ts';
import { scheduleRequest, workerOn } from '../support/delivery-worker.ts';
import { until } from '../support/probes.ts';
import { startService } from '../support/service.ts';
import { type Receiver, startReceiver } from '../support/webhook-receiver.ts';

const MINUTE = 60_000;

/** `count` subscriptions for store 1 to `receiver`, made by a service then stopped. */
async function subscribedData(
  t: ExecutionContext,
  receiver: Receiver,
  count: number,
  env: Record<string, string>,
) {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-queue-window-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const clock = manualClock(new Date());
  const s = await startService(t, { dataDir, clock, env });
  await seedCatalog(s);
  const hookIds: string[] = [];
  for (let i = 0; i < count; i++) hookIds.push((await createWebhook(s, receiver.url, [1])).id);
  await s.service.stop();
  return { dataDir, clock, hookIds };
}

/** The request of the delivery of `cart`'s revision `revision` to `hookId`, its body naming all three. */
function request(hookId: string, cart: string, revision: number, clock: ReturnType<typeof manualClock>) {
  const r = scheduleRequest(hookId, cart, revision, clock);
  r.command.body = JSON.stringify({ hook: hookId, cart, revision });
  return r;
}

/** Runs what falls due (`tick`) until `done`, noting the most queues the worker held meanwhile. */
async function pump(worker: DeliveryWorker, done: () => boolean, held: { max: number }, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    held.max = Math.max(held.max, worker.queues());
    if (done()) return;
    if (Date.now() > deadline) {
      throw new Error(
        `timed out: ${worker.queues()} held, ${JSON.stringify(worker.pending())}, ${JSON.stringify(worker.slots())}`,
      );
    }
    await worker.tick();
    held.max = Math.max(held.max, worker.queues());
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The stored queue documents (the guards left out: a stream id never starts with `$`). */
async function storedQueues(readStore: { collection: (name: string) => Promise<unknown> }) {
  const c = (await readStore.collection(DELIVERY_FOLLOWER.collection)) as {
    find(filter: object): Promise<DeliveryQueueDoc[]>;
  };
  return (await c.find({})).filter((doc) => !doc._id.startsWith('$'));
}

/**
 * A commit as version 1's release makes it (its follower's guard on `GUARD`, at its checkpoint): a
 * queue document without `due_at` and the checkpoint of version 1.
 */
async function commitOfVersion1(readStore: ReadStore, position: number, doc: DeliveryQueueDoc) {
  const { due_at: _due, queued_since: _since, ...old } = doc;
  const c = await readStore.collection(DELIVERY_FOLLOWER.collection);
  await readStore.commit({
    writes: [
      {
        collection: c,
        ops: [
          {
            updateOne: {
              filter: { _id: GUARD, position: { $lte: position } },
              update: { $set: { position } },
              upsert: true,
            },
          },
          {
            replaceOne: {
              filter: { _id: old._id },
              replacement: { ...old, revision: old.revision + 1 },
              upsert: true,
            },
          },
        ],
      },
    ],
    checkpoints: [
      {
        name: DELIVERY_FOLLOWER.name,
        checkpoint: { position, events: 0, updated_at: new Date().toISOString(), version: '1' },
      },
    ],
  });
}

test('window 10, 1,000 queues pending over 5 subscriptions: at most 10 held, each delivery delivered once, each queue in cart order', async (t) => {
  t.timeout(180_000);
  const receiver = await startReceiver(t);
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h' };
  const { dataDir, clock, hookIds } = await subscribedData(t, receiver, 5, env);
  const { worker } = await workerOn(t, dataDir, clock, env, { queueWindow: 10 });
  worker.start();
  await worker.caughtUp;
  const held = { max: 0 };
  const sampler = setInterval(() => {
    held.max = Math.max(held.max, worker.queues());
  }, 1);
  t.teardown(() => clearInterval(sampler));

  let scheduled = 0;
  const queues: { hook: string; cart: string }[] = [];
  for (const hook of hookIds) for (let i = 0; i < 200; i++) queues.push({ hook, cart: randomUUID() });
  for (const revision of [1, 2])
    for (const { hook, cart } of queues) {
      t.true(await worker.schedule(request(hook, cart, revision, clock)));
      scheduled += 1;
      held.max = Math.max(held.max, worker.queues());
    }
  t.true(worker.pending().depth > 0);
  await pump(
    worker,
    () => receiver.received.length >= scheduled && worker.pending().depth === 0,
    held,
    150_000,
  );

  t.true(held.max <= 10, `at most 10 queues held, not ${held.max}`);
  const ids = receiver.received.map((r) => r.headers['x-service-webhook-id']);
  t.is(ids.length, scheduled);
  t.is(new Set(ids).size, scheduled, 'every delivery sent once');
  const byQueue = new Map<string, number[]>();
  for (const r of receiver.received) {
    const key = `${r.body.hook}/${r.body.cart}`;
    byQueue.set(key, [...(byQueue.get(key) ?? []), r.body.revision as number]);
  }
  t.is(byQueue.size, 1_000);
  t.true(
    [...byQueue.values()].every((revisions) => revisions.join() === '1,2'),
    'each queue in cart order',
  );
  await until('every queue settled', () => worker.queues() === 0);
});

test('a receiver down while 2,000 queues are pending: the worker holds at most its window, every queue gets its attempt, all counted pending', async (t) => {
  t.timeout(180_000);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503 });
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '1m,1m,1h,1h' };
  const { dataDir, clock, hookIds } = await subscribedData(t, receiver, 1, env);
  const { worker } = await workerOn(t, dataDir, clock, env, { queueWindow: 10 });
  worker.start();
  await worker.caughtUp;
  const held = { max: 0 };
  for (let i = 0; i < 2_000; i++) {
    await worker.schedule(request(hookIds[0], randomUUID(), 1, clock));
    held.max = Math.max(held.max, worker.queues());
  }
  t.is(worker.pending().depth, 2_000);
  // Each first attempt fails; its queue waits for its retry in the store while the others get theirs.
  // (Counted as the worker records them: on a loaded machine a request may fail before the receiver
  // has it, which is a failed attempt too.)
  const made = () => Object.values(worker.stats().attempts).reduce((a, b) => a + b, 0);
  await pump(worker, () => made() >= 2_000, held, 150_000);
  t.is(made(), 2_000, 'one attempt each');
  await worker.settle();
  t.is(worker.pending().depth, 2_000, 'held and cold deliveries all pending');
  // The retries fall due: the second attempts go out through the window too.
  clock.advance(2 * MINUTE);
  await pump(worker, () => made() >= 4_000, held, 150_000);
  t.is(made(), 4_000, 'one more attempt each');
  t.true(held.max <= 10, `at most 10 queues held, not ${held.max}`);
  t.is(worker.pending().depth, 2_000);
  t.true(worker.queues() <= 10);
});

test('a crash with cold queues: another worker on the same files loses nothing, each delivery sent with its one webhook id, not before its stored due time', async (t) => {
  t.timeout(120_000);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503 });
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '1m,1m,1h,1h' };
  const { dataDir, clock, hookIds } = await subscribedData(t, receiver, 2, env);
  const first = await workerOn(t, dataDir, clock, env, { queueWindow: 3 });
  first.worker.start();
  await first.worker.caughtUp;
  const streams: string[] = [];
  for (let i = 0; i < 12; i++) {
    const r = request(hookIds[i % 2], randomUUID(), 1, clock);
    streams.push(r.stream);
    await first.worker.schedule(r);
  }
  const held = { max: 0 };
  await pump(first.worker, () => receiver.received.length >= 12, held);
  // Every queue stored with its retry time; then one more delivery each for two queues, not committed.
  await until('the queues stored with their retry', async () => {
    const docs = await storedQueues(first.readStore);
    return docs.length === 12 && docs.every((d) => d.due_at !== null && d.deliveries[0].attempts === 1);
  });
  const more = [0, 1].map((i) => {
    const cart = delivery.parseStreamId(streams[i])?.cart_uuid as string;
    return request(hookIds[i % 2], cart, 2, clock);
  });
  for (const r of more) await first.worker.schedule(r);
  t.is(first.worker.pending().depth, 14);
  // The crash: the store closed under the worker, so its last changes are never committed.
  await first.readStore.close();
  await first.worker.stop();
  t.true(held.max <= 3);

  const second = await workerOn(t, dataDir, clock, env, { queueWindow: 3 });
  second.worker.start();
  await second.worker.caughtUp;
  t.true(second.worker.resumed().documents <= 3, 'only up to the window read back');
  await second.worker.settle();
  t.is(second.worker.pending().depth, 14, 'every delivery pending, the cold ones counted');
  receiver.setDefault({ status: 200 });
  await second.worker.tick();
  await new Promise((r) => setTimeout(r, 100));
  await second.worker.tick();
  t.is(receiver.received.length, 12, 'nothing sent before the stored retry times');

  clock.advance(2 * MINUTE);
  await pump(second.worker, () => second.worker.pending().depth === 0, held);
  t.true(held.max <= 3);
  // Answered 200 from here on: the first twelve were the failed first attempts.
  const answered = receiver.received.slice(12);
  const delivered = answered.map((r) => r.headers['x-service-webhook-id']);
  const ids = new Set([
    ...(await first.store.readAll({ filter: { eventTypes: ['WebhookDeliveryScheduled'] } })).map(
      (e) => (e.data as { delivery_id: string }).delivery_id,
    ),
  ]);
  t.is(ids.size, 14);
  t.deepEqual(
    [...new Set(delivered)].sort(),
    [...ids].sort(),
    'each delivery delivered with its one webhook id',
  );
  for (const r of more) {
    const sent = answered.filter((x) => x.body.cart === r.command.cart_uuid);
    t.deepEqual(
      sent.map((x) => x.body.revision),
      [1, 2],
      'in cart order',
    );
  }
});

test('a delivery scheduled for a cold queue whose head is in retry waits behind it; a redelivery of a settled queue reloads it through the window', async (t) => {
  t.timeout(120_000);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503 });
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '1m,1m,1h,1h' };
  const { dataDir, clock, hookIds } = await subscribedData(t, receiver, 1, env);
  const { worker, store, readStore } = await workerOn(t, dataDir, clock, env, {
    queueWindow: 1,
    random: () => 0.5,
  });
  worker.start();
  await worker.caughtUp;
  const [hook] = hookIds;
  const held = { max: 0 };
  const cartA = randomUUID();
  const a1 = request(hook, cartA, 1, clock);
  await worker.schedule(a1);
  await pump(worker, () => receiver.received.length >= 1 && worker.slots().inFlight === 0, held);
  // B falls due while A waits for its retry: A leaves the window for it.
  await worker.schedule(request(hook, randomUUID(), 1, clock));
  await pump(worker, () => receiver.received.length >= 2 && worker.slots().inFlight === 0, held);
  await worker.settle();

  // The fan-out's next delivery for A, cold: appended behind its head, not due.
  const a2 = request(hook, cartA, 2, clock);
  t.true(await worker.schedule(a2));
  t.is(worker.queues(), 1);
  t.is(worker.pending().depth, 3, 'the cold deliveries counted');
  await worker.tick();
  await new Promise((r) => setTimeout(r, 50));
  await worker.tick();
  t.is(receiver.received.length, 2, 'nothing sent before the head is due');
  const stored = await until('A stored with both deliveries', async () => {
    const docs = await storedQueues(readStore);
    const doc = docs.find((d) => d._id === a1.stream);
    return doc?.deliveries.length === 2 ? doc : undefined;
  });
  t.deepEqual(
    stored.deliveries.map((d) => d.source_revision),
    [1, 2],
  );
  t.is(stored.due_at, stored.deliveries[0].next_attempt_at, 'due when its head is');

  receiver.setDefault({ status: 200 });
  clock.advance(2 * MINUTE);
  await pump(worker, () => worker.pending().depth === 0, held);
  const toA = receiver.received.slice(2).filter((r) => r.body.cart === cartA);
  t.deepEqual(
    toA.map((r) => r.body.revision),
    [1, 2],
    'A in cart order',
  );

  // C fills the window, waiting for its retry; an operator redelivers A's first delivery.
  receiver.setDefault({ status: 503 });
  const before = receiver.received.length;
  await worker.schedule(request(hook, randomUUID(), 1, clock));
  await pump(worker, () => receiver.received.length > before && worker.slots().inFlight === 0, held);
  receiver.setDefault({ status: 200 });
  const at = clock.now().toISOString();
  await createCommandHandler(store, eventRegistry).handle(
    a1.stream,
    delivery.decider,
    { type: 'RequestRedelivery', delivery_id: a1.command.delivery_id, reason: 'redeliver', at },
    { correlationId: randomUUID(), causationId: null, actor: { type: 'operator', id: 'test' }, at },
  );
  await pump(
    worker,
    () =>
      receiver.received.some(
        (r, i) => i > before && r.headers['x-service-webhook-id'] === a1.command.delivery_id,
      ),
    held,
  );
  const again = receiver.received.slice(before + 1).find((r) => r.body.cart === cartA);
  t.is(again?.body.revision, 1);
  t.is(again?.headers['x-service-delivery-attempt'], '3');
  t.true(held.max <= 1, `at most one queue held, not ${held.max}`);
});

test('queues stored by version 1 (no due_at, no index) are upgraded in place: nothing lost, only the window read back', async (t) => {
  t.timeout(120_000);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 503 });
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '1m,1m,1h,1h' };
  const { dataDir, clock, hookIds } = await subscribedData(t, receiver, 1, env);
  const first = await workerOn(t, dataDir, clock, env);
  first.worker.start();
  await first.worker.caughtUp;
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const r = request(hookIds[0], randomUUID(), 1, clock);
    ids.push(r.command.delivery_id);
    await first.worker.schedule(r);
  }
  await pump(first.worker, () => receiver.received.length >= 5 && first.worker.slots().inFlight === 0, {
    max: 0,
  });
  await first.worker.settle();
  await first.worker.stop();

  // The same queues as version 1 stored them: a collection without the new fields or indexes.
  const docs = await storedQueues(first.readStore);
  const checkpoint = await first.readStore.getCheckpoint(DELIVERY_FOLLOWER.name);
  if (!checkpoint) throw new Error('the worker stored a checkpoint');
  await first.readStore.close();
  const file = path.join(dataDir, 'dispatcher.db');
  await Promise.all(['', '-wal', '-shm'].map((suffix) => rm(`${file}${suffix}`, { force: true })));
  const old = openSqliteReadStore(file);
  const c = await old.collection(DELIVERY_FOLLOWER.collection);
  await c.bulkWrite([
    {
      replaceOne: {
        filter: { _id: GUARD },
        replacement: { _id: GUARD, position: checkpoint.position },
        upsert: true,
      },
    },
    ...docs.map(({ due_at: _due, queued_since: _since, ...doc }) => ({
      replaceOne: { filter: { _id: doc._id }, replacement: doc, upsert: true },
    })),
  ]);
  await old.setCheckpoint(DELIVERY_FOLLOWER.name, { ...checkpoint, version: '1' });
  await old.close();

  const second = await workerOn(t, dataDir, clock, env, { queueWindow: 2 });
  second.worker.start();
  await second.worker.caughtUp;
  t.true(second.worker.resumed().documents <= 2, 'only the window read back');
  t.is(second.worker.pending().depth, 5, 'every pending delivery counted');
  t.is((await second.readStore.getCheckpoint(DELIVERY_FOLLOWER.name))?.version, DELIVERY_FOLLOWER.version);
  const upgraded = await storedQueues(second.readStore);
  t.is(upgraded.length, 5);
  t.true(upgraded.every((d) => d.due_at === d.deliveries[0].next_attempt_at && d.queued_since !== null));

  // A worker of version 1's release still running (a rolling update) commits after the upgrade: refused.
  const upgradedAt = await second.readStore.getCheckpoint(DELIVERY_FOLLOWER.name);
  await t.throwsAsync(commitOfVersion1(second.readStore, checkpoint.position + 1, upgraded[0]));
  t.deepEqual(await storedQueues(second.readStore), upgraded, 'its commit wrote no document');
  t.deepEqual(await second.readStore.getCheckpoint(DELIVERY_FOLLOWER.name), upgradedAt, 'nor its checkpoint');

  receiver.setDefault({ status: 200 });
  clock.advance(2 * MINUTE);
  const held = { max: 0 };
  await pump(second.worker, () => second.worker.pending().depth === 0, held);
  t.true(held.max <= 2);
  t.deepEqual(
    [...new Set(receiver.received.slice(5).map((r) => r.headers['x-service-webhook-id']))].sort(),
    [...ids].sort(),
  );
});

test('a worker on a dispatcher store of its own first start keeps queues beyond its window in that store and delivers them all', async (t) => {
  t.timeout(60_000);
  const receiver = await startReceiver(t);
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h' };
  const { dataDir, clock, hookIds } = await subscribedData(t, receiver, 1, env);
  const file = path.join(dataDir, 'dispatcher.db');
  await Promise.all(['', '-wal', '-shm'].map((suffix) => rm(`${file}${suffix}`, { force: true })));
  const { worker, readStore } = await workerOn(t, dataDir, clock, env, { queueWindow: 2 });
  worker.start();
  await worker.caughtUp;
  t.deepEqual(worker.resumed(), { position: 0, documents: 0 });
  // The first two answers take long enough for the cold queues to be committed and forgotten from
  // memory: the store is then their only copy.
  receiver.script({ status: 200, delayMs: 800 }, { status: 200, delayMs: 800 });
  const held = { max: 0 };
  for (let i = 0; i < 20; i++) {
    await worker.schedule(request(hookIds[0], randomUUID(), 1, clock));
    held.max = Math.max(held.max, worker.queues());
  }
  await until('the cold queues stored', async () => (await storedQueues(readStore)).length >= 18);
  await pump(worker, () => receiver.received.length >= 20 && worker.pending().depth === 0, held);
  t.true(held.max <= 2, `at most 2 queues held, not ${held.max}`);
  t.is(new Set(receiver.received.map((r) => r.headers['x-service-webhook-id'])).size, 20);
});
