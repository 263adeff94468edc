/**
 * Delivery shards leased among dispatcher processes (dispatcher/shard-leases.ts; docs/webhooks.md,
 * "Scale"), modelled on the embedded stores with a manual clock: two dispatchers share 16 shards 8/8,
 * a dispatcher that stops renewing loses its shards to the other once their leases run out, and an
 * attempt it had in flight is recorded interrupted by the new owner and sent again with the same
 * webhook id, never two `AttemptStarted` for one attempt number.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { loadConfig } from '../../cli/config.ts';
import { createDeliveryWorker } from '../../dispatcher/delivery-worker.ts';
import { createLeasedDeliveries } from '../../dispatcher/leased-deliveries.ts';
import { createShardLeases, DISPATCHERS_COLLECTION } from '../../dispatcher/shard-leases.ts';
import { shardOf } from '../../dispatcher/shards.ts';
import { createSubscriptionTracker } from '../../dispatcher/subscription-tracker.ts';
import { manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { createWebhook, seedCatalog } from '../support/cart-world.ts';
import { scheduleRequest } from '../support/delivery-worker.ts';
import { until } from '../support/probes.ts';
import { startService } from '../support/service.ts';
import { type Receiver, startReceiver } from '../support/webhook-receiver.ts';

type ManualClock = ReturnType<typeof manualClock>;
const SHARDS = 16;
const LEASE_MS = 15_000;
/** An attempt's lease: another dispatcher records it interrupted after this. */
const ATTEMPT_LEASE_MS = 10_000;

/** A data dir with `count` subscriptions for store 1 to `receiver`, made by a service then stopped. */
async function dataWithSubscriptions(t: ExecutionContext, receiver: Receiver, clock: ManualClock, count = 1) {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-shard-leases-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const s = await startService(t, { dataDir, clock });
  await seedCatalog(s);
  const hookIds: string[] = [];
  for (let i = 0; i < count; i++) hookIds.push((await createWebhook(s, receiver.url, [1])).id);
  await s.service.stop();
  return { dataDir, hookId: hookIds[0], hookIds };
}

/**
 * A dispatcher process's leased deliveries on the data dir: its own connections, named `owner`, at
 * most `maxInFlight` requests open.
 */
async function dispatcher(
  t: ExecutionContext,
  dataDir: string,
  clock: ManualClock,
  owner: string,
  maxInFlight = 256,
) {
  const config = await loadConfig({ PDS_DATA_DIR: dataDir });
  const store = await openSqliteEventStore(path.join(dataDir, 'events.db'));
  const readStore = openSqliteReadStore(path.join(dataDir, 'dispatcher.db'), { clock });
  const tracker = createSubscriptionTracker({ store });
  tracker.start();
  await tracker.caughtUp;
  const deliveries = createLeasedDeliveries({
    store,
    registry: eventRegistry,
    readStore,
    owner,
    shards: SHARDS,
    ttlMs: LEASE_MS,
    clock,
    maxInFlight,
    worker: (shard, budget) =>
      createDeliveryWorker({
        store,
        readStore,
        clock,
        tracker,
        shard,
        maxInFlight: budget,
        dispatcherId: owner,
        secretKey: config.secretKey,
        allowPrivate: true,
        timeoutMs: 5_000,
        leaseMs: ATTEMPT_LEASE_MS,
        scheduleMs: [0, 3_600_000],
      }),
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await deliveries.stop();
    await tracker.stop();
    await readStore.close();
    await store.close();
  };
  t.teardown(stop);
  return { deliveries, leases: deliveries.leases, store, stop };
}

test('two dispatchers share 16 shards 8/8; when one stops, the other takes all of them', async (t) => {
  const receiver = await startReceiver(t);
  const clock = manualClock(new Date());
  const { dataDir } = await dataWithSubscriptions(t, receiver, clock);
  const a = await dispatcher(t, dataDir, clock, 'dispatcher-a');
  await a.leases.start();
  t.is(a.leases.held().length, 16, 'alone, it holds every shard');

  const b = await dispatcher(t, dataDir, clock, 'dispatcher-b');
  await b.leases.start();
  t.deepEqual(b.leases.held(), [], 'every shard is held');
  await a.leases.round();
  await a.leases.givenBack();
  t.is(a.leases.held().length, 8, 'it gives back what is above its share');
  await b.leases.round();
  await b.leases.taken();
  t.is(b.leases.held().length, 8);
  t.deepEqual(
    [...a.leases.held(), ...b.leases.held()].sort((x, y) => x - y),
    [...Array(16).keys()],
  );

  await a.stop();
  await b.leases.round();
  await b.leases.taken();
  t.is(b.leases.held().length, 16, 'a stopped dispatcher released its shards at once');
});

test('a dispatcher that stops renewing: its shards are taken after the lease, its attempt in flight recorded interrupted and sent again with the same webhook id', async (t) => {
  const receiver = await startReceiver(t);
  receiver.script({ hang: true });
  const clock = manualClock(new Date());
  const { dataDir, hookId } = await dataWithSubscriptions(t, receiver, clock);
  const a = await dispatcher(t, dataDir, clock, 'dispatcher-a');
  const b = await dispatcher(t, dataDir, clock, 'dispatcher-b');
  await a.leases.start();
  await b.leases.start();
  await a.leases.round();
  await a.leases.givenBack();
  await b.leases.round();
  await b.leases.taken();
  const shard = shardOf(hookId, SHARDS);
  const [owner, other] = a.leases.held().includes(shard) ? [a, b] : [b, a];

  // The other dispatcher's fan-out schedules it: the owner picks it up and sends it; the receiver hangs.
  const request = scheduleRequest(hookId, 'c8a4b3f2-9a57-4a1e-8c1d-3f2b4c5d6e7f', 1, clock);
  t.true(await other.deliveries.schedule(request));
  const [hung] = await receiver.waitFor(1);

  // The owner is gone (no more renewals); past its leases, the other takes every shard.
  clock.advance(Math.max(LEASE_MS, ATTEMPT_LEASE_MS) + 1_000);
  await other.leases.round();
  await other.leases.taken();
  t.is(other.leases.held().length, 16);
  await until('sent again', async () => {
    await other.deliveries.tick();
    return receiver.received.length >= 2;
  });
  t.is(receiver.received[1].headers['x-service-webhook-id'], hung.headers['x-service-webhook-id']);

  const events = await other.store.readStream(request.stream);
  const started = events.filter((e) => e.type === 'WebhookDeliveryAttemptStarted');
  const numbers = started.map((e) => (e.data as { attempt: number }).attempt);
  t.deepEqual(numbers, [1, 2], 'never two starts of one attempt');
  const attempted = events.filter((e) => e.type === 'WebhookDeliveryAttempted');
  t.like(attempted[0].data, { outcome: 'interrupted' });
  t.is(
    (started[1].data as { dispatcher_id: string }).dispatcher_id,
    other === a ? 'dispatcher-a' : 'dispatcher-b',
  );
  t.is(owner.leases.held().length, 8, 'the gone dispatcher never learnt of it');
});

/** Two shards' leases in a store of their own, on a manual clock; `take` is each worker's start. */
function twoShards(
  t: ExecutionContext,
  take: (owner: string, index: number) => Promise<void> = async () => {},
) {
  const clock = manualClock(new Date());
  const readStore = openSqliteReadStore(':memory:', { clock });
  t.teardown(() => readStore.close());
  const leasesOf = (owner: string) =>
    createShardLeases({
      readStore,
      owner,
      shards: 2,
      ttlMs: LEASE_MS,
      clock,
      take: (index) => take(owner, index),
      async give() {},
    });
  return { clock, readStore, leasesOf };
}

test('a shard worker with a long catch-up holds up neither the round nor the renewals of the shards held', async (t) => {
  const catchUp = Promise.withResolvers<void>();
  const taken: number[] = [];
  const { clock, leasesOf } = twoShards(t, async (owner, index) => {
    taken.push(index);
    // The first shard's worker catches up until the test lets it.
    if (owner === 'dispatcher-a' && taken.length === 1) await catchUp.promise;
  });
  const a = leasesOf('dispatcher-a');
  await a.round();
  t.deepEqual(a.held(), [0, 1], 'both taken, the second while the first still catches up');
  let ready = false;
  void a.taken().then(() => {
    ready = true;
  });

  // Two thirds of the lease twice: held past its first term only if renewed meanwhile.
  for (let i = 0; i < 2; i++) {
    clock.advance((LEASE_MS * 2) / 3);
    await a.round();
  }
  t.false(ready, 'the first worker still catches up');
  const b = leasesOf('dispatcher-b');
  await b.round();
  t.deepEqual(b.held(), [], 'every lease renewed: none free for another dispatcher');
  catchUp.resolve();
  await a.taken();
  await a.stop();
  await b.stop();
});

test('after a hand-over, the shards a dispatcher holds together never have more than PDS_WEBHOOK_MAX_IN_FLIGHT requests open', async (t) => {
  const MAX = 16;
  const receiver = await startReceiver(t);
  receiver.setDefault({ hang: true });
  const clock = manualClock(new Date());
  const { dataDir, hookIds } = await dataWithSubscriptions(t, receiver, clock, 40);
  const a = await dispatcher(t, dataDir, clock, 'dispatcher-a', MAX);
  const b = await dispatcher(t, dataDir, clock, 'dispatcher-b', MAX);
  await a.leases.start();
  await b.leases.start();
  await a.leases.round();
  await a.leases.givenBack();
  await b.leases.round();
  await b.leases.taken();
  t.is(b.leases.held().length, 8);
  // A stops: B takes its 8 shards beside its own 8.
  await a.stop();
  await b.leases.round();
  await b.leases.taken();
  t.is(b.leases.held().length, 16);

  // Three carts for each of the 40 subscriptions, every receiver hanging: far more due than MAX.
  for (const cart of [randomUUID(), randomUUID(), randomUUID()])
    for (const hookId of hookIds)
      t.true(await b.deliveries.schedule(scheduleRequest(hookId, cart, 1, clock)));
  await receiver.waitFor(MAX);
  await b.deliveries.settle();
  t.is(b.deliveries.slots().inFlight, MAX, 'the budget is used whole');
  t.true(b.deliveries.slots().waiting > 0, 'the other due queues wait for a slot');
  t.is(receiver.open().max, MAX, 'never more requests open than PDS_WEBHOOK_MAX_IN_FLIGHT');
  await receiver.close();
});

test('a dispatcher gone without saying so is deleted from the dispatchers there once its presence ran out', async (t) => {
  const { clock, readStore, leasesOf } = twoShards(t);
  const dispatchers = await readStore.collection(DISPATCHERS_COLLECTION);
  const crashed = leasesOf('dispatcher-crashed');
  await crashed.round(); // and never again, nor a stop
  const a = leasesOf('dispatcher-a');
  await a.round();
  t.is((await dispatchers.find({})).length, 2);
  clock.advance(LEASE_MS / 3);
  await a.round();
  t.is((await dispatchers.find({})).length, 2, 'still there within its presence');
  clock.advance(LEASE_MS);
  await a.round();
  t.deepEqual(
    (await dispatchers.find({})).map((d) => d._id),
    ['dispatcher-a'],
  );
  t.deepEqual(a.held(), [0, 1], 'it took the shards of the one gone');
  await a.stop();
});
