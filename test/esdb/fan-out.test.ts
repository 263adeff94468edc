/**
 * The concurrent fan-out on EventStoreDB (dispatcher/fan-out-schedule.ts;
 * docs/webhooks.md, "How a delivery flows"; docs/webhooks.md, "Order, isolation, durability"): a
 * cart event owed to more subscriptions than the fan-out has under way at once (`FAN_OUT_PARALLEL`)
 * is scheduled with its appends sent together over the client's one connection, and every guarantee
 * holds when one append fails in the middle.
 * An api process and a dispatcher process run on the engine every engine suite finds the same way
 * (`test/support/engines.ts`); the dispatcher's store is wrapped in the fault-injecting store
 * (`test/support/faulty-store.ts`). Of each of a cart's two status changes, the 17th `Scheduled` append
 * fails: for the first before it is written (a server that refused it), for the second after (the
 * write done, its answer lost, as when the adapter's append times out). Either way the handling is
 * tried again and writes only what is missing, and each subscription gets each of the cart's events
 * once, with its name-based id, in the cart's order. Its subscriptions cover a store id of its own, so
 * a shared server's other subscriptions are never owed its cart. Without an engine it is reported as
 * skipped (or failed under `PDS_REQUIRE_ENGINES=1`).
 */
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { FAN_OUT_PARALLEL } from '../../dispatcher/fan-out-schedule.ts';
import { manualClock } from '../../domain/clock.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import { createEsdbEventStore } from '../../eventstore/esdb.ts';
import type { EventStore } from '../../eventstore/port.ts';
import {
  addItem,
  checkOut,
  createCart,
  createWebhook,
  idle,
  move,
  seedCatalog,
} from '../support/cart-world.ts';
import { ENGINE_STARTUP_MS } from '../support/containers.ts';
import { scheduledDeliveryIds } from '../support/delivery-worker.ts';
import { type Engine, engineAccess, reportMissingEngine } from '../support/engines.ts';
import { type FaultyStore, faultyStore } from '../support/faulty-store.ts';
import { until } from '../support/probes.ts';
import { startService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const SUITE = 'EventStoreDB fan-out';
/** More than the fan-out has under way at once, so some schedules wait for a place. */
const SUBSCRIPTIONS = 300;
/** The `Scheduled` append of each cart event that fails. */
const FAILING = 17;

const access = await engineAccess('eventstore');

if (access.missing !== undefined) {
  reportMissingEngine(test, SUITE, access.missing);
} else {
  let running: Engine | undefined;

  test.before(async (t) => {
    t.timeout(ENGINE_STARTUP_MS);
    running = await access.start();
  });
  test.after.always(async () => {
    await running?.stop();
  });

  test('esdb: an append failing in the middle of a fan-out to 300 subscriptions, refused or written with its answer lost: the cart event is tried again, and each subscription gets each of the cart’s events once, with its id, in order', async (t) => {
    t.timeout(5 * 60_000);
    t.true(SUBSCRIPTIONS > FAN_OUT_PARALLEL);
    const url = running?.url;
    if (!url) throw new Error('EventStoreDB is not running: the setup hook failed');
    const dir = await mkdtemp(path.join(tmpdir(), 'pds-esdb-fan-out-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    // Both processes of the split deployment need the same secrets (docs/operations.md).
    const env = {
      PDS_EVENT_STORE: url,
      PDS_READ_STORE: 'memory',
      PDS_SECRET_KEY: randomBytes(32).toString('base64'),
      PDS_OPERATOR_TOKEN: randomBytes(24).toString('base64url'),
      PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
    };
    const storeId = randomInt(1_000_000, 2 ** 40);
    const receiver = await startReceiver(t);
    const clock = manualClock(new Date());
    const api = await startService(t, { role: 'api', dataDir: dir, clock, env });
    await seedCatalog(api, [storeId]);
    const hooks: string[] = [];
    // A path per subscription, so that the receiver tells them apart.
    for (let i = 0; i < SUBSCRIPTIONS; i++)
      hooks.push((await createWebhook(api, `${receiver.url}/${i}`, [storeId])).id);

    let faulty: FaultyStore | undefined;
    /** The schedules the dispatcher appended (or tried to), by cart event. */
    const tried = new Map<string, number>();
    /** How the `FAILING`th append of the next cart event fails, in the order the cart's events come. */
    const failures: Array<'before' | 'after'> = ['before', 'after'];
    const failedOn = new Map<string, 'before' | 'after'>();
    /** `Scheduled` appends under way at once: now, and at most. */
    const appending = { now: 0, most: 0 };
    const dispatcher = await startService(t, {
      role: 'dispatcher',
      dataDir: dir,
      clock,
      env,
      wrapStore: (inner) => {
        const store = faultyStore(inner);
        const append = store.append;
        store.append = (streamId, events, options) => {
          if (events[0]?.type !== 'WebhookDeliveryScheduled') return append(streamId, events, options);
          const source = (events[0].data as { source_event_id: string }).source_event_id;
          const n = (tried.get(source) ?? 0) + 1;
          tried.set(source, n);
          const when = n === FAILING ? failures.shift() : undefined;
          if (when) {
            failedOn.set(source, when);
            store.failAppends(1, when);
          }
          appending.now += 1;
          appending.most = Math.max(appending.most, appending.now);
          return append(streamId, events, options).finally(() => {
            appending.now -= 1;
          });
        };
        faulty = store;
        return store;
      },
    });

    const cart = await createCart(api, storeId);
    await addItem(api, cart);
    await checkOut(api, cart);
    // Written at once: the fan-out may hold both, and handles the cart's second only after its first,
    // so the first's 17th append is the one that fails before it is written.
    await move(api, cart, 'preparing');
    const store: EventStore = createEsdbEventStore(url);
    t.teardown(() => store.close());
    const cartEvents = (await store.readStream(`cart-${cart.uuid}`)).filter(
      (e) => e.type === 'CartStatusChanged',
    );
    t.is(cartEvents.length, 2);

    // This cart's webhooks only: on a shared server, a delivery left pending by an earlier run may
    // find a receiver on its old port.
    const received = () => receiver.received.filter((r) => r.body?.cart?.uuid === cart.uuid);
    // The retries' pauses and the leases are on the dispatcher's clock: moved on by a second per look.
    await until(
      `${2 * SUBSCRIPTIONS} webhooks received`,
      async () => {
        clock.advance(1_000);
        await dispatcher.tick();
        return received().length >= 2 * SUBSCRIPTIONS;
      },
      180_000,
    );
    await idle(dispatcher, 1_000);
    t.is(faulty?.injected.failedAppends, 2, 'one append failed in each of the two fan-outs');
    t.deepEqual(
      cartEvents.map((e) => failedOn.get(e.id)),
      ['before', 'after'],
    );
    t.deepEqual(
      cartEvents.map((e) => tried.get(e.id)),
      [SUBSCRIPTIONS + 1, SUBSCRIPTIONS],
      'each fan-out tried again wrote only what was missing: the refused one again, the one written with its answer lost not again',
    );

    t.log(`${appending.most} Scheduled appends under way at once, at most`);
    t.true(
      appending.most > 1 && appending.most <= FAN_OUT_PARALLEL,
      `${appending.most} appends under way at once: sent together, within the fan-out's bound`,
    );
    t.is(received().length, 2 * SUBSCRIPTIONS, 'nothing more arrived');
    for (const [i, hook] of hooks.entries()) {
      const ids = cartEvents.map((e) => delivery.deliveryId(hook, e.id));
      t.deepEqual(
        await scheduledDeliveryIds(store, hook, cart.uuid),
        ids,
        `subscription ${i}: one delivery per cart event, in the cart's order`,
      );
      t.deepEqual(
        received()
          .filter((r) => r.path === `/hooks/${i}`)
          .map((r) => [r.body.cart.status, r.headers['x-service-webhook-id']]),
        [
          ['verification', ids[0]],
          ['preparing', ids[1]],
        ],
        `subscription ${i}: sent once each, in the cart's order`,
      );
    }
  });
}
