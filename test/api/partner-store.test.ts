/**
 * The Store Operator API (`/partner/store/v1`) and the Store Menu Feed API (`/partner/store-menu-feed/v1`)
 * end to end, on a real service: data created through `/platform/v1`, partners and keys through
 * `/admin/v1`, answers checked exactly against the record schemas, store selection, recommendations,
 * curbside arrivals (events in the cart's history, refusals, Idempotency-Key), auth, paging and bad
 * parameters — and no other store's data in any answer given to a one-store key.
 *
 * The menu feed API has no `/carts` route: `GET /partner/store-menu-feed/v1/carts` answers 404 (nothing
 * is served there), whatever the key.
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import type { z } from 'zod';
import { type Characteristics, score } from '../../api/partner/recommendations.ts';
import {
  curbsidePickupSettingRecord,
  menuProductRecord,
  partnerCartRecord,
  reviewRecord,
  specialRecord,
} from '../../api/partner/schemas.ts';
import { curbsideArrivalRecord, recommendationRecord } from '../../api/partner/store.ts';
import { responseErrors } from '../support/openapi-validate.ts';
import { startService, type TestService } from '../support/service.ts';

const P = '/platform/v1';
const ADMIN = '/admin/v1';
const OP = '/partner/store/v1';
const FEED = '/partner/store-menu-feed/v1';
const PROBLEM = /^application\/problem\+json/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
type Json = Record<string, any>;
interface Reply {
  status: number;
  headers: Headers;
  body: Json;
}

interface Fixture {
  s: TestService;
  /** Store operator, store 1. */
  op1: { id: string; key: string };
  /** Store operator, stores 1 and 2. */
  opMulti: { id: string; key: string };
  /** Store menu feed, store 1. */
  feed: { id: string; key: string };
  /** Brand partner (brand 1). */
  brand: { id: string; key: string };
  carts: Record<'c1' | 'c2' | 'c3' | 'c4' | 'c5' | 'c6' | 'c7' | 'c8' | 'c9' | 'c10' | 'c11', string>;
  /** Before any cart was created. */
  beforeCarts: string;
  /** After the fixture, before the late updates (menu product 108, special 2, review 6). */
  beforeLate: string;
  /** Every body a store-1-only key received, to check that no other store's data leaked. */
  seenByStore1: Json[];
}

// ---- helpers --------------------------------------------------------------------------------------

async function send(
  s: TestService,
  method: string,
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
): Promise<Reply> {
  const r = await s.call(method, url, body, headers);
  const text = await r.text();
  return { status: r.status, headers: r.headers, body: text === '' ? {} : (JSON.parse(text) as Json) };
}

/** A setup write that must succeed. */
async function ok(s: TestService, method: string, url: string, body?: unknown) {
  const r = await send(s, method, url, body);
  if (r.status >= 300) throw new Error(`${method} ${url} answered ${r.status}: ${JSON.stringify(r.body)}`);
  return r;
}

/** A partner request with an API key (or none). */
async function call(
  f: Fixture,
  key: string | null,
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const auth = key === null ? { authorization: '' } : { authorization: `Bearer ${key}` };
  const r = await send(f.s, method, url, body, { ...auth, ...headers });
  await conformsToDocument(f, method, url, r);
  // Answers only: a problem may echo what the request named (e.g. the uuid of a cart it may not see).
  if ((key === f.op1.key || key === f.feed.key) && r.status < 300) f.seenByStore1.push(r.body);
  return r;
}

const BASES = ['/partner/store-menu-feed/v1', '/partner/store/v1'];

/**
 * Every answer of a documented operation must match the API's OpenAPI document (status documented,
 * media type, headers, body). Deliberate probes of routes the API does not have are left out.
 */
async function conformsToDocument(f: Fixture, method: string, url: string, r: Reply): Promise<void> {
  const base = BASES.find((b) => url.startsWith(`${b}/`));
  if (!base) return;
  const document = await f.s.openApiDocument(base);
  const errors = responseErrors(document, method, url, r.status, r.body, {
    contentType: r.headers.get('content-type') ?? '',
    headers: r.headers,
  });
  const undocumentedRoute =
    errors.length === 1 && /is not documented$|no path of the document matches/.test(errors[0]);
  if (errors.length > 0 && !undocumentedRoute) {
    throw new Error(
      `${method} ${url} → ${r.status} does not match the OpenAPI document:\n${errors.join('\n')}`,
    );
  }
}

function assertProblem(t: ExecutionContext, r: Reply, status: number, code?: string): void {
  t.is(r.status, status, JSON.stringify(r.body));
  t.regex(r.headers.get('content-type') ?? '', PROBLEM);
  t.is(typeof r.body.type, 'string');
  t.is(typeof r.body.title, 'string');
  t.is(r.body.status, status);
  t.is(typeof r.body.detail, 'string');
  if (code !== undefined) t.is(r.body.code, code);
  t.false(JSON.stringify(r.body).includes('    at '), 'no stack trace');
}

/** The value parses with the schema and has exactly its fields (nothing private, nothing missing). */
function assertRecord(t: ExecutionContext, schema: z.ZodObject, value: unknown, what: string): void {
  const parsed = schema.safeParse(value);
  t.true(parsed.success, `${what}: ${parsed.success ? '' : JSON.stringify(parsed.error.issues)}`);
  t.deepEqual(Object.keys(value as Json).sort(), Object.keys(schema.shape).sort(), `${what}: fields`);
}

function assertPage(t: ExecutionContext, r: Reply, plural: string, record: z.ZodObject): Json[] {
  t.is(r.status, 200, JSON.stringify(r.body));
  t.regex(r.headers.get('content-type') ?? '', /^application\/json/);
  t.deepEqual(Object.keys(r.body).sort(), ['next_cursor', plural].sort());
  const items = r.body[plural] as Json[];
  t.true(Array.isArray(items));
  for (const item of items) assertRecord(t, record, item, plural);
  return items;
}

/** Follows `Link: <…>; rel="next"` from `url` to the end; returns every page's items. */
async function walk(
  t: ExecutionContext,
  f: Fixture,
  key: string,
  url: string,
  plural: string,
  record: z.ZodObject,
): Promise<Json[][]> {
  const pages: Json[][] = [];
  let next: string | null = url;
  while (next) {
    const r = await call(f, key, 'GET', next);
    pages.push(assertPage(t, r, plural, record));
    const link = r.headers.get('link');
    if (r.body.next_cursor === null) {
      t.is(link, null);
      next = null;
    } else {
      const m = /^<([^>]+)>; rel="next"$/.exec(link ?? '');
      t.truthy(m, `Link header: ${link}`);
      next = m?.[1] ?? null;
      t.true(next?.includes(`cursor=${r.body.next_cursor}`));
      t.true(pages.length < 50, 'the walk ends');
    }
  }
  return pages;
}

const ids = (items: Json[]) => items.map((x) => x.id as number);

/** Every `store_id` anywhere in a value. */
function storeIdsIn(value: unknown, out: number[] = []): number[] {
  if (Array.isArray(value)) for (const v of value) storeIdsIn(v, out);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === 'store_id' && typeof v === 'number') out.push(v);
      else storeIdsIn(v, out);
    }
  }
  return out;
}

async function untilCaughtUp(s: TestService): Promise<void> {
  const end = Date.now() + 20_000;
  for (;;) {
    const r = await send(s, 'GET', `${ADMIN}/projections`);
    const all = r.body.projections as Array<{ state: string; lag_events: number }>;
    if (all.every((p) => p.state === 'live' && p.lag_events === 0)) return;
    if (Date.now() > end) throw new Error(`projections not caught up: ${JSON.stringify(all)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- fixture --------------------------------------------------------------------------------------

const store = (name: string) => ({
  name,
  address: '843 Howard St',
  city: 'San Francisco',
  state: 'CA',
  zip: '94103',
  lat: 37.7816,
  long: -122.4048,
  pickup: true,
  delivery: false,
});

/** id → [kind, lineage, thc, cbd]. */
const PRODUCTS: Record<number, [string, string | null, number | null, number | null]> = {
  1: ['flower', 'hybrid', 20, 1], // the subject of the recommendations
  2: ['flower', 'hybrid', 21, 1],
  3: ['flower', 'indica', 18, 0.5],
  4: ['flower', 'sativa', 30, null],
  5: ['vape', 'hybrid', 80, null],
  6: ['edible', 'indica', 0.5, null],
  7: ['flower', 'hybrid', 20, 1],
  8: ['tincture', 'cbd', 0, 20],
  9: ['flower', 'hybrid', 20, 1], // only at store 3
  10: ['flower', 'hybrid', 20, 1], // only at store 2
};

/** Menu product id → [store, product, prices, in stock]. */
const MENU: Record<number, [number, number, Record<string, string>, boolean]> = {
  101: [1, 1, { gram: '10.00', 'eighth ounce': '35.00' }, true],
  102: [1, 2, { gram: '11.00' }, true],
  103: [1, 3, { gram: '10.00' }, true],
  104: [1, 4, { gram: '25.00' }, true],
  105: [1, 5, { each: '40.00' }, true],
  106: [1, 6, { each: '10.00' }, true],
  107: [1, 7, { gram: '10.00' }, false],
  108: [1, 8, { each: '60.00' }, true],
  110: [1, 1, { gram: '10.00' }, true], // a second listing of product 1
  201: [2, 1, { gram: '50.00' }, true],
  202: [2, 10, { gram: '12.00' }, true],
  203: [2, 2, { gram: '11.00' }, true],
  301: [3, 9, { gram: '10.00' }, true],
};

/** Review id → [product, store, rating, verified]. */
const REVIEWS: Record<number, [number, number, number, boolean]> = {
  1: [1, 1, 5, true],
  2: [1, 1, 1, false],
  3: [1, 2, 3, true],
  4: [2, 1, 4, true],
  5: [1, 1, 4, true],
  6: [1, 1, 4, true],
};

async function register(s: TestService, body: Json) {
  const r = await ok(s, 'POST', `${ADMIN}/partners`, body);
  return { id: r.body.partner.partner_id as string, key: r.body.api_key as string };
}

async function createFixture(t: ExecutionContext): Promise<Fixture> {
  const s = await startService(t);
  await ok(s, 'PUT', `${P}/stores/1`, store('Green Door'));
  await ok(s, 'PUT', `${P}/stores/2`, store('Blue Door'));
  await ok(s, 'PUT', `${P}/stores/3`, store('Red Door'));
  await ok(s, 'PUT', `${P}/brands/1`, { name: 'Kiva' });
  await ok(s, 'PUT', `${P}/brands/2`, { name: 'Stiiizy' });
  for (const [id, [kind, lineage, thc, cbd]] of Object.entries(PRODUCTS)) {
    await ok(s, 'PUT', `${P}/products/${id}`, {
      name: `Product ${id}`,
      brand_id: Number(id) % 2 === 1 ? 1 : 2,
      kind,
      lineage,
      percent_thc: thc,
      percent_cbd: cbd,
    });
  }
  for (const [id, [storeId, productId, prices, inStock]] of Object.entries(MENU)) {
    await ok(s, 'PUT', `${P}/stores/${storeId}/menu_products/${id}`, {
      product_id: productId,
      prices,
      in_stock: inStock,
    });
  }
  for (const [id, [productId, storeId, rating, verified]] of Object.entries(REVIEWS)) {
    await ok(s, 'PUT', `${P}/reviews/${id}`, {
      product_id: productId,
      store_id: storeId,
      rating,
      comment: `Review ${id}`,
      verified,
    });
  }
  const special = (storeId: number, title: string, over: Json = {}) => ({
    store_id: storeId,
    title,
    special_type: 'product',
    discount_type: 'percent',
    discount_value: '10.00',
    starts_at: '2026-01-01T00:00:00.000Z',
    ...over,
  });
  await ok(s, 'PUT', `${P}/specials/1`, special(1, 'Ten off product 1', { product_ids: [1] }));
  await ok(s, 'PUT', `${P}/specials/2`, special(1, 'Vapes', { kinds: ['vape'], enabled: false }));
  await ok(s, 'PUT', `${P}/specials/3`, special(2, 'Store 2 deal', { product_ids: [1] }));
  await ok(s, 'PUT', `${P}/specials/4`, special(1, 'Stiiizy days', { brand_ids: [2] }));
  await ok(s, 'PUT', `${P}/stores/1/curbside_pickup_setting`, {
    enabled: true,
    arrival_instructions: 'Park in bay 2',
    payment_options: ['cash'],
  });
  await ok(s, 'PUT', `${P}/stores/3/curbside_pickup_setting`, { enabled: true });
  // Store 2 keeps the default setting: curbside off.

  const op1 = await register(s, { name: 'Green Door web', kind: 'store_operator', store_ids: [1] });
  const opMulti = await register(s, { name: 'Doors group', kind: 'store_operator', store_ids: [1, 2] });
  const feed = await register(s, { name: 'Menu feed', kind: 'store_menu_feed', store_ids: [1] });
  const brand = await register(s, { name: 'Kiva', kind: 'brand', brand_ids: [1] });

  const beforeCarts = new Date().toISOString();
  await pause(5);
  const cart = async (
    storeId: number,
    partnerId: string,
    item: number,
    checkout?: string,
    status?: string,
  ) => {
    const uuid = randomUUID();
    await ok(s, 'POST', `${P}/carts`, {
      uuid,
      store_id: storeId,
      source: { channel: 'headless', partner_id: partnerId },
    });
    await ok(s, 'POST', `${P}/carts/${uuid}/items`, { menu_product_id: item, price_id: 'gram', count: 2 });
    if (checkout) await ok(s, 'POST', `${P}/carts/${uuid}/checkout`, { reservation_mode: checkout });
    if (status) await ok(s, 'POST', `${P}/carts/${uuid}/status`, { status });
    return uuid;
  };
  const carts = {
    c1: await cart(1, op1.id, 101, 'curbside'),
    c2: await cart(1, op1.id, 101), // not checked out
    c3: await cart(1, op1.id, 102, 'curbside', 'cancelled'),
    c4: await cart(3, op1.id, 301, 'curbside'), // store 3: outside every key
    c5: await cart(1, opMulti.id, 101, 'curbside'),
    c6: await cart(2, opMulti.id, 201, 'pickup'), // store 2: curbside off
    c7: await cart(1, op1.id, 103, 'curbside'),
    c8: await cart(1, op1.id, 101, 'curbside'),
    c9: await cart(1, op1.id, 101, 'curbside'),
    c10: await cart(1, feed.id, 101, 'curbside'), // the menu feed's own site
    c11: await cart(1, feed.id, 101, 'pickup'),
  };
  await untilCaughtUp(s);

  // Late updates, for `updated_after`: menu product 108, special 2, review 6 (same rating).
  await pause(5);
  const beforeLate = new Date().toISOString();
  await pause(5);
  await ok(s, 'PUT', `${P}/stores/1/menu_products/108`, { product_id: 8, prices: { each: '61.00' } });
  await ok(s, 'PUT', `${P}/specials/2`, special(1, 'Vapes!', { kinds: ['vape'], enabled: false }));
  await ok(s, 'PUT', `${P}/reviews/6`, {
    product_id: 1,
    store_id: 1,
    rating: 4,
    comment: 'Revised',
    verified: true,
  });
  await untilCaughtUp(s);
  return { s, op1, opMulti, feed, brand, carts, beforeCarts, beforeLate, seenByStore1: [] };
}

/**
 * One service and data set for the whole file (tests run serially; the writes use their own carts).
 * The service outlives every test: its teardown runs after the last one.
 */
const teardowns: Array<() => unknown> = [];
const fileContext = { teardown: (fn: () => unknown) => teardowns.push(fn) } as unknown as ExecutionContext;
let fixture: Fixture | undefined;
test.before(async () => {
  fixture = await createFixture(fileContext);
});
test.after.always(async () => {
  for (const fn of teardowns.reverse()) await fn();
});
const setup = async (_t: ExecutionContext): Promise<Fixture> => {
  if (!fixture) throw new Error('no fixture');
  return fixture;
};

const APIS = [
  { name: 'store operator', base: OP, key: (f: Fixture) => f.op1.key },
  { name: 'store menu feed', base: FEED, key: (f: Fixture) => f.feed.key },
];

// ---- menu products ----------------------------------------------------------------------------------

test.serial('GET /menu_products: the store’s menu products, exact records, on both APIs', async (t) => {
  const f = await setup(t);
  for (const api of APIS) {
    const r = await call(f, api.key(f), 'GET', `${api.base}/menu_products`);
    const items = assertPage(t, r, 'menu_products', menuProductRecord);
    t.is(r.body.next_cursor, null);
    t.is(r.headers.get('link'), null);
    t.deepEqual(ids(items), [101, 102, 103, 104, 105, 106, 107, 108, 110], api.name);
    const first = items[0];
    t.regex(first.updated_at, ISO);
    t.deepEqual(first, {
      id: 101,
      product_id: 1,
      store_id: 1,
      name: 'Product 1',
      brand: 'Kiva',
      brand_id: 1,
      kind: 'flower',
      kind_subtype: null,
      lineage: 'hybrid',
      description: null,
      available_weights: ['gram', 'eighth ounce'],
      price_each: null,
      price_half_gram: null,
      price_gram: '10.00',
      price_two_gram: null,
      price_eighth_ounce: '35.00',
      price_quarter_ounce: null,
      price_half_ounce: null,
      price_ounce: null,
      percent_thc: 20,
      percent_cbd: 1,
      image_urls: [],
      in_stock: true,
      // Verified reviews of product 1 anywhere: 5, 3, 4, 4.
      aggregate_rating: 4,
      review_count: 4,
      applicable_special_ids: [1],
      updated_at: first.updated_at,
    });
    t.deepEqual(items.find((x) => x.id === 102)?.applicable_special_ids, [4]); // brand 2
    t.false(items.find((x) => x.id === 107)?.in_stock);
    // Security headers and rate limit headers on every partner answer.
    t.is(r.headers.get('x-content-type-options'), 'nosniff');
    t.is(r.headers.get('cache-control'), 'no-store');
    t.truthy(r.headers.get('ratelimit-limit'));
  }
});

test.serial('GET /menu_products: paging walks the list once, in order, with Link headers', async (t) => {
  const f = await setup(t);
  for (const api of APIS) {
    const pages = await walk(
      t,
      f,
      api.key(f),
      `${api.base}/menu_products?limit=2`,
      'menu_products',
      menuProductRecord,
    );
    t.deepEqual(
      pages.map((p) => ids(p)),
      [[101, 102], [103, 104], [105, 106], [107, 108], [110]],
    );
    // An exact multiple of the limit: the last full page says there is no more.
    const threes = await walk(
      t,
      f,
      api.key(f),
      `${api.base}/menu_products?limit=3`,
      'menu_products',
      menuProductRecord,
    );
    t.deepEqual(
      threes.map((p) => p.length),
      [3, 3, 3],
    );
    const all = await call(f, api.key(f), 'GET', `${api.base}/menu_products?limit=500`);
    t.is(all.body.menu_products.length, 9);
  }
});

test.serial('GET /menu_products?updated_after: only what changed since', async (t) => {
  const f = await setup(t);
  const url = `${OP}/menu_products?updated_after=${encodeURIComponent(f.beforeLate)}`;
  const r = await call(f, f.op1.key, 'GET', url);
  t.deepEqual(ids(assertPage(t, r, 'menu_products', menuProductRecord)), [108]);
  t.is(r.body.menu_products[0].price_each, '61.00');
  const none = await call(f, f.feed.key, 'GET', `${FEED}/menu_products?updated_after=2999-01-01T00:00:00Z`);
  t.deepEqual(assertPage(t, none, 'menu_products', menuProductRecord), []);
  // With an offset: the same instant as UTC.
  const offset = await call(
    f,
    f.op1.key,
    'GET',
    `${OP}/menu_products?updated_after=2000-01-01T02:00:00%2B02:00`,
  );
  t.is(offset.body.menu_products.length, 9);
});

test.serial('GET /menu_products/{id}: one menu product of the store; another store’s is a 404', async (t) => {
  const f = await setup(t);
  for (const api of APIS) {
    const r = await call(f, api.key(f), 'GET', `${api.base}/menu_products/105`);
    t.is(r.status, 200, JSON.stringify(r.body));
    t.deepEqual(Object.keys(r.body), ['menu_product']);
    assertRecord(t, menuProductRecord, r.body.menu_product, 'menu_product');
    t.like(r.body.menu_product, { id: 105, product_id: 5, store_id: 1, kind: 'vape', price_each: '40.00' });
    for (const other of [201, 301, 999]) {
      assertProblem(
        t,
        await call(f, api.key(f), 'GET', `${api.base}/menu_products/${other}`),
        404,
        'menu_product_not_found',
      );
    }
    assertProblem(t, await call(f, api.key(f), 'GET', `${api.base}/menu_products/abc`), 404);
    assertProblem(t, await call(f, api.key(f), 'GET', `${api.base}/menu_products/0`), 404);
  }
  // A two-store key reads store 2's with store_id=2, and not without choosing.
  const two = await call(f, f.opMulti.key, 'GET', `${OP}/menu_products/201?store_id=2`);
  t.is(two.status, 200);
  t.is(two.body.menu_product.store_id, 2);
  assertProblem(t, await call(f, f.opMulti.key, 'GET', `${OP}/menu_products/201?store_id=1`), 404);
  assertProblem(t, await call(f, f.opMulti.key, 'GET', `${OP}/menu_products/201`), 400, 'store_id_required');
});

// ---- store selection -------------------------------------------------------------------------------

test.serial(
  'store selection: default for one store, required for several, 404 outside the key',
  async (t) => {
    const f = await setup(t);
    const ok1 = await call(f, f.op1.key, 'GET', `${OP}/menu_products?store_id=1`);
    t.deepEqual(ids(ok1.body.menu_products), [101, 102, 103, 104, 105, 106, 107, 108, 110]);
    for (const path of [
      '/menu_products',
      '/specials',
      '/curbside_pickup_setting',
      '/products/1/reviews',
      '/products/1/recommendations',
    ]) {
      const r = await call(f, f.opMulti.key, 'GET', `${OP}${path}`);
      assertProblem(t, r, 400, 'store_id_required');
      t.deepEqual(r.body.errors, [
        { field: 'store_id', message: 'required when the key covers several stores' },
      ]);
      assertProblem(t, await call(f, f.op1.key, 'GET', `${OP}${path}?store_id=2`), 404, 'store_not_found');
      assertProblem(
        t,
        await call(f, f.opMulti.key, 'GET', `${OP}${path}?store_id=3`),
        404,
        'store_not_found',
      );
      assertProblem(t, await call(f, f.feed.key, 'GET', `${FEED}${path}?store_id=3`), 404, 'store_not_found');
      assertProblem(t, await call(f, f.op1.key, 'GET', `${OP}${path}?store_id=abc`), 400);
      assertProblem(t, await call(f, f.op1.key, 'GET', `${OP}${path}?store_id=-1`), 400);
    }
    const s2 = await call(f, f.opMulti.key, 'GET', `${OP}/menu_products?store_id=2`);
    t.deepEqual(ids(assertPage(t, s2, 'menu_products', menuProductRecord)), [201, 202, 203]);
    t.true(s2.body.menu_products.every((m: Json) => m.store_id === 2));
  },
);

// ---- recommendations ---------------------------------------------------------------------------------

const characteristicsOf = (menuId: number, prices: Record<string, string>): Characteristics => {
  const [, productId, , inStock] = MENU[menuId];
  const [kind, lineage, thc, cbd] = PRODUCTS[productId];
  return {
    product_id: productId,
    kind,
    lineage: lineage as Characteristics['lineage'],
    percent_thc: thc,
    percent_cbd: cbd,
    lowest_price: Math.min(...Object.values(prices).map(Number)),
    in_stock: inStock,
  };
};

test.serial(
  'GET /products/{id}/recommendations: same kind first, then closeness; never itself',
  async (t) => {
    const f = await setup(t);
    const subject = characteristicsOf(101, MENU[101][2]);
    for (const api of APIS) {
      const r = await call(f, api.key(f), 'GET', `${api.base}/products/1/recommendations`);
      t.is(r.status, 200, JSON.stringify(r.body));
      t.deepEqual(Object.keys(r.body), ['recommendations']);
      const recs = r.body.recommendations as Json[];
      for (const rec of recs) {
        assertRecord(t, recommendationRecord, rec, 'recommendation');
        assertRecord(t, menuProductRecord, rec.menu_product, 'recommendation.menu_product');
      }
      // Flower (same kind) first: 102 (hybrid, THC 21, in stock), 107 (out of stock), 103 (indica),
      // 104 (sativa, dear); then other kinds: 106 (edible, same price), 105 (vape), 108 (tincture).
      t.deepEqual(
        recs.map((x) => x.menu_product.id),
        [102, 107, 103, 104, 106, 105, 108],
        api.name,
      );
      const prices = (id: number) => (id === 108 ? { each: '61.00' } : MENU[id][2]);
      t.deepEqual(
        recs.map((x) => x.score),
        recs.map((x) => score(subject, characteristicsOf(x.menu_product.id, prices(x.menu_product.id)))),
      );
      t.deepEqual(
        recs.map((x) => x.score),
        [0.9933, 0.94, 0.9087, 0.7183, 0.215, 0.21, 0.06],
      );
      // Never product 1 itself (101, 110), nothing from another store (201, 203, 301).
      t.true(recs.every((x) => x.menu_product.product_id !== 1 && x.menu_product.store_id === 1));

      const three = await call(f, api.key(f), 'GET', `${api.base}/products/1/recommendations?limit=3`);
      t.deepEqual(
        three.body.recommendations.map((x: Json) => x.menu_product.id),
        [102, 107, 103],
      );
      // From another product of the store: product 5 (vape) gets flower only after the vapes (none).
      const vape = await call(f, api.key(f), 'GET', `${api.base}/products/5/recommendations`);
      t.is(vape.status, 200);
      t.false(vape.body.recommendations.some((x: Json) => x.menu_product.product_id === 5));
      t.is(vape.body.recommendations.length, 7); // products 1, 2, 3, 4, 6, 7, 8: one listing per product
    }
  },
);

test.serial(
  'GET /products/{id}/recommendations: 404 for a product the store does not carry; bad limits',
  async (t) => {
    const f = await setup(t);
    for (const api of APIS) {
      for (const id of [9, 10, 999]) {
        assertProblem(
          t,
          await call(f, api.key(f), 'GET', `${api.base}/products/${id}/recommendations`),
          404,
          'product_not_found',
        );
      }
      assertProblem(t, await call(f, api.key(f), 'GET', `${api.base}/products/x/recommendations`), 404);
      for (const limit of ['0', '11', 'abc', '1.5']) {
        assertProblem(
          t,
          await call(f, api.key(f), 'GET', `${api.base}/products/1/recommendations?limit=${limit}`),
          400,
        );
      }
      assertProblem(
        t,
        await call(f, api.key(f), 'GET', `${api.base}/products/1/recommendations?cursor=abc`),
        400,
      );
    }
    // Store 2 carries product 10: recommended there from store 2's menu only.
    const r = await call(f, f.opMulti.key, 'GET', `${OP}/products/10/recommendations?store_id=2`);
    t.is(r.status, 200);
    t.deepEqual(
      r.body.recommendations.map((x: Json) => x.menu_product.id),
      [203, 201],
    );
  },
);

// ---- reviews -------------------------------------------------------------------------------------------

test.serial(
  'GET /products/{id}/reviews: verified reviews written at the store; 404 for a product not carried',
  async (t) => {
    const f = await setup(t);
    for (const api of APIS) {
      const r = await call(f, api.key(f), 'GET', `${api.base}/products/1/reviews`);
      const items = assertPage(t, r, 'reviews', reviewRecord);
      t.deepEqual(ids(items), [1, 5, 6]); // 2 is unverified, 3 was written at store 2
      t.regex(items[0].created_at, ISO);
      t.regex(items[0].updated_at, ISO);
      t.deepEqual(items[0], {
        id: 1,
        product_id: 1,
        store_id: 1,
        brand_id: 1,
        rating: 5,
        comment: 'Review 1',
        feelings: [],
        activities: [],
        verified: true,
        created_at: items[0].created_at,
        updated_at: items[0].updated_at,
      });
      const pages = await walk(
        t,
        f,
        api.key(f),
        `${api.base}/products/1/reviews?limit=1`,
        'reviews',
        reviewRecord,
      );
      t.deepEqual(pages.map(ids), [[1], [5], [6]]);
      const late = await call(
        f,
        api.key(f),
        'GET',
        `${api.base}/products/1/reviews?updated_after=${encodeURIComponent(f.beforeLate)}`,
      );
      t.deepEqual(ids(assertPage(t, late, 'reviews', reviewRecord)), [6]);
      t.is(late.body.reviews[0].comment, 'Revised');
      const two = await call(f, api.key(f), 'GET', `${api.base}/products/2/reviews`);
      t.deepEqual(ids(assertPage(t, two, 'reviews', reviewRecord)), [4]);
      // Carried but never reviewed.
      const none = await call(f, api.key(f), 'GET', `${api.base}/products/3/reviews`);
      t.deepEqual(assertPage(t, none, 'reviews', reviewRecord), []);
      for (const id of [9, 10, 999]) {
        assertProblem(
          t,
          await call(f, api.key(f), 'GET', `${api.base}/products/${id}/reviews`),
          404,
          'product_not_found',
        );
      }
    }
    const s2 = await call(f, f.opMulti.key, 'GET', `${OP}/products/1/reviews?store_id=2`);
    t.deepEqual(ids(assertPage(t, s2, 'reviews', reviewRecord)), [3]);
  },
);

// ---- specials ------------------------------------------------------------------------------------------

test.serial('GET /specials: the store’s specials, exact records, paging and updated_after', async (t) => {
  const f = await setup(t);
  for (const api of APIS) {
    const r = await call(f, api.key(f), 'GET', `${api.base}/specials`);
    const items = assertPage(t, r, 'specials', specialRecord);
    t.deepEqual(ids(items), [1, 2, 4]);
    t.regex(items[0].updated_at, ISO);
    t.deepEqual(items[0], {
      id: 1,
      store_id: 1,
      title: 'Ten off product 1',
      description: null,
      special_type: 'product',
      discount_type: 'percent',
      discount_value: '10.00',
      product_ids: [1],
      brand_ids: [],
      kinds: [],
      starts_at: items[0].starts_at,
      ends_at: null,
      enabled: true,
      updated_at: items[0].updated_at,
    });
    t.is(Date.parse(items[0].starts_at), Date.parse('2026-01-01T00:00:00Z'));
    t.like(items[1], { id: 2, title: 'Vapes!', enabled: false, kinds: ['vape'] });
    const pages = await walk(t, f, api.key(f), `${api.base}/specials?limit=2`, 'specials', specialRecord);
    t.deepEqual(pages.map(ids), [[1, 2], [4]]);
    const late = await call(
      f,
      api.key(f),
      'GET',
      `${api.base}/specials?updated_after=${encodeURIComponent(f.beforeLate)}`,
    );
    t.deepEqual(ids(assertPage(t, late, 'specials', specialRecord)), [2]);
  }
  const s2 = await call(f, f.opMulti.key, 'GET', `${OP}/specials?store_id=2`);
  t.deepEqual(ids(assertPage(t, s2, 'specials', specialRecord)), [3]);
});

// ---- curbside pickup setting -----------------------------------------------------------------------------

test.serial('GET /curbside_pickup_setting: the store’s setting (default when never set)', async (t) => {
  const f = await setup(t);
  for (const api of APIS) {
    const r = await call(f, api.key(f), 'GET', `${api.base}/curbside_pickup_setting`);
    t.is(r.status, 200, JSON.stringify(r.body));
    t.deepEqual(Object.keys(r.body), ['curbside_pickup_setting']);
    const setting = r.body.curbside_pickup_setting;
    assertRecord(t, curbsidePickupSettingRecord, setting, 'curbside_pickup_setting');
    t.regex(setting.updated_at, ISO);
    t.deepEqual(setting, {
      store_id: 1,
      enabled: true,
      arrival_instructions: 'Park in bay 2',
      hours: [],
      window_minutes: 15,
      max_orders_per_window: 10,
      payment_options: ['cash'],
      arrival_form_fields: [
        { name: 'vehicle_make', label: 'Vehicle make', required: true },
        { name: 'vehicle_color', label: 'Vehicle color', required: true },
        { name: 'parking_spot', label: 'Parking spot', required: false },
      ],
      updated_at: setting.updated_at,
    });
  }
  const s2 = await call(f, f.opMulti.key, 'GET', `${OP}/curbside_pickup_setting?store_id=2`);
  t.is(s2.status, 200);
  t.like(s2.body.curbside_pickup_setting, { store_id: 2, enabled: false, arrival_instructions: null });
});

// ---- carts -------------------------------------------------------------------------------------------

test.serial(
  'GET /carts: the operator’s own carts at its stores, exact records, filters, paging',
  async (t) => {
    const f = await setup(t);
    const { c1, c2, c3, c5, c6, c7, c8, c9 } = f.carts;
    const uuids = (items: Json[]) => items.map((c) => c.uuid as string);
    const r = await call(f, f.op1.key, 'GET', `${OP}/carts`);
    const items = assertPage(t, r, 'carts', partnerCartRecord);
    // c4 (store 3, outside the key) and c5 (another partner's site) are not there.
    t.deepEqual(uuids(items), [c1, c2, c3, c7, c8, c9]);
    const first = items[0];
    t.like(first, {
      uuid: c1,
      status: 'verification',
      reservation_mode: 'curbside',
      store_id: 1,
      store_name: 'Green Door',
      abandoned_at: null,
      source: { channel: 'headless', partner_id: f.op1.id },
    });
    t.is(first.products.length, 1);
    t.like(first.products[0], {
      product_id: 1,
      price_id: 'gram',
      count: 2,
      checkout_price: 10,
      brand: 'Kiva',
    });
    t.is(first.amount, first.products[0].discounted_checkout_price * 2);
    t.regex(first.updated_at, ISO);
    t.true(
      items.every((c, i) => i === 0 || c.id > items[i - 1].id),
      'id order',
    );

    const pages = await walk(t, f, f.op1.key, `${OP}/carts?limit=4`, 'carts', partnerCartRecord);
    t.deepEqual(pages.map(uuids), [
      [c1, c2, c3, c7],
      [c8, c9],
    ]);
    const q = (query: string) => call(f, f.op1.key, 'GET', `${OP}/carts?${query}`);
    t.deepEqual(uuids((await q('status=cancelled')).body.carts), [c3]);
    t.deepEqual(uuids((await q('status=pending')).body.carts), [c2]);
    t.deepEqual(uuids((await q('abandoned=true')).body.carts), []);
    t.deepEqual(uuids((await q('abandoned=false')).body.carts), [c1, c2, c3, c7, c8, c9]);
    t.deepEqual(uuids((await q(`created_before=${encodeURIComponent(f.beforeCarts)}`)).body.carts), []);
    t.deepEqual(uuids((await q(`created_after=${encodeURIComponent(f.beforeCarts)}`)).body.carts).length, 6);
    t.deepEqual(uuids((await q('updated_after=2999-01-01T00:00:00Z')).body.carts), []);
    t.deepEqual(uuids((await q('store_id=1&status=verification&limit=2')).body.carts), [c1, c7]);
    assertProblem(t, await q('store_id=2'), 404, 'store_not_found');

    // A two-store operator: its own carts at both stores, or one store's.
    const multi = await call(f, f.opMulti.key, 'GET', `${OP}/carts`);
    t.deepEqual(uuids(assertPage(t, multi, 'carts', partnerCartRecord)), [c5, c6]);
    const multi2 = await call(f, f.opMulti.key, 'GET', `${OP}/carts?store_id=2`);
    t.deepEqual(uuids(assertPage(t, multi2, 'carts', partnerCartRecord)), [c6]);
    assertProblem(t, await call(f, f.opMulti.key, 'GET', `${OP}/carts?store_id=3`), 404, 'store_not_found');
  },
);

test.serial('GET /carts: not on the menu feed API (404), not for a menu feed key (403)', async (t) => {
  const f = await setup(t);
  assertProblem(t, await call(f, f.feed.key, 'GET', `${FEED}/carts`), 404, 'not_found');
  assertProblem(t, await call(f, f.op1.key, 'GET', `${FEED}/carts`), 404, 'not_found');
  assertProblem(t, await call(f, f.feed.key, 'GET', `${OP}/carts`), 403, 'wrong_partner_kind');
});

// ---- auth ----------------------------------------------------------------------------------------------

test.serial('auth: 401 without a valid key, 403 for a key of another kind, on every route', async (t) => {
  const f = await setup(t);
  const routes = [
    ['GET', '/menu_products'],
    ['GET', '/menu_products/101'],
    ['GET', '/products/1/recommendations'],
    ['GET', '/products/1/reviews'],
    ['GET', '/specials'],
    ['GET', '/curbside_pickup_setting'],
    ['POST', `/reservations/${f.carts.c1}/curbside_arrival`],
  ];
  for (const [base, own, others] of [
    [OP, f.op1.key, [f.feed.key, f.brand.key]],
    [FEED, f.feed.key, [f.op1.key, f.brand.key]],
  ] as const) {
    for (const [method, path] of [...routes, ...(base === OP ? [['GET', '/carts']] : [])]) {
      const body = method === 'POST' ? { vehicle_make: 'VW', vehicle_color: 'red' } : undefined;
      const none = await call(f, null, method, `${base}${path}`, body);
      assertProblem(t, none, 401, 'unauthorized');
      t.is(none.headers.get('www-authenticate'), 'Bearer realm="pds-partner"');
      assertProblem(t, await call(f, 'not-a-key', method, `${base}${path}`, body), 401, 'unauthorized');
      // The operator token is not a partner key.
      assertProblem(t, await send(f.s, method, `${base}${path}`, body), 401);
      for (const key of others)
        assertProblem(t, await call(f, key, method, `${base}${path}`, body), 403, 'wrong_partner_kind');
      t.truthy(own);
    }
  }
  const history = await send(f.s, 'GET', `${ADMIN}/carts/${f.carts.c1}/history`);
  t.false(
    history.body.events.some((e: Json) => e.type === 'CurbsideArrivalPosted'),
    'refused posts appended nothing',
  );
});

// ---- curbside arrival -----------------------------------------------------------------------------------

async function arrivals(f: Fixture, uuid: string): Promise<Json[]> {
  const r = await send(f.s, 'GET', `${ADMIN}/carts/${uuid}/history`);
  return (r.body.events as Json[]).filter((e) => e.type === 'CurbsideArrivalPosted');
}

test.serial('POST /reservations/{uuid}/curbside_arrival: 201, the event in the cart’s history', async (t) => {
  const f = await setup(t);
  const { c1, c10 } = f.carts;
  const body = { vehicle_make: 'Volvo', vehicle_color: 'blue', parking_spot: '3', notes: 'Trunk is open' };
  const r = await call(f, f.op1.key, 'POST', `${OP}/reservations/${c1.toUpperCase()}/curbside_arrival`, body);
  t.is(r.status, 201, JSON.stringify(r.body));
  t.deepEqual(Object.keys(r.body), ['curbside_arrival']);
  const arrival = r.body.curbside_arrival;
  assertRecord(t, curbsideArrivalRecord, arrival, 'curbside_arrival');
  t.regex(arrival.arrived_at, /^\d{4}-\d\d-\d\dT/);
  t.deepEqual(arrival, {
    arrival_id: arrival.arrival_id,
    reservation_uuid: c1,
    store_id: 1,
    arrived_at: arrival.arrived_at,
    fields: body,
  });
  const events = await arrivals(f, c1);
  t.is(events.length, 1);
  t.like(events[0], {
    type: 'CurbsideArrivalPosted',
    actor: { type: 'partner', id: f.op1.id },
    data: { arrival_id: arrival.arrival_id, fields: body, arrived_at: arrival.arrived_at, store_id: 1 },
  });

  // The menu feed posts arrivals too, for its own site's reservations; optional fields may be left out.
  const fed = await call(f, f.feed.key, 'POST', `${FEED}/reservations/${c10}/curbside_arrival`, {
    vehicle_make: 'Kia',
    vehicle_color: 'white',
  });
  t.is(fed.status, 201, JSON.stringify(fed.body));
  t.deepEqual(fed.body.curbside_arrival.fields, { vehicle_make: 'Kia', vehicle_color: 'white' });
  const fedEvents = await arrivals(f, c10);
  t.is(fedEvents.length, 1);
  t.deepEqual(fedEvents[0].actor, { type: 'partner', id: f.feed.id, name: null });

  // The cart's status is unchanged, and the operator still lists it.
  await untilCaughtUp(f.s);
  const carts = await call(f, f.op1.key, 'GET', `${OP}/carts?status=verification`);
  t.true(carts.body.carts.some((c: Json) => c.uuid === c1));
});

test.serial(
  'POST curbside_arrival: 404 unknown, outside the key or from another site, 409 refusals, nothing appended',
  async (t) => {
    const f = await setup(t);
    const { c2, c3, c4, c5, c6, c8, c10, c11 } = f.carts;
    const body = { vehicle_make: 'VW', vehicle_color: 'red' };
    const store = await f.s.openStore();
    const cases: Array<[string, string, string, number, string]> = [
      [f.op1.key, OP, randomUUID(), 404, 'reservation_not_found'],
      [f.op1.key, OP, c4, 404, 'reservation_not_found'], // store 3: outside every key
      [f.feed.key, FEED, c6, 404, 'reservation_not_found'], // store 2: outside the feed's key
      [f.op1.key, OP, c6, 404, 'reservation_not_found'],
      [f.op1.key, OP, 'not-a-uuid', 404, 'not_found'],
      // At a store of the key, but from another partner's site (docs/partner-api.md, "The curbside arrival").
      [f.op1.key, OP, c5, 404, 'reservation_not_found'],
      [f.op1.key, OP, c10, 404, 'reservation_not_found'],
      [f.feed.key, FEED, c8, 404, 'reservation_not_found'],
      [f.op1.key, OP, c2, 409, 'reservation_not_checked_out'],
      [f.op1.key, OP, c3, 409, 'reservation_closed'],
      [f.opMulti.key, OP, c6, 409, 'reservation_not_curbside'], // a pickup reservation
      [f.feed.key, FEED, c11, 409, 'reservation_not_curbside'],
    ];
    for (const [key, base, uuid, status, code] of cases) {
      const before = await store.headPosition();
      const r = await call(f, key, 'POST', `${base}/reservations/${uuid}/curbside_arrival`, body);
      assertProblem(t, r, status, code);
      t.is(await store.headPosition(), before, `${uuid}: nothing appended`);
      // The answer never tells a cart of another store apart from a cart that does not exist.
      if (status === 404) t.false(JSON.stringify(r.body).includes('store'), JSON.stringify(r.body));
    }
    // c5, from the two-store operator's site, is its own to post for.
    t.is(
      (await call(f, f.opMulti.key, 'POST', `${OP}/reservations/${c5}/curbside_arrival`, body)).status,
      201,
    );
  },
);

test.serial('POST curbside_arrival: 422 for missing required, unknown or malformed fields', async (t) => {
  const f = await setup(t);
  const url = `${OP}/reservations/${f.carts.c9}/curbside_arrival`;
  const store = await f.s.openStore();
  const before = await store.headPosition();
  const cases: Array<[unknown, string[]]> = [
    [{ vehicle_make: 'VW' }, ['vehicle_color']],
    [{}, ['vehicle_make', 'vehicle_color']],
    [{ vehicle_make: 'VW', vehicle_color: '  ' }, ['vehicle_color']],
    [{ vehicle_make: 'VW', vehicle_color: 'red', licence_plate: 'X' }, ['licence_plate']],
    [{ vehicle_make: 'VW', vehicle_color: 'red', notes: 'x'.repeat(501) }, ['notes']],
    [{ vehicle_make: 3, vehicle_color: 'red' }, ['vehicle_make']],
    [[1, 2], []],
  ];
  for (const [body, fields] of cases) {
    const r = await call(f, f.op1.key, 'POST', url, body);
    assertProblem(t, r, 422);
    for (const field of fields) {
      t.true(
        (r.body.errors ?? []).some((e: Json) => e.field === field),
        `${JSON.stringify(body)} names ${field}: ${JSON.stringify(r.body.errors)}`,
      );
    }
  }
  assertProblem(t, await call(f, f.op1.key, 'POST', url, '{"vehicle_make": '), 400, 'malformed_json');
  assertProblem(t, await call(f, f.op1.key, 'POST', url, 'x'.repeat(70_000)), 413);
  t.is(await store.headPosition(), before, 'nothing appended');
  t.deepEqual(await arrivals(f, f.carts.c9), []);
});

test.serial('POST curbside_arrival: Idempotency-Key replays the first answer and appends once', async (t) => {
  const f = await setup(t);
  const url = `${OP}/reservations/${f.carts.c7}/curbside_arrival`;
  const key = `arrival-${randomUUID()}`;
  const body = { vehicle_make: 'Saab', vehicle_color: 'green' };
  const first = await call(f, f.op1.key, 'POST', url, body, { 'idempotency-key': key });
  t.is(first.status, 201, JSON.stringify(first.body));
  const again = await call(f, f.op1.key, 'POST', url, body, { 'idempotency-key': key });
  t.is(again.status, 201);
  t.deepEqual(again.body, first.body);
  t.is(again.headers.get('idempotent-replayed'), 'true');
  t.is((await arrivals(f, f.carts.c7)).length, 1);
  // The same key with another body is refused.
  const other = await call(
    f,
    f.op1.key,
    'POST',
    url,
    { ...body, vehicle_color: 'red' },
    { 'idempotency-key': key },
  );
  t.true(other.status === 422 || other.status === 409, JSON.stringify(other.body));
  t.regex(other.headers.get('content-type') ?? '', PROBLEM);
  // Keys are per partner: the feed's key space is its own.
  const fedUrl = `${FEED}/reservations/${f.carts.c10}/curbside_arrival`;
  const fed = await call(f, f.feed.key, 'POST', fedUrl, body, { 'idempotency-key': key });
  t.is(fed.status, 201);
  t.not(fed.body.curbside_arrival.arrival_id, first.body.curbside_arrival.arrival_id);
  t.is((await arrivals(f, f.carts.c10)).length, 2);
  // Without a key, each post is an arrival of its own.
  t.is((await call(f, f.op1.key, 'POST', url, body)).status, 201);
  t.is((await arrivals(f, f.carts.c7)).length, 2);
});

// ---- bad parameters ---------------------------------------------------------------------------------------

test.serial('bad parameters: 4xx problem documents naming the parameter, never 5xx', async (t) => {
  const f = await setup(t);
  const garbage = Buffer.from('["x"]').toString('base64url');
  const lists = ['/menu_products', '/specials', '/products/1/reviews'];
  const bad = [
    'limit=0',
    'limit=501',
    'limit=abc',
    'limit=1&limit=2',
    'cursor=%%%',
    'cursor=abc',
    `cursor=${garbage}`,
    `cursor=${'a'.repeat(600)}`,
    'updated_after=yesterday',
    'updated_after=2026-13-01T00:00:00Z',
    'foo=1',
  ];
  for (const api of APIS) {
    for (const path of lists) {
      for (const query of bad) {
        const r = await call(f, api.key(f), 'GET', `${api.base}${path}?${query}`);
        assertProblem(t, r, 400);
        t.true(
          Array.isArray(r.body.errors) && r.body.errors.length > 0,
          `${path}?${query}: ${JSON.stringify(r.body)}`,
        );
      }
    }
    assertProblem(t, await call(f, api.key(f), 'GET', `${api.base}/curbside_pickup_setting?limit=1`), 400);
    assertProblem(t, await call(f, api.key(f), 'GET', `${api.base}/menu_products/101?cursor=x`), 400);
    assertProblem(t, await call(f, api.key(f), 'GET', `${api.base}/nothing`), 404);
    const del = await call(f, api.key(f), 'DELETE', `${api.base}/menu_products/101`);
    assertProblem(t, del, del.status === 405 ? 405 : 404);
  }
  const cartsBad = [
    ...bad,
    'status=bogus',
    'abandoned=maybe',
    'created_after=1',
    'created_before=2026-01-01',
    `cursor=${Buffer.from('[1]').toString('base64url')}`,
  ];
  for (const query of cartsBad) {
    const r = await call(f, f.op1.key, 'GET', `${OP}/carts?${query}`);
    assertProblem(t, r, 400);
  }
  // A cursor of one list is not one of another.
  const page = await call(f, f.op1.key, 'GET', `${OP}/carts?limit=1`);
  assertProblem(
    t,
    await call(f, f.op1.key, 'GET', `${OP}/menu_products?cursor=${page.body.next_cursor}`),
    400,
    'invalid_cursor',
  );
});

// ---- no leaks ------------------------------------------------------------------------------------------------

test.serial('no answer to a store-1 key carries another store’s data', async (t) => {
  const f = await setup(t);
  // Every body the store-1 keys received in this file (the tests above ran first: serial).
  t.true(f.seenByStore1.length > 50, String(f.seenByStore1.length));
  const foreign = f.seenByStore1.flatMap((b) => storeIdsIn(b)).filter((id) => id !== 1);
  t.deepEqual(foreign, []);
  const text = JSON.stringify(f.seenByStore1);
  t.false(text.includes('Blue Door'));
  t.false(text.includes('Red Door'));
  t.false(text.includes('"_'), 'no private fields');
  t.false(text.includes(f.carts.c4));
  t.false(text.includes(f.carts.c6));
});

test.serial('OpenAPI documents: the store routes on both APIs, /carts only on the operator’s', async (t) => {
  const f = await setup(t);
  const op = await send(f.s, 'GET', `${OP}/openapi.json`, undefined, { authorization: '' });
  const feed = await send(f.s, 'GET', `${FEED}/openapi.json`, undefined, { authorization: '' });
  t.is(op.status, 200);
  t.is(feed.status, 200);
  const shared = [
    '/menu_products',
    '/menu_products/{menu_product_id}',
    '/products/{product_id}/recommendations',
    '/products/{product_id}/reviews',
    '/specials',
    '/curbside_pickup_setting',
    '/reservations/{uuid}/curbside_arrival',
  ];
  const paths = (doc: Json) =>
    Object.keys(doc.paths ?? {}).map((p) => p.replace(/^\/partner\/[^/]+\/v1/, ''));
  t.deepEqual(paths(op.body).sort(), ['/carts', ...shared].sort());
  t.deepEqual(paths(feed.body).sort(), [...shared].sort());
});
