/**
 * Drives a real service through its platform and admin APIs for webhook tests: a small catalog, carts
 * moved through checkout and their statuses, and webhook subscriptions.
 */
import { randomUUID } from 'node:crypto';
import type { TestService } from './service.ts';

/** Anything that can call the service's HTTP API with the operator token. */
export type Caller = Pick<TestService, 'call'>;

const P = '/platform/v1';

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
type Json = Record<string, any>;

/** A call that must succeed; its JSON answer. */
export async function must(s: Caller, method: string, url: string, body?: unknown): Promise<Json> {
  const res = await s.call(method, url, body);
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${url} answered ${res.status}: ${text}`);
  return text === '' ? {} : (JSON.parse(text) as Json);
}

/** Stores `storeIds` (pickup and delivery), brand 1, product 1 on every store's menu as menu product `storeId * 100`. */
export async function seedCatalog(s: Caller, storeIds: number[] = [1]): Promise<void> {
  await must(s, 'PUT', `${P}/brands/1`, { name: 'Brand One' });
  await must(s, 'PUT', `${P}/products/1`, {
    name: 'Blue Dream 3.5g',
    brand_id: 1,
    kind: 'flower',
    lineage: 'hybrid',
  });
  for (const id of storeIds) {
    await must(s, 'PUT', `${P}/stores/${id}`, {
      name: `Store ${id}`,
      display_name: `Store ${id} Downtown`,
      store_url: `https://store${id}.example.com`,
      address: `${id} Market St`,
      city: 'San Francisco',
      state: 'CA',
      zip: '94103',
      lat: 37.77,
      long: -122.41,
      pickup: true,
      delivery: true,
    });
    await must(s, 'PUT', `${P}/stores/${id}/menu_products/${id * 100}`, {
      product_id: 1,
      prices: { gram: '10.00', 'eighth ounce': '35.00' },
    });
  }
}

export interface WorldCart {
  uuid: string;
  storeId: number;
}

export async function createCart(s: Caller, storeId = 1): Promise<WorldCart> {
  const uuid = randomUUID();
  await must(s, 'POST', `${P}/carts`, {
    uuid,
    store_id: storeId,
    source: { channel: 'headless', partner_id: null },
  });
  return { uuid, storeId };
}

export const addItem = (s: Caller, c: WorldCart, count = 2) =>
  must(s, 'POST', `${P}/carts/${c.uuid}/items`, {
    menu_product_id: c.storeId * 100,
    price_id: 'gram',
    count,
  });

export const identify = (s: Caller, c: WorldCart) =>
  must(s, 'PUT', `${P}/carts/${c.uuid}/customer`, {
    email: 'ana@example.com',
    first_name: 'Ana',
    last_name: 'Lee',
    phone_number: '+14155550100',
    DOB: '1990-04-01T00:00:00.000Z',
  });

export const checkOut = (s: Caller, c: WorldCart) =>
  must(s, 'POST', `${P}/carts/${c.uuid}/checkout`, {
    reservation_mode: 'pickup',
    reservation_start_window: '2026-03-01 10:00',
  });

export const move = (s: Caller, c: WorldCart, status: string, extra: Json = {}) =>
  must(s, 'POST', `${P}/carts/${c.uuid}/status`, { status, ...extra });

/** A cart at `verification`: created, one item added, its customer identified, checked out for pickup. */
export async function checkedOut(s: Caller, storeId = 1): Promise<WorldCart> {
  const cart = await createCart(s, storeId);
  await addItem(s, cart);
  await identify(s, cart);
  await checkOut(s, cart);
  return cart;
}

/** The pickup path after checkout (`verification`): every move up to a review. */
export const PICKUP_MOVES = ['preparing', 'ready_for_pickup', 'finished', 'with_review'];

export async function createWebhook(
  s: Caller,
  url: string,
  storeIds: number[],
  events?: string[],
): Promise<{ id: string; secret: string }> {
  const out = await must(s, 'POST', '/admin/v1/webhooks', {
    url,
    auth_token: 'receiver-token-1',
    store_ids: storeIds,
    ...(events ? { events } : {}),
  });
  return { id: out.webhook.webhook_id, secret: out.signing_secret };
}

/** Runs the service's due timers every 20 ms until `until` settles (events reach the timers asynchronously). */
export async function ticking<T>(s: TestService, until: () => Promise<T>): Promise<T> {
  let done = false;
  const loop = (async () => {
    while (!done) {
      await s.tick();
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    return await until();
  } finally {
    done = true;
    await loop;
  }
}

/** Lets the service run its timers for `ms` of real time (to show that nothing more arrives). */
export async function idle(s: TestService, ms = 300): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    await s.tick();
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A store operator partner of `storeId` whose key is not rate limited by a test's traffic. */
export async function storeOperator(s: Caller, name: string, storeId: number) {
  const created = await must(s, 'POST', '/admin/v1/partners', {
    name,
    kind: 'store_operator',
    store_ids: [storeId],
    rate_limit_per_minute: 100_000,
  });
  return { partnerId: created.partner.partner_id as string, key: created.api_key as string };
}

/** Every cart of `storeId` the store operator's key reads: its status and number of lines, by uuid. */
export async function partnerCartView(
  base: string,
  key: string,
  storeId: number,
): Promise<Map<string, string>> {
  const view = new Map<string, string>();
  let cursor: string | null = null;
  do {
    const url = new URL(`${base}/partner/store/v1/carts?store_id=${storeId}&limit=100`);
    if (cursor) url.searchParams.set('cursor', cursor);
    const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
    if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${await res.text()}`);
    const page = (await res.json()) as {
      carts: Array<{ uuid: string; status: string; products: unknown[] }>;
      next_cursor: string | null;
    };
    for (const c of page.carts) view.set(c.uuid, `${c.status}, ${c.products.length} line(s)`);
    cursor = page.next_cursor;
  } while (cursor);
  return view;
}
