/**
 * Several dispatcher processes of the split deployment sharing the delivery shards (docs/webhooks.md,
 * "Scale"): on EventStoreDB and a MongoDB replica set in containers (`support/containers.ts`), an API,
 * a projector and two dispatcher services, as docker-compose.yml runs them. The dispatchers lease the
 * 16 shards 8/8 and the webhooks of subscriptions of every shard arrive once each; once one dispatcher
 * stops, the other holds all 16 and the next status change still reaches every subscription, in cart
 * order. It runs only where it can start containers, and says why it is skipped elsewhere (or fails,
 * under `PDS_REQUIRE_ENGINES=1`).
 */
import { randomBytes } from 'node:crypto';
import test from 'ava';
import { addItem, checkOut, createCart, createWebhook, move, seedCatalog } from './support/cart-world.ts';
import { startEventStore, startMongoReplicaSet, withDatabase } from './support/containers.ts';
import { containersProblem, reportMissingEngine } from './support/engines.ts';
import { until } from './support/probes.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const SUITE = 'dispatchers sharing the delivery shards';
const SUBSCRIPTIONS = 6;

/** How many times the service logged `message` (its logs are JSON lines at debug level). */
const logged = (s: TestService, message: string) =>
  s
    .logs()
    .split('\n')
    .filter((line) => line.includes(`"msg":"${message}"`)).length;

const problem = await containersProblem();

if (problem !== undefined) {
  reportMissingEngine(test, SUITE, `no containers to run the split deployment: ${problem}`);
} else {
  test('two dispatcher processes hold 8 of 16 shards each, every webhook arrives once; one stops and the other takes all 16', async (t) => {
    t.timeout(10 * 60_000);
    const started = await Promise.allSettled([startEventStore(), startMongoReplicaSet()]);
    for (const engine of started) if (engine.status === 'fulfilled') t.teardown(() => engine.value.stop());
    const [esdb, mongo] = started.map((engine) => {
      if (engine.status === 'rejected') throw engine.reason;
      return engine.value;
    });
    const env = {
      PDS_EVENT_STORE: esdb.url,
      PDS_READ_STORE: withDatabase(mongo.url, 'pds'),
      PDS_OPERATOR_TOKEN: randomBytes(24).toString('base64url'),
      PDS_SECRET_KEY: randomBytes(32).toString('base64'),
      PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
    };
    const api = await startService(t, { role: 'api', env });
    await startService(t, { role: 'projector', env });
    const first = await startService(t, { role: 'dispatcher', env });
    const second = await startService(t, { role: 'dispatcher', env });
    // The first took every shard alone, then gave back what is above its share to the second.
    await until(
      'the shards split 8/8',
      () => logged(second, 'delivery shard taken') === 8 && logged(first, 'delivery shard given back') === 8,
      60_000,
    );
    t.is(logged(first, 'delivery shard taken'), 16);

    // A receiver per subscription: each one's webhooks in the order they arrived.
    const receivers = [];
    await seedCatalog(api);
    for (let i = 0; i < SUBSCRIPTIONS; i++) {
      const receiver = await startReceiver(t);
      await createWebhook(api, receiver.url, [1]);
      receivers.push(receiver);
    }
    const cart = await createCart(api);
    await addItem(api, cart);
    await checkOut(api, cart);
    for (const receiver of receivers) await receiver.waitFor(1, 60_000);

    await first.service.stop();
    await until('the second holds every shard', () => logged(second, 'delivery shard taken') === 16, 60_000);
    await move(api, cart, 'preparing');
    for (const receiver of receivers) {
      const received = await receiver.waitFor(2, 60_000);
      t.deepEqual(
        received.map((w) => w.body.cart.status),
        ['verification', 'preparing'],
        'each status change once, in order',
      );
    }
  });
}
