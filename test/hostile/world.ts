/**
 * The data the hostile-input suite attacks: a small catalog, partners of every kind with keys, carts
 * (one open, one checked out for curbside), a webhook subscription to a local receiver with a delivered
 * webhook, and spare partners and subscriptions that DELETE routes may remove. Built through the
 * platform and admin APIs, as a client would, then waited on until every read model has caught up.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext } from 'ava';
import { ticking } from '../support/cart-world.ts';
import type { TestService } from '../support/service.ts';
import { type Receiver, startReceiver } from '../support/webhook-receiver.ts';
import type { Json } from './values.ts';

export type Kind = 'brand' | 'brand_feed' | 'store_operator' | 'store_menu_feed';
export const KINDS: readonly Kind[] = ['brand', 'brand_feed', 'store_operator', 'store_menu_feed'];

export interface World {
  /** Stores 101 and 102 are in the partners' scope, 103 is in nobody's. */
  stores: { inScope: number[]; outOfScope: number };
  brand: number;
  otherBrand: number;
  products: number[];
  otherProduct: number;
  /** Menu products: 401, 402 at store 101; 403 at store 102; 404 at store 103. */
  menuProducts: number[];
  review: number;
  special: number;
  /** A pending cart holding menu products 401 and 402. */
  openCart: string;
  /** A pending cart holding one item, for checkout. */
  checkoutCart: string;
  /** A cart checked out for curbside at store 101, from the store operator's site. */
  curbsideCart: string;
  /**
   * Another, from the store menu feed's site: a partner posts arrivals only for its own site's
   * reservations (docs/partner-api.md, "The curbside arrival").
   */
  feedCurbsideCart: string;
  keys: Record<Kind, string>;
  partnerIds: Record<Kind, string>;
  /** A brand partner for admin key routes, and one whose keys DELETE may revoke. */
  adminPartner: { id: string; keyIds: string[] };
  sparePartner: { id: string; keyIds: string[] };
  webhookId: string;
  /** Subscriptions DELETE may remove. */
  spareWebhookIds: string[];
  deliveryId: string;
  /**
   * A delivery of a subscription no route rewrites, for redelivery: a hostile but valid PATCH of
   * `webhookId` can disable it, after which its deliveries are refused redelivery (409).
   */
  redeliverableId: string;
  receiver: Receiver;
  authToken: string;
  /** The operator token, which signs in to the console. */
  operatorToken: string;
  /**
   * A console session (`POST /admin/v1/session`): its cookie and CSRF token. The sign-out route's
   * valid request ends it, so the session routes come last in the catalogue.
   */
  session: { cookie: string; csrf: string };
  /** An auditor account with two tokens (for the token routes), and one whose tokens DELETE may revoke. */
  operator: { id: string; tokenIds: string[] };
  spareOperator: { id: string; tokenIds: string[] };
  /**
   * The account the PATCH route changes: a hostile body may disable it, which would refuse every
   * token issued to `operator` afterwards.
   */
  patchedOperator: { id: string; tokenIds: string[] };
}

async function must(s: TestService, method: string, url: string, body?: unknown): Promise<Json> {
  const res = await s.call(method, url, body);
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${url} answered ${res.status}: ${text}`);
  return text === '' ? {} : (JSON.parse(text) as Json);
}

/** Waits until every projection has applied every event. */
export async function caughtUp(s: TestService): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const body = (await (await s.call('GET', '/admin/v1/projections')).json()) as {
      projections: { lag_events: number }[];
    };
    if (body.projections.every((p) => p.lag_events === 0)) return;
    if (Date.now() > deadline) throw new Error(`projections never caught up: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const storeBody = (id: number, curbside: boolean) => ({
  name: `Store ${id}`,
  address: `${id} Main St`,
  city: 'Denver',
  state: 'CO',
  zip: '80202',
  lat: 39.7528,
  long: -104.9995,
  pickup: true,
  delivery: true,
  curbside,
});

export async function buildWorld(t: ExecutionContext, s: TestService): Promise<World> {
  const P = '/platform/v1';
  for (const id of [101, 102, 103]) {
    await must(s, 'PUT', `${P}/stores/${id}`, storeBody(id, id === 101));
  }
  await must(s, 'PUT', `${P}/stores/101/curbside_pickup_setting`, { enabled: true });
  await must(s, 'PUT', `${P}/brands/201`, { name: 'Brand 201' });
  await must(s, 'PUT', `${P}/brands/202`, { name: 'Brand 202' });
  const products: [number, number][] = [
    [301, 201],
    [302, 201],
    [303, 202],
  ];
  for (const [id, brand] of products) {
    await must(s, 'PUT', `${P}/products/${id}`, {
      name: `Product ${id}`,
      brand_id: brand,
      kind: 'flower',
      lineage: 'hybrid',
      percent_thc: 20,
    });
  }
  const listings: [number, number, number][] = [
    [401, 101, 301],
    [402, 101, 302],
    [403, 102, 301],
    [404, 103, 303],
    // Added to carts by the add-item route's valid request, and rewritten by no route: a hostile but
    // valid PUT of 401 may relist it without a gram price, after which adding it by the gram never works.
    [405, 101, 302],
  ];
  for (const [id, store, product] of listings) {
    await must(s, 'PUT', `${P}/stores/${store}/menu_products/${id}`, {
      product_id: product,
      prices: { gram: '10.00', 'eighth ounce': '35.00' },
    });
  }
  await must(s, 'PUT', `${P}/reviews/501`, { product_id: 301, store_id: 101, rating: 5, verified: true });
  await must(s, 'PUT', `${P}/specials/601`, {
    store_id: 101,
    title: 'Deal',
    special_type: 'product',
    discount_type: 'percent',
    discount_value: '10.00',
    brand_ids: [201],
    starts_at: '2026-01-01T00:00:00Z',
  });

  const keys = {} as Record<Kind, string>;
  const partnerIds = {} as Record<Kind, string>;
  for (const kind of KINDS) {
    const scope =
      kind === 'brand' || kind === 'brand_feed'
        ? { brand_ids: [201] }
        : { store_ids: kind === 'store_operator' ? [101] : [101, 102] };
    // A high rate limit: the properties send hundreds of requests with one key.
    const out = await must(s, 'POST', '/admin/v1/partners', {
      name: `${kind} partner`,
      kind,
      ...scope,
      rate_limit_per_minute: 100_000,
    });
    keys[kind] = out.api_key;
    partnerIds[kind] = out.partner.partner_id;
  }
  const partnerWithKeys = async (name: string) => {
    const out = await must(s, 'POST', '/admin/v1/partners', { name, kind: 'brand', brand_ids: [201] });
    const id = out.partner.partner_id as string;
    const second = await must(s, 'POST', `/admin/v1/partners/${id}/keys`, {});
    return { id, keyIds: [out.partner.keys[0].key_id as string, second.key.key_id as string] };
  };
  const adminPartner = await partnerWithKeys('admin target');
  const sparePartner = await partnerWithKeys('spare');
  const accountWithTokens = async (name: string) => {
    const email = `${name.replaceAll(' ', '.')}@example.com`;
    const out = await must(s, 'POST', '/admin/v1/operators', { name, email, role: 'auditor' });
    const id = out.operator.operator_id as string;
    const second = await must(s, 'POST', `/admin/v1/operators/${id}/tokens`, {});
    return { id, tokenIds: [out.operator.tokens[0].token_id as string, second.token.token_id as string] };
  };
  const operator = await accountWithTokens('hostile target');
  const spareOperator = await accountWithTokens('spare account');
  const patchedOperator = await accountWithTokens('patched account');

  const receiver = await startReceiver(t);
  const authToken = `hostile-receiver-token-${randomUUID()}`;
  const webhook = await must(s, 'POST', '/admin/v1/webhooks', {
    url: receiver.url,
    auth_token: authToken,
    store_ids: [101],
  });
  const webhookId = webhook.webhook.webhook_id as string;
  const untouched = await must(s, 'POST', '/admin/v1/webhooks', {
    url: receiver.url,
    auth_token: `untouched-${randomUUID()}`,
    store_ids: [101],
  });
  const untouchedId = untouched.webhook.webhook_id as string;
  const spareWebhookIds: string[] = [];
  for (let i = 0; i < 3; i++) {
    const spare = await must(s, 'POST', '/admin/v1/webhooks', {
      url: receiver.url,
      auth_token: `spare-${i}`,
      store_ids: [102],
    });
    spareWebhookIds.push(spare.webhook.webhook_id);
  }

  const openCart = randomUUID();
  await must(s, 'POST', `${P}/carts`, {
    uuid: openCart,
    store_id: 101,
    source: { channel: 'headless', partner_id: null },
  });
  for (const item of [401, 402]) {
    await must(s, 'POST', `${P}/carts/${openCart}/items`, {
      menu_product_id: item,
      price_id: 'gram',
      count: 1,
    });
  }
  const checkoutCart = randomUUID();
  await must(s, 'POST', `${P}/carts`, {
    uuid: checkoutCart,
    store_id: 101,
    source: { channel: 'headless', partner_id: null },
  });
  await must(s, 'POST', `${P}/carts/${checkoutCart}/items`, {
    menu_product_id: 401,
    price_id: 'gram',
    count: 1,
  });
  const curbsideCartOf = async (partnerId: string) => {
    const uuid = randomUUID();
    await must(s, 'POST', `${P}/carts`, {
      uuid,
      store_id: 101,
      source: { channel: 'embedded', partner_id: partnerId },
    });
    await must(s, 'POST', `${P}/carts/${uuid}/items`, {
      menu_product_id: 402,
      price_id: 'eighth ounce',
      count: 2,
    });
    await must(s, 'POST', `${P}/carts/${uuid}/checkout`, { reservation_mode: 'curbside' });
    return uuid;
  };
  const curbsideCart = await curbsideCartOf(partnerIds.store_operator);
  const feedCurbsideCart = await curbsideCartOf(partnerIds.store_menu_feed);
  // The checkout's cart_status_updated reaches the receiver from both subscriptions of store 101:
  // deliveries the delivery routes can name.
  await ticking(s, () => receiver.waitFor(2));
  await caughtUp(s);
  const firstDelivery = async (id: string): Promise<string> => {
    const deliveries = await must(s, 'GET', `/admin/v1/webhooks/${id}/deliveries`);
    const delivery = deliveries.deliveries[0]?.delivery_id as string | undefined;
    if (!delivery) throw new Error(`no delivery listed: ${JSON.stringify(deliveries)}`);
    return delivery;
  };
  const deliveryId = await firstDelivery(webhookId);
  const redeliverableId = await firstDelivery(untouchedId);
  const signIn = await fetch(`${s.base}/admin/v1/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: s.token }),
  });
  if (signIn.status !== 201) throw new Error(`sign-in answered ${signIn.status}: ${await signIn.text()}`);
  const session = {
    cookie: signIn.headers.getSetCookie()[0].split(';')[0],
    csrf: ((await signIn.json()) as { csrf_token: string }).csrf_token,
  };

  return {
    stores: { inScope: [101, 102], outOfScope: 103 },
    brand: 201,
    otherBrand: 202,
    products: [301, 302],
    otherProduct: 303,
    menuProducts: [401, 402, 403, 404],
    review: 501,
    special: 601,
    openCart,
    checkoutCart,
    curbsideCart,
    feedCurbsideCart,
    keys,
    partnerIds,
    adminPartner,
    sparePartner,
    webhookId,
    spareWebhookIds,
    deliveryId,
    redeliverableId,
    receiver,
    authToken,
    operatorToken: s.token,
    session,
    operator,
    spareOperator,
    patchedOperator,
  };
}
