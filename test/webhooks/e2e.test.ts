/**
 * Webhooks end to end on a real service and real local receivers (docs/webhooks.md): every
 * status move of a cart reaches every covering subscription once, in order, signed (checked by an
 * independent verifier) and shaped as the specification's tables; other subscriptions get nothing.
 */
import test from 'ava';
import { manualClock } from '../../domain/clock.ts';
import {
  addItem,
  checkOut,
  createCart,
  createWebhook,
  identify,
  move,
  PICKUP_MOVES,
  seedCatalog,
  ticking,
} from '../support/cart-world.ts';
import { startService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';
import { verifyWebhook } from './verify-signature.ts';

const nowSeconds = () => Math.floor(Date.now() / 1000);

test('every status move produces one signed cart_status_updated, in order, at each covering subscription only', async (t) => {
  const s = await startService(t);
  await seedCatalog(s, [1, 2]);
  const covering = await startReceiver(t);
  const alsoCovering = await startReceiver(t);
  const otherStore = await startReceiver(t);
  const abandonOnly = await startReceiver(t);
  const a = await createWebhook(s, covering.url, [1]);
  const b = await createWebhook(s, alsoCovering.url, [1, 2], ['cart_status_updated']);
  await createWebhook(s, otherStore.url, [2]);
  await createWebhook(s, abandonOnly.url, [1], ['cart_abandoned']);

  const cart = await createCart(s, 1);
  await addItem(s, cart);
  await identify(s, cart);
  await checkOut(s, cart);
  for (const status of PICKUP_MOVES)
    await move(s, cart, status, status === 'with_review' ? { rating: 4 } : {});
  const expected = ['verification', ...PICKUP_MOVES];

  for (const [receiver, secret] of [
    [covering, a.secret],
    [alsoCovering, b.secret],
  ] as const) {
    const got = await receiver.waitFor(expected.length);
    t.deepEqual(
      got.map((r) => r.body.cart.status),
      expected,
    );
    const ids = new Set<string>();
    for (const r of got) {
      t.deepEqual(verifyWebhook(r.headers, r.raw, secret, nowSeconds()), { valid: true });
      t.is(r.headers.authorization, 'Bearer receiver-token-1');
      t.is(r.headers['content-type'], 'application/json');
      t.is(r.headers['x-service-delivery-attempt'], '1');
      ids.add(r.headers['x-service-webhook-id'] as string);
      t.is(r.body.webhook_event, 'cart_status_updated');
      t.deepEqual(Object.keys(r.body).sort(), ['cart', 'webhook_event']);
      t.like(r.body.cart, {
        uuid: cart.uuid,
        store_id: 1,
        store_name: 'Store 1',
        amount: 20,
        reservation_mode: 'pickup',
        customer_email_address: 'ana@example.com',
        customer_phone_number: '+14155550100',
        customer_name: 'Ana Lee',
      });
      t.regex(r.body.cart.created_at, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
      t.is(r.body.cart.products.length, 1);
      t.like(r.body.cart.products[0], {
        name: 'Blue Dream 3.5g',
        brand: 'Brand One',
        count: 2,
        checkout_price: 10,
      });
    }
    t.is(ids.size, expected.length, 'one webhook id per event');
  }
  // The last body was rendered at the with_review move: the rating is in it, and not in earlier ones.
  t.is(covering.received.at(-1)?.body.cart.rating, 4);
  t.is(covering.received[0].body.cart.rating, 0);

  // Give stray deliveries a chance to show up, then check nobody else got anything.
  await new Promise((r) => setTimeout(r, 300));
  t.is(covering.received.length, expected.length);
  t.is(otherStore.received.length, 0);
  t.is(abandonOnly.received.length, 0);

  const metrics = await (await fetch(`${s.base}/metrics`)).text();
  t.regex(metrics, /pds_webhook_attempts_total\{outcome="delivered"\} 10\b/);
  t.regex(metrics, /pds_webhook_attempt_duration_seconds_count\{outcome="delivered"\} 10\b/);
  t.regex(metrics, /pds_webhook_deliveries_pending 0\b/);
  t.regex(metrics, /pds_webhook_oldest_pending_seconds 0\b/);
});

test('an idle cart produces exactly one cart_abandoned with the docs/webhooks.md shape', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: { PDS_ABANDON_AFTER: '6h' } });
  await seedCatalog(s, [1]);
  const receiver = await startReceiver(t);
  const hook = await createWebhook(s, receiver.url, [1]);
  const cart = await createCart(s, 1);
  await addItem(s, cart, 3);
  await identify(s, cart);
  clock.advance(6 * 3_600_000 + 1_000);
  const [got] = await ticking(s, () => receiver.waitFor(1, 10_000));
  t.deepEqual(verifyWebhook(got.headers, got.raw, hook.secret, Math.floor(clock.now().getTime() / 1000)), {
    valid: true,
  });
  t.deepEqual(Object.keys(got.body).sort(), ['cart', 'customer', 'store', 'webhook_event']);
  t.deepEqual(got.body.store, {
    id: 1,
    name: 'Store 1',
    display_name: 'Store 1 Downtown',
    store_url: 'https://store1.example.com',
  });
  t.deepEqual(got.body.customer, {
    email: 'ana@example.com',
    first_name: 'Ana',
    last_name: 'Lee',
    phone_number: '+14155550100',
    DOB: '1990-04-01T00:00:00.000Z',
  });
  t.is(got.body.cart.uuid, cart.uuid);
  t.deepEqual(got.body.cart.products, [
    {
      product_id: 1,
      product_name: 'Blue Dream 3.5g',
      product_brand_name: 'Brand One',
      product_image: [],
      product_price: '10.00',
      quantity: 3,
      category: 'flower',
      subcategory: null,
      lineage: 'hybrid',
      weight_variant: 'gram',
    },
  ]);
  clock.advance(6 * 3_600_000);
  for (let i = 0; i < 5; i++) {
    await s.tick();
    await new Promise((r) => setTimeout(r, 100));
  }
  t.is(receiver.received.length, 1, 'exactly one cart_abandoned');
});
