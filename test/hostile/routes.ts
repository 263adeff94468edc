/**
 * Every HTTP route the service serves, as the hostile-input suite attacks it: method, path pattern,
 * who may call it, the query parameters it reads, valid values for its path parameters and a valid body
 * (the template hostile bodies are mutations of). The partner routes are derived from the partner route
 * tables (`api/partner/*`), so a new partner route is attacked without editing this file; platform,
 * admin, docs and operational routes are listed by hand, and `coverage.test.ts` fails when the routers
 * serve a route this catalogue does not name.
 */
import { z } from 'zod';
import { partnerApis } from '../../api/partner/index.ts';
import type { PartnerKind } from '../../domain/partner.ts';
import type { Json } from './values.ts';
import type { World } from './world.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
/** Who may call a route: the operator token, a partner kind's key, anyone, or a console session. */
export type Auth = 'operator' | PartnerKind | 'public' | 'session';

export interface RouteSpec {
  method: Method;
  /** The router's pattern, e.g. `/platform/v1/stores/:id`. */
  path: string;
  auth: Auth;
  /** The query parameters the route reads. */
  query: readonly string[];
  /** Query parameters a request must carry (the valid request sends their first valid value). */
  requiredQuery?: readonly string[];
  /** Valid values of each path parameter (ids that exist, so hostile bodies reach the handler's depth). */
  params(w: World): Record<string, string[]>;
  /** A valid body: hostile bodies are mutations of it. Absent when the route reads no body. */
  body?(w: World): Json;
  /**
   * The API base whose OpenAPI document every answer must match (partner, platform and admin routes).
   */
  apiBase?: string;
}

const none = () => ({});
const spec = (
  method: Method,
  path: string,
  auth: Auth,
  params: RouteSpec['params'] = none,
  extra: Partial<Pick<RouteSpec, 'query' | 'body' | 'apiBase'>> = {},
): RouteSpec => ({
  method,
  path,
  auth,
  params,
  query: extra.query ?? [],
  body: extra.body,
  ...(extra.apiBase ? { apiBase: extra.apiBase } : {}),
});

// ---- platform ------------------------------------------------------------------------------------

const P = '/platform/v1';
const storeBody = (): Json => ({
  name: 'Hostile Store',
  display_name: 'Hostile Store Downtown',
  store_url: 'https://store.example.com',
  address: '1 Main St',
  city: 'Denver',
  state: 'CO',
  zip: '80202',
  lat: 39.75,
  long: -104.99,
  phone: '+1 303-555-0100',
  time_zone: 'America/Denver',
  recreational: true,
  medical: false,
  pickup: true,
  delivery: false,
  curbside: true,
  working_hours: [{ day: 'monday', from: '09:00', to: '17:00' }],
});

const platformSpecs: readonly RouteSpec[] = [
  spec('PUT', `${P}/stores/:id`, 'operator', () => ({ id: ['101', '150'] }), { body: storeBody }),
  spec('PUT', `${P}/stores/:id/curbside_pickup_setting`, 'operator', () => ({ id: ['101', '102'] }), {
    body: () => ({
      enabled: true,
      arrival_instructions: 'Park in bay 3',
      hours: [{ day: 'friday', from: '10:00', to: '18:00' }],
      window_minutes: 15,
      max_orders_per_window: 10,
      payment_options: ['cash'],
      arrival_form_fields: [{ name: 'vehicle_make', label: 'Make', required: true }],
    }),
  }),
  spec('PUT', `${P}/brands/:id`, 'operator', () => ({ id: ['201', '250'] }), {
    body: () => ({ name: 'Brand' }),
  }),
  spec('PUT', `${P}/products/:id`, 'operator', () => ({ id: ['301', '350'] }), {
    body: () => ({
      name: 'Product',
      brand_id: 201,
      kind: 'edible',
      kind_subtype: 'gummies',
      lineage: 'indica',
      description: 'Tasty',
      percent_thc: 10,
      percent_cbd: 1,
      image_urls: ['https://img.example.com/p.png'],
    }),
  }),
  spec(
    'PUT',
    `${P}/stores/:store_id/menu_products/:id`,
    'operator',
    () => ({ store_id: ['101'], id: ['401', '450'] }),
    {
      body: () => ({ product_id: 301, prices: { gram: '11.00', each: '5.00' }, in_stock: true }),
    },
  ),
  spec('DELETE', `${P}/stores/:store_id/menu_products/:id`, 'operator', () => ({
    store_id: ['102'],
    id: ['403'],
  })),
  spec('PUT', `${P}/reviews/:id`, 'operator', () => ({ id: ['501', '550'] }), {
    body: () => ({
      product_id: 301,
      store_id: 101,
      rating: 4,
      comment: 'Good',
      feelings: ['happy'],
      activities: ['hiking'],
      verified: true,
    }),
  }),
  spec('PUT', `${P}/specials/:id`, 'operator', () => ({ id: ['601', '650'] }), {
    body: () => ({
      store_id: 101,
      title: 'Deal',
      description: 'Ten off',
      special_type: 'product',
      discount_type: 'percent',
      discount_value: '10.00',
      product_ids: [301],
      brand_ids: [201],
      kinds: ['flower'],
      starts_at: '2026-01-01T00:00:00Z',
      ends_at: '2027-01-01T00:00:00+02:00',
      enabled: true,
    }),
  }),
  spec('POST', `${P}/carts`, 'operator', none, {
    body: () => ({ store_id: 101, source: { channel: 'headless', partner_id: 'site-1' }, user_id: 7 }),
  }),
  spec('POST', `${P}/carts/:uuid/items`, 'operator', (w) => ({ uuid: [w.openCart] }), {
    body: () => ({ menu_product_id: 405, price_id: 'gram', count: 1 }),
  }),
  spec(
    'PATCH',
    `${P}/carts/:uuid/items/:menu_product_id`,
    'operator',
    (w) => ({
      uuid: [w.openCart],
      menu_product_id: ['401'],
    }),
    { body: () => ({ count: 2 }) },
  ),
  spec('DELETE', `${P}/carts/:uuid/items/:menu_product_id`, 'operator', (w) => ({
    uuid: [w.openCart],
    menu_product_id: ['402'],
  })),
  spec('PUT', `${P}/carts/:uuid/customer`, 'operator', (w) => ({ uuid: [w.openCart] }), {
    body: () => ({
      email: 'ana@example.com',
      first_name: 'Ana',
      last_name: 'Lee',
      phone_number: '+14155550100',
      DOB: '1990-04-01T00:00:00.000Z',
    }),
  }),
  spec('POST', `${P}/carts/:uuid/checkout`, 'operator', (w) => ({ uuid: [w.checkoutCart, w.curbsideCart] }), {
    body: () => ({
      reservation_mode: 'pickup',
      reservation_start_window: '2026-03-01 10:00',
      promo_code: 'X',
    }),
  }),
  spec('POST', `${P}/carts/:uuid/status`, 'operator', (w) => ({ uuid: [w.curbsideCart] }), {
    body: () => ({
      status: 'preparing',
      assigned_employee_id: 5,
      assigned_employee_name: 'Sam',
      checkout_message: 'Thanks',
      pos_order_id: 'POS-1',
      queue_number: 3,
    }),
  }),
];
/** Every platform answer must match the platform API's OpenAPI document. */
export const platformRoutes: readonly RouteSpec[] = platformSpecs.map((r) => ({ ...r, apiBase: P }));

// ---- admin ---------------------------------------------------------------------------------------

const A = '/admin/v1';
const adminSpecs: readonly RouteSpec[] = [
  spec('POST', `${A}/partners`, 'operator', none, {
    body: () => ({ name: 'Partner', kind: 'brand', brand_ids: [201], rate_limit_per_minute: 600 }),
  }),
  spec('GET', `${A}/partners`, 'operator', none, { query: ['limit', 'cursor', 'kind'] }),
  spec('GET', `${A}/partners/:id`, 'operator', (w) => ({ id: [w.adminPartner.id] })),
  spec('PATCH', `${A}/partners/:id`, 'operator', (w) => ({ id: [w.adminPartner.id] }), {
    body: () => ({ rate_limit_per_minute: 1000 }),
  }),
  spec('POST', `${A}/partners/:id/keys`, 'operator', (w) => ({ id: [w.adminPartner.id] }), {
    body: () => ({}),
  }),
  spec(
    'POST',
    `${A}/partners/:id/keys/:key_id/rotate`,
    'operator',
    (w) => ({ id: [w.adminPartner.id], key_id: w.adminPartner.keyIds }),
    { body: () => ({}) },
  ),
  spec('DELETE', `${A}/partners/:id/keys/:key_id`, 'operator', (w) => ({
    id: [w.sparePartner.id],
    key_id: w.sparePartner.keyIds,
  })),
  spec('GET', `${A}/carts/:uuid/history`, 'operator', (w) => ({ uuid: [w.curbsideCart, w.openCart] })),
  spec('GET', `${A}/carts/:uuid/webhooks`, 'operator', (w) => ({ uuid: [w.curbsideCart, w.openCart] }), {
    query: ['limit', 'cursor'],
  }),
  spec('POST', `${A}/webhooks`, 'operator', none, {
    body: (w) => ({
      url: w.receiver.url,
      auth_token: 'token-1',
      store_ids: [101],
      events: ['cart_status_updated'],
    }),
  }),
  spec('GET', `${A}/webhooks`, 'operator', none, { query: ['limit', 'cursor', 'store_id', 'enabled'] }),
  spec('GET', `${A}/webhooks/:id`, 'operator', (w) => ({ id: [w.webhookId] })),
  spec('PATCH', `${A}/webhooks/:id`, 'operator', (w) => ({ id: [w.webhookId] }), {
    body: (w) => ({
      url: w.receiver.url,
      auth_token: w.authToken,
      store_ids: [101],
      events: ['cart_status_updated', 'cart_abandoned'],
      enabled: true,
    }),
  }),
  spec('POST', `${A}/webhooks/:id/rotate-secret`, 'operator', (w) => ({ id: [w.webhookId] }), {
    body: () => ({}),
  }),
  spec('DELETE', `${A}/webhooks/:id`, 'operator', (w) => ({ id: w.spareWebhookIds })),
  spec('GET', `${A}/webhooks/:id/deliveries`, 'operator', (w) => ({ id: [w.webhookId] }), {
    query: ['status', 'limit', 'cursor'],
  }),
  spec('GET', `${A}/webhooks/:id/health`, 'operator', (w) => ({ id: [w.webhookId] }), { query: ['window'] }),
  spec('GET', `${A}/webhooks/deliveries/:delivery_id`, 'operator', (w) => ({ delivery_id: [w.deliveryId] })),
  spec(
    'POST',
    `${A}/webhooks/deliveries/:delivery_id/redeliver`,
    'operator',
    (w) => ({ delivery_id: [w.redeliverableId] }),
    { body: () => ({}) },
  ),
  spec('POST', `${A}/webhooks/:id/recover`, 'operator', (w) => ({ id: [w.webhookId] }), {
    body: () => ({ since: '2020-01-01T00:00:00Z' }),
  }),
  spec('POST', `${A}/webhooks/:id/test`, 'operator', (w) => ({ id: [w.webhookId] }), {
    body: () => ({ event: 'cart_abandoned' }),
  }),
  spec('GET', `${A}/webhook-fan-out`, 'operator'),
  spec('GET', `${A}/webhook-health`, 'operator'),
  spec('GET', `${A}/carts/:uuid/views`, 'operator', (w) => ({ uuid: [w.curbsideCart, w.openCart] }), {
    query: ['limit', 'cursor'],
    apiBase: A,
  }),
  spec('GET', `${A}/carts`, 'operator', none, {
    query: [
      'store_id',
      'status',
      'created_after',
      'created_before',
      'partner_id',
      'customer_email',
      'customer_phone',
      'limit',
      'cursor',
    ],
    apiBase: A,
  }),
  spec('GET', `${A}/me`, 'operator', none, { apiBase: A }),
  spec('POST', `${A}/operators`, 'operator', none, {
    body: () => ({
      name: 'Hostile Auditor',
      email: 'hostile.auditor@example.com',
      role: 'auditor',
      expires_in_days: 30,
    }),
    apiBase: A,
  }),
  spec('GET', `${A}/operators`, 'operator', none, { query: ['limit', 'cursor', 'role'], apiBase: A }),
  spec('GET', `${A}/operators/:id`, 'operator', (w) => ({ id: [w.operator.id] }), { apiBase: A }),
  spec('PATCH', `${A}/operators/:id`, 'operator', (w) => ({ id: [w.patchedOperator.id] }), {
    body: () => ({ role: 'operator', enabled: true }),
    apiBase: A,
  }),
  spec('GET', `${A}/operators/:id/tokens`, 'operator', (w) => ({ id: [w.operator.id] }), { apiBase: A }),
  spec('POST', `${A}/operators/:id/tokens`, 'operator', (w) => ({ id: [w.operator.id] }), {
    body: () => ({ expires_in_days: 7 }),
    apiBase: A,
  }),
  spec(
    'POST',
    `${A}/operators/:id/tokens/:token_id/rotate`,
    'operator',
    (w) => ({ id: [w.operator.id], token_id: w.operator.tokenIds }),
    { body: () => ({ expires_in_days: 30 }), apiBase: A },
  ),
  spec(
    'DELETE',
    `${A}/operators/:id/tokens/:token_id`,
    'operator',
    (w) => ({ id: [w.spareOperator.id], token_id: w.spareOperator.tokenIds }),
    { apiBase: A },
  ),
  spec('GET', `${A}/projections`, 'operator'),
  spec('POST', `${A}/projections/:name/rebuild`, 'operator', () => ({
    name: ['catalog', 'carts', 'webhook_deliveries'],
  })),
  // A customer the world has none of: hostile bodies reach the lookup, and no world cart is erased.
  spec('POST', `${A}/customers/erase`, 'operator', none, {
    body: () => ({ customer: 'nobody-in-this-world@example.com' }),
  }),
  spec('POST', `${A}/customers/export`, 'operator', none, {
    body: () => ({ customer: 'nobody-in-this-world@example.com' }),
  }),
  // The console's session: sign-in takes the token; sign-out, last, ends the world's session.
  spec('POST', `${A}/session`, 'public', none, { body: (w) => ({ token: w.operatorToken }), apiBase: A }),
  spec('GET', `${A}/session`, 'session', none, { apiBase: A }),
  spec('DELETE', `${A}/session`, 'session', none, { apiBase: A }),
];
/** Every admin answer must match the admin API's OpenAPI document. */
export const adminRoutes: readonly RouteSpec[] = adminSpecs.map((r) => ({ ...r, apiBase: A }));

// ---- public: operational endpoints, OpenAPI documents, the home, docs and console pages ------------

export const publicRoutes: readonly RouteSpec[] = [
  spec('GET', '/', 'public'),
  spec('GET', '/healthz', 'public'),
  spec('GET', '/readyz', 'public'),
  spec('GET', '/metrics', 'public'),
  ...partnerApis.map((api) => spec('GET', `${api.base}/openapi.json`, 'public')),
  spec('GET', '/admin/v1/openapi.json', 'public'),
  spec('GET', `${P}/openapi.json`, 'public'),
  spec('GET', '/docs', 'public', none, { query: ['api'] }),
  spec('GET', '/docs/assets/:name', 'public', () => ({ name: ['docs.css', 'swagger-ui.css'] }), {
    query: ['v'],
  }),
  // The console's page and assets are public; everything it shows comes from /admin/v1 with the token.
  spec('GET', '/console', 'public', none),
  spec('GET', '/console/assets/:name', 'public', () => ({ name: ['console.css', 'console.js'] }), {
    query: ['v'],
  }),
];

// ---- partner APIs, from their route tables ----------------------------------------------------------

/** Valid values of the partner APIs' path parameters, by name. */
const partnerParams: Record<string, (w: World) => string[]> = {
  store_id: (w) => [...w.stores.inScope, w.stores.outOfScope].map(String),
  menu_product_id: (w) => w.menuProducts.map(String),
  product_id: (w) => [...w.products, w.otherProduct].map(String),
  // Each store API's key posts arrivals for its own site's reservation (and is refused the other's).
  uuid: (w) => [w.curbsideCart, w.feedCurbsideCart, w.openCart, w.curbsideCart.toUpperCase()],
};

/** Valid bodies of the partner APIs' POST routes, by operation id. */
const partnerBodies: Record<string, (w: World) => Json> = {
  postCurbsideArrival: () => ({
    vehicle_make: 'Volvo',
    vehicle_color: 'red',
    parking_spot: '3',
    notes: 'Blue',
  }),
};

function queryKeys(schema: z.ZodType | undefined): string[] {
  if (schema === undefined) return [];
  if (!(schema instanceof z.ZodObject)) throw new Error('a partner query schema that is not an object');
  return Object.keys(schema.shape);
}

/** The keys a query schema requires (those that refuse being absent). */
function requiredKeys(schema: z.ZodType | undefined): string[] {
  if (!(schema instanceof z.ZodObject)) return [];
  return Object.entries(schema.shape as Record<string, z.ZodType>)
    .filter(([, field]) => !field.safeParse(undefined).success)
    .map(([key]) => key);
}

export const partnerRoutes: readonly RouteSpec[] = partnerApis.flatMap((api) =>
  api.routes.map((r): RouteSpec => {
    const path = `${api.base}${r.path.replace(/\{(\w+)\}/g, ':$1')}`;
    const names = [...r.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    for (const name of names) {
      if (!partnerParams[name]) throw new Error(`no valid values for the path parameter ${name} of ${path}`);
    }
    const body = r.body ? partnerBodies[r.operationId] : undefined;
    if (r.body && !body) throw new Error(`no valid body for ${r.operationId} (${path})`);
    return {
      method: r.method.toUpperCase() as Method,
      path,
      auth: api.kinds[0],
      query: queryKeys(r.query as z.ZodType | undefined),
      // store_id too where the route reads it: a key covering several stores must name one.
      requiredQuery: [
        ...requiredKeys(r.query as z.ZodType | undefined),
        ...(queryKeys(r.query as z.ZodType | undefined).includes('store_id') ? ['store_id'] : []),
      ],
      params: (w) => Object.fromEntries(names.map((n) => [n, partnerParams[n](w)])),
      body,
      apiBase: api.base,
    };
  }),
);

export const allRoutes: readonly RouteSpec[] = [
  ...partnerRoutes,
  ...platformRoutes,
  ...adminRoutes,
  ...publicRoutes,
];

// ---- query values -------------------------------------------------------------------------------

const b64 = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const SOME_UUID = '00000000-0000-4000-8000-000000000000';

/**
 * Values of each query parameter that parse (or nearly): well-formed cursors of every list and cursors
 * that decode to JSON of the wrong shape (operators, prototype keys, huge and negative numbers).
 */
const queryValues: Record<string, string[]> = {
  limit: ['1', '2', '10', '500'],
  cursor: [
    b64([401]),
    b64([1, SOME_UUID]),
    b64(SOME_UUID),
    b64(['2020-01-01T00:00:00.000Z', SOME_UUID]),
    b64(['2020-01-01T00:00:00.000Z', 1, SOME_UUID]),
    b64([{ $gt: 0 }]),
    b64({ $where: '1' }),
    b64('["__proto__"]'),
    b64('{"__proto__":{"polluted":"yes"}}'),
    b64('[1e400]'),
    b64([-1]),
    b64('[9007199254740993]'),
    b64([1, { $gt: '' }]),
    b64(['2020-01-01T00:00:00.000Z', { $ne: null }]),
  ],
  store_id: ['101', '102', '103'],
  updated_after: ['2020-01-01T00:00:00Z', '2030-01-01T00:00:00.000+05:30'],
  created_after: ['2020-01-01T00:00:00Z', '2020-02-29T23:59:59.999-12:00'],
  created_before: ['2099-01-01T00:00:00Z', '0000-01-01T00:00:00+14:00'],
  status: ['verification', 'pending', 'preparing', 'pending,delivered', 'parked', 'failed,in_flight'],
  abandoned: ['true', 'false'],
  partner_id: [SOME_UUID],
  customer_email: ['ana@example.com', 'ANA@Example.com '],
  customer_phone: ['+14155550100', '(415) 555-0100'],
  zipcode: ['80202', '10001', '00000', '99999'],
  radius: ['1', '25', '100', '0.5'],
  kind: ['brand', 'store_operator'],
  role: ['auditor', 'operator', 'admin'],
  enabled: ['true', 'false'],
  window: ['1h', '24h'],
  api: ['brand', 'store', 'brand-feed', 'store-menu-feed', 'platform', 'admin'],
  v: ['x'],
};

export function validQueryValues(name: string): string[] {
  const values = queryValues[name];
  if (!values) throw new Error(`no valid values for the query parameter ${name}`);
  return values;
}

/** The parameter names of a pattern, in order. */
export const paramNames = (path: string) => [...path.matchAll(/:(\w+)/g)].map((m) => m[1]);
