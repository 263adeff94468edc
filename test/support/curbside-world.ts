/**
 * A store with curbside on, driven through the platform and admin APIs, for the tests of curbside
 * arrivals: its partners and their keys, and reservations from a partner's site.
 */
import { randomUUID } from 'node:crypto';
import type { TestService } from './service.ts';

const P = '/platform/v1';
type Json = Record<string, unknown>;

/** A call with the operator token that must succeed; its answer. */
export async function ok(
  s: TestService,
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Json> {
  const r = await s.call(method, url, body, headers);
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${text}`);
  return JSON.parse(text) as Json;
}

/** Store 1 (pickup, delivery and curbside, its curbside setting on), brand 1, product 1 as menu product 1. */
export async function seedCurbsideStore(s: TestService): Promise<void> {
  await ok(s, 'PUT', `${P}/stores/1`, {
    name: 'Green Door',
    address: '1 Main St',
    city: 'Denver',
    state: 'CO',
    zip: '80202',
    lat: 39.75,
    long: -104.99,
    pickup: true,
    delivery: true,
    curbside: true,
  });
  await ok(s, 'PUT', `${P}/stores/1/curbside_pickup_setting`, { enabled: true });
  await ok(s, 'PUT', `${P}/brands/1`, { name: 'Kiva' });
  await ok(s, 'PUT', `${P}/products/1`, {
    name: 'Product 1',
    brand_id: 1,
    kind: 'flower',
    lineage: 'hybrid',
  });
  await ok(s, 'PUT', `${P}/stores/1/menu_products/1`, { product_id: 1, prices: { gram: '10.00' } });
}

/** A partner of `kind` with `scope`, and its key once authentication sees it. */
export async function partner(s: TestService, name: string, kind: string, scope: Json) {
  const created = await ok(s, 'POST', '/admin/v1/partners', { name, kind, ...scope });
  const found = {
    id: (created.partner as { partner_id: string }).partner_id,
    key: created.api_key as string,
  };
  // The keys' read model is a projection: wait until the key answers on its partner API.
  const path =
    kind === 'store_menu_feed'
      ? '/partner/store-menu-feed/v1'
      : `/partner/${kind === 'brand' ? 'brand' : 'store'}/v1`;
  const probe = kind === 'brand' ? `${path}/products` : `${path}/curbside_pickup_setting`;
  for (let i = 0; i < 200; i++) {
    const r = await fetch(`${s.base}${probe}`, { headers: { authorization: `Bearer ${found.key}` } });
    if (r.status !== 401) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return found;
}

/** A cart of store 1 from `partnerId`'s site (null: the platform's own), checked out for `mode`. */
export async function reservation(
  s: TestService,
  partnerId: string | null,
  mode: string,
  checkoutHeaders: Record<string, string> = {},
): Promise<string> {
  const uuid = randomUUID();
  await ok(s, 'POST', `${P}/carts`, {
    uuid,
    store_id: 1,
    source: { channel: 'headless', partner_id: partnerId },
  });
  await ok(s, 'POST', `${P}/carts/${uuid}/items`, { menu_product_id: 1, price_id: 'gram', count: 1 });
  await ok(s, 'POST', `${P}/carts/${uuid}/checkout`, { reservation_mode: mode }, checkoutHeaders);
  return uuid;
}
