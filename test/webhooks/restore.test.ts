/**
 * The delivery worker's start is bounded by its working set (issue #12): after a service has delivered
 * a history of webhooks and stopped, a delivery worker started on the same data reads its pending
 * queues back from the read store and only the delivery events after its checkpoint, holds only the
 * queue with a pending retry, sends that retry when it falls due, and still redelivers an old
 * delivered webhook when an operator asks (its queue's stream is read again).
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createCommandHandler } from '../../application/command-handler.ts';
import { DELIVERY_FOLLOWER } from '../../dispatcher/delivery-worker.ts';
import { manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import { addItem, checkOut, createCart, createWebhook, seedCatalog } from '../support/cart-world.ts';
import { attempts, scheduleRequest, workerOn } from '../support/delivery-worker.ts';
import { startService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const FILTER = { streamPrefixes: [delivery.STREAM_PREFIX] };

async function tempDataDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-webhooks-restore-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A service's data with one webhook subscription to a receiver of this test, the service stopped. */
async function subscribedData(t: ExecutionContext) {
  const dataDir = await tempDataDir(t);
  const clock = manualClock(new Date());
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h' };
  const receiver = await startReceiver(t);
  const s = await startService(t, { dataDir, clock, env });
  await seedCatalog(s);
  const hook = await createWebhook(s, receiver.url, [1]);
  await s.service.stop();
  return { dataDir, clock, env, receiver, hook };
}

test('a restarted delivery worker reads only the events after its checkpoint, holds only pending queues, and still redelivers an old webhook', async (t) => {
  const dataDir = await tempDataDir(t);
  const clock = manualClock(new Date());
  const HOUR = 3_600_000;
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h' };
  const healthy = await startReceiver(t);
  const failing = await startReceiver(t);
  failing.setDefault({ status: 500 });

  // A history: ten carts' webhooks delivered, one failed with its retry an hour away.
  const s = await startService(t, { dataDir, clock, env });
  await seedCatalog(s, [1, 2]);
  await createWebhook(s, healthy.url, [1]);
  await createWebhook(s, failing.url, [2]);
  for (let i = 0; i < 10; i++) {
    const cart = await createCart(s, 1);
    await addItem(s, cart);
    await checkOut(s, cart);
  }
  const stuck = await createCart(s, 2);
  await addItem(s, stuck);
  await checkOut(s, stuck);
  const inspect = await s.openStore();
  await attempts(inspect, 11);
  await healthy.waitFor(10);
  await s.service.stop();

  // The worker alone on the same files, counting what the store hands it.
  const { worker, store, readStore, counted } = await workerOn(t, dataDir, clock, env);
  const checkpoint = (await readStore.getCheckpoint(DELIVERY_FOLLOWER.name))?.position ?? 0;
  const history = (await store.readAll({ filter: FILTER })).length;
  const after = (await store.readAll({ after: checkpoint, filter: FILTER })).length;
  t.true(checkpoint > 0);
  t.true(history >= 33, `${history} delivery events in history`);
  t.log(`${history} delivery events in history, ${after} after the checkpoint`);

  worker.start();
  await worker.caughtUp;
  t.deepEqual(worker.resumed(), { position: checkpoint, documents: 1 });
  t.is(counted.events, after, 'only the delivery events after the checkpoint');
  t.is(counted.streamReads, 0);
  t.is(worker.queues(), 1, 'the queue with the pending retry, no settled one');
  t.is(worker.pending().depth, 1);

  // The retry falls due: sent, failed again, parked (the last attempt); the queue leaves.
  clock.advance(2 * HOUR); // past the retry and its jitter
  await worker.tick();
  const [, second] = await failing.waitFor(2);
  t.is(second.headers['x-service-delivery-attempt'], '2');
  await worker.settle();
  t.is(worker.queues(), 0);
  t.is(worker.pending().depth, 0);

  // An operator redelivers one of the old delivered webhooks: its queue is read again and sent.
  const [scheduled] = await store.readAll({ filter: { eventTypes: ['WebhookDeliveryScheduled'] } });
  const { delivery_id } = scheduled.data as { delivery_id: string };
  const first = healthy.received.find((r) => r.headers['x-service-webhook-id'] === delivery_id);
  t.truthy(first);
  const at = clock.now().toISOString();
  await createCommandHandler(store, eventRegistry).handle(
    scheduled.streamId,
    delivery.decider,
    { type: 'RequestRedelivery', delivery_id, reason: 'redeliver', at },
    { correlationId: delivery_id, causationId: null, actor: { type: 'operator', id: 'test' }, at },
  );
  const got = await healthy.waitFor(11);
  t.is(got[10].headers['x-service-webhook-id'], delivery_id);
  t.is(got[10].headers['x-service-delivery-attempt'], '2');
  t.is(got[10].raw.toString(), first?.raw.toString() ?? '', 'the same body');
  await worker.settle();
  t.is(counted.streamReads, 1, 'the redelivered queue, read once (its later events are known)');
  await worker.stop();
  t.is(worker.queues(), 0);
  const queues = await readStore.collection(DELIVERY_FOLLOWER.collection);
  const left = (await queues.find({})).filter((doc) => !String(doc._id).startsWith('$'));
  t.is(left.length, 0, 'no queue left in the read store');
});

test('a queue that left the working set ahead of the log (a reload found the next delivery and sent it) is not worked again when the log catches up', async (t) => {
  const { dataDir, clock, env, receiver, hook } = await subscribedData(t);

  const { worker, store, counted, hold, held, step, release } = await workerOn(t, dataDir, clock, env);
  t.teardown(release);
  worker.start();
  await worker.caughtUp;
  const cartUuid = randomUUID();
  const stream = delivery.streamId(hook.id, cartUuid);
  const commands = createCommandHandler(store, eventRegistry);
  const schedule = (revision: number) => {
    const { command, metadata } = scheduleRequest(hook.id, cartUuid, revision, clock);
    return commands.handle(stream, delivery.decider, command, { ...metadata, causationId: null });
  };

  // The worker is handed the first delivery only; the second is in the stream before it sends.
  hold();
  await schedule(1);
  await held();
  await schedule(2);
  const before = counted.streamReads;
  step(); // the first batch goes through; the log's next events wait
  const got = await receiver.waitFor(2);
  t.deepEqual(
    got.map((r) => r.body),
    [{ revision: 1 }, { revision: 2 }],
    'in order, after reading the queue again',
  );
  await attempts(store, 2, stream);
  t.is(counted.streamReads - before, 1, 'the conflict on the first attempt read the queue once');
  t.is(worker.queues(), 0);

  release();
  await worker.settle();
  t.is(worker.queues(), 0);
  t.is(counted.streamReads - before, 1, 'the second delivery, known already, is not worked again');
  t.is(receiver.received.length, 2);
  const events = await store.readStream(stream);
  t.is(events.filter((e) => e.type === 'WebhookDeliveryAttemptStarted').length, 2);
});

test("the embedded store does not hand the delivery worker back its own appends, only others', and its checkpoint still moves past them", async (t) => {
  const { dataDir, clock, env, receiver, hook } = await subscribedData(t);

  const { worker, store, readStore, handed } = await workerOn(t, dataDir, clock, env);
  worker.start();
  await worker.caughtUp;
  const before = handed.length;
  // Scheduled as the fan-out does: each delivery's scheduling and start in one append, then its result.
  for (let i = 0; i < 3; i++) t.true(await worker.schedule(scheduleRequest(hook.id, randomUUID(), 1, clock)));
  await receiver.waitFor(3);
  await attempts(store, 3);
  await worker.settle();
  t.deepEqual(handed.slice(before), [], 'its own appends are applied as they return, not read back');
  t.is(worker.queues(), 0);

  // A delivery scheduled by another writer (another dispatcher's fan-out): handed over and sent. Its
  // result is not handed back; its start may be, when the log is read again between the start's
  // commit and the worker applying it (the worker then finds it applied already).
  const cartUuid = randomUUID();
  const { command, metadata } = scheduleRequest(hook.id, cartUuid, 1, clock);
  await createCommandHandler(store, eventRegistry).handle(
    delivery.streamId(hook.id, cartUuid),
    delivery.decider,
    command,
    { ...metadata, causationId: null },
  );
  await receiver.waitFor(4);
  await attempts(store, 4);
  await worker.settle();
  const others = handed.slice(before).filter((type) => type !== 'WebhookDeliveryAttemptStarted');
  t.deepEqual(others, ['WebhookDeliveryScheduled'], "the other writer's scheduling, not the result");
  t.is(receiver.received.length, 4);

  // The checkpoint stored at stop is the last delivery event: a restart reads none of them again.
  await worker.stop();
  const head = await store.headPosition(FILTER);
  t.is((await readStore.getCheckpoint(DELIVERY_FOLLOWER.name))?.position, head);
});
