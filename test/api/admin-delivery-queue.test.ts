/**
 * Where a delivery stands in its queue (api/admin-delivery-queue.ts;
 * docs/webhooks.md, "Order, isolation, durability"), at its cost: a page of deliveries waiting behind
 * the failed heads of many queues is answered from the `webhook_deliveries` read model with one query
 * for all its queues, never a read of each queue's event stream. Real service, injected clock, a dead
 * receiver, an event store and a read store that count what the page reads.
 */
import test from 'ava';
import { manualClock } from '../../domain/clock.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { WEBHOOK_DELIVERIES } from '../../projections/read-models/webhook-deliveries.ts';
import type { Collection, ReadStore } from '../../projections/read-store.ts';
import { type Json, ok, whileTicking } from '../support/admin-answers.ts';
import { addItem, checkOut, createCart, createWebhook, move, seedCatalog } from '../support/cart-world.ts';
import { startService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const ADMIN = '/admin/v1';
const QUEUES = 6;

/** What the service read while `counting` was on: delivery queue streams, and finds of `webhook_deliveries`. */
const reads = { counting: false, queueStreams: 0, deliveryFinds: 0 };

function countingStore(inner: EventStore): EventStore {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === 'readStream') {
        return (streamId: string, options?: unknown) => {
          if (reads.counting && streamId.startsWith(delivery.STREAM_PREFIX)) reads.queueStreams += 1;
          return target.readStream(streamId, options as never);
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

const counted = new WeakSet<Collection>();

/**
 * Counts the collection's reads in place: the store knows its collections by identity (a commit names
 * them), so a wrapper object would not do.
 */
function countReads(c: Collection): void {
  if (counted.has(c)) return;
  counted.add(c);
  for (const method of ['find', 'findOne', 'findByIds'] as const) {
    const read = c[method].bind(c) as (...args: unknown[]) => Promise<never>;
    Object.assign(c, {
      [method]: (...args: unknown[]) => {
        if (reads.counting) reads.deliveryFinds += 1;
        return read(...args);
      },
    });
  }
}

function countingReadStore(inner: ReadStore): ReadStore {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === 'collection') {
        return async (name: string, indexes?: never) => {
          const c = await target.collection(name, indexes);
          if (name === WEBHOOK_DELIVERIES) countReads(c);
          return c;
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

test("a page of deliveries waiting behind the failed heads of many queues: one read-model query for the page's queues, no stream read", async (t) => {
  const clock = manualClock('2026-11-27T10:00:30.000Z');
  const s = await startService(t, {
    clock,
    env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h,1h' },
    wrapStore: countingStore,
    wrapReadStore: (store, url) => (url.endsWith('read.db') ? countingReadStore(store) : store),
  });
  await seedCatalog(s);
  const dead = await startReceiver(t);
  dead.setDefault({ status: 500, body: 'down' });
  const hook = await createWebhook(s, dead.url, [1]);
  const deliveries = async (query = '') =>
    (await ok(t, await s.call('GET', `${ADMIN}/webhooks/${hook.id}/deliveries${query}`)))
      .deliveries as Json[];

  // Each cart's checkout fails; its next move waits behind it, in that cart's queue.
  const carts = [];
  for (let i = 0; i < QUEUES; i++) {
    const cart = await createCart(s);
    await addItem(s, cart);
    await checkOut(s, cart);
    carts.push(cart);
  }
  await whileTicking(s, async () =>
    (await deliveries('?status=failed')).length === QUEUES ? true : undefined,
  );
  clock.advance(1_000);
  for (const cart of carts) await move(s, cart, 'preparing');
  await whileTicking(s, async () => ((await deliveries()).length === 2 * QUEUES ? true : undefined));

  reads.counting = true;
  const page = await deliveries('?status=pending');
  reads.counting = false;
  t.is(page.length, QUEUES);
  const failed = new Map((await deliveries('?status=failed')).map((d) => [d.cart_uuid, d]));
  for (const d of page) {
    const head = failed.get(d.cart_uuid);
    t.deepEqual(d.waiting_behind, {
      delivery_id: head?.delivery_id,
      status: 'failed',
      next_attempt_at: head?.next_attempt_at,
    });
  }
  t.is(reads.queueStreams, 0, 'no queue stream read');
  t.is(reads.deliveryFinds, 2, "the page's query, and one for its queues");

  // A cart's audit: its deliveries, the second behind the first, with the same two queries.
  Object.assign(reads, { queueStreams: 0, deliveryFinds: 0, counting: true });
  const ofCart = await ok(t, await s.call('GET', `${ADMIN}/carts/${carts[0].uuid}/webhooks`));
  reads.counting = false;
  t.deepEqual(
    ofCart.deliveries.map((d: Json) => d.waiting_behind?.delivery_id ?? null),
    [null, failed.get(carts[0].uuid)?.delivery_id],
  );
  t.is(reads.queueStreams, 0);
  t.is(reads.deliveryFinds, 2);
});
