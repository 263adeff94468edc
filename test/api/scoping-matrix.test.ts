/**
 * The scoping matrix (issue 5): every partner endpoint × every partner kind × a resource in and out of
 * the key's scope → the expected status, and no id of the other scope anywhere in any body.
 *
 * Two disjoint worlds, A and B: each has a store, a brand, products, menu products, reviews, a special,
 * carts and one partner of every kind. Ids of world B are distinctive (9xxxxxx) so a leak is found by
 * searching the raw body text for them.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { responseErrors } from '../support/openapi-validate.ts';
import { startService, type TestService } from '../support/service.ts';

interface World {
  store: number;
  brand: number;
  products: number[];
  menuProducts: number[];
  review: number;
  special: number;
  zip: string;
  lat: number;
  long: number;
  /** Carts checked out for curbside from each store partner's own site. */
  curbsideCarts: Record<StoreKind, string>;
  keys: Record<Kind, string>;
  partnerIds: Record<Kind, string>;
}
type Kind = 'brand' | 'brand_feed' | 'store_operator' | 'store_menu_feed';
type StoreKind = 'store_operator' | 'store_menu_feed';
const KINDS: Kind[] = ['brand', 'brand_feed', 'store_operator', 'store_menu_feed'];
const BASE: Record<Kind, string> = {
  brand: '/partner/brand/v1',
  brand_feed: '/partner/brand-feed/v1',
  store_operator: '/partner/store/v1',
  store_menu_feed: '/partner/store-menu-feed/v1',
};

async function ok(res: Promise<Response>): Promise<Record<string, unknown>> {
  const r = await res;
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${r.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Builds one world through the platform and admin APIs (`base` makes its ids distinctive). */
async function buildWorld(
  s: TestService,
  base: number,
  place: { zip: string; lat: number; long: number; city: string; state: string },
): Promise<World> {
  const store = base + 1;
  const brand = base + 2;
  const products = [base + 11, base + 12];
  const menuProducts = [base + 21, base + 22];
  await ok(
    s.call('PUT', `/platform/v1/stores/${store}`, {
      name: `Store ${store}`,
      address: '1 Main St',
      city: place.city,
      state: place.state,
      zip: place.zip,
      lat: place.lat,
      long: place.long,
      curbside: true,
    }),
  );
  await ok(s.call('PUT', `/platform/v1/stores/${store}/curbside_pickup_setting`, { enabled: true }));
  await ok(s.call('PUT', `/platform/v1/brands/${brand}`, { name: `Brand ${brand}` }));
  for (const [i, p] of products.entries()) {
    await ok(
      s.call('PUT', `/platform/v1/products/${p}`, {
        name: `Product ${p}`,
        brand_id: brand,
        kind: 'flower',
        lineage: 'hybrid',
        percent_thc: 20 + i,
        percent_cbd: 1,
      }),
    );
    await ok(
      s.call('PUT', `/platform/v1/stores/${store}/menu_products/${menuProducts[i]}`, {
        product_id: p,
        prices: { gram: `1${i}.00` },
      }),
    );
  }
  const review = base + 31;
  await ok(
    s.call('PUT', `/platform/v1/reviews/${review}`, {
      product_id: products[0],
      store_id: store,
      rating: 5,
      verified: true,
    }),
  );
  const special = base + 41;
  await ok(
    s.call('PUT', `/platform/v1/specials/${special}`, {
      store_id: store,
      title: `Deal ${special}`,
      special_type: 'product',
      discount_type: 'percent',
      discount_value: '10.00',
      brand_ids: [brand],
      starts_at: '2026-01-01T00:00:00Z',
    }),
  );
  const keys = {} as Record<Kind, string>;
  const partnerIds = {} as Record<Kind, string>;
  for (const kind of KINDS) {
    const scope = kind === 'brand' || kind === 'brand_feed' ? { brand_ids: [brand] } : { store_ids: [store] };
    const created = await ok(
      s.call('POST', '/admin/v1/partners', { name: `${kind} ${base}`, kind, ...scope }),
    );
    keys[kind] = created.api_key as string;
    partnerIds[kind] = (created.partner as { partner_id: string }).partner_id;
  }
  // Carts from the brand's, the operator's and the menu feed's own sites, checked out for curbside.
  const curbsideCarts = {} as Record<StoreKind, string>;
  for (const source of ['brand', 'store_operator', 'store_menu_feed'] as const) {
    const uuid = randomUUID();
    await ok(
      s.call('POST', '/platform/v1/carts', {
        uuid,
        store_id: store,
        source: { channel: 'embedded', partner_id: partnerIds[source] },
      }),
    );
    await ok(
      s.call('POST', `/platform/v1/carts/${uuid}/items`, {
        menu_product_id: menuProducts[0],
        price_id: 'gram',
        count: 1,
      }),
    );
    await ok(s.call('POST', `/platform/v1/carts/${uuid}/checkout`, { reservation_mode: 'curbside' }));
    if (source !== 'brand') curbsideCarts[source] = uuid;
  }
  return { store, brand, products, menuProducts, review, special, curbsideCarts, keys, partnerIds, ...place };
}

interface Case {
  api: Kind;
  name: string;
  method: 'GET' | 'POST';
  /** The URL for a resource of world `w` (in scope when w is the key's own world). */
  url(w: World): string;
  body?(w: World): unknown;
  /** Status for the key's own world, and for the other world's resource. */
  own: number;
  other: number;
}

const cases: Case[] = [
  { api: 'brand', name: 'GET /carts', method: 'GET', url: () => '/carts', own: 200, other: 200 },
  {
    api: 'brand',
    name: 'GET /stores/{store_id}/menu_products',
    method: 'GET',
    url: (w) => `/stores/${w.store}/menu_products`,
    own: 200,
    other: 404,
  },
  {
    api: 'brand',
    name: 'GET /products',
    method: 'GET',
    url: (w) => `/products?zipcode=${w.zip}&radius=25`,
    own: 200,
    other: 200,
  },
  { api: 'brand', name: 'GET /stores', method: 'GET', url: () => '/stores', own: 200, other: 200 },
  { api: 'brand', name: 'GET /reviews', method: 'GET', url: () => '/reviews', own: 200, other: 200 },
  { api: 'brand', name: 'GET /specials', method: 'GET', url: () => '/specials', own: 200, other: 200 },
  { api: 'brand_feed', name: 'GET /reviews', method: 'GET', url: () => '/reviews', own: 200, other: 200 },
  {
    api: 'brand_feed',
    name: 'GET /products/{product_id}/reviews',
    method: 'GET',
    url: (w) => `/products/${w.products[0]}/reviews`,
    own: 200,
    other: 404,
  },
];
for (const api of ['store_operator', 'store_menu_feed'] as const) {
  const store = (w: World) => `store_id=${w.store}`;
  if (api === 'store_operator')
    cases.push({ api, name: 'GET /carts', method: 'GET', url: () => '/carts', own: 200, other: 200 });
  cases.push(
    {
      api,
      name: 'GET /menu_products',
      method: 'GET',
      url: (w) => `/menu_products?${store(w)}`,
      own: 200,
      other: 404,
    },
    {
      api,
      name: 'GET /menu_products/{menu_product_id}',
      method: 'GET',
      url: (w) => `/menu_products/${w.menuProducts[0]}?${store(w)}`,
      own: 200,
      other: 404,
    },
    {
      api,
      name: 'GET /products/{product_id}/recommendations',
      method: 'GET',
      url: (w) => `/products/${w.products[0]}/recommendations?${store(w)}`,
      own: 200,
      other: 404,
    },
    {
      api,
      name: 'GET /products/{product_id}/reviews',
      method: 'GET',
      url: (w) => `/products/${w.products[0]}/reviews?${store(w)}`,
      own: 200,
      other: 404,
    },
    { api, name: 'GET /specials', method: 'GET', url: (w) => `/specials?${store(w)}`, own: 200, other: 404 },
    {
      api,
      name: 'GET /curbside_pickup_setting',
      method: 'GET',
      url: (w) => `/curbside_pickup_setting?${store(w)}`,
      own: 200,
      other: 404,
    },
    {
      api,
      name: 'POST /reservations/{uuid}/curbside_arrival',
      method: 'POST',
      url: (w) => `/reservations/${w.curbsideCarts[api]}/curbside_arrival`,
      body: () => ({ vehicle_make: 'Volvo', vehicle_color: 'red', parking_spot: '3' }),
      own: 201,
      other: 404,
    },
    // A reservation from another partner's site, even at a store of the key: as if it did not exist.
    {
      api,
      name: 'POST /reservations/{uuid}/curbside_arrival (another partner’s site)',
      method: 'POST',
      url: (w) =>
        `/reservations/${w.curbsideCarts[api === 'store_operator' ? 'store_menu_feed' : 'store_operator']}/curbside_arrival`,
      body: () => ({ vehicle_make: 'Volvo', vehicle_color: 'red', parking_spot: '3' }),
      own: 404,
      other: 404,
    },
  );
}

/** Every distinctive id of a world, as it would appear in JSON. */
function idsOf(w: World): string[] {
  return [w.store, w.brand, ...w.products, ...w.menuProducts, w.review, w.special]
    .map(String)
    .concat([...Object.values(w.curbsideCarts), ...Object.values(w.partnerIds)]);
}

test('scoping matrix: every endpoint × every partner kind × in and out of scope', async (t) => {
  t.timeout(180_000);
  const s = await startService(t);
  const a = await buildWorld(s, 1_000_000, {
    zip: '80202',
    lat: 39.7528,
    long: -104.9995,
    city: 'Denver',
    state: 'CO',
  });
  const b = await buildWorld(s, 9_000_000, {
    zip: '10001',
    lat: 40.7506,
    long: -73.9972,
    city: 'New York',
    state: 'NY',
  });
  // Wait until the read models hold both worlds.
  for (let i = 0; i < 200; i++) {
    const r = await fetch(`${s.base}/partner/store/v1/menu_products?store_id=${b.store}`, {
      headers: { authorization: `Bearer ${b.keys.store_operator}` },
    });
    const p = (await (await s.call('GET', '/admin/v1/projections')).json()) as {
      projections: Array<{ lag_events: number }>;
    };
    if (r.status === 200 && p.projections.every((x) => x.lag_events === 0)) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }

  const foreign = idsOf(b);
  let checked = 0;
  for (const c of cases) {
    for (const kind of KINDS) {
      for (const [label, target] of [
        ['own', a],
        ['other', b],
      ] as const) {
        const res = await fetch(`${s.base}${BASE[c.api]}${c.url(target)}`, {
          method: c.method,
          headers: {
            authorization: `Bearer ${a.keys[kind]}`,
            ...(c.body ? { 'content-type': 'application/json', 'idempotency-key': randomUUID() } : {}),
          },
          body: c.body ? JSON.stringify(c.body(target)) : undefined,
        });
        const text = await res.text();
        // Every answer, refusals included, is what the API's OpenAPI document says it can be.
        const problems = responseErrors(
          await s.openApiDocument(BASE[c.api]),
          c.method,
          `${BASE[c.api]}${c.url(target)}`,
          res.status,
          text ? JSON.parse(text) : null,
          { contentType: res.headers.get('content-type') ?? '', headers: res.headers },
        );
        t.deepEqual(problems, [], `${c.api} ${c.name} (${kind} key, ${label})`);
        const expected = kind !== c.api ? 403 : label === 'own' ? c.own : c.other;
        t.is(
          res.status,
          expected,
          `${c.api} ${c.name} with a ${kind} key, ${label} resource: ${text.slice(0, 200)}`,
        );
        if (res.status >= 400) {
          t.is(res.headers.get('content-type'), 'application/problem+json', `${c.api} ${c.name}`);
        }
        // An id the request itself names may be echoed back ("no store 9000001"): that is not a leak.
        const asked = `${c.url(target)} ${c.body ? JSON.stringify(c.body(target)) : ''}`;
        for (const id of foreign.filter((x) => !asked.includes(x))) {
          t.false(
            new RegExp(`(^|[^0-9a-f-])${id}([^0-9a-f-]|$)`).test(text),
            `${c.api} ${c.name} (${kind} key, ${label}) leaks ${id} of the other world`,
          );
        }
        checked += 1;
      }
    }
  }
  t.is(checked, cases.length * KINDS.length * 2);

  // Positive control: the own-scope answers do carry the world's own data.
  const own = await fetch(`${s.base}/partner/brand/v1/stores`, {
    headers: { authorization: `Bearer ${a.keys.brand}` },
  });
  t.true((await own.text()).includes(String(a.store)));
  const carts = await fetch(`${s.base}/partner/store/v1/carts`, {
    headers: { authorization: `Bearer ${a.keys.store_operator}` },
  });
  t.true((await carts.text()).includes(a.curbsideCarts.store_operator));
});

test('without a key, or with a malformed or unknown key: 401 on every endpoint', async (t) => {
  const s = await startService(t);
  for (const c of cases) {
    for (const auth of [undefined, 'Bearer nope', `Bearer pds_key_${'x'.repeat(43)}`, 'Basic abc']) {
      const res = await fetch(
        `${s.base}${BASE[c.api]}${c.url({ store: 1, brand: 1, products: [1], menuProducts: [1], review: 1, special: 1, curbsideCarts: { store_operator: randomUUID(), store_menu_feed: randomUUID() }, zip: '80202' } as World)}`,
        {
          method: c.method,
          headers: auth ? { authorization: auth } : {},
        },
      );
      t.is(res.status, 401, `${c.api} ${c.name} with ${auth}`);
      t.is(res.headers.get('content-type'), 'application/problem+json');
      t.truthy(res.headers.get('www-authenticate'));
    }
  }
});
