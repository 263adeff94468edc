/**
 * The brand partner API (`/partner/brand/v1`, docs/partner-api.md) on a real service: a small network of stores
 * around San Francisco (and farther), three brands, two brand partners; every endpoint's exact answer,
 * its filters, paging (also while records are added), authentication and scope, and the refusals.
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import {
  menuProductRecord,
  partnerCartRecord,
  productRecord,
  reviewRecord,
  specialRecord,
  storeRecord,
} from '../../api/partner/schemas.ts';
import { createCommandHandler } from '../../application/command-handler.ts';
import * as cart from '../../domain/cart.ts';
import { eventRegistry } from '../../domain/index.ts';
import {
  ADMIN,
  assertPage,
  caughtUp,
  get,
  ISO,
  type Json,
  ok,
  type Partner,
  PLATFORM,
  problem,
  registerPartner,
  sleep,
  walk,
  write,
} from '../support/brand-partner.ts';
import { startService, type TestService } from '../support/service.ts';

const B = '/partner/brand/v1';

/** Real places: the distances from the centroid of ZIP 94103 (San Francisco) are in the comments. */
const STORES: Record<number, { name: string; city: string; zip: string; lat: number; long: number }> = {
  101: { name: 'Mission Greens', city: 'San Francisco', zip: '94103', lat: 37.7749, long: -122.4194 }, // 0.46 mi
  102: { name: 'Oakland Leaf', city: 'Oakland', zip: '94612', lat: 37.8044, long: -122.2712 }, // 7.95 mi
  103: { name: 'San Jose Buds', city: 'San Jose', zip: '95113', lat: 37.3382, long: -121.8863 }, // 41.6 mi
  104: { name: 'LA Canna', city: 'Los Angeles', zip: '90012', lat: 34.0522, long: -118.2437 }, // 347 mi
  105: { name: 'Capitol Kind', city: 'Sacramento', zip: '95814', lat: 38.5816, long: -121.4944 }, // 74.8 mi
  106: { name: 'Civic Center Cannabis', city: 'San Francisco', zip: '94102', lat: 37.7793, long: -122.4193 }, // 0.62 mi
};

/** product → [brand, kind]. Brands 1 and 2 are partner A's, brand 3 partner B's. Product 14 is listed nowhere. */
const PRODUCTS: Record<number, [number, string]> = {
  11: [1, 'flower'],
  12: [1, 'edible'],
  13: [2, 'vape'],
  14: [1, 'pre-roll'],
  31: [3, 'flower'],
  32: [3, 'edible'],
};

/** menu product → [store, product]. */
const MENU: Record<number, [number, number]> = {
  1001: [101, 11],
  1002: [101, 31],
  1003: [102, 12],
  1004: [103, 11],
  1005: [104, 13],
  1006: [105, 12],
  1007: [106, 31],
  1008: [101, 13],
  1009: [101, 32],
};

/** review → [product, store, rating, verified]. */
const REVIEWS: Record<number, [number, number, number, boolean]> = {
  501: [11, 101, 5, true],
  502: [11, 103, 1, false],
  503: [13, 104, 4, true],
  504: [31, 101, 3, true],
  505: [12, 102, 2, true],
  506: [32, 101, 4, true],
};

const SPECIALS: Record<number, Json> = {
  // Names product 11 (brand 1): A.
  701: { store_id: 101, title: 'Flower Friday', special_type: 'product', product_ids: [11] },
  // Names brand 3 at a store that does not carry it: B.
  702: { store_id: 104, title: 'Brand 3 week', special_type: 'product', brand_ids: [3] },
  // Edibles at store 102, which lists product 12 (brand 1, edible): A.
  703: { store_id: 102, title: 'Edible deal', special_type: 'product', kinds: ['edible'] },
  // Flower at store 106, which lists product 31 (brand 3): B.
  704: { store_id: 106, title: 'Flower at Civic', special_type: 'product', kinds: ['flower'] },
  // A cart total special involves no product: nobody's.
  705: { store_id: 103, title: '$10 off $100', special_type: 'cart_total' },
  // Brand 2, disabled: still A's (the record says enabled: false).
  706: { store_id: 101, title: 'Vape promo', special_type: 'product', brand_ids: [2], enabled: false },
};

interface Network {
  a: Partner;
  b: Partner;
  feed: Partner;
  operator: Partner;
  /** The platform's answers: records as written. */
  stores: Record<number, Json>;
  products: Record<number, Json>;
  reviews: Record<number, Json>;
  specials: Record<number, Json>;
}

async function seed(t: ExecutionContext, svc: TestService): Promise<Network> {
  const net: Network = { stores: {}, products: {}, reviews: {}, specials: {} } as Network;
  for (const [id, s] of Object.entries(STORES)) {
    const out = await write(t, svc, 'PUT', `${PLATFORM}/stores/${id}`, {
      ...s,
      address: `${id} Main St`,
      state: 'CA',
      pickup: true,
    });
    net.stores[Number(id)] = out.store;
  }
  for (const id of [1, 2, 3]) await write(t, svc, 'PUT', `${PLATFORM}/brands/${id}`, { name: `Brand ${id}` });
  for (const [id, [brand, kind]] of Object.entries(PRODUCTS)) {
    const out = await write(t, svc, 'PUT', `${PLATFORM}/products/${id}`, {
      name: `Product ${id}`,
      brand_id: brand,
      kind,
      lineage: kind === 'flower' ? 'hybrid' : null,
      percent_thc: 20,
      image_urls: [`https://img.example.com/${id}.png`],
    });
    net.products[Number(id)] = out.product;
  }
  for (const [id, [store, product]] of Object.entries(MENU)) {
    await write(t, svc, 'PUT', `${PLATFORM}/stores/${store}/menu_products/${id}`, {
      product_id: product,
      prices: { gram: '10.00', 'eighth ounce': '35.00' },
    });
  }
  for (const [id, [product, store, rating, verified]] of Object.entries(REVIEWS)) {
    const out = await write(t, svc, 'PUT', `${PLATFORM}/reviews/${id}`, {
      product_id: product,
      store_id: store,
      rating,
      comment: `Review ${id}`,
      verified,
    });
    net.reviews[Number(id)] = out.review;
  }
  for (const [id, s] of Object.entries(SPECIALS)) {
    const out = await write(t, svc, 'PUT', `${PLATFORM}/specials/${id}`, {
      discount_type: 'percent',
      discount_value: '10.00',
      starts_at: '2020-01-01T00:00:00Z',
      ...s,
    });
    net.specials[Number(id)] = out.special;
  }
  net.a = await registerPartner(t, svc, { name: 'Brand A', kind: 'brand', brand_ids: [1, 2] });
  net.b = await registerPartner(t, svc, { name: 'Brand B', kind: 'brand', brand_ids: [3] });
  net.feed = await registerPartner(t, svc, { name: 'Feed', kind: 'brand_feed', all_brands: true });
  net.operator = await registerPartner(t, svc, { name: 'Op', kind: 'store_operator', store_ids: [101] });
  await caughtUp(t, svc);
  return net;
}

const ids = (records: Json[], field = 'id') => records.map((r) => r[field]);

/** None of these strings (another partner's ids, uuids) appears anywhere in the body. */
function noneOf(t: ExecutionContext, body: Json, forbidden: string[]) {
  const text = JSON.stringify(body);
  for (const s of forbidden) t.false(text.includes(s), `${s} must not appear in ${text.slice(0, 300)}`);
}

// ---- catalog endpoints --------------------------------------------------------------------------

test('GET /stores/{store_id}/menu_products: the menu products of the partner brands at the store, else 404', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);
  const a = net.a.api_key;
  const b = net.b.api_key;

  const body = await ok(t, svc, a, `${B}/stores/101/menu_products`);
  assertPage(t, body, 'menu_products', menuProductRecord);
  t.deepEqual(ids(body.menu_products), [1001, 1008]);
  t.is(body.next_cursor, null);
  const [mp] = body.menu_products;
  t.deepEqual(mp, {
    id: 1001,
    product_id: 11,
    store_id: 101,
    name: 'Product 11',
    brand: 'Brand 1',
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
    percent_cbd: null,
    image_urls: ['https://img.example.com/11.png'],
    in_stock: true,
    aggregate_rating: 5,
    review_count: 1,
    applicable_special_ids: [701],
    updated_at: mp.updated_at,
  });
  t.regex(mp.updated_at, ISO);
  t.deepEqual(body.menu_products[1].applicable_special_ids, [], 'special 706 is disabled');

  t.deepEqual(ids((await ok(t, svc, b, `${B}/stores/101/menu_products`)).menu_products), [1002, 1009]);
  t.deepEqual(ids((await ok(t, svc, a, `${B}/stores/102/menu_products`)).menu_products), [1003]);
  t.deepEqual(ids((await ok(t, svc, a, `${B}/stores/104/menu_products`)).menu_products), [1005]);

  // A store carrying none of the partner's brands, an unknown store, a malformed id: the same 404.
  await problem(t, svc, a, `${B}/stores/106/menu_products`, 404, 'store_not_found');
  await problem(t, svc, b, `${B}/stores/102/menu_products`, 404, 'store_not_found');
  await problem(t, svc, a, `${B}/stores/999/menu_products`, 404, 'store_not_found');
  await problem(t, svc, a, `${B}/stores/abc/menu_products`, 404);
  await problem(t, svc, a, `${B}/stores/0/menu_products`, 404);

  // updated_after: a relisting moves one menu product past the mark.
  const mark = new Date().toISOString();
  await sleep(5);
  await write(t, svc, 'PUT', `${PLATFORM}/stores/101/menu_products/1008`, {
    product_id: 13,
    prices: { each: '25.00' },
    in_stock: false,
  });
  await caughtUp(t, svc);
  const since = await ok(t, svc, a, `${B}/stores/101/menu_products?updated_after=${mark}`);
  t.deepEqual(ids(since.menu_products), [1008]);
  t.like(since.menu_products[0], { price_each: '25.00', price_gram: null, in_stock: false });
  await problem(
    t,
    svc,
    a,
    `${B}/stores/101/menu_products?updated_after=yesterday`,
    400,
    'invalid_parameter',
    'updated_after',
  );

  // Delisting the partner's last product at a store takes the store out of its scope.
  await write(t, svc, 'DELETE', `${PLATFORM}/stores/104/menu_products/1005`);
  await caughtUp(t, svc);
  await problem(t, svc, a, `${B}/stores/104/menu_products`, 404, 'store_not_found');
});

test('GET /products: the partner products carried within the radius of the ZIP centroid, with those stores only', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);
  const a = net.a.api_key;

  const near = await ok(t, svc, a, `${B}/products?zipcode=94103`);
  assertPage(t, near, 'products', productRecord);
  // Default 25 miles: stores 101 (0.46 mi), 102 (7.95 mi), 106 (0.62 mi, brand 3 only).
  t.deepEqual(
    near.products.map((p: Json) => [p.product_id, p.store_ids]),
    [
      [11, [101]],
      [12, [102]],
      [13, [101]],
    ],
  );
  const p11 = near.products[0];
  t.deepEqual(p11, {
    ...net.products[11],
    brand: 'Brand 1',
    aggregate_rating: 5,
    review_count: 1,
    store_ids: [101],
    updated_at: p11.updated_at,
  });
  t.regex(p11.updated_at, ISO);

  const at = async (query: string) =>
    (await ok(t, svc, a, `${B}/products?${query}`)).products.map((p: Json) => [p.product_id, p.store_ids]);
  t.deepEqual(await at('zipcode=94103&radius=0.5'), [
    [11, [101]],
    [13, [101]],
  ]);
  t.deepEqual(await at('zipcode=94103&radius=50'), [
    [11, [101, 103]],
    [12, [102]],
    [13, [101]],
  ]);
  t.deepEqual(await at('zipcode=94103&radius=100'), [
    [11, [101, 103]],
    [12, [102, 105]],
    [13, [101]],
  ]);
  t.deepEqual(await at('zipcode=90012&radius=5'), [[13, [104]]]);
  t.deepEqual(await at('zipcode=10001&radius=100'), [], 'a known ZIP with no store near');
  // Partner B sees its own brand only.
  const bNear = await ok(t, svc, net.b.api_key, `${B}/products?zipcode=94103`);
  t.deepEqual(
    bNear.products.map((p: Json) => [p.product_id, p.store_ids]),
    [
      [31, [101, 106]],
      [32, [101]],
    ],
  );

  // updated_after: a product upsert after the mark.
  const mark = new Date().toISOString();
  await sleep(5);
  await write(t, svc, 'PUT', `${PLATFORM}/products/12`, { name: 'Gummies', brand_id: 1, kind: 'edible' });
  await caughtUp(t, svc);
  t.deepEqual(await at(`zipcode=94103&radius=100&updated_after=${encodeURIComponent(mark)}`), [
    [12, [102, 105]],
  ]);

  // Refusals: 400 for malformed parameters, 422 for a ZIP code that does not exist.
  await problem(t, svc, a, `${B}/products`, 400, 'invalid_parameter', 'zipcode');
  await problem(t, svc, a, `${B}/products?zipcode=9410`, 400, 'invalid_parameter', 'zipcode');
  await problem(t, svc, a, `${B}/products?zipcode=941030`, 400, 'invalid_parameter', 'zipcode');
  await problem(t, svc, a, `${B}/products?zipcode=abcde`, 400, 'invalid_parameter', 'zipcode');
  await problem(t, svc, a, `${B}/products?zipcode=94103&zipcode=94102`, 400, 'invalid_parameter', 'zipcode');
  await problem(t, svc, a, `${B}/products?zipcode=00000`, 422, 'unknown_zipcode', 'zipcode');
  await problem(t, svc, a, `${B}/products?zipcode=99999&radius=10`, 422, 'unknown_zipcode', 'zipcode');
  for (const radius of ['101', '0', '-5', 'far', '1e9', 'Infinity', '']) {
    await problem(
      t,
      svc,
      a,
      `${B}/products?zipcode=94103&radius=${radius}`,
      400,
      'invalid_parameter',
      'radius',
    );
  }
  await problem(t, svc, a, `${B}/products?zipcode=94103&sort=name`, 400, 'invalid_parameter', 'sort');
});

test('GET /stores: the stores carrying at least one partner product, with the partner brands they carry', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);

  const body = await ok(t, svc, net.a.api_key, `${B}/stores`);
  assertPage(t, body, 'stores', storeRecord);
  t.deepEqual(
    body.stores.map((s: Json) => [s.id, s.brand_ids]),
    [
      [101, [1, 2]],
      [102, [1]],
      [103, [1]],
      [104, [2]],
      [105, [1]],
    ],
  );
  const s101 = body.stores[0];
  t.deepEqual(s101, {
    ...net.stores[101],
    brand_ids: [1, 2],
    rating: 4,
    reviews_count: 3,
    updated_at: s101.updated_at,
  });
  t.regex(s101.updated_at, ISO);
  const bBody = await ok(t, svc, net.b.api_key, `${B}/stores`);
  t.deepEqual(
    bBody.stores.map((s: Json) => [s.id, s.brand_ids]),
    [
      [101, [3]],
      [106, [3]],
    ],
  );

  const mark = new Date().toISOString();
  await sleep(5);
  await write(t, svc, 'PUT', `${PLATFORM}/stores/103`, {
    ...net.stores[103],
    id: undefined,
    updated_at: undefined,
    name: 'SJ Buds',
  });
  await caughtUp(t, svc);
  const since = await ok(t, svc, net.a.api_key, `${B}/stores?updated_after=${mark}`);
  t.deepEqual(ids(since.stores), [103]);
  t.is(since.stores[0].name, 'SJ Buds');
});

test('GET /reviews and GET /specials: the verified reviews and the specials involving the partner products', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);
  const a = net.a.api_key;
  const b = net.b.api_key;

  const reviews = await ok(t, svc, a, `${B}/reviews`);
  assertPage(t, reviews, 'reviews', reviewRecord);
  t.deepEqual(ids(reviews.reviews), [501, 503, 505], 'verified only (502 is not)');
  t.deepEqual(reviews.reviews[0], net.reviews[501]);
  t.deepEqual(ids((await ok(t, svc, b, `${B}/reviews`)).reviews), [504, 506]);

  const specials = await ok(t, svc, a, `${B}/specials`);
  assertPage(t, specials, 'specials', specialRecord);
  t.deepEqual(ids(specials.specials), [701, 703, 706]);
  t.deepEqual(specials.specials[0], net.specials[701]);
  t.deepEqual(ids((await ok(t, svc, b, `${B}/specials`)).specials), [702, 704]);

  // A review revised to verified, and a special newly involving brand 2 after the mark.
  const mark = new Date().toISOString();
  await sleep(5);
  await write(t, svc, 'PUT', `${PLATFORM}/reviews/502`, {
    product_id: 11,
    store_id: 103,
    rating: 2,
    verified: true,
  });
  await write(t, svc, 'PUT', `${PLATFORM}/specials/705`, {
    store_id: 103,
    title: '$10 off $100, and vapes',
    special_type: 'cart_total',
    discount_type: 'dollar_amount',
    discount_value: '10.00',
    brand_ids: [2],
    starts_at: '2020-01-01T00:00:00Z',
  });
  await caughtUp(t, svc);
  t.deepEqual(ids((await ok(t, svc, a, `${B}/reviews?updated_after=${mark}`)).reviews), [502]);
  t.deepEqual(ids((await ok(t, svc, a, `${B}/reviews`)).reviews), [501, 502, 503, 505]);
  t.deepEqual(ids((await ok(t, svc, a, `${B}/specials?updated_after=${mark}`)).specials), [705]);
  t.deepEqual(ids((await ok(t, svc, b, `${B}/specials?updated_after=${mark}`)).specials), []);
  await problem(
    t,
    svc,
    a,
    `${B}/reviews?updated_after=2026-02-30T00:00:00`,
    400,
    'invalid_parameter',
    'updated_after',
  );
  await problem(t, svc, a, `${B}/specials?limit=5&store_id=101`, 400, 'invalid_parameter', 'store_id');
});

// ---- carts --------------------------------------------------------------------------------------

async function abandon(svc: TestService, uuid: string): Promise<void> {
  const commands = createCommandHandler(await svc.openStore(), eventRegistry);
  // As the abandonment timer would, with a 1 ms idle time instead of 6 hours.
  const at = new Date().toISOString();
  await commands.handle(
    cart.streamId(uuid),
    cart.decider,
    { type: 'AbandonCart', at, abandon_after_ms: 1 },
    { correlationId: randomUUID(), causationId: null, actor: { type: 'system', id: 'test' }, at },
  );
}

test('GET /carts: the carts from the partner site, filtered by time, status and abandonment', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);
  const a = net.a.api_key;
  const latest = new Map<string, Json>();
  const newCart = async (store: number, channel: string, partnerId: string | null, item?: number) => {
    const uuid = randomUUID();
    let out = await write(t, svc, 'POST', `${PLATFORM}/carts`, {
      uuid,
      store_id: store,
      source: { channel, partner_id: partnerId },
    });
    if (item) {
      out = await write(t, svc, 'POST', `${PLATFORM}/carts/${uuid}/items`, {
        menu_product_id: item,
        price_id: 'gram',
        count: 2,
      });
    }
    latest.set(uuid, out.cart);
    return uuid;
  };
  const c1 = await newCart(101, 'embedded', net.a.partner_id, 1001);
  const c2 = await newCart(102, 'headless', net.a.partner_id);
  const c3 = await newCart(101, 'embedded', net.b.partner_id, 1002);
  const c4 = await newCart(101, 'embedded', null, 1001);
  await sleep(5); // the filters compare exact times (the record's created_at has whole seconds)
  const mid = new Date().toISOString();
  await sleep(5);
  const c5 = await newCart(101, 'headless', net.a.partner_id, 1008);
  await write(t, svc, 'POST', `${PLATFORM}/carts/${c5}/checkout`, { reservation_mode: 'pickup' });
  latest.set(
    c5,
    (await write(t, svc, 'POST', `${PLATFORM}/carts/${c5}/status`, { status: 'preparing' })).cart,
  );
  await abandon(svc, c1);
  await abandon(svc, c3);
  await caughtUp(t, svc);

  const all = await ok(t, svc, a, `${B}/carts`);
  assertPage(t, all, 'carts', partnerCartRecord);
  t.deepEqual(ids(all.carts, 'uuid'), [c1, c2, c5]);
  for (const c of all.carts) t.is(c.source.partner_id, net.a.partner_id);
  const [r1, r2, r5] = all.carts;
  t.deepEqual(r2, {
    ...latest.get(c2),
    updated_at: r2.updated_at,
    abandoned_at: null,
    source: { channel: 'headless', partner_id: net.a.partner_id },
  });
  t.deepEqual(r1, { ...latest.get(c1), updated_at: r1.updated_at, abandoned_at: r1.abandoned_at });
  t.regex(r1.abandoned_at, ISO);
  t.deepEqual(r5, { ...latest.get(c5), status: 'preparing', abandoned_at: null });
  t.true(r1.id < r2.id && r2.id < r5.id);
  noneOf(t, all, [c3, c4, net.b.partner_id]);
  t.deepEqual(ids((await ok(t, svc, net.b.api_key, `${B}/carts`)).carts, 'uuid'), [c3]);

  const uuids = async (query: string) => ids((await ok(t, svc, a, `${B}/carts?${query}`)).carts, 'uuid');
  t.deepEqual(await uuids('abandoned=true'), [c1]);
  t.deepEqual(await uuids('abandoned=false'), [c2, c5]);
  t.deepEqual(await uuids('status=preparing'), [c5]);
  t.deepEqual(await uuids('status=pending'), [c1, c2]);
  t.deepEqual(await uuids('status=cancelled'), []);
  t.deepEqual(await uuids(`created_after=${encodeURIComponent(mid)}`), [c5]);
  t.deepEqual(await uuids(`created_before=${encodeURIComponent(mid)}`), [c1, c2]);
  t.deepEqual(await uuids(`created_before=${encodeURIComponent(mid)}&abandoned=false`), [c2]);
  const offset = mid.replace('Z', '+00:00');
  t.deepEqual(await uuids(`created_after=${encodeURIComponent(offset)}`), [c5], 'an offset is accepted');

  const mark = new Date().toISOString();
  await sleep(5);
  await write(t, svc, 'POST', `${PLATFORM}/carts/${c2}/items`, {
    menu_product_id: 1003,
    price_id: 'gram',
    count: 1,
  });
  await caughtUp(t, svc);
  t.deepEqual(await uuids(`updated_after=${mark}`), [c2]);

  for (const [query, field] of [
    ['created_after=2026-01-01', 'created_after'],
    ['created_before=not-a-time', 'created_before'],
    ['updated_after=2026-01-01T25:00:00Z', 'updated_after'],
    ['status=abandoned', 'status'],
    ['abandoned=yes', 'abandoned'],
    ['abandoned=', 'abandoned'],
    ['partner_id=x', 'partner_id'],
  ]) {
    await problem(t, svc, a, `${B}/carts?${query}`, 400, 'invalid_parameter', field);
  }
});

// ---- paging -------------------------------------------------------------------------------------

test('paging: limit and cursor, Link until the last page, every record once while records are added', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);
  const a = net.a.api_key;

  // 20 more reviews and specials of brand 1, and 12 more stores carrying it.
  for (let i = 0; i < 20; i++) {
    await write(t, svc, 'PUT', `${PLATFORM}/reviews/${600 + i}`, {
      product_id: 12,
      store_id: 102,
      rating: 3,
      verified: i % 4 !== 0,
    });
    await write(t, svc, 'PUT', `${PLATFORM}/specials/${800 + i}`, {
      store_id: 102,
      title: `Deal ${i}`,
      special_type: 'product',
      discount_type: 'percent',
      discount_value: '5.00',
      product_ids: [12],
      starts_at: '2020-01-01T00:00:00Z',
    });
  }
  for (let i = 0; i < 12; i++) {
    const id = 200 + i * 2;
    await write(t, svc, 'PUT', `${PLATFORM}/stores/${id}`, {
      ...STORES[101],
      name: `SF ${id}`,
      address: 'x',
      state: 'CA',
      lat: 37.77 + i / 1000,
    });
    await write(t, svc, 'PUT', `${PLATFORM}/stores/${id}/menu_products/${3000 + i}`, {
      product_id: 11,
      prices: { each: '1.00' },
    });
  }
  await caughtUp(t, svc);

  const expected = {
    reviews: [501, 503, 505, ...Array.from({ length: 20 }, (_, i) => 600 + i).filter((_, i) => i % 4 !== 0)],
    specials: [701, 703, 706, ...Array.from({ length: 20 }, (_, i) => 800 + i)],
    stores: [101, 102, 103, 104, 105, ...Array.from({ length: 12 }, (_, i) => 200 + i * 2)],
  };
  for (const [plural, want] of Object.entries(expected)) {
    for (const limit of [1, 3, 7, 100]) {
      const pages = await walk(t, svc, a, `${B}/${plural}?limit=${limit}`, plural);
      t.deepEqual(ids(pages.flat()), want, `${plural} by ${limit}`);
      t.true(pages.every((p) => p.length <= limit));
      t.is(pages.length, Math.max(1, Math.ceil(want.length / limit)));
    }
  }
  // Default limit 100: one page.
  t.is((await ok(t, svc, a, `${B}/reviews`)).next_cursor, null);

  // Records added between pages, before and after the cursor: those already there appear exactly once,
  // the ones after the cursor appear too, and nothing repeats.
  let added = 0;
  const pages = await walk(t, svc, a, `${B}/stores?limit=4`, 'stores', async (page) => {
    if (page > 3) return;
    for (const id of [199 + page * 2, 300 + page]) {
      await write(t, svc, 'PUT', `${PLATFORM}/stores/${id}`, {
        ...STORES[101],
        name: `New ${id}`,
        address: 'y',
        state: 'CA',
      });
      await write(t, svc, 'PUT', `${PLATFORM}/stores/${id}/menu_products/${4000 + id}`, {
        product_id: 11,
        prices: { each: '1.00' },
      });
      added += 1;
    }
    await caughtUp(t, svc);
  });
  const seen = ids(pages.flat());
  t.is(new Set(seen).size, seen.length, 'no record twice');
  for (const id of expected.stores) t.is(seen.filter((x) => x === id).length, 1, `store ${id} once`);
  for (const id of [301, 302, 303]) t.true(seen.includes(id), `store ${id}, added after the cursor`);
  t.deepEqual(
    seen,
    [...seen].sort((x, y) => x - y),
    'in id order',
  );
  t.is(added, 6);

  // Carts page by id too; a cart created mid-walk comes last and is met.
  const carts: string[] = [];
  for (let i = 0; i < 5; i++) {
    const uuid = randomUUID();
    await write(t, svc, 'POST', `${PLATFORM}/carts`, {
      uuid,
      store_id: 101,
      source: { channel: 'embedded', partner_id: net.a.partner_id },
    });
    carts.push(uuid);
  }
  await caughtUp(t, svc);
  const late = randomUUID();
  const cartPages = await walk(t, svc, a, `${B}/carts?limit=2`, 'carts', async (page) => {
    if (page !== 1) return;
    await write(t, svc, 'POST', `${PLATFORM}/carts`, {
      uuid: late,
      store_id: 101,
      source: { channel: 'embedded', partner_id: net.a.partner_id },
    });
    await caughtUp(t, svc);
  });
  t.deepEqual(ids(cartPages.flat(), 'uuid'), [...carts, late]);

  // Menu products and products page too.
  const menu = await walk(t, svc, a, `${B}/stores/101/menu_products?limit=1`, 'menu_products');
  t.deepEqual(ids(menu.flat()), [1001, 1008]);
  const products = await walk(t, svc, a, `${B}/products?zipcode=94103&radius=100&limit=1`, 'products');
  t.deepEqual(ids(products.flat(), 'product_id'), [11, 12, 13]);

  // limit and cursor refusals.
  for (const limit of ['0', '501', 'abc', '1.5', '-1', '']) {
    await problem(t, svc, a, `${B}/reviews?limit=${limit}`, 400, 'invalid_parameter', 'limit');
  }
  const foreign = Buffer.from(JSON.stringify(['x'])).toString('base64url');
  for (const cursor of ['garbage', '!!!', foreign, 'W10', Buffer.from('{"a":1}').toString('base64url')]) {
    for (const path of [
      'reviews',
      'stores',
      'specials',
      'carts',
      'stores/101/menu_products',
      'products?zipcode=94103',
    ]) {
      const sep = path.includes('?') ? '&' : '?';
      await problem(t, svc, a, `${B}/${path}${sep}cursor=${cursor}`, 400, 'invalid_cursor', 'cursor');
    }
  }
  await problem(t, svc, a, `${B}/reviews?cursor=${'x'.repeat(600)}`, 400, 'invalid_parameter', 'cursor');
});

// ---- authentication and scope -------------------------------------------------------------------

test('auth: 401 without a valid key, 403 for another kind, and no other partner data in any answer', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);
  const paths = [
    '/carts',
    '/stores/101/menu_products',
    '/products?zipcode=94103',
    '/stores',
    '/reviews',
    '/specials',
  ];
  for (const path of paths) {
    const none = await problem(t, svc, null, `${B}${path}`, 401, 'unauthorized');
    t.truthy(none);
    const r = await get(svc, null, `${B}${path}`);
    t.is(r.headers.get('www-authenticate'), 'Bearer realm="pds-partner"');
    await problem(t, svc, 'Bearer not-a-key', `${B}${path}`, 401, 'unauthorized');
    await problem(
      t,
      svc,
      `Basic ${Buffer.from('a:b').toString('base64')}`,
      `${B}${path}`,
      401,
      'unauthorized',
    );
    await problem(t, svc, `${net.a.api_key}x`, `${B}${path}`, 401, 'unauthorized');
    await problem(t, svc, net.operator.api_key, `${B}${path}`, 403, 'wrong_partner_kind');
    await problem(t, svc, net.feed.api_key, `${B}${path}`, 403, 'wrong_partner_kind');
  }
  // Security headers on partner answers.
  const r = await get(svc, net.a.api_key, `${B}/stores`);
  t.is(r.headers.get('x-content-type-options'), 'nosniff');
  t.is(r.headers.get('cache-control'), 'no-store');
  t.truthy(r.headers.get('ratelimit-limit'));

  // Nothing of partner B (brand 3: products 31, 32; menu products 1002, 1007, 1009; reviews 504, 506;
  // specials 702, 704) reaches partner A, and the reverse.
  for (const path of paths) {
    const body = await ok(t, svc, net.a.api_key, `${B}${path}${path.includes('?') ? '&' : '?'}limit=500`);
    const text = JSON.stringify(body);
    t.false(/"brand_id":3\b/.test(text), `${path}: no brand 3 record`);
    t.false(
      /"(product_)?id":(31|32|1002|1007|1009|504|506|702|704)\b/.test(text),
      `${path}: ${text.slice(0, 200)}`,
    );
    t.false(text.includes('"_'), 'no private fields');
  }
  for (const path of paths.filter((p) => !p.includes('menu_products'))) {
    const text = JSON.stringify(await ok(t, svc, net.b.api_key, `${B}${path}`));
    t.false(/"brand_id":(1|2)\b/.test(text), `${path} (B): no brand 1 or 2 record`);
  }

  // A revoked key is refused; a new key of the same partner works.
  const fresh = await write(t, svc, 'POST', `${ADMIN}/partners/${net.a.partner_id}/keys`);
  await write(t, svc, 'DELETE', `${ADMIN}/partners/${net.a.partner_id}/keys/${net.a.key_id}`);
  await caughtUp(t, svc);
  await problem(t, svc, net.a.api_key, `${B}/stores`, 401, 'unauthorized');
  t.deepEqual(ids((await ok(t, svc, fresh.api_key, `${B}/stores`)).stores), [101, 102, 103, 104, 105]);
});
