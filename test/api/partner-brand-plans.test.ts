/**
 * What a page of the brand and brand feed APIs costs: every handler runs against read models in the
 * default (SQLite) read store, with the indexes the read-model modules declare and thousands of
 * documents, and a page of 20 examines about 20 documents (`lastExamined()`), first page and after a
 * cursor, for one brand and for several (merged index walks), never the whole collection.
 */
import test from 'ava';
import { brandApi } from '../../api/partner/brand.ts';
import { brandFeedApi } from '../../api/partner/brand-feed.ts';
import type { PartnerPrincipal } from '../../api/partner/common.ts';
import type { PartnerApi, PartnerDeps } from '../../api/partner/routes.ts';
import * as cart from '../../domain/cart.ts';
import { fold } from '../../domain/decider.ts';
import { CARTS, cartIndexes } from '../../projections/read-models/carts.ts';
import { MENU_PRODUCTS, menuProductIndexes } from '../../projections/read-models/catalog/menu-products.ts';
import { PRODUCTS, productIndexes } from '../../projections/read-models/catalog/products.ts';
import { REVIEWS, reviewIndexes } from '../../projections/read-models/catalog/reviews.ts';
import { SPECIALS, specialIndexes } from '../../projections/read-models/catalog/specials.ts';
import { STORES, storeIndexes } from '../../projections/read-models/catalog/stores.ts';
import type { Doc, IndexSpec } from '../../projections/read-store.ts';
import { openSqliteReadStore, type SqliteCollection } from '../../projections/sqlite/read-store.ts';

const BRANDS = 50;
const SLACK = 3;
const LIMIT = 20;

/** A cart's state for the fixture's documents (created, nothing in it). */
const emptyCart = fold(cart.decider, [
  cart.events.CartCreated({
    cart_uuid: '00000000-0000-4000-8000-000000000000',
    store_id: 1,
    source: { channel: 'headless', partner_id: null },
    user_id: null,
    created_at: '2026-01-01T00:00:00.000Z',
  }),
]);

async function world() {
  const store = openSqliteReadStore(':memory:');
  const collections = new Map<string, SqliteCollection>();
  const fill = async (name: string, indexes: readonly IndexSpec[], docs: Doc[]) => {
    const c = await store.collection(name, indexes);
    await c.bulkWrite(
      docs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
    );
    collections.set(name, c);
  };
  const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
  const brandOf = (i: number) => (i % BRANDS) + 1;
  // 2,000 stores between latitudes 30 and 40 on one meridian; store 1 in San Francisco.
  await fill(
    STORES,
    storeIndexes,
    range(2000).map((i) => ({
      _id: i,
      id: i,
      lat: i === 1 ? 37.7749 : 30 + (i % 200) * 0.05,
      long: -122.4194,
      brand_ids: [...new Set([((i - 1) % BRANDS) + 1, brandOf(i * 7)])].sort((a, b) => a - b),
      updated_at: '2026-01-01T00:00:00.000Z',
    })),
  );
  await fill(
    PRODUCTS,
    productIndexes,
    range(5000).map((i) => ({
      _id: i,
      product_id: i,
      brand_id: brandOf(i),
      store_ids: [1, (i % 2000) + 1].filter((v, k, a) => a.indexOf(v) === k),
      updated_at: '2026-01-01T00:00:00.000Z',
    })),
  );
  await fill(
    MENU_PRODUCTS,
    menuProductIndexes,
    range(20000).map((i) => ({
      _id: i,
      id: i,
      store_id: brandOf(i),
      product_id: (i % 5000) + 1,
      brand_id: brandOf(i),
      updated_at: '2026-01-01T00:00:00.000Z',
    })),
  );
  await fill(
    REVIEWS,
    reviewIndexes,
    range(20000).map((i) => ({
      _id: i,
      id: i,
      product_id: (i % 5000) + 1,
      store_id: (i % 2000) + 1,
      brand_id: brandOf((i % 5000) + 1),
      verified: i % 3 !== 0,
      updated_at: '2026-01-01T00:00:00.000Z',
    })),
  );
  await fill(
    SPECIALS,
    specialIndexes,
    range(5000).map((i) => ({
      _id: i,
      id: i,
      store_id: (i % 2000) + 1,
      _involved_brand_ids: [brandOf(i), brandOf(i * 3)].sort((a, b) => a - b),
      updated_at: '2026-01-01T00:00:00.000Z',
    })),
  );
  await fill(
    CARTS,
    cartIndexes,
    range(10000).map((i) => ({
      _id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      id: i,
      store_name: '',
      // The page renders each record from the state; what it holds does not matter to the plan.
      _state: emptyCart,
      store_id: (i % 2000) + 1,
      _partner_id: `partner-${i % 20}`,
      _brand_ids: [brandOf(i)],
      _created_at: '2026-01-01T00:00:00.000Z',
      _updated_at: '2026-01-01T00:00:00.000Z',
      _abandoned: i % 2 === 0,
      status: 'pending',
    })),
  );
  const deps = {
    collection: (name: string) => {
      const c = collections.get(name);
      if (!c) throw new Error(`no collection ${name}`);
      return c;
    },
  } as unknown as PartnerDeps;
  return { collections, deps };
}

const fixture = world();

const partner = (
  kind: PartnerPrincipal['kind'],
  brand_ids: number[],
  all_brands = false,
): PartnerPrincipal => ({
  partner_id: 'partner-3',
  key_id: 'key',
  kind,
  brand_ids,
  store_ids: [],
  all_brands,
  rate_limit_per_minute: 600,
});

/** Runs a route's handler as the router would; answers the body and what each collection examined. */
async function call(
  api: PartnerApi,
  path: string,
  params: Record<string, string>,
  query: Record<string, string>,
  who: PartnerPrincipal,
) {
  const { collections, deps } = await fixture;
  const r = api.routes.find((x) => x.path === path);
  if (!r) throw new Error(`no route ${path}`);
  const ctx = {
    path,
    querystring: new URLSearchParams(query).toString(),
    set() {},
    body: undefined as unknown,
  };
  await r.handler(
    ctx as never,
    {
      params: r.params?.parse(params),
      query: r.query?.parse(query),
      body: undefined,
      partner: who,
      execute: (effect) => effect(),
    },
    deps,
  );
  const examined = Object.fromEntries([...collections].map(([name, c]) => [name, c.lastExamined()]));
  return { body: ctx.body as Record<string, unknown> & { next_cursor: string | null }, examined };
}

/** Two pages of LIMIT: each full, contiguous, and examining about LIMIT documents of `collection`. */
async function twoPages(
  t: import('ava').ExecutionContext,
  api: PartnerApi,
  path: string,
  plural: string,
  collection: string,
  who: PartnerPrincipal,
  params: Record<string, string> = {},
  query: Record<string, string> = {},
) {
  const first = await call(api, path, params, { ...query, limit: String(LIMIT) }, who);
  const items = first.body[plural] as unknown[];
  t.is(items.length, LIMIT, `${path}: a full first page`);
  t.true(
    first.examined[collection] <= LIMIT + SLACK,
    `${path}: first page examined ${first.examined[collection]}`,
  );
  t.truthy(first.body.next_cursor);
  const second = await call(
    api,
    path,
    params,
    { ...query, limit: String(LIMIT), cursor: first.body.next_cursor ?? '' },
    who,
  );
  t.is((second.body[plural] as unknown[]).length, LIMIT, `${path}: a full second page`);
  t.true(
    second.examined[collection] <= LIMIT + SLACK,
    `${path}: second page examined ${second.examined[collection]}`,
  );
  return { first, second };
}

test('brand API: a page examines about a page, for one brand and for several', async (t) => {
  for (const brands of [[7], [7, 8, 9]]) {
    const who = partner('brand', brands);
    await twoPages(t, brandApi, '/stores', 'stores', STORES, who);
    await twoPages(t, brandApi, '/reviews', 'reviews', REVIEWS, who);
    await twoPages(t, brandApi, '/specials', 'specials', SPECIALS, who);
    // Store 7 lists 400 menu products, all of brand 7.
    await twoPages(t, brandApi, '/stores/{store_id}/menu_products', 'menu_products', MENU_PRODUCTS, who, {
      store_id: '7',
    });
    const { first } = await twoPages(
      t,
      brandApi,
      '/products',
      'products',
      PRODUCTS,
      who,
      {},
      { zipcode: '94103' },
    );
    // The stores near the ZIP: the latitude band around it, not every store.
    t.true(first.examined[STORES] <= 200, `stores examined ${first.examined[STORES]}`);
  }
  await twoPages(t, brandApi, '/carts', 'carts', CARTS, partner('brand', [1]));
  await twoPages(t, brandApi, '/carts', 'carts', CARTS, partner('brand', [1]), {}, { abandoned: 'false' });
});

test('brand feed API: a page examines about a page, for some brands and for all', async (t) => {
  for (const who of [
    partner('brand_feed', [7]),
    partner('brand_feed', [7, 8, 9]),
    partner('brand_feed', [], true),
  ]) {
    await twoPages(t, brandFeedApi, '/reviews', 'reviews', REVIEWS, who);
  }
  // Product 7 (brand 8) has 4 reviews, 2 verified: one findByIds for the product, one page of its reviews.
  const { body, examined } = await call(
    brandFeedApi,
    '/products/{product_id}/reviews',
    { product_id: '7' },
    {},
    partner('brand_feed', [8]),
  );
  t.deepEqual(
    (body.reviews as Array<{ id: number }>).map((r) => r.id),
    [5006, 10006],
  );
  t.true(examined[REVIEWS] <= 4 + SLACK, `examined ${examined[REVIEWS]}`);
});
