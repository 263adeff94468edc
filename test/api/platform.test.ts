/**
 * The platform write API (`/platform/v1`) end to end, against a real service on a temporary embedded
 * store: every route of docs/partner-api.md' platform table, cart pricing, refusals (problem documents, nothing
 * appended), Idempotency-Key, concurrent writers on one cart and conditional writes (If-Match).
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import type { ProblemBody } from '../../api/http.ts';
import type { BrandState } from '../../domain/brand.ts';
import type * as cartDomain from '../../domain/cart.ts';
import type { MenuProductRecord } from '../../domain/menu-product.ts';
import type { ProductRecord } from '../../domain/product.ts';
import type { ReviewRecord } from '../../domain/review.ts';
import type { SpecialRecord } from '../../domain/special.ts';
import type { CurbsidePickupSettingRecord, StoreRecord } from '../../domain/store.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { startService, type TestService } from '../support/service.ts';

const P = '/platform/v1';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type PartnerCart = ReturnType<typeof cartDomain.toPartnerCart>;
type BrandRecord = Omit<Extract<BrandState, { exists: true }>, 'exists' | 'brand_id'> & { id: number };
type Problem = ProblemBody & { allowed?: string[]; current_revision?: number; [extension: string]: unknown };
interface WriteMeta {
  revision: number;
  position: number;
}
interface Reply<T> {
  status: number;
  headers: Headers;
  body: T;
}

/** One request; the body parsed as JSON (null when there is none). */
async function send<T = WriteMeta>(
  s: TestService,
  method: string,
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
): Promise<Reply<T>> {
  const r = await s.call(method, url, body, headers);
  const text = await r.text();
  return { status: r.status, headers: r.headers, body: (text === '' ? null : JSON.parse(text)) as T };
}

/** A write that must succeed (2xx); fails the test with the problem otherwise. */
async function ok<T>(
  t: ExecutionContext,
  s: TestService,
  method: string,
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
): Promise<Reply<T & WriteMeta>> {
  const r = await send<T & WriteMeta>(s, method, url, body, headers);
  if (r.status >= 300) t.fail(`${method} ${url} answered ${r.status}: ${JSON.stringify(r.body)}`);
  return r;
}

/**
 * A successful write's answer: the status, `revision`/`position` in the body, `ETag: "<revision>"`,
 * and both equal to the stream's last event in the store.
 */
async function assertWrite(
  t: ExecutionContext,
  store: EventStore,
  r: Reply<WriteMeta>,
  status: number,
  streamId: string,
): Promise<void> {
  t.is(r.status, status, JSON.stringify(r.body));
  t.regex(r.headers.get('content-type') ?? '', /^application\/json/);
  t.true(Number.isInteger(r.body.revision) && r.body.revision >= 0);
  t.true(Number.isInteger(r.body.position) && r.body.position > 0);
  t.is(r.headers.get('etag'), `"${r.body.revision}"`);
  const [last] = await store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  t.is(r.body.revision, last.revision, `revision of ${streamId}`);
  t.is(r.body.position, last.position, `position of ${streamId}`);
}

/** RFC 9457 problem document with the service's `code`. */
function assertProblem(t: ExecutionContext, r: Reply<Problem>, status: number, code?: string): void {
  t.is(r.status, status, JSON.stringify(r.body));
  t.regex(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
  t.is(typeof r.body?.type, 'string');
  t.is(typeof r.body?.title, 'string');
  t.is(r.body?.status, status);
  t.is(typeof r.body?.detail, 'string');
  t.is(typeof r.body?.code, 'string');
  if (code !== undefined) t.is(r.body.code, code);
}

interface Refusal {
  method: string;
  url: string;
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  code?: string;
  /** Fields the problem's `errors` must name (422/400). */
  fields?: string[];
}

/** Sends a request that must be refused with a problem, and checks that nothing was appended. */
async function refused(t: ExecutionContext, s: TestService, store: EventStore, c: Refusal): Promise<Problem> {
  const before = await store.headPosition();
  const r = await send<Problem>(s, c.method, c.url, c.body, c.headers);
  const what = `${c.method} ${c.url} ${JSON.stringify(c.body) ?? ''}`.slice(0, 200);
  t.is(r.status, c.status, `${what} → ${JSON.stringify(r.body)}`);
  assertProblem(t, r, c.status, c.code);
  for (const field of c.fields ?? []) {
    t.true(
      (r.body.errors ?? []).some((e) => e.field === field),
      `${what}: errors name ${field}: ${JSON.stringify(r.body.errors)}`,
    );
  }
  t.is(await store.headPosition(), before, `${what}: nothing appended`);
  return r.body;
}

// ---- seeding -----------------------------------------------------------------------------------

const storeBody = (over: Record<string, unknown> = {}) => ({
  name: 'Green Door',
  address: '843 Howard St',
  city: 'San Francisco',
  state: 'CA',
  zip: '94103',
  lat: 37.7816,
  long: -122.4048,
  pickup: true,
  delivery: true,
  ...over,
});
const productBody = (brandId: number, over: Record<string, unknown> = {}) => ({
  name: 'Blue Dream 3.5g',
  brand_id: brandId,
  kind: 'flower',
  lineage: 'hybrid',
  ...over,
});
const cartBody = (storeId: number, over: Record<string, unknown> = {}) => ({
  store_id: storeId,
  source: { channel: 'headless', partner_id: 'p-1' },
  ...over,
});

async function seedStore(
  t: ExecutionContext,
  s: TestService,
  id: number,
  over: Record<string, unknown> = {},
) {
  await ok(t, s, 'PUT', `${P}/stores/${id}`, storeBody(over));
}
async function seedBrand(t: ExecutionContext, s: TestService, id: number, name = `Brand ${id}`) {
  await ok(t, s, 'PUT', `${P}/brands/${id}`, { name });
}
async function seedProduct(t: ExecutionContext, s: TestService, id: number, brandId: number) {
  await ok(t, s, 'PUT', `${P}/products/${id}`, productBody(brandId, { name: `Product ${id}` }));
}
async function seedMenuProduct(
  t: ExecutionContext,
  s: TestService,
  storeId: number,
  id: number,
  productId: number,
  prices: Record<string, string> = { gram: '10.00', 'eighth ounce': '35.00' },
) {
  await ok(t, s, 'PUT', `${P}/stores/${storeId}/menu_products/${id}`, { product_id: productId, prices });
}

/** Store 1 (pickup and delivery), brand 1, product 1 listed as menu product 1 at 10.00 a gram. */
async function seedCatalog(t: ExecutionContext, s: TestService): Promise<void> {
  await seedStore(t, s, 1);
  await seedBrand(t, s, 1);
  await seedProduct(t, s, 1, 1);
  await seedMenuProduct(t, s, 1, 1, 1);
}

async function createCart(t: ExecutionContext, s: TestService, storeId = 1): Promise<string> {
  const uuid = randomUUID();
  await ok(t, s, 'POST', `${P}/carts`, cartBody(storeId, { uuid }));
  return uuid;
}

const line = (c: PartnerCart, productId: number) => c.products.find((p) => p.product_id === productId);

// ---- 1. every route answers the documented shape ------------------------------------------------

test('stores and curbside pickup setting: 201 on creation, 200 on update and no-op, documented shape', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();

  const created = await ok<{ store: StoreRecord }>(
    t,
    s,
    'PUT',
    `${P}/stores/7`,
    storeBody({ working_hours: [{ day: 'monday', from: '09:00', to: '21:00' }] }),
  );
  await assertWrite(t, store, created, 201, 'store-7');
  t.is(created.body.revision, 0);
  t.deepEqual(Object.keys(created.body).sort(), ['position', 'revision', 'store']);
  t.like(created.body.store, {
    id: 7,
    name: 'Green Door',
    display_name: null,
    store_url: null,
    address: '843 Howard St',
    city: 'San Francisco',
    state: 'CA',
    zip: '94103',
    lat: 37.7816,
    long: -122.4048,
    phone: null,
    time_zone: 'America/Los_Angeles',
    recreational: true,
    medical: false,
    pickup: true,
    delivery: true,
    curbside: false,
    working_hours: [{ day: 'monday', from: '09:00', to: '21:00' }],
  });
  t.false(Number.isNaN(Date.parse(created.body.store.updated_at)));

  const updated = await ok<{ store: StoreRecord }>(
    t,
    s,
    'PUT',
    `${P}/stores/7`,
    storeBody({ display_name: 'Green Door SoMa', phone: '+1 415-555-0100' }),
  );
  await assertWrite(t, store, updated, 200, 'store-7');
  t.is(updated.body.revision, 1);
  t.is(updated.body.store.display_name, 'Green Door SoMa');
  t.deepEqual(updated.body.store.working_hours, []);

  // The same body again changes nothing: 200, same revision, nothing appended.
  const head = await store.headPosition();
  const again = await ok<{ store: StoreRecord }>(
    t,
    s,
    'PUT',
    `${P}/stores/7`,
    storeBody({ display_name: 'Green Door SoMa', phone: '+1 415-555-0100' }),
  );
  await assertWrite(t, store, again, 200, 'store-7');
  t.is(again.body.revision, 1);
  t.is(await store.headPosition(), head);

  const setting = await ok<{ curbside_pickup_setting: CurbsidePickupSettingRecord }>(
    t,
    s,
    'PUT',
    `${P}/stores/7/curbside_pickup_setting`,
    { enabled: true, arrival_instructions: 'Park in bay 2', payment_options: ['cash'] },
  );
  await assertWrite(t, store, setting, 200, 'store-7');
  t.is(setting.body.revision, 2);
  t.deepEqual(Object.keys(setting.body).sort(), ['curbside_pickup_setting', 'position', 'revision']);
  t.like(setting.body.curbside_pickup_setting, {
    store_id: 7,
    enabled: true,
    arrival_instructions: 'Park in bay 2',
    hours: [],
    window_minutes: 15,
    max_orders_per_window: 10,
    payment_options: ['cash'],
  });
  t.deepEqual(
    setting.body.curbside_pickup_setting.arrival_form_fields.map((f) => f.name),
    ['vehicle_make', 'vehicle_color', 'parking_spot'],
  );
  t.is(typeof setting.body.curbside_pickup_setting.updated_at, 'string');

  const setting2 = await ok<{ curbside_pickup_setting: CurbsidePickupSettingRecord }>(
    t,
    s,
    'PUT',
    `${P}/stores/7/curbside_pickup_setting`,
    { enabled: false },
  );
  await assertWrite(t, store, setting2, 200, 'store-7');
  t.is(setting2.body.revision, 3);
  t.false(setting2.body.curbside_pickup_setting.enabled);
});

test('brands and products: 201 on creation, 200 on update, documented shape', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();

  const brand = await ok<{ brand: BrandRecord }>(t, s, 'PUT', `${P}/brands/3`, { name: 'Kiva' });
  await assertWrite(t, store, brand, 201, 'brand-3');
  t.deepEqual(Object.keys(brand.body).sort(), ['brand', 'position', 'revision']);
  t.like(brand.body.brand, { id: 3, name: 'Kiva' });
  t.is(typeof brand.body.brand.updated_at, 'string');
  const renamed = await ok<{ brand: BrandRecord }>(t, s, 'PUT', `${P}/brands/3`, {
    name: 'Kiva Confections',
  });
  await assertWrite(t, store, renamed, 200, 'brand-3');
  t.is(renamed.body.revision, 1);
  t.is(renamed.body.brand.name, 'Kiva Confections');

  const product = await ok<{ product: ProductRecord }>(
    t,
    s,
    'PUT',
    `${P}/products/11`,
    productBody(3, {
      kind_subtype: 'Chocolate',
      kind: 'edible',
      lineage: 'indica',
      description: 'Dark chocolate',
      percent_thc: 0.5,
      image_urls: ['https://img.example.com/11.png'],
    }),
  );
  await assertWrite(t, store, product, 201, 'product-11');
  t.deepEqual(Object.keys(product.body).sort(), ['position', 'product', 'revision']);
  t.like(product.body.product, {
    product_id: 11,
    name: 'Blue Dream 3.5g',
    brand_id: 3,
    kind: 'edible',
    kind_subtype: 'Chocolate',
    lineage: 'indica',
    description: 'Dark chocolate',
    percent_thc: 0.5,
    percent_cbd: null,
    image_urls: ['https://img.example.com/11.png'],
  });
  t.is(typeof product.body.product.updated_at, 'string');
  const changed = await ok<{ product: ProductRecord }>(
    t,
    s,
    'PUT',
    `${P}/products/11`,
    productBody(3, { kind: 'edible', percent_cbd: 2 }),
  );
  await assertWrite(t, store, changed, 200, 'product-11');
  t.is(changed.body.revision, 1);
  t.is(changed.body.product.percent_cbd, 2);
  t.is(changed.body.product.kind_subtype, null);
});

test('menu products: list 201, relist 200, delist 200, documented shape', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedStore(t, s, 1);
  await seedBrand(t, s, 1);
  await seedProduct(t, s, 5, 1);

  const listed = await ok<{ menu_product: MenuProductRecord }>(
    t,
    s,
    'PUT',
    `${P}/stores/1/menu_products/50`,
    {
      product_id: 5,
      prices: { 'eighth ounce': '35.00', gram: '12.00' },
    },
  );
  await assertWrite(t, store, listed, 201, 'menuproduct-50');
  t.deepEqual(Object.keys(listed.body).sort(), ['menu_product', 'position', 'revision']);
  t.like(listed.body.menu_product, {
    id: 50,
    product_id: 5,
    store_id: 1,
    brand_id: 1,
    available_weights: ['gram', 'eighth ounce'],
    price_each: null,
    price_half_gram: null,
    price_gram: '12.00',
    price_two_gram: null,
    price_eighth_ounce: '35.00',
    price_quarter_ounce: null,
    price_half_ounce: null,
    price_ounce: null,
    in_stock: true,
  });
  t.is(typeof listed.body.menu_product.updated_at, 'string');

  const repriced = await ok<{ menu_product: MenuProductRecord }>(
    t,
    s,
    'PUT',
    `${P}/stores/1/menu_products/50`,
    {
      product_id: 5,
      prices: { gram: '11.00' },
      in_stock: false,
    },
  );
  await assertWrite(t, store, repriced, 200, 'menuproduct-50');
  t.is(repriced.body.revision, 1);
  t.like(repriced.body.menu_product, { price_gram: '11.00', price_eighth_ounce: null, in_stock: false });

  const delisted = await ok<{ menu_product: { id: number; store_id: number; listed: boolean } }>(
    t,
    s,
    'DELETE',
    `${P}/stores/1/menu_products/50`,
  );
  await assertWrite(t, store, delisted, 200, 'menuproduct-50');
  t.is(delisted.body.revision, 2);
  t.deepEqual(delisted.body.menu_product, { id: 50, store_id: 1, listed: false });
  const [last] = await store.readStream('menuproduct-50', { direction: 'backwards', maxCount: 1 });
  t.is(last.type, 'MenuProductDelisted');

  // Listed again after delisting: an update of the existing stream (200).
  const relisted = await ok<{ menu_product: MenuProductRecord }>(
    t,
    s,
    'PUT',
    `${P}/stores/1/menu_products/50`,
    {
      product_id: 5,
      prices: { gram: '11.00' },
      in_stock: false,
    },
  );
  await assertWrite(t, store, relisted, 200, 'menuproduct-50');
  t.is(relisted.body.revision, 3);
});

test('reviews and specials: 201 on creation, 200 on update, documented shape', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedStore(t, s, 1);
  await seedBrand(t, s, 2);
  await seedProduct(t, s, 5, 2);

  const review = await ok<{ review: ReviewRecord }>(t, s, 'PUT', `${P}/reviews/900`, {
    product_id: 5,
    store_id: 1,
    rating: 4,
    comment: 'Smooth',
    feelings: ['relaxed'],
    activities: ['reading'],
    verified: true,
  });
  await assertWrite(t, store, review, 201, 'review-900');
  t.deepEqual(Object.keys(review.body).sort(), ['position', 'review', 'revision']);
  t.like(review.body.review, {
    id: 900,
    product_id: 5,
    store_id: 1,
    brand_id: 2,
    rating: 4,
    comment: 'Smooth',
    feelings: ['relaxed'],
    activities: ['reading'],
    verified: true,
  });
  t.is(typeof review.body.review.created_at, 'string');
  const revised = await ok<{ review: ReviewRecord }>(t, s, 'PUT', `${P}/reviews/900`, {
    product_id: 5,
    store_id: 1,
    rating: 5,
    verified: true,
  });
  await assertWrite(t, store, revised, 200, 'review-900');
  t.is(revised.body.revision, 1);
  t.like(revised.body.review, {
    rating: 5,
    comment: null,
    feelings: [],
    created_at: review.body.review.created_at,
  });

  const specialBody = {
    store_id: 1,
    title: '20% off Blue Dream',
    special_type: 'product',
    discount_type: 'percent',
    discount_value: '20.00',
    product_ids: [5],
    starts_at: '2020-01-01T00:00:00Z',
  };
  const special = await ok<{ special: SpecialRecord }>(t, s, 'PUT', `${P}/specials/30`, specialBody);
  await assertWrite(t, store, special, 201, 'special-30');
  t.deepEqual(Object.keys(special.body).sort(), ['position', 'revision', 'special']);
  t.like(special.body.special, {
    id: 30,
    store_id: 1,
    title: '20% off Blue Dream',
    description: null,
    special_type: 'product',
    discount_type: 'percent',
    discount_value: '20.00',
    product_ids: [5],
    brand_ids: [],
    kinds: [],
    starts_at: '2020-01-01T00:00:00.000Z',
    ends_at: null,
    enabled: true,
  });
  const disabled = await ok<{ special: SpecialRecord }>(t, s, 'PUT', `${P}/specials/30`, {
    ...specialBody,
    enabled: false,
  });
  await assertWrite(t, store, disabled, 200, 'special-30');
  t.is(disabled.body.revision, 1);
  t.false(disabled.body.special.enabled);
});

test('carts: created with a given and a generated uuid (201), lines added, changed and removed, customer', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  await seedProduct(t, s, 2, 1);
  await seedMenuProduct(t, s, 1, 2, 2, { each: '5.50' });

  const uuid = randomUUID();
  const created = await ok<{ cart: PartnerCart }>(
    t,
    s,
    'POST',
    `${P}/carts`,
    cartBody(1, { uuid, user_id: 42 }),
  );
  await assertWrite(t, store, created, 201, `cart-${uuid}`);
  t.is(created.body.revision, 0);
  t.is(created.headers.get('location'), `${P}/carts/${uuid}`);
  t.deepEqual(Object.keys(created.body).sort(), ['cart', 'position', 'revision']);
  t.like(created.body.cart, {
    id: created.body.position,
    uuid,
    amount: 0,
    status: 'pending',
    reservation_mode: '',
    reservation_start_window: '',
    checked_out_time: '',
    store_id: 1,
    store_name: 'Green Door',
    user_id: 42,
    customer_phone_number: '',
    customer_email_address: '',
    rating: 0,
    abandoned_at: null,
    source: { channel: 'headless', partner_id: 'p-1' },
    products: [],
  });
  t.regex(created.body.cart.created_at, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);

  const generated = await ok<{ cart: PartnerCart }>(
    t,
    s,
    'POST',
    `${P}/carts`,
    cartBody(1, { source: { channel: 'embedded', partner_id: null } }),
  );
  t.regex(generated.body.cart.uuid, UUID);
  t.not(generated.body.cart.uuid, uuid);
  await assertWrite(t, store, generated, 201, `cart-${generated.body.cart.uuid}`);
  t.is(generated.headers.get('location'), `${P}/carts/${generated.body.cart.uuid}`);
  t.like(generated.body.cart, { user_id: null, source: { channel: 'embedded', partner_id: null } });

  const added = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${uuid}/items`, {
    menu_product_id: 1,
    price_id: 'gram',
    count: 2,
  });
  await assertWrite(t, store, added, 200, `cart-${uuid}`);
  t.is(added.body.revision, 1);
  t.is(added.body.cart.id, created.body.position);
  t.deepEqual(added.body.cart.products, [
    {
      brand: 'Brand 1',
      name: 'Product 1',
      kind: 'flower',
      kind_subtype: null,
      lineage: 'hybrid',
      product_id: 1,
      price_id: 'gram',
      count: 2,
      checkout_price: 10,
      discounted_checkout_price: 10,
      special_id: null,
      special_title: null,
    },
  ]);
  t.is(added.body.cart.amount, 20);

  const second = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${uuid}/items`, {
    menu_product_id: 2,
    price_id: 'each',
    count: 1,
  });
  await assertWrite(t, store, second, 200, `cart-${uuid}`);
  t.is(second.body.cart.amount, 25.5);

  const patched = await ok<{ cart: PartnerCart }>(t, s, 'PATCH', `${P}/carts/${uuid}/items/1`, { count: 5 });
  await assertWrite(t, store, patched, 200, `cart-${uuid}`);
  t.is(patched.body.revision, 3);
  t.is(line(patched.body.cart, 1)?.count, 5);
  t.is(patched.body.cart.amount, 55.5);
  // The same count again changes nothing: 200, same revision, nothing appended.
  const head = await store.headPosition();
  const samePatch = await ok<{ cart: PartnerCart }>(t, s, 'PATCH', `${P}/carts/${uuid}/items/1`, {
    count: 5,
  });
  await assertWrite(t, store, samePatch, 200, `cart-${uuid}`);
  t.is(samePatch.body.revision, 3);
  t.is(await store.headPosition(), head);

  // count 0 removes the line.
  const zeroed = await ok<{ cart: PartnerCart }>(t, s, 'PATCH', `${P}/carts/${uuid}/items/2`, { count: 0 });
  await assertWrite(t, store, zeroed, 200, `cart-${uuid}`);
  t.is(zeroed.body.revision, 4);
  t.is(line(zeroed.body.cart, 2), undefined);
  t.is(zeroed.body.cart.amount, 50);
  const [removedByPatch] = await store.readStream(`cart-${uuid}`, { direction: 'backwards', maxCount: 1 });
  t.is(removedByPatch.type, 'CartItemRemoved');

  const readded = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${uuid}/items`, {
    menu_product_id: 2,
    price_id: 'each',
    count: 3,
  });
  t.is(readded.body.cart.amount, 66.5);
  const deleted = await ok<{ cart: PartnerCart }>(t, s, 'DELETE', `${P}/carts/${uuid}/items/2`);
  await assertWrite(t, store, deleted, 200, `cart-${uuid}`);
  t.is(deleted.body.revision, 6);
  t.deepEqual(
    deleted.body.cart.products.map((p) => p.product_id),
    [1],
  );
  t.is(deleted.body.cart.amount, 50);

  const customer = await ok<{ cart: PartnerCart }>(t, s, 'PUT', `${P}/carts/${uuid}/customer`, {
    email: 'ada@example.com',
    first_name: 'Ada',
    last_name: 'Lovelace',
    phone_number: '+1 415 555 0101',
    DOB: '1990-12-10T00:00:00Z',
  });
  await assertWrite(t, store, customer, 200, `cart-${uuid}`);
  t.is(customer.body.revision, 7);
  t.like(customer.body.cart, {
    customer_email_address: 'ada@example.com',
    customer_phone_number: '+1 415 555 0101',
    customer_name: 'Ada Lovelace',
  });

  const types = (await store.readStream(`cart-${uuid}`)).map((e) => e.type);
  t.deepEqual(types, [
    'CartCreated',
    'CartItemAdded',
    'CartItemAdded',
    'CartItemQuantityChanged',
    'CartItemRemoved',
    'CartItemAdded',
    'CartItemRemoved',
    'CartCustomerIdentified',
  ]);
});

/** Checks out a one-line cart and walks it through `moves`, checking each answer. */
async function walkStatuses(
  t: ExecutionContext,
  s: TestService,
  store: EventStore,
  mode: 'pickup' | 'delivery' | 'curbside',
  moves: string[],
): Promise<PartnerCart> {
  const uuid = await createCart(t, s);
  await ok(t, s, 'POST', `${P}/carts/${uuid}/items`, { menu_product_id: 1, price_id: 'gram', count: 3 });
  const checkedOut = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${uuid}/checkout`, {
    reservation_mode: mode,
    reservation_start_window: '2026-03-01 10:00',
  });
  await assertWrite(t, store, checkedOut, 200, `cart-${uuid}`);
  // CartCheckedOut and CartStatusChanged: revision 1 (item) + 2.
  t.is(checkedOut.body.revision, 3);
  t.like(checkedOut.body.cart, {
    status: 'verification',
    reservation_mode: mode,
    reservation_start_window: '2026-03-01 10:00',
    amount: 30,
  });
  t.regex(checkedOut.body.cart.checked_out_time, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
  let revision = checkedOut.body.revision;
  let cart = checkedOut.body.cart;
  for (const [i, to] of moves.entries()) {
    const body: Record<string, unknown> = { status: to };
    if (i === 0)
      Object.assign(body, { assigned_employee_id: 9, assigned_employee_name: 'Sam', queue_number: 4 });
    if (to === 'with_review') body.rating = 5;
    const moved = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${uuid}/status`, body);
    await assertWrite(t, store, moved, 200, `cart-${uuid}`);
    t.is(moved.body.revision, ++revision);
    t.is(moved.body.cart.status as string, to);
    // Assignment fields stay in force until changed.
    t.like(moved.body.cart, { assigned_employee_id: 9, assigned_employee_name: 'Sam', queue_number: 4 });
    cart = moved.body.cart;
  }
  const statusEvents = (await store.readStream(`cart-${uuid}`))
    .filter((e) => e.type === 'CartStatusChanged')
    .map((e) => `${(e.data as { from: string }).from}>${(e.data as { to: string }).to}`);
  const path = ['pending', 'verification', ...moves];
  t.deepEqual(
    statusEvents,
    path.slice(1).map((to, i) => `${path[i]}>${to}`),
  );
  return cart;
}

test('carts: checkout and the full status path for pickup', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  const cart = await walkStatuses(t, s, store, 'pickup', [
    'staff_member_review',
    'preparing',
    'ready_for_pickup',
    'finished',
    'with_review',
  ]);
  t.is(cart.rating, 5);
});

test('carts: checkout and the full status path for delivery (and curbside)', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  const delivered = await walkStatuses(t, s, store, 'delivery', [
    'preparing',
    'delivery_started',
    'delivery_finished',
    'finished',
    'with_review',
  ]);
  t.is(delivered.rating, 5);
  await ok(t, s, 'PUT', `${P}/stores/1/curbside_pickup_setting`, { enabled: true });
  const curbside = await walkStatuses(t, s, store, 'curbside', ['preparing', 'ready_for_pickup', 'finished']);
  t.is(curbside.reservation_mode, 'curbside');
});

test('carts: cancelled and dismissed are final', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  await walkStatuses(t, s, store, 'pickup', ['cancelled']);
  await walkStatuses(t, s, store, 'delivery', ['preparing', 'delivery_started', 'dismissed']);
});

// ---- 2. pricing ------------------------------------------------------------------------------

test('pricing: a line keeps the price of its placement; a new line gets the current price and specials', async (t) => {
  const s = await startService(t);
  await seedStore(t, s, 1);
  await seedBrand(t, s, 1);
  await seedProduct(t, s, 1, 1);
  await seedProduct(t, s, 2, 1);
  await seedMenuProduct(t, s, 1, 1, 1, { gram: '10.00' });
  await seedMenuProduct(t, s, 1, 2, 2, { gram: '20.00' });

  const uuid = await createCart(t, s);
  const first = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${uuid}/items`, {
    menu_product_id: 1,
    price_id: 'gram',
    count: 1,
  });
  t.like(line(first.body.cart, 1), { checkout_price: 10, discounted_checkout_price: 10 });

  // Prices change after placement.
  await seedMenuProduct(t, s, 1, 1, 1, { gram: '12.00' });
  await seedMenuProduct(t, s, 1, 2, 2, { gram: '25.00' });

  // The existing line keeps its price, also when its count changes.
  const patched = await ok<{ cart: PartnerCart }>(t, s, 'PATCH', `${P}/carts/${uuid}/items/1`, { count: 3 });
  t.like(line(patched.body.cart, 1), { count: 3, checkout_price: 10, discounted_checkout_price: 10 });
  t.is(patched.body.cart.amount, 30);

  // A new line gets the new price.
  const second = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${uuid}/items`, {
    menu_product_id: 2,
    price_id: 'gram',
    count: 2,
  });
  t.like(line(second.body.cart, 1), { checkout_price: 10, discounted_checkout_price: 10 });
  t.like(line(second.body.cart, 2), { checkout_price: 25, discounted_checkout_price: 25, special_id: null });
  t.is(second.body.cart.amount, 80);
  const other = await createCart(t, s);
  const otherCart = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${other}/items`, {
    menu_product_id: 1,
    price_id: 'gram',
    count: 1,
  });
  t.like(line(otherCart.body.cart, 1), { checkout_price: 12, discounted_checkout_price: 12 });

  // An active 'product' special on product 2 lowers the discounted price of lines placed from now on.
  await ok(t, s, 'PUT', `${P}/specials/1`, {
    store_id: 1,
    title: '20% off Product 2',
    special_type: 'product',
    discount_type: 'percent',
    discount_value: '20.00',
    product_ids: [2],
    starts_at: '2020-01-01T00:00:00Z',
  });
  // Specials that are not active or not 'product' specials change nothing.
  await ok(t, s, 'PUT', `${P}/specials/2`, {
    store_id: 1,
    title: 'Disabled',
    special_type: 'product',
    discount_type: 'percent',
    discount_value: '90.00',
    product_ids: [1, 2],
    starts_at: '2020-01-01T00:00:00Z',
    enabled: false,
  });
  await ok(t, s, 'PUT', `${P}/specials/3`, {
    store_id: 1,
    title: 'Future',
    special_type: 'product',
    discount_type: 'dollar_amount',
    discount_value: '5.00',
    product_ids: [1, 2],
    starts_at: '2999-01-01T00:00:00Z',
  });
  await ok(t, s, 'PUT', `${P}/specials/4`, {
    store_id: 1,
    title: 'Cart total',
    special_type: 'cart_total',
    discount_type: 'dollar_amount',
    discount_value: '5.00',
    kinds: ['flower'],
    starts_at: '2020-01-01T00:00:00Z',
  });
  const discountedCart = await createCart(t, s);
  await ok(t, s, 'POST', `${P}/carts/${discountedCart}/items`, {
    menu_product_id: 1,
    price_id: 'gram',
    count: 2,
  });
  const discounted = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${discountedCart}/items`, {
    menu_product_id: 2,
    price_id: 'gram',
    count: 3,
  });
  t.like(line(discounted.body.cart, 1), {
    checkout_price: 12,
    discounted_checkout_price: 12,
    special_id: null,
    special_title: null,
  });
  t.like(line(discounted.body.cart, 2), {
    checkout_price: 25,
    discounted_checkout_price: 20,
    special_id: 1,
    special_title: '20% off Product 2',
  });
  // amount = Σ discounted × count.
  t.is(discounted.body.cart.amount, 12 * 2 + 20 * 3);
  const expected = discounted.body.cart.products.reduce(
    (sum, p) => sum + p.discounted_checkout_price * p.count,
    0,
  );
  t.is(discounted.body.cart.amount, expected);

  // The line already in the first cart is not repriced by the special.
  const unchanged = await ok<{ cart: PartnerCart }>(t, s, 'PUT', `${P}/carts/${uuid}/customer`, {
    email: 'x@example.com',
  });
  t.like(line(unchanged.body.cart, 2), {
    checkout_price: 25,
    discounted_checkout_price: 25,
    special_id: null,
  });
  t.is(unchanged.body.cart.amount, 80);

  // Checkout records the same amount.
  const checkedOut = await ok<{ cart: PartnerCart }>(t, s, 'POST', `${P}/carts/${discountedCart}/checkout`, {
    reservation_mode: 'pickup',
  });
  t.is(checkedOut.body.cart.amount, 84);
});

// ---- 3. refusals --------------------------------------------------------------------------------

test('refusals: stores and curbside pickup setting', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedStore(t, s, 1);
  const url = `${P}/stores/2`;
  const wrongType = await refused(t, s, store, {
    method: 'PUT',
    url,
    body: storeBody({ lat: '37.7' }),
    status: 422,
    code: 'validation_failed',
    fields: ['lat'],
  });
  // A field of the wrong type is reported as such, not as missing.
  t.is(wrongType.errors?.length, 1);
  t.regex(wrongType.errors?.[0].message ?? '', /expected number/);
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: storeBody({ pickup: 'yes' }),
    status: 422,
    fields: ['pickup'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: storeBody({ state: 'California' }),
    status: 422,
    fields: ['state'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: storeBody({ zip: 94103 }),
    status: 422,
    fields: ['zip'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: storeBody({ working_hours: [{ day: 'funday', from: '9', to: '21:00' }] }),
    status: 422,
    fields: ['working_hours[0].day', 'working_hours[0].from'],
  });
  const unknown = await refused(t, s, store, {
    method: 'PUT',
    url,
    body: storeBody({ color: 'green' }),
    status: 422,
    code: 'validation_failed',
    fields: ['color'],
  });
  t.deepEqual(unknown.errors, [{ field: 'color', message: 'unknown field' }]);
  const { name: _name, zip: _zip, ...withoutNameAndZip } = storeBody();
  const missing = await refused(t, s, store, {
    method: 'PUT',
    url,
    body: withoutNameAndZip,
    status: 422,
    fields: ['name', 'zip'],
  });
  t.true(missing.errors?.every((e) => e.message === 'required'));
  const notAnObject = await refused(t, s, store, { method: 'PUT', url, body: [], status: 422 });
  t.is(notAnObject.errors?.[0].field, '(body)');
  t.regex(notAnObject.errors?.[0].message ?? '', /expected object/);
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: {},
    status: 422,
    fields: ['name', 'address', 'lat'],
  });
  for (const id of ['abc', '-1', '0', '1.5', '99999999999999999999']) {
    await refused(t, s, store, {
      method: 'PUT',
      url: `${P}/stores/${id}`,
      body: storeBody(),
      status: 404,
      code: 'not_found',
    });
    await refused(t, s, store, {
      method: 'PUT',
      url: `${P}/stores/${id}/curbside_pickup_setting`,
      body: { enabled: true },
      status: 404,
    });
  }

  const setting = `${P}/stores/1/curbside_pickup_setting`;
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/stores/2/curbside_pickup_setting`,
    body: { enabled: true },
    status: 404,
    code: 'store_not_found',
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: setting,
    body: { enabled: 'yes' },
    status: 422,
    fields: ['enabled'],
  });
  await refused(t, s, store, { method: 'PUT', url: setting, body: {}, status: 422, fields: ['enabled'] });
  await refused(t, s, store, {
    method: 'PUT',
    url: setting,
    body: { enabled: true, tip: 1 },
    status: 422,
    fields: ['tip'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: setting,
    body: { enabled: true, window_minutes: 1 },
    status: 422,
    fields: ['window_minutes'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: setting,
    body: {
      enabled: true,
      arrival_form_fields: [
        { name: 'plate', label: 'Plate' },
        { name: 'plate', label: 'Plate again' },
      ],
    },
    status: 422,
  });
});

test('refusals: brands, products, menu products', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  await seedStore(t, s, 2);

  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/brands/2`,
    body: { name: 5 },
    status: 422,
    fields: ['name'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/brands/2`,
    body: { name: '   ' },
    status: 422,
    fields: ['name'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/brands/2`,
    body: {},
    status: 422,
    fields: ['name'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/brands/2`,
    body: { name: 'X', logo: 'x' },
    status: 422,
    fields: ['logo'],
  });
  await refused(t, s, store, { method: 'PUT', url: `${P}/brands/-3`, body: { name: 'X' }, status: 404 });
  await refused(t, s, store, { method: 'PUT', url: `${P}/brands/x`, body: { name: 'X' }, status: 404 });

  const product = `${P}/products/2`;
  const unknownBrand = await refused(t, s, store, {
    method: 'PUT',
    url: product,
    body: productBody(77),
    status: 422,
    code: 'unknown_brand_id',
  });
  t.is(unknownBrand.brand_id, 77);
  await refused(t, s, store, {
    method: 'PUT',
    url: product,
    body: productBody(1, { kind: 'weed' }),
    status: 422,
    fields: ['kind'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: product,
    body: productBody(1, { brand_id: '1' }),
    status: 422,
    fields: ['brand_id'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: product,
    body: productBody(1, { percent_thc: 101 }),
    status: 422,
    fields: ['percent_thc'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: product,
    body: productBody(1, { image_urls: ['ftp://x'] }),
    status: 422,
    fields: ['image_urls[0]'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: product,
    body: { brand_id: 1, kind: 'flower' },
    status: 422,
    fields: ['name'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: product,
    body: productBody(1, { strain: 'x' }),
    status: 422,
    fields: ['strain'],
  });
  await refused(t, s, store, { method: 'PUT', url: `${P}/products/-2`, body: productBody(1), status: 404 });

  const mp = `${P}/stores/1/menu_products/2`;
  const unknownProduct = await refused(t, s, store, {
    method: 'PUT',
    url: mp,
    body: { product_id: 99, prices: { gram: '1.00' } },
    status: 422,
    code: 'unknown_product_id',
  });
  t.is(unknownProduct.product_id, 99);
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/stores/9/menu_products/2`,
    body: { product_id: 1, prices: { gram: '1.00' } },
    status: 404,
    code: 'store_not_found',
  });
  // Menu product 1 belongs to store 1.
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/stores/2/menu_products/1`,
    body: { product_id: 1, prices: { gram: '1.00' } },
    status: 409,
    code: 'menu_product_store_mismatch',
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: mp,
    body: { product_id: 1, prices: { gram: 12 } },
    status: 422,
    fields: ['prices.gram'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: mp,
    body: { product_id: 1, prices: { gram: '12' } },
    status: 422,
    fields: ['prices.gram'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: mp,
    body: { product_id: 1, prices: {} },
    status: 422,
    fields: ['prices'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: mp,
    body: { product_id: 1, prices: { kilo: '1.00' } },
    status: 422,
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: mp,
    body: { prices: { gram: '1.00' } },
    status: 422,
    fields: ['product_id'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: mp,
    body: { product_id: 1, prices: { gram: '1.00' }, in_stock: 'yes' },
    status: 422,
    fields: ['in_stock'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: mp,
    body: { product_id: 1, prices: { gram: '1.00' }, sku: 'x' },
    status: 422,
    fields: ['sku'],
  });
  for (const path of [
    '/stores/x/menu_products/2',
    '/stores/1/menu_products/-2',
    '/stores/0/menu_products/2',
  ]) {
    await refused(t, s, store, {
      method: 'PUT',
      url: `${P}${path}`,
      body: { product_id: 1, prices: { gram: '1.00' } },
      status: 404,
    });
    await refused(t, s, store, { method: 'DELETE', url: `${P}${path}`, status: 404 });
  }

  // Delisting what is not listed (here) is a 404.
  await refused(t, s, store, {
    method: 'DELETE',
    url: `${P}/stores/1/menu_products/2`,
    status: 404,
    code: 'menu_product_not_found',
  });
  await refused(t, s, store, {
    method: 'DELETE',
    url: `${P}/stores/2/menu_products/1`,
    status: 404,
    code: 'menu_product_not_found',
  });
  await ok(t, s, 'DELETE', `${P}/stores/1/menu_products/1`);
  await refused(t, s, store, {
    method: 'DELETE',
    url: `${P}/stores/1/menu_products/1`,
    status: 404,
    code: 'menu_product_not_found',
  });
});

test('refusals: reviews and specials', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);

  const review = { product_id: 1, store_id: 1, rating: 4, verified: true };
  const url = `${P}/reviews/1`;
  const unknownStore = await refused(t, s, store, {
    method: 'PUT',
    url,
    body: { ...review, store_id: 8 },
    status: 422,
    code: 'unknown_store_id',
  });
  t.is(unknownStore.store_id, 8);
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: { ...review, product_id: 8 },
    status: 422,
    code: 'unknown_product_id',
  });
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: { ...review, rating: 6 },
    status: 422,
    fields: ['rating'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: { ...review, rating: 4.5 },
    status: 422,
    fields: ['rating'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: { ...review, rating: '5' },
    status: 422,
    fields: ['rating'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: { ...review, feelings: 'happy' },
    status: 422,
    fields: ['feelings'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: { product_id: 1, store_id: 1, rating: 4 },
    status: 422,
    fields: ['verified'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url,
    body: { ...review, author: 'x' },
    status: 422,
    fields: ['author'],
  });
  await refused(t, s, store, { method: 'PUT', url: `${P}/reviews/abc`, body: review, status: 404 });

  const special = {
    store_id: 1,
    title: 'Deal',
    special_type: 'product',
    discount_type: 'percent',
    discount_value: '10.00',
    starts_at: '2020-01-01T00:00:00Z',
  };
  const sUrl = `${P}/specials/1`;
  await refused(t, s, store, {
    method: 'PUT',
    url: sUrl,
    body: { ...special, store_id: 8 },
    status: 422,
    code: 'unknown_store_id',
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: sUrl,
    body: { ...special, discount_type: 'bogus' },
    status: 422,
    fields: ['discount_type'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: sUrl,
    body: { ...special, discount_value: 10 },
    status: 422,
    fields: ['discount_value'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: sUrl,
    body: { ...special, discount_value: '150.00' },
    status: 422,
    fields: ['discount_value'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: sUrl,
    body: { ...special, ends_at: '2019-01-01T00:00:00Z' },
    status: 422,
    fields: ['ends_at'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: sUrl,
    body: { ...special, starts_at: 'tomorrow' },
    status: 422,
    fields: ['starts_at'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: sUrl,
    body: { ...special, kinds: ['weed'] },
    status: 422,
    fields: ['kinds[0]'],
  });
  const { title: _title, ...noTitle } = special;
  await refused(t, s, store, { method: 'PUT', url: sUrl, body: noTitle, status: 422, fields: ['title'] });
  await refused(t, s, store, {
    method: 'PUT',
    url: sUrl,
    body: { ...special, code: 'X' },
    status: 422,
    fields: ['code'],
  });
  await refused(t, s, store, { method: 'PUT', url: `${P}/specials/-1`, body: special, status: 404 });
});

test('refusals: carts, items and customer', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  await seedStore(t, s, 2);
  await seedMenuProduct(t, s, 2, 20, 1);
  const uuid = await createCart(t, s);
  await ok(t, s, 'POST', `${P}/carts/${uuid}/items`, { menu_product_id: 1, price_id: 'gram', count: 1 });
  const unknownCart = randomUUID();

  // POST /carts
  const carts = `${P}/carts`;
  const unknownStore = await refused(t, s, store, {
    method: 'POST',
    url: carts,
    body: cartBody(9),
    status: 422,
    code: 'unknown_store_id',
  });
  t.is(unknownStore.store_id, 9);
  await refused(t, s, store, {
    method: 'POST',
    url: carts,
    body: { store_id: 1 },
    status: 422,
    fields: ['source'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: carts,
    body: cartBody(1, { store_id: '1' }),
    status: 422,
    fields: ['store_id'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: carts,
    body: cartBody(1, { source: { channel: 'kiosk', partner_id: null } }),
    status: 422,
    fields: ['source.channel'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: carts,
    body: cartBody(1, { source: { channel: 'headless', partner_id: null, extra: 1 } }),
    status: 422,
    fields: ['source.extra'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: carts,
    body: cartBody(1, { uuid: 'not-a-uuid' }),
    status: 422,
    fields: ['uuid'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: carts,
    body: cartBody(1, { coupon: 'x' }),
    status: 422,
    fields: ['coupon'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: carts,
    body: cartBody(1, { uuid }),
    status: 409,
    code: 'cart_exists',
  });

  // POST /carts/{uuid}/items
  const items = `${P}/carts/${uuid}/items`;
  const item = { menu_product_id: 1, price_id: 'gram', count: 1 };
  await refused(t, s, store, {
    method: 'POST',
    url: `${P}/carts/${unknownCart}/items`,
    body: item,
    status: 404,
    code: 'cart_not_found',
  });
  await refused(t, s, store, { method: 'POST', url: `${P}/carts/not-a-uuid/items`, body: item, status: 404 });
  await refused(t, s, store, { method: 'POST', url: `${P}/carts/123/items`, body: item, status: 404 });
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, menu_product_id: 99 },
    status: 422,
    code: 'unknown_menu_product',
  });
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, menu_product_id: 20 },
    status: 422,
    code: 'menu_product_not_at_store',
  });
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, price_id: 'ounce' },
    status: 422,
    code: 'price_not_available',
  });
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, price_id: 'ton' },
    status: 422,
    fields: ['price_id'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, count: 0 },
    status: 422,
    fields: ['count'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, count: 101 },
    status: 422,
    fields: ['count'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, count: 1.5 },
    status: 422,
    fields: ['count'],
  });
  const countAsString = await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, count: '1' },
    status: 422,
    fields: ['count'],
  });
  t.notDeepEqual(countAsString.errors, [{ field: 'count', message: 'required' }]);
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { menu_product_id: 1, price_id: 'gram' },
    status: 422,
    fields: ['count'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, note: 'x' },
    status: 422,
    fields: ['note'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: items,
    body: { ...item, price_id: 'eighth ounce' },
    status: 409,
    code: 'line_weight_mismatch',
  });

  // PATCH and DELETE /carts/{uuid}/items/{menu_product_id}
  await refused(t, s, store, {
    method: 'PATCH',
    url: `${P}/carts/${unknownCart}/items/1`,
    body: { count: 2 },
    status: 404,
    code: 'cart_not_found',
  });
  await refused(t, s, store, {
    method: 'PATCH',
    url: `${items}/2`,
    body: { count: 2 },
    status: 404,
    code: 'cart_line_not_found',
  });
  await refused(t, s, store, { method: 'PATCH', url: `${items}/abc`, body: { count: 2 }, status: 404 });
  await refused(t, s, store, { method: 'PATCH', url: `${items}/-1`, body: { count: 2 }, status: 404 });
  await refused(t, s, store, {
    method: 'PATCH',
    url: `${items}/1`,
    body: { count: -1 },
    status: 422,
    fields: ['count'],
  });
  await refused(t, s, store, {
    method: 'PATCH',
    url: `${items}/1`,
    body: { count: 'two' },
    status: 422,
    fields: ['count'],
  });
  await refused(t, s, store, {
    method: 'PATCH',
    url: `${items}/1`,
    body: {},
    status: 422,
    fields: ['count'],
  });
  await refused(t, s, store, {
    method: 'PATCH',
    url: `${items}/1`,
    body: { count: 2, price_id: 'gram' },
    status: 422,
    fields: ['price_id'],
  });
  await refused(t, s, store, {
    method: 'DELETE',
    url: `${P}/carts/${unknownCart}/items/1`,
    status: 404,
    code: 'cart_not_found',
  });
  await refused(t, s, store, {
    method: 'DELETE',
    url: `${items}/2`,
    status: 404,
    code: 'cart_line_not_found',
  });
  await refused(t, s, store, { method: 'DELETE', url: `${items}/x`, status: 404 });
  await refused(t, s, store, { method: 'DELETE', url: `${P}/carts/nope/items/1`, status: 404 });

  // PUT /carts/{uuid}/customer
  const customer = `${P}/carts/${uuid}/customer`;
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/carts/${unknownCart}/customer`,
    body: { email: 'a@b.co' },
    status: 404,
    code: 'cart_not_found',
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/carts/x/customer`,
    body: { email: 'a@b.co' },
    status: 404,
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: customer,
    body: { email: 'not-an-email' },
    status: 422,
    fields: ['email'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: customer,
    body: { DOB: 'yesterday' },
    status: 422,
    fields: ['DOB'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: customer,
    body: { first_name: 5 },
    status: 422,
    fields: ['first_name'],
  });
  await refused(t, s, store, {
    method: 'PUT',
    url: customer,
    body: { ssn: '123' },
    status: 422,
    fields: ['ssn'],
  });
});

test('refusals: checkout and status moves (409 with the allowed moves)', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  const empty = await createCart(t, s);
  const uuid = await createCart(t, s);
  await ok(t, s, 'POST', `${P}/carts/${uuid}/items`, { menu_product_id: 1, price_id: 'gram', count: 1 });
  const unknownCart = randomUUID();

  const checkout = `${P}/carts/${uuid}/checkout`;
  await refused(t, s, store, {
    method: 'POST',
    url: `${P}/carts/${unknownCart}/checkout`,
    body: { reservation_mode: 'pickup' },
    status: 404,
    code: 'cart_not_found',
  });
  await refused(t, s, store, {
    method: 'POST',
    url: `${P}/carts/1/checkout`,
    body: { reservation_mode: 'pickup' },
    status: 404,
  });
  await refused(t, s, store, {
    method: 'POST',
    url: checkout,
    body: { reservation_mode: 'drone' },
    status: 422,
    fields: ['reservation_mode'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: checkout,
    body: {},
    status: 422,
    fields: ['reservation_mode'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: checkout,
    body: { reservation_mode: 'pickup', tip: '1.00' },
    status: 422,
    fields: ['tip'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: `${P}/carts/${empty}/checkout`,
    body: { reservation_mode: 'pickup' },
    status: 409,
    code: 'cart_empty',
  });
  const unavailable = await refused(t, s, store, {
    method: 'POST',
    url: checkout,
    body: { reservation_mode: 'curbside' },
    status: 409,
    code: 'reservation_mode_unavailable',
  });
  t.deepEqual(unavailable.available, ['pickup', 'delivery']);

  const status = `${P}/carts/${uuid}/status`;
  await refused(t, s, store, {
    method: 'POST',
    url: `${P}/carts/${unknownCart}/status`,
    body: { status: 'preparing' },
    status: 404,
    code: 'cart_not_found',
  });
  await refused(t, s, store, {
    method: 'POST',
    url: `${P}/carts/zzz/status`,
    body: { status: 'preparing' },
    status: 404,
  });
  await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'lost' },
    status: 422,
    fields: ['status'],
  });
  await refused(t, s, store, { method: 'POST', url: status, body: {}, status: 422, fields: ['status'] });
  await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'preparing', note: 'x' },
    status: 422,
    fields: ['note'],
  });
  await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'preparing', queue_number: -1 },
    status: 422,
    fields: ['queue_number'],
  });
  const fromPending = await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'preparing' },
    status: 409,
    code: 'invalid_status_move',
  });
  t.deepEqual(fromPending.allowed, ['verification']);
  await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'verification' },
    status: 409,
    code: 'checkout_required',
  });

  await ok(t, s, 'POST', checkout, { reservation_mode: 'pickup' });
  const fromVerification = await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'ready_for_pickup' },
    status: 409,
    code: 'invalid_status_move',
  });
  t.deepEqual(fromVerification.allowed, ['staff_member_review', 'preparing', 'cancelled', 'dismissed']);
  t.like(fromVerification, { from: 'verification', to: 'ready_for_pickup' });
  // Checked out: the lines and the checkout are closed.
  await refused(t, s, store, {
    method: 'POST',
    url: checkout,
    body: { reservation_mode: 'pickup' },
    status: 409,
    code: 'cart_checked_out',
  });
  await refused(t, s, store, {
    method: 'POST',
    url: `${P}/carts/${uuid}/items`,
    body: { menu_product_id: 1, price_id: 'gram', count: 1 },
    status: 409,
    code: 'cart_checked_out',
  });
  await refused(t, s, store, {
    method: 'PATCH',
    url: `${P}/carts/${uuid}/items/1`,
    body: { count: 3 },
    status: 409,
    code: 'cart_checked_out',
  });
  await refused(t, s, store, {
    method: 'DELETE',
    url: `${P}/carts/${uuid}/items/1`,
    status: 409,
    code: 'cart_checked_out',
  });

  await ok(t, s, 'POST', status, { status: 'preparing' });
  // A pickup cart is never delivered.
  const pickupPreparing = await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'delivery_started' },
    status: 409,
    code: 'invalid_status_move',
  });
  t.deepEqual(pickupPreparing.allowed, ['ready_for_pickup', 'cancelled', 'dismissed']);
  await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'preparing' },
    status: 409,
    code: 'invalid_status_move',
  });
  await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'ready_for_pickup', rating: 5 },
    status: 422,
    code: 'rating_not_allowed',
  });
  await ok(t, s, 'POST', status, { status: 'ready_for_pickup' });
  await ok(t, s, 'POST', status, { status: 'finished' });
  await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'with_review' },
    status: 422,
    code: 'invalid_rating',
  });
  await ok(t, s, 'POST', status, { status: 'with_review', rating: 3 });
  const final = await refused(t, s, store, {
    method: 'POST',
    url: status,
    body: { status: 'cancelled' },
    status: 409,
    code: 'invalid_status_move',
  });
  t.deepEqual(final.allowed, []);
});

test('refusals: If-Match stale (412) or malformed (400), and If-Match with the current revision succeeds', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  const uuid = await createCart(t, s);

  const stale = await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/stores/1`,
    body: storeBody({ name: 'Renamed' }),
    headers: { 'if-match': '"5"' },
    status: 412,
    code: 'revision_mismatch',
  });
  t.is(stale.current_revision, 0);
  // Even a write that would change nothing is refused when the revision is stale.
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/stores/1`,
    body: storeBody(),
    headers: { 'if-match': '"3"' },
    status: 412,
    code: 'revision_mismatch',
  });
  // A resource that does not exist yet is at revision -1.
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/brands/2`,
    body: { name: 'New' },
    headers: { 'if-match': '0' },
    status: 412,
    code: 'revision_mismatch',
  });
  await refused(t, s, store, {
    method: 'POST',
    url: `${P}/carts/${uuid}/items`,
    body: { menu_product_id: 1, price_id: 'gram', count: 1 },
    headers: { 'if-match': '"1"' },
    status: 412,
    code: 'revision_mismatch',
  });
  for (const header of ['abc', '"1', '*', '"1", "2"', 'W/"x"']) {
    await refused(t, s, store, {
      method: 'PUT',
      url: `${P}/stores/1`,
      body: storeBody({ name: 'Renamed' }),
      headers: { 'if-match': header },
      status: 400,
      code: 'invalid_if_match',
      fields: ['If-Match'],
    });
  }
  await refused(t, s, store, {
    method: 'DELETE',
    url: `${P}/carts/${uuid}/items/1`,
    headers: { 'if-match': 'latest' },
    status: 400,
    code: 'invalid_if_match',
  });

  // The current revision: the write goes through.
  const renamed = await ok<{ store: StoreRecord }>(
    t,
    s,
    'PUT',
    `${P}/stores/1`,
    storeBody({ name: 'Renamed' }),
    {
      'if-match': '"0"',
    },
  );
  await assertWrite(t, store, renamed, 200, 'store-1');
  t.is(renamed.body.revision, 1);
  t.is(renamed.body.store.name, 'Renamed');
  const again = await ok(t, s, 'PUT', `${P}/stores/1`, storeBody({ name: 'Again' }), { 'if-match': '1' });
  t.is(again.body.revision, 2);
  const brand = await ok(t, s, 'PUT', `${P}/brands/2`, { name: 'New' }, { 'if-match': '"-1"' });
  t.is(brand.status, 201);
  const added = await ok<{ cart: PartnerCart }>(
    t,
    s,
    'POST',
    `${P}/carts/${uuid}/items`,
    { menu_product_id: 1, price_id: 'gram', count: 1 },
    { 'if-match': '"0"' },
  );
  await assertWrite(t, store, added, 200, `cart-${uuid}`);
  t.is(added.body.revision, 1);
  const patched = await ok(
    t,
    s,
    'PATCH',
    `${P}/carts/${uuid}/items/1`,
    { count: 2 },
    { 'if-match': added.headers.get('etag')! },
  );
  t.is(patched.body.revision, 2);
});

test('refusals: body size, malformed JSON, content type, operator token, unknown route', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  const uuid = await createCart(t, s);

  // > 64 KiB: 413, whatever the route.
  const huge = JSON.stringify(storeBody({ display_name: 'x'.repeat(70 * 1024) }));
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/stores/2`,
    body: huge,
    status: 413,
    code: 'payload_too_large',
  });
  await refused(t, s, store, {
    method: 'POST',
    url: `${P}/carts`,
    body: JSON.stringify({ ...cartBody(1), pad: 'y'.repeat(65 * 1024) }),
    status: 413,
    code: 'payload_too_large',
  });
  // Just under the cap it is parsed (and refused for its content, not its size).
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/stores/2`,
    body: JSON.stringify(storeBody({ display_name: 'x'.repeat(60 * 1024) })),
    status: 422,
    fields: ['display_name'],
  });

  for (const [method, url] of [
    ['PUT', `${P}/stores/2`],
    ['PUT', `${P}/stores/1/curbside_pickup_setting`],
    ['PUT', `${P}/brands/2`],
    ['PUT', `${P}/products/2`],
    ['PUT', `${P}/stores/1/menu_products/2`],
    ['PUT', `${P}/reviews/2`],
    ['PUT', `${P}/specials/2`],
    ['POST', `${P}/carts`],
    ['POST', `${P}/carts/${uuid}/items`],
    ['PATCH', `${P}/carts/${uuid}/items/1`],
    ['PUT', `${P}/carts/${uuid}/customer`],
    ['POST', `${P}/carts/${uuid}/checkout`],
    ['POST', `${P}/carts/${uuid}/status`],
  ]) {
    await refused(t, s, store, { method, url, body: '{"name": "x",', status: 400, code: 'malformed_json' });
    await refused(t, s, store, {
      method,
      url,
      body: '{"name": "x"} trailing',
      status: 400,
      code: 'malformed_json',
    });
    await refused(t, s, store, {
      method,
      url,
      body: 'name=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      status: 415,
      code: 'unsupported_media_type',
    });
    await refused(t, s, store, {
      method,
      url,
      body: '{"name": "x"}',
      headers: { 'content-type': 'text/plain' },
      status: 415,
      code: 'unsupported_media_type',
    });
  }

  // Operator token: missing or wrong → 401 with WWW-Authenticate, on every kind of route.
  for (const [method, url, body] of [
    ['PUT', `${P}/stores/1`, storeBody()],
    ['DELETE', `${P}/stores/1/menu_products/1`, undefined],
    ['POST', `${P}/carts`, cartBody(1)],
    ['POST', `${P}/carts/${uuid}/status`, { status: 'preparing' }],
  ] as const) {
    for (const authorization of ['', 'Bearer wrong-token-123456', `Basic ${s.token}`, s.token]) {
      const before = await store.headPosition();
      const r = await send<Problem>(s, method, url, body, { authorization });
      assertProblem(t, r, 401, 'unauthorized');
      t.regex(r.headers.get('www-authenticate') ?? '', /^Bearer /);
      t.is(await store.headPosition(), before);
    }
  }
  const noHeader = await fetch(`${s.base}${P}/stores/1`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(storeBody({ name: 'Hijacked' })),
  });
  t.is(noHeader.status, 401);
  t.regex(noHeader.headers.get('www-authenticate') ?? '', /^Bearer /);
  t.regex(noHeader.headers.get('content-type') ?? '', /^application\/problem\+json/);

  // Unknown routes and methods: 404 problems.
  await refused(t, s, store, { method: 'GET', url: `${P}/nothing`, status: 404, code: 'not_found' });
  await refused(t, s, store, {
    method: 'PUT',
    url: `${P}/stores/1/nothing`,
    body: {},
    status: 404,
    code: 'not_found',
  });
  // A known path with a method it does not serve: 405 with Allow.
  const before = await store.headPosition();
  const wrongMethod = await send<Problem>(s, 'POST', `${P}/stores/1`, storeBody());
  assertProblem(t, wrongMethod, 405, 'method_not_allowed');
  t.regex(wrongMethod.headers.get('allow') ?? '', /\bPUT\b/);
  t.is(await store.headPosition(), before);
  await refused(t, s, store, { method: 'POST', url: `${P}/cart`, body: cartBody(1), status: 404 });

  // Nothing was logged with the token in it.
  t.false(s.logs().includes(s.token));
});

// ---- 4. Idempotency-Key ------------------------------------------------------------------------

test('Idempotency-Key: a retry replays the first answer; one cart is created', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);

  const key = `create-${randomUUID()}`;
  const body = cartBody(1);
  const first = await send<{ cart: PartnerCart } & WriteMeta>(s, 'POST', `${P}/carts`, body, {
    'idempotency-key': key,
  });
  t.is(first.status, 201);
  t.is(first.headers.get('idempotent-replayed'), null);
  const head = await store.headPosition();
  // Same key, same body (keys in another order): the first answer, replayed.
  const second = await send<{ cart: PartnerCart } & WriteMeta>(
    s,
    'POST',
    `${P}/carts`,
    { source: body.source, store_id: 1 },
    { 'idempotency-key': key },
  );
  t.is(second.status, 201);
  t.deepEqual(second.body, first.body);
  t.is(second.headers.get('idempotent-replayed'), 'true');
  t.is(second.headers.get('etag'), first.headers.get('etag'));
  t.is(second.headers.get('location'), first.headers.get('location'));
  t.regex(second.headers.get('content-type') ?? '', /^application\/json/);
  t.is(await store.headPosition(), head, 'a replay appends nothing');

  const created = (await store.readAll({ filter: { eventTypes: ['CartCreated'] } })).map((e) => e.streamId);
  t.deepEqual(created, [`cart-${first.body.cart.uuid}`]);

  // Same key with another body: 422, and still one cart.
  const reused = await send<Problem>(s, 'POST', `${P}/carts`, cartBody(1, { user_id: 7 }), {
    'idempotency-key': key,
  });
  assertProblem(t, reused, 422, 'idempotency_key_reused');
  // Same key on another route: also another request.
  const otherRoute = await send<Problem>(s, 'POST', `${P}/carts/${first.body.cart.uuid}/items`, body, {
    'idempotency-key': key,
  });
  assertProblem(t, otherRoute, 422, 'idempotency_key_reused');
  t.is(await store.headPosition(), head);
  t.is((await store.readAll({ filter: { eventTypes: ['CartCreated'] } })).length, 1);

  // Without a key, the same body creates another cart.
  const third = await send<{ cart: PartnerCart }>(s, 'POST', `${P}/carts`, body);
  t.is(third.status, 201);
  t.not(third.body.cart.uuid, first.body.cart.uuid);

  // A malformed key is a 400.
  const badKey = await send<Problem>(s, 'POST', `${P}/carts`, body, { 'idempotency-key': 'x'.repeat(256) });
  assertProblem(t, badKey, 400, 'invalid_idempotency_key');
});

test('Idempotency-Key: a POST refused by the command replays its 422; an invalid one leaves the key free', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);

  // Refused by the request schema: it never ran, so nothing is recorded (docs/write-side.md, "Idempotency").
  const key = `bad-${randomUUID()}`;
  const invalidBody = { store_id: 'one', source: { channel: 'headless', partner_id: null } };
  const first = await send<Problem>(s, 'POST', `${P}/carts`, invalidBody, { 'idempotency-key': key });
  assertProblem(t, first, 422, 'validation_failed');
  t.is(first.headers.get('idempotent-replayed'), null);
  const second = await send<Problem>(s, 'POST', `${P}/carts`, invalidBody, { 'idempotency-key': key });
  assertProblem(t, second, 422, 'validation_failed');
  t.deepEqual(second.body, first.body);
  t.is(second.headers.get('idempotent-replayed'), null, 'refused again, not replayed');
  // The key is free for the corrected request.
  const corrected = await send<{ cart: PartnerCart }>(s, 'POST', `${P}/carts`, cartBody(1), {
    'idempotency-key': key,
  });
  t.is(corrected.status, 201);
  const createdCarts = await store.readAll({ filter: { eventTypes: ['CartCreated'] } });
  t.deepEqual(
    createdCarts.map((e) => e.streamId),
    [`cart-${corrected.body.cart.uuid}`],
  );

  // Refused by the domain (the store does not exist).
  const domainKey = `domain-${randomUUID()}`;
  const unknownStore = cartBody(42, { uuid: randomUUID() });
  const refusedFirst = await send<Problem>(s, 'POST', `${P}/carts`, unknownStore, {
    'idempotency-key': domainKey,
  });
  assertProblem(t, refusedFirst, 422, 'unknown_store_id');
  const refusedHead = await store.headPosition();
  // The store appears in between: the retry still answers the first result, and creates nothing.
  await seedStore(t, s, 42);
  const afterSeed = await store.headPosition();
  t.true(afterSeed > refusedHead);
  const refusedSecond = await send<Problem>(s, 'POST', `${P}/carts`, unknownStore, {
    'idempotency-key': domainKey,
  });
  assertProblem(t, refusedSecond, 422, 'unknown_store_id');
  t.deepEqual(refusedSecond.body, refusedFirst.body);
  t.is(refusedSecond.headers.get('idempotent-replayed'), 'true');
  t.is(await store.headPosition(), afterSeed);
  t.deepEqual(await store.readAll({ filter: { eventTypes: ['CartCreated'] } }), createdCarts);
});

test('Idempotency-Key: a replayed item placement adds the item once', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  await seedCatalog(t, s);
  const uuid = await createCart(t, s);
  const key = randomUUID();
  const item = { menu_product_id: 1, price_id: 'gram', count: 2 };
  const first = await send<{ cart: PartnerCart } & WriteMeta>(s, 'POST', `${P}/carts/${uuid}/items`, item, {
    'idempotency-key': key,
  });
  t.is(first.status, 200);
  const second = await send<{ cart: PartnerCart } & WriteMeta>(s, 'POST', `${P}/carts/${uuid}/items`, item, {
    'idempotency-key': key,
  });
  t.is(second.status, 200);
  t.is(second.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(second.body, first.body);
  t.is(line(second.body.cart, 1)?.count, 2);
  const added = (await store.readStream(`cart-${uuid}`)).filter((e) => e.type === 'CartItemAdded');
  t.is(added.length, 1);
});

// ---- 5. concurrency ----------------------------------------------------------------------------

async function concurrentAdds(t: ExecutionContext, distinct: boolean): Promise<void> {
  const s = await startService(t);
  const store = await s.openStore();
  await seedStore(t, s, 1);
  await seedBrand(t, s, 1);
  const n = 50;
  const menuProducts = distinct ? Array.from({ length: n }, (_, i) => i + 1) : [1];
  for (const id of menuProducts) {
    await seedProduct(t, s, id, 1);
    await seedMenuProduct(t, s, 1, id, id, { each: `${id}.25` });
  }
  const uuid = await createCart(t, s);

  const replies = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      send<{ cart: PartnerCart } & WriteMeta>(s, 'POST', `${P}/carts/${uuid}/items`, {
        menu_product_id: distinct ? i + 1 : 1,
        price_id: 'each',
        count: 1,
      }),
    ),
  );
  t.deepEqual(
    replies.map((r) => r.status),
    Array.from({ length: n }, () => 200),
    JSON.stringify(replies.filter((r) => r.status !== 200).map((r) => r.body)),
  );
  // Every answer names a different revision, 1..50.
  t.deepEqual(
    replies.map((r) => r.body.revision).sort((a, b) => a - b),
    Array.from({ length: n }, (_, i) => i + 1),
  );
  for (const r of replies) t.is(r.headers.get('etag'), `"${r.body.revision}"`);

  const events = await store.readStream(`cart-${uuid}`);
  t.is(events.length, n + 1);
  t.deepEqual(
    events.map((e) => e.revision),
    Array.from({ length: n + 1 }, (_, i) => i),
  );
  t.is(events[0].type, 'CartCreated');
  const added = events.filter((e) => e.type === 'CartItemAdded');
  t.is(added.length, n);

  // The final cart, as the last writer saw it, agrees with the events.
  const last = replies.find((r) => r.body.revision === n)!;
  const cart = last.body.cart;
  t.is(last.body.position, events[n].position);
  const expectedCents = menuProducts.reduce((sum, id) => sum + (id * 100 + 25) * (distinct ? 1 : n), 0);
  t.is(cart.products.length, menuProducts.length);
  t.is(
    cart.products.reduce((sum, p) => sum + p.count, 0),
    n,
  );
  t.is(Math.round(cart.amount * 100), expectedCents);
  if (!distinct) t.is(cart.products[0].count, n);
  else
    t.deepEqual(
      cart.products.map((p) => p.product_id).sort((a, b) => a - b),
      menuProducts,
    );

  // One more write sees the same cart.
  const final = await ok<{ cart: PartnerCart }>(t, s, 'PUT', `${P}/carts/${uuid}/customer`, {
    first_name: 'Ada',
  });
  t.is(final.body.revision, n + 1);
  t.is(final.body.cart.amount, cart.amount);
  t.deepEqual(final.body.cart.products, cart.products);
}

test('concurrency: 50 concurrent placements of distinct menu products on one cart', async (t) => {
  await concurrentAdds(t, true);
});

test('concurrency: 50 concurrent placements of the same menu product on one cart', async (t) => {
  await concurrentAdds(t, false);
});

test('a path id has one spelling: 0x10, 1e1, +5, 07 and " 7" name no record and write nothing', async (t) => {
  const s = await startService(t);
  const store = await s.openStore();
  for (const id of ['0x10', '1e1', '%2B5', '07', '%207', '1.0', '0b11']) {
    const before = await store.headPosition();
    const r = await send<Problem>(s, 'PUT', `${P}/brands/${id}`, { name: 'Odd' });
    t.is(r.status, 404, id);
    t.is(r.headers.get('content-type'), 'application/problem+json', id);
    t.is(await store.headPosition(), before, `${id}: nothing appended`);
  }
  t.is((await send(s, 'PUT', `${P}/brands/16`, { name: 'Sixteen' })).status, 201);
});
