/**
 * Role `all` with the dispatcher on a worker thread of its own (`cli/role-thread.ts`, as
 * `npm start` runs it): webhooks go out from the thread, its readiness and metrics show through the
 * parent's `/readyz` and `/metrics`, a thread that dies is started again and delivers what was written
 * meanwhile, and a stop ends it.
 */
import test from 'ava';
import { parseConfig } from '../../cli/config.ts';
import {
  DELIVERY_THREAD_CACHE_MIB,
  deliveryComponents,
  leasesShards,
} from '../../cli/delivery-components.ts';
import { DISPATCHER_STORE_CACHE_MIB, dispatcherState } from '../../cli/dispatcher-state.ts';
import { dispatcherThreads, roleThread } from '../../cli/role-thread.ts';
import { shardOf } from '../../dispatcher/shards.ts';
import { addItem, checkOut, createCart, createWebhook, move, seedCatalog } from '../support/cart-world.ts';
import { killThread, metrics, readyz, until } from '../support/probes.ts';
import { startService, type TestService } from '../support/service.ts';
import { recordingOpenings } from '../support/store-openings.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

test('the dispatcher thread sends the webhooks; its checks and metrics show through the parent', async (t) => {
  const thread = roleThread('dispatcher');
  const s = await startService(t, { threads: { dispatcher: thread } });
  t.truthy(thread.worker, 'a thread runs');
  // 4 MB semi-spaces: with 1 MB ones, deliveries in flight were promoted and full GCs held them up.
  t.is(thread.worker?.resourceLimits?.maxYoungGenerationSizeMb, 12);
  const receiver = await startReceiver(t);
  await seedCatalog(s);
  await createWebhook(s, receiver.url, [1]);
  const cart = await createCart(s);
  await addItem(s, cart);
  await checkOut(s, cart);
  const [first] = await receiver.waitFor(1);
  t.is(first.body.cart.uuid, cart.uuid);
  t.is(first.body.cart.status, 'verification');

  const ready = await readyz(s);
  t.is(ready.code, 200);
  t.like(ready.checks, {
    dispatcher_thread: 'ok',
    'dispatcher:webhook_deliveries_restored': 'ok',
    'dispatcher:subscription:webhook_fan_out': 'ok',
    'subscription:projection_carts': 'ok',
  });
  t.false('webhook_deliveries_restored' in ready.checks, 'not run on the API thread');
  // The attempt is counted once its result is recorded, just after the receiver answered.
  await until('the attempt is counted', async () =>
    /^pds_webhook_attempts_total\{outcome="delivered"\} 1$/m.test(await metrics(s)),
  );
  const text = await metrics(s);
  t.regex(text, /^pds_subscription_up\{subscription="webhook_fan_out"\} 1$/m);
  t.regex(text, /^pds_thread_restarts_total\{thread="dispatcher"\} 0$/m);
});

/** Whether the webhook's deliveries, as the admin API lists them, are all `delivered`. */
async function allDelivered(s: TestService, webhookId: string, count: number): Promise<boolean> {
  const res = await s.call('GET', `/admin/v1/webhooks/${webhookId}/deliveries?status=delivered`);
  return ((await res.json()) as { deliveries: unknown[] }).deliveries.length === count;
}

test('a dispatcher thread that dies is started again and delivers what was written while it was down', async (t) => {
  const thread = roleThread('dispatcher');
  const s = await startService(t, { threads: { dispatcher: thread } });
  const receiver = await startReceiver(t);
  await seedCatalog(s);
  const webhook = await createWebhook(s, receiver.url, [1]);
  const cart = await createCart(s);
  await addItem(s, cart);
  await checkOut(s, cart);
  await receiver.waitFor(1);
  // Its result recorded: a thread killed before that would hold the cart's queue until the attempt's
  // lease ran out (the next test).
  await until('the first delivery is recorded', () => allDelivered(s, webhook.id, 1));

  const dead = await killThread(thread);
  // Down: not ready, and the API still takes writes.
  const down = await readyz(s);
  t.is(down.code, 503);
  t.is(down.checks.dispatcher_thread, 'failing');
  await move(s, cart, 'preparing');

  await until('the thread is back', async () => thread.restarts === 1 && (await readyz(s)).code === 200);
  t.not(thread.worker, dead);
  const received = await receiver.waitFor(2);
  t.deepEqual(
    received.map((w) => w.body.cart.status),
    ['verification', 'preparing'],
  );
  t.regex(await metrics(s), /^pds_thread_restarts_total\{thread="dispatcher"\} 1$/m);
});

test('a thread killed during an attempt: the next thread sends it again when its lease runs out, same webhook id', async (t) => {
  const thread = roleThread('dispatcher');
  // A lease of 2 × 500 ms + 1 s (dispatcher/delivery-worker.ts).
  const s = await startService(t, { threads: { dispatcher: thread }, env: { PDS_WEBHOOK_TIMEOUT: '500ms' } });
  const receiver = await startReceiver(t);
  receiver.script({ hang: true });
  await seedCatalog(s);
  const webhook = await createWebhook(s, receiver.url, [1]);
  const cart = await createCart(s);
  await addItem(s, cart);
  await checkOut(s, cart);
  const [hung] = await receiver.waitFor(1);

  const dead = thread.worker;
  if (!dead) return t.fail('no thread');
  await dead.terminate();
  await until('the first delivery is recorded', () => allDelivered(s, webhook.id, 1), 20_000);
  const received = await receiver.waitFor(2);
  const id = hung.headers['x-service-webhook-id'];
  t.truthy(id);
  t.is(received[1].headers['x-service-webhook-id'], id);
  t.is(received[1].body.cart.uuid, cart.uuid);
  t.is(thread.restarts, 1);
});

test('a stop ends the thread after its components stopped', async (t) => {
  const thread = roleThread('dispatcher');
  const s = await startService(t, { threads: { dispatcher: thread } });
  const worker = thread.worker;
  if (!worker) return t.fail('no thread');
  const code = new Promise<number>((resolve) => worker.once('exit', resolve));
  await s.service.stop();
  t.is(await code, 0, 'ended by itself, not terminated');
  t.falsy(thread.worker);
  t.is(thread.restarts, 0);
});

test('two delivery workers (PDS_WEBHOOK_DELIVERY_THREADS=2): a cart event reaches the subscriptions of both shards, each sent by its thread', async (t) => {
  const { dispatcher, deliveries } = dispatcherThreads(2);
  t.is(deliveries.length, 1);
  const s = await startService(t, {
    threads: { dispatcher, deliveries },
    env: { PDS_WEBHOOK_DELIVERY_THREADS: '2' },
  });
  t.is(deliveries[0].worker?.threadId !== undefined, true, 'a delivery thread runs');
  const receiver = await startReceiver(t);
  await seedCatalog(s);
  const hooks: string[] = [];
  while (![0, 1].every((shard) => hooks.some((id) => shardOf(id, 2) === shard)))
    hooks.push((await createWebhook(s, receiver.url, [1])).id);
  const cart = await createCart(s);
  await addItem(s, cart);
  await checkOut(s, cart);
  const received = await receiver.waitFor(hooks.length);
  t.is(new Set(received.map((w) => w.headers['x-service-webhook-id'])).size, hooks.length, 'one each');
  for (const w of received) t.is(w.body.cart.uuid, cart.uuid);
  for (const hook of hooks) await until('delivered', () => allDelivered(s, hook, 1));
  // Each shard's attempts were started by one worker, another than the other shard's.
  const store = await s.openStore();
  t.teardown(() => store.close());
  const started = await store.readAll({ filter: { eventTypes: ['WebhookDeliveryAttemptStarted'] } });
  t.is(started.length, hooks.length);
  const senders = [0, 1].map(
    (shard) =>
      new Set(
        started
          .filter((e) => shardOf(e.streamId.slice('webhookdelivery-'.length).split('_')[0], 2) === shard)
          .map((e) => (e.data as { dispatcher_id: string }).dispatcher_id),
      ),
  );
  t.is(senders[0].size, 1);
  t.is(senders[1].size, 1);
  t.notDeepEqual([...senders[0]], [...senders[1]], 'the two shards were sent by two workers');

  const ready = await readyz(s);
  t.is(ready.code, 200);
  t.like(ready.checks, {
    dispatcher_thread: 'ok',
    delivery_2_thread: 'ok',
    'dispatcher:webhook_deliveries_restored': 'ok',
    'delivery-2:webhook_deliveries_restored': 'ok',
    'delivery-2:subscription:webhook_delivery_worker_2_of_2': 'ok',
    'dispatcher:subscription:webhook_delivery_worker_1_of_2': 'ok',
  });
  await until('every attempt is counted', async () =>
    new RegExp(`^pds_webhook_attempts_total\\{outcome="delivered"\\} ${hooks.length}$`, 'm').test(
      await metrics(s),
    ),
  );
  const text = await metrics(s);
  // Summed over the threads; a subscription both follow is up once, not twice.
  t.regex(text, /^pds_webhook_deliveries_pending 0$/m);
  t.regex(text, /^pds_subscription_up\{subscription="webhook_subscription_tracker"\} 1$/m);
  t.regex(text, /^pds_thread_restarts_total\{thread="delivery-2"\} 0$/m);
});

test('a delivery thread that dies is started again and sends its shard’s webhooks written while it was down', async (t) => {
  const { dispatcher, deliveries } = dispatcherThreads(2);
  const s = await startService(t, {
    threads: { dispatcher, deliveries },
    env: { PDS_WEBHOOK_DELIVERY_THREADS: '2' },
  });
  const receiver = await startReceiver(t);
  await seedCatalog(s);
  let hook = await createWebhook(s, receiver.url, [1]);
  // A subscription of the delivery thread's shard (the second).
  while (shardOf(hook.id, 2) !== 1) {
    t.true((await s.call('DELETE', `/admin/v1/webhooks/${hook.id}`)).ok);
    hook = await createWebhook(s, receiver.url, [1]);
  }
  const [thread] = deliveries;
  const dead = await killThread(thread);
  t.is((await readyz(s)).checks.delivery_2_thread, 'failing');
  const cart = await createCart(s);
  await addItem(s, cart);
  await checkOut(s, cart);

  await until('the thread is back', async () => thread.restarts === 1 && (await readyz(s)).code === 200);
  t.not(thread.worker, dead);
  const [received] = await receiver.waitFor(1);
  t.is(received.body.cart.uuid, cart.uuid);
  await until('delivered', () => allDelivered(s, hook.id, 1));
  t.regex(await metrics(s), /^pds_thread_restarts_total\{thread="delivery-2"\} 1$/m);
});

test('a delivery thread opens dispatcher.db with a small page cache of its own; the dispatcher thread with its own 8 MiB, not the read store’s', async (t) => {
  const config = parseConfig({ PDS_DATA_DIR: '/tmp/pds-unused' });
  const { ctx, opened } = recordingOpenings(config);
  const [state] = deliveryComponents({ index: 1, count: 2 });
  await state.start(ctx);
  t.teardown(() => state.stop());
  const ofDispatcher = dispatcherState({});
  await ofDispatcher.start(ctx);
  t.teardown(() => ofDispatcher.stop());
  t.deepEqual(opened, [
    { url: config.dispatcherStoreUrl, cacheMiB: DELIVERY_THREAD_CACHE_MIB },
    { url: config.dispatcherStoreUrl, cacheMiB: DISPATCHER_STORE_CACHE_MIB },
  ]);
  t.is(DELIVERY_THREAD_CACHE_MIB, 4);
  t.is(DISPATCHER_STORE_CACHE_MIB, 8);
});

test('only a dispatcher process of the split deployment leases delivery shards; role all’s dispatcher and delivery threads keep their own, on EventStoreDB too', (t) => {
  const on = (role: 'dispatcher' | 'all', embedded: boolean) =>
    ({ role, config: { embedded } }) as Parameters<typeof leasesShards>[0];
  t.true(leasesShards(on('dispatcher', false), true), 'role dispatcher on EventStoreDB');
  t.false(leasesShards(on('dispatcher', false), false), 'a thread of role all on EventStoreDB');
  t.false(leasesShards(on('dispatcher', true), false), 'a thread of role all on the embedded files');
  t.false(leasesShards(on('all', false), true), 'role all without threads: one worker');
});
