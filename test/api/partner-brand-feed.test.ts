/**
 * The brand feed partner API (`/partner/brand-feed/v1`, docs/partner-api.md) on a real service: the verified
 * reviews of the brands within a partner's policy (some brands, or all), per product, their filters
 * and paging, authentication, and that nothing outside the policy ever shows.
 */
import test, { type ExecutionContext } from 'ava';
import { reviewRecord } from '../../api/partner/schemas.ts';
import {
  ADMIN,
  assertPage,
  caughtUp,
  get,
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

const F = '/partner/brand-feed/v1';

/** product → brand. */
const PRODUCTS: Record<number, number> = { 11: 1, 12: 1, 21: 2, 31: 3, 32: 3 };
/** review → [product, store, rating, verified]. */
const REVIEWS: Record<number, [number, number, number, boolean]> = {
  501: [11, 101, 5, true],
  502: [11, 101, 1, false],
  503: [21, 102, 4, true],
  504: [31, 101, 3, true],
  505: [12, 102, 2, true],
  506: [12, 101, 5, false],
};

interface Network {
  one: Partner;
  two: Partner;
  all: Partner;
  brand: Partner;
  menuFeed: Partner;
  reviews: Record<number, Json>;
}

async function seed(t: ExecutionContext, svc: TestService): Promise<Network> {
  for (const [id, lat] of [
    [101, 37.7749],
    [102, 37.8044],
  ]) {
    await write(t, svc, 'PUT', `${PLATFORM}/stores/${id}`, {
      name: `Store ${id}`,
      address: `${id} Main St`,
      city: 'San Francisco',
      state: 'CA',
      zip: '94103',
      lat,
      long: -122.4194,
    });
  }
  for (const id of [1, 2, 3]) await write(t, svc, 'PUT', `${PLATFORM}/brands/${id}`, { name: `Brand ${id}` });
  for (const [id, brand] of Object.entries(PRODUCTS)) {
    await write(t, svc, 'PUT', `${PLATFORM}/products/${id}`, {
      name: `Product ${id}`,
      brand_id: brand,
      kind: 'edible',
    });
  }
  const reviews: Record<number, Json> = {};
  for (const [id, [product, store, rating, verified]] of Object.entries(REVIEWS)) {
    const out = await write(t, svc, 'PUT', `${PLATFORM}/reviews/${id}`, {
      product_id: product,
      store_id: store,
      rating,
      comment: rating > 3 ? 'Lovely' : null,
      feelings: ['relaxed'],
      activities: ['reading'],
      verified,
    });
    reviews[Number(id)] = out.review;
  }
  const net: Network = {
    one: await registerPartner(t, svc, { name: 'Feed one', kind: 'brand_feed', brand_ids: [1] }),
    two: await registerPartner(t, svc, { name: 'Feed two', kind: 'brand_feed', brand_ids: [3, 1] }),
    all: await registerPartner(t, svc, { name: 'Feed all', kind: 'brand_feed', all_brands: true }),
    brand: await registerPartner(t, svc, { name: 'A brand', kind: 'brand', brand_ids: [1] }),
    menuFeed: await registerPartner(t, svc, { name: 'Menus', kind: 'store_menu_feed', store_ids: [101] }),
    reviews,
  };
  await caughtUp(t, svc);
  return net;
}

const ids = (body: Json) => (body.reviews as Json[]).map((r) => r.id);

test('GET /reviews: the verified reviews of the brands within the policy, or of all brands', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);

  const one = await ok(t, svc, net.one.api_key, `${F}/reviews`);
  assertPage(t, one, 'reviews', reviewRecord);
  t.deepEqual(ids(one), [501, 505]);
  t.is(one.next_cursor, null);
  t.deepEqual(one.reviews[0], net.reviews[501]);
  t.deepEqual(one.reviews[0], {
    id: 501,
    product_id: 11,
    store_id: 101,
    brand_id: 1,
    rating: 5,
    comment: 'Lovely',
    feelings: ['relaxed'],
    activities: ['reading'],
    verified: true,
    created_at: one.reviews[0].created_at,
    updated_at: one.reviews[0].updated_at,
  });
  t.deepEqual(ids(await ok(t, svc, net.two.api_key, `${F}/reviews`)), [501, 504, 505]);
  const all = await ok(t, svc, net.all.api_key, `${F}/reviews`);
  assertPage(t, all, 'reviews', reviewRecord);
  t.deepEqual(ids(all), [501, 503, 504, 505], 'unverified reviews (502, 506) never show');

  // A product moving to a policy brand brings its reviews; a review verified later appears.
  const mark = new Date().toISOString();
  await sleep(5);
  await write(t, svc, 'PUT', `${PLATFORM}/products/21`, { name: 'Product 21', brand_id: 1, kind: 'edible' });
  await write(t, svc, 'PUT', `${PLATFORM}/reviews/506`, {
    product_id: 12,
    store_id: 101,
    rating: 5,
    verified: true,
  });
  await caughtUp(t, svc);
  t.deepEqual(ids(await ok(t, svc, net.one.api_key, `${F}/reviews`)), [501, 503, 505, 506]);
  t.deepEqual(ids(await ok(t, svc, net.one.api_key, `${F}/reviews?updated_after=${mark}`)), [503, 506]);
  t.deepEqual(ids(await ok(t, svc, net.two.api_key, `${F}/reviews?updated_after=${mark}`)), [503, 506]);
  t.deepEqual(ids(await ok(t, svc, net.all.api_key, `${F}/reviews?updated_after=${mark}`)), [503, 506]);
  const later = new Date(Date.now() + 60_000).toISOString();
  t.deepEqual(ids(await ok(t, svc, net.all.api_key, `${F}/reviews?updated_after=${later}`)), []);

  // Unverifying a review takes it out.
  await write(t, svc, 'PUT', `${PLATFORM}/reviews/501`, {
    product_id: 11,
    store_id: 101,
    rating: 5,
    verified: false,
  });
  await caughtUp(t, svc);
  t.deepEqual(ids(await ok(t, svc, net.one.api_key, `${F}/reviews`)), [503, 505, 506]);
});

test('GET /products/{product_id}/reviews: one product in the policy, else 404', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);
  const one = net.one.api_key;

  const p11 = await ok(t, svc, one, `${F}/products/11/reviews`);
  assertPage(t, p11, 'reviews', reviewRecord);
  t.deepEqual(ids(p11), [501]);
  t.deepEqual(p11.reviews[0], net.reviews[501]);
  t.deepEqual(ids(await ok(t, svc, one, `${F}/products/12/reviews`)), [505]);
  t.deepEqual(ids(await ok(t, svc, net.two.api_key, `${F}/products/31/reviews`)), [504]);
  t.deepEqual(
    ids(await ok(t, svc, net.two.api_key, `${F}/products/32/reviews`)),
    [],
    'in the policy, no review',
  );
  t.deepEqual(ids(await ok(t, svc, net.all.api_key, `${F}/products/21/reviews`)), [503]);

  // Outside the policy, unknown, malformed: the same 404.
  await problem(t, svc, one, `${F}/products/21/reviews`, 404, 'product_not_found');
  await problem(t, svc, one, `${F}/products/31/reviews`, 404, 'product_not_found');
  await problem(t, svc, net.two.api_key, `${F}/products/21/reviews`, 404, 'product_not_found');
  await problem(t, svc, net.all.api_key, `${F}/products/999/reviews`, 404, 'product_not_found');
  await problem(t, svc, one, `${F}/products/abc/reviews`, 404);
  await problem(t, svc, one, `${F}/products/-1/reviews`, 404);
  await problem(t, svc, one, `${F}/products/99999999999999999999/reviews`, 404);

  // The product moves into the policy: its reviews follow.
  await write(t, svc, 'PUT', `${PLATFORM}/products/21`, { name: 'Product 21', brand_id: 1, kind: 'edible' });
  await caughtUp(t, svc);
  t.deepEqual(ids(await ok(t, svc, one, `${F}/products/21/reviews`)), [503]);
  await problem(
    t,
    svc,
    net.two.api_key,
    `${F}/products/31/reviews?cursor=nope`,
    400,
    'invalid_cursor',
    'cursor',
  );
  await problem(t, svc, one, `${F}/products/31/reviews?limit=0`, 400, 'invalid_parameter', 'limit');
});

test('paging: every verified review once, Link until the last page, also while reviews are added', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);
  for (let i = 0; i < 15; i++) {
    await write(t, svc, 'PUT', `${PLATFORM}/reviews/${600 + i * 2}`, {
      product_id: i % 2 === 0 ? 11 : 31,
      store_id: 101,
      rating: 1 + (i % 5),
      verified: i % 5 !== 4,
    });
  }
  await caughtUp(t, svc);
  const extra = Array.from({ length: 15 }, (_, i) => i).filter((i) => i % 5 !== 4);
  const wantOne = [501, 505, ...extra.filter((i) => i % 2 === 0).map((i) => 600 + i * 2)];
  const wantAll = [501, 503, 504, 505, ...extra.map((i) => 600 + i * 2)];
  for (const limit of [1, 2, 5, 500]) {
    const one = await walk(t, svc, net.one.api_key, `${F}/reviews?limit=${limit}`, 'reviews');
    t.deepEqual(
      one.flat().map((r) => r.id),
      wantOne,
      `brand 1 by ${limit}`,
    );
    t.is(one.length, Math.max(1, Math.ceil(wantOne.length / limit)));
    const all = await walk(t, svc, net.all.api_key, `${F}/reviews?limit=${limit}`, 'reviews');
    t.deepEqual(
      all.flat().map((r) => r.id),
      wantAll,
      `all by ${limit}`,
    );
    const two = await walk(t, svc, net.two.api_key, `${F}/reviews?limit=${limit}`, 'reviews');
    t.deepEqual(
      two.flat().map((r) => r.id),
      wantAll.filter((id) => id !== 503),
      `brands 1 and 3 by ${limit}`,
    );
    const p11 = await walk(t, svc, net.one.api_key, `${F}/products/11/reviews?limit=${limit}`, 'reviews');
    t.deepEqual(
      p11.flat().map((r) => r.id),
      wantOne.filter((id) => id !== 505),
    );
  }

  // Reviews added between pages, below and beyond the cursor.
  const pages = await walk(t, svc, net.all.api_key, `${F}/reviews?limit=3`, 'reviews', async (page) => {
    if (page > 2) return;
    await write(t, svc, 'PUT', `${PLATFORM}/reviews/${502 + page * 100}`, {
      product_id: 12,
      store_id: 101,
      rating: 3,
      verified: true,
    });
    await write(t, svc, 'PUT', `${PLATFORM}/reviews/${900 + page}`, {
      product_id: 12,
      store_id: 101,
      rating: 3,
      verified: true,
    });
    await caughtUp(t, svc);
  });
  const seen = pages.flat().map((r) => r.id);
  t.is(new Set(seen).size, seen.length, 'nothing twice');
  for (const id of wantAll) t.is(seen.filter((x) => x === id).length, 1, `review ${id} once`);
  t.true(seen.includes(901) && seen.includes(902), 'added beyond the cursor: met');
  t.deepEqual(
    seen,
    [...seen].sort((a, b) => a - b),
  );

  for (const limit of ['0', '501', 'abc', '2.5']) {
    await problem(t, svc, net.one.api_key, `${F}/reviews?limit=${limit}`, 400, 'invalid_parameter', 'limit');
  }
  for (const cursor of [
    'garbage',
    Buffer.from('[1,2]').toString('base64url'),
    Buffer.from('["x"]').toString('base64url'),
  ]) {
    await problem(t, svc, net.one.api_key, `${F}/reviews?cursor=${cursor}`, 400, 'invalid_cursor', 'cursor');
  }
  await problem(
    t,
    svc,
    net.one.api_key,
    `${F}/reviews?updated_after=2026-01-01`,
    400,
    'invalid_parameter',
    'updated_after',
  );
  await problem(t, svc, net.one.api_key, `${F}/reviews?brand_id=3`, 400, 'invalid_parameter', 'brand_id');
});

test('auth: 401 without a valid key (none, malformed, revoked), 403 for other kinds', async (t) => {
  const svc = await startService(t);
  const net = await seed(t, svc);
  for (const path of ['/reviews', '/products/11/reviews']) {
    await problem(t, svc, null, `${F}${path}`, 401, 'unauthorized');
    await problem(t, svc, 'Bearer ', `${F}${path}`, 401, 'unauthorized');
    await problem(t, svc, 'Bearer pds_live_nope', `${F}${path}`, 401, 'unauthorized');
    await problem(t, svc, `Token ${net.one.api_key}`, `${F}${path}`, 401, 'unauthorized');
    await problem(t, svc, net.brand.api_key, `${F}${path}`, 403, 'wrong_partner_kind');
    await problem(t, svc, net.menuFeed.api_key, `${F}${path}`, 403, 'wrong_partner_kind');
    // Authentication comes before parameters: a bad query without a key is still a 401.
    await problem(t, svc, null, `${F}${path}?limit=0`, 401, 'unauthorized');
  }
  // A brand feed key on the brand API is a 403 too.
  await problem(t, svc, net.one.api_key, '/partner/brand/v1/reviews', 403, 'wrong_partner_kind');

  await write(t, svc, 'DELETE', `${ADMIN}/partners/${net.one.partner_id}/keys/${net.one.key_id}`);
  await caughtUp(t, svc);
  await problem(t, svc, net.one.api_key, `${F}/reviews`, 401, 'unauthorized');
  const two = await get(svc, net.two.api_key, `${F}/reviews`);
  t.is(two.status, 200, 'other partners keep working');
});
