/**
 * The black-box end-to-end suite: what a partner and an operator do with a deployment, over HTTP only.
 * A runner passes a lazily resolved target (base URL, operator token, the host name the service calls
 * back on); the suite sets up its own catalog, partners and subscriptions (./world.ts) and checks:
 *
 * - the health endpoints (docs/operations.md, "Health");
 * - bad input answered with RFC 9457 problems, 4xx and never 500 (docs/partner-api.md, "Errors and limits");
 * - a cart driven through the platform API, read back by its store operator, a curbside arrival, and
 *   the signed `cart_status_updated` webhooks of its moves (docs/webhooks.md, "Requests");
 * - menu products through the brand, store operator and store menu feed APIs;
 * - that no partner sees another's data (docs/partner-api.md, "Keys and scope").
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { cartSeenBy, cartWithItem, checkOut, deliveriesOf, identify, move, webhookFor } from './carts.ts';
import {
  ADMIN,
  assertProblem,
  BRAND,
  type Client,
  client,
  eventually,
  type Json,
  MENU_FEED,
  PLATFORM,
  page,
  STORE,
  settles,
  type Target,
} from './http.ts';
import { isolation } from './isolation.ts';
import type { Delivery } from './receiver.ts';
import { cleanUp, createWorld, type World } from './world.ts';

/** Per test: a first test also waits for the target (an embedded start, say) and the world's set-up. */
const TEST_TIMEOUT_MS = 180_000;

export function registerSuite(resolveTarget: () => Promise<Target>): void {
  let api: Promise<Client> | undefined;
  let world: Promise<World> | undefined;
  const connect = () => {
    api ??= resolveTarget().then(client);
    return api;
  };
  const setUp = async () => {
    world ??= connect().then(createWorld);
    return { api: await connect(), world: await world };
  };

  test('health: /healthz, /readyz and /metrics', async (t) => {
    t.timeout(TEST_TIMEOUT_MS);
    await health(t, await connect());
  });

  test('bad input is an RFC 9457 problem, 4xx and never 500', async (t) => {
    t.timeout(TEST_TIMEOUT_MS);
    const { api: a, world: w } = await setUp();
    await badInput(t, a, w);
  });

  test('a cart through the platform API: read back by its store operator, a curbside arrival, signed webhooks', async (t) => {
    t.timeout(TEST_TIMEOUT_MS);
    const { api: a, world: w } = await setUp();
    await cartFlow(t, a, w);
  });

  test('menu products through the brand, store operator and store menu feed APIs', async (t) => {
    t.timeout(TEST_TIMEOUT_MS);
    const { api: a, world: w } = await setUp();
    await menuProducts(t, a, w);
  });

  test('a partner never sees another partner’s carts, menus, reservations or webhooks', async (t) => {
    t.timeout(TEST_TIMEOUT_MS);
    const { api: a, world: w } = await setUp();
    await isolation(t, a, w);
  });

  // Serial, so that a runner's own serial after-hook (stopping what it started) runs after this one.
  test.serial.after.always('remove the subscriptions and revoke the keys the suite made', async (t) => {
    const w = await world?.catch(() => undefined);
    if (!w || !api) return;
    t.deepEqual(await cleanUp(await api, w), [], 'every clean-up request succeeded');
  });
}

async function health(t: ExecutionContext, a: Client): Promise<void> {
  const live = await a.call('GET', '/healthz', { auth: null });
  t.is(live.status, 200, live.text);
  t.is(live.body.status, 'ok');
  const ready = await a.call('GET', '/readyz', { auth: null });
  t.is(ready.status, 200, ready.text);
  t.is(ready.body.status, 'ready');
  const metrics = await a.call('GET', '/metrics', { auth: null, headers: { accept: 'text/plain' } });
  t.is(metrics.status, 200);
  t.regex(metrics.headers.get('content-type') ?? '', /^text\/plain/);
  t.regex(metrics.text, /^# TYPE http_request_duration_seconds histogram$/m);
  t.regex(metrics.text, /^http_request_duration_seconds_count\{[^}]*route="[^"]+"[^}]*\} \d+$/m);
}

async function badInput(t: ExecutionContext, a: Client, w: World): Promise<void> {
  const c = w.catalog;
  const carts = `${PLATFORM}/carts`;
  const wrong = await a.call('POST', carts, {
    body: { store_id: 'one', colour: 'red', source: { channel: 'embedded', partner_id: null } },
  });
  assertProblem(t, 'a wrong type', wrong, 422, 'validation_failed', 'store_id');
  assertProblem(t, 'an unknown field', wrong, 422, 'validation_failed', 'colour');
  assertProblem(
    t,
    'malformed JSON',
    await a.call('POST', carts, { body: '{"store_id": ' }),
    400,
    'malformed_json',
  );
  const text = await a.call('POST', carts, { body: 'store_id=1', headers: { 'content-type': 'text/plain' } });
  assertProblem(t, 'another content type', text, 415);
  const valid = { store_id: c.storeA, source: { channel: 'headless', partner_id: null } };
  assertProblem(t, 'no operator token', await a.call('POST', carts, { auth: null, body: valid }), 401);
  const notOperator = await a.call('POST', carts, { auth: 'not-the-operator-token-0123456789', body: valid });
  assertProblem(t, 'a wrong operator token', notOperator, 401);
  const item = { menu_product_id: c.menuAatA, price_id: 'gram', count: 1 };
  const unknown = await a.call('POST', `${carts}/${randomUUID()}/items`, { body: item });
  assertProblem(t, 'an unknown cart', unknown, 404);
  const tooMany = await a.call('POST', `${carts}/${randomUUID()}/items`, { body: { ...item, count: 101 } });
  assertProblem(t, 'a count over the limit', tooMany, 422, 'validation_failed', 'count');
  const uuid = await cartWithItem(a, c.storeA, w.operatorA.partner_id, c.menuAatA);
  const skip = await a.call('POST', `${carts}/${uuid}/status`, { body: { status: 'finished' } });
  assertProblem(t, 'a move the cart may not make', skip, 409, 'invalid_status_move');

  const key = w.operatorA.api_key;
  assertProblem(t, 'no API key', await a.get(null, `${STORE}/menu_products`), 401);
  assertProblem(
    t,
    'an unknown API key',
    await a.get(`pds_key_${'A'.repeat(43)}`, `${STORE}/menu_products`),
    401,
  );
  const brandKey = await a.get(w.brandA.api_key, `${STORE}/menu_products`);
  assertProblem(t, 'a key of another kind', brandKey, 403, 'wrong_partner_kind');
  assertProblem(t, 'a misspelt filter', await a.get(key, `${STORE}/menu_products?colour=red`), 400);
  assertProblem(t, 'a limit of 0', await a.get(key, `${STORE}/menu_products?limit=0`), 400);
  assertProblem(t, 'a cursor never given out', await a.get(key, `${STORE}/carts?cursor=%%%`), 400);
  assertProblem(t, 'a hex path id', await a.get(key, `${STORE}/menu_products/0x10`), 404);
  assertProblem(t, 'a route that does not exist', await a.get(null, '/partner/nope/v1/things'), 404);
}

/** A delivery as docs/webhooks.md, "Requests" describes it, about cart `uuid` at `storeId`. */
function checkDelivery(t: ExecutionContext, d: Delivery, uuid: string, storeId: number): void {
  t.is(d.refused, null);
  t.regex(String(d.headers['content-type']), /^application\/json/);
  t.is(d.headers['user-agent'], 'PartnerDataService-Webhooks/1.0');
  t.regex(String(d.headers['x-service-webhook-id']), /^\S+$/);
  t.regex(String(d.headers['x-service-delivery-attempt']), /^[1-9]\d*$/);
  t.is(d.body.webhook_event, 'cart_status_updated');
  t.like(d.body.cart, { uuid, store_id: storeId, amount: 20, reservation_mode: 'curbside' });
  t.is(d.body.cart.customer_email_address, 'e2e@example.com');
  t.is(d.body.cart.products.length, 1);
  t.is(d.body.cart.source, undefined, 'the webhook cart has no source');
}

async function cartFlow(t: ExecutionContext, a: Client, w: World): Promise<void> {
  const { catalog: c, operatorA, receiver, hooksA } = w;
  const uuid = await cartWithItem(a, c.storeA, operatorA.partner_id, c.menuAatA, 2);
  await identify(a, uuid);
  const checkedOut = await checkOut(a, uuid, 'curbside');
  t.is(checkedOut.cart.status, 'verification');

  checkDelivery(t, await webhookFor(receiver, hooksA.path, uuid, 'verification'), uuid, c.storeA);
  const listed = await cartSeenBy(a, operatorA.api_key, `${STORE}/carts`, uuid, 'verification');
  t.like(listed, {
    store_id: c.storeA,
    amount: 20,
    reservation_mode: 'curbside',
    customer_email_address: 'e2e@example.com',
    source: { channel: 'embedded', partner_id: operatorA.partner_id },
  });
  t.like(listed.products[0], { product_id: c.productA, price_id: 'gram', count: 2, checkout_price: 10 });

  // The store's own arrival form decides which fields are accepted (docs/partner-api.md, "The curbside arrival").
  const arrivalPath = `${STORE}/reservations/${uuid}/curbside_arrival`;
  const form = { vehicle_make: 'Subaru', vehicle_color: 'green', parking_spot: '4' };
  const auth = operatorA.api_key;
  const odd = await a.call('POST', arrivalPath, { auth, body: { ...form, shoe_size: '9' } });
  assertProblem(t, 'a field the arrival form does not ask', odd, 422);
  const once = {
    auth,
    body: { ...form, notes: 'by the blue door' },
    headers: { 'idempotency-key': randomUUID() },
  };
  const arrived = await a.call('POST', arrivalPath, once);
  t.is(arrived.status, 201, arrived.text);
  t.like(arrived.body.curbside_arrival, { reservation_uuid: uuid, store_id: c.storeA });
  const replayed = await a.call('POST', arrivalPath, once);
  t.is(replayed.status, 201, replayed.text);
  t.is(replayed.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(replayed.body, arrived.body);

  // The operator's audit trail names the partner as the arrival's actor (docs/write-side.md, "Auditors").
  const history = await a.write('GET', `${ADMIN}/carts/${uuid}/history`);
  const arrivals = (history.events as Json[]).filter((e) => e.type === 'CurbsideArrivalPosted');
  t.is(arrivals.length, 1, 'the replay appended nothing');
  t.like(arrivals[0].actor, { type: 'partner', id: operatorA.partner_id });

  const moves = ['preparing', 'ready_for_pickup', 'finished'];
  for (const status of moves) await move(a, uuid, status);
  for (const status of moves)
    checkDelivery(t, await webhookFor(receiver, hooksA.path, uuid, status), uuid, c.storeA);
  // In event order, one queue per subscription and cart; at least once, so a repeated webhook id counts
  // once (docs/webhooks.md, "Order, isolation, durability").
  const byId = new Map<string, string>();
  for (const d of deliveriesOf(receiver, hooksA.path, uuid)) {
    if (!byId.has(String(d.headers['x-service-webhook-id']))) {
      byId.set(String(d.headers['x-service-webhook-id']), d.body.cart.status);
    }
  }
  t.deepEqual([...byId.values()], ['verification', ...moves]);

  const closed = await a.call('POST', arrivalPath, { auth, body: form });
  assertProblem(t, 'an arrival after the pickup', closed, 409, 'reservation_closed');
  const finished = await cartSeenBy(a, auth, `${STORE}/carts?status=finished`, uuid, 'finished');
  t.is(finished.abandoned_at, null);
}

async function menuProducts(t: ExecutionContext, a: Client, w: World): Promise<void> {
  const c = w.catalog;
  const menu = (key: string, path: string) => async () =>
    page(await a.get(key, path), 'menu_products')
      .map((m) => m.id as number)
      .sort((x, y) => x - y);
  // Catalog read models trail the platform writes: each read waits until it shows what was written.
  const seen = async (what: string, key: string, path: string, expected: number[]) =>
    t.deepEqual(await settles(what, menu(key, path), expected), expected);
  const { operatorA, feedA, brandA, brandB } = w;
  await seen('store A’s menu, by its operator', operatorA.api_key, `${STORE}/menu_products`, [
    c.menuAatA,
    c.menuBatA,
  ]);
  await seen(
    'store A’s menu, by its feed',
    feedA.api_key,
    `${MENU_FEED}/menu_products?store_id=${c.storeA}`,
    [c.menuAatA, c.menuBatA],
  );
  await seen('brand A at store A', brandA.api_key, `${BRAND}/stores/${c.storeA}/menu_products`, [c.menuAatA]);
  await seen('brand A at store B', brandA.api_key, `${BRAND}/stores/${c.storeB}/menu_products`, [c.menuAatB]);
  await seen('brand B at store A', brandB.api_key, `${BRAND}/stores/${c.storeA}/menu_products`, [c.menuBatA]);

  const one = await a.get(operatorA.api_key, `${STORE}/menu_products/${c.menuAatA}`);
  t.is(one.status, 200, one.text);
  t.like(one.body.menu_product, {
    id: c.menuAatA,
    product_id: c.productA,
    store_id: c.storeA,
    brand_id: c.brandA,
    kind: 'flower',
    price_gram: '10.00',
    price_eighth_ounce: '35.00',
    in_stock: true,
  });
  const setting = await eventually('store A’s curbside setting', async () => {
    const r = await a.get(operatorA.api_key, `${STORE}/curbside_pickup_setting`);
    return r.body.curbside_pickup_setting?.enabled === true ? r.body.curbside_pickup_setting : undefined;
  });
  t.like(setting, { store_id: c.storeA, enabled: true });
}
