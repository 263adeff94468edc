/**
 * Valid text that looks hostile round-trips exactly (issue 8, part 3): emoji, RTL and bidi controls,
 * combining marks, `<script>`, `'; DROP TABLE`, `{"$gt":""}` and path traversal written through the
 * platform and admin APIs come back unchanged from the write's answer, the event store and every
 * partner read API that shows them (after the read models catch up). Nothing is escaped, trimmed,
 * normalized or interpreted on the way. Tab and line breaks round-trip in text of several lines
 * (descriptions, comments, instructions, messages, notes). What no text may hold (NUL and the other
 * control characters, lone surrogates; tab and line breaks in a name) is refused with a 422:
 * `text-fields.test.ts`.
 */
import test, { type ExecutionContext } from 'ava';
import fc from 'fast-check';
import { isOneLine, isPrintable } from '../../domain/schemas.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { startService, type TestService } from '../support/service.ts';
import type { Json } from './values.ts';
import { caughtUp } from './world.ts';

const NASTY_VALID: readonly string[] = [
  '🌿 Green 🔥 Leaf',
  'مرحبا بالعالم',
  'שלום עולם',
  '\u202eevil\u202c.exe',
  "<script>alert('x')</script>",
  '"><img src=x onerror=alert(1)>',
  "Robert'); DROP TABLE events;--",
  "' OR '1'='1",
  '{"$gt":""}',
  '$where',
  '{"$where":"sleep(1000)"}',
  '../../etc/passwd',
  '%00%2e%2e%2f',
  '👩‍👩‍👧‍👦 family',
  'Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template injection probe, sent as text
  '${7*7} {{7*7}}',
  '\\u0000 not an escape',
  'line1\nline2\r\nline3',
  'tab\tinside',
  'e\u0301 vs é',
  'ﬁ ligature',
  '𝕳𝖊𝖑𝖑𝖔',
  '__proto__',
  'constructor',
];

/** The curated values a name accepts (no tab or line break). */
const NASTY_ONE_LINE = NASTY_VALID.filter(isOneLine);

/** Text a non-empty trimmed field of several lines accepts: no surrounding white space, 1 to 100 UTF-16 units. */
const lines = fc
  .oneof(
    { weight: 3, arbitrary: fc.constantFrom(...NASTY_VALID) },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 30 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }) },
    // Characters outside the BMP: surrogate pairs, well-formed (a lone surrogate is refused).
    {
      weight: 1,
      arbitrary: fc
        .array(fc.integer({ min: 0x10000, max: 0x10ffff }), { minLength: 1, maxLength: 4 })
        .map((codes) => `s${String.fromCodePoint(...codes)}s`),
    },
  )
  .filter((s) => s.length > 0 && s.length <= 100 && s.trim() === s && isPrintable(s));
/** Text a name accepts: the same, on one line. */
const text = lines.filter(isOneLine);
/** The fields of several lines. */
const MULTI_LINE = new Set(['description', 'comment', 'special', 'instructions', 'message', 'notes']);

const texts = fc.record({
  store: text,
  displayName: text,
  address: text,
  city: text,
  brand: text,
  product: text,
  subtype: text,
  description: lines,
  comment: lines,
  feeling: text,
  title: text,
  special: lines,
  instructions: lines,
  payment: text,
  label: text,
  first: text,
  last: text,
  window: text,
  promo: text,
  employee: text,
  message: lines,
  partner: text,
  notes: lines,
});
type Texts = typeof texts extends fc.Arbitrary<infer T> ? T : never;

async function must(s: TestService, method: string, url: string, body?: unknown): Promise<Json> {
  const res = await s.call(method, url, body);
  const raw = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${url} answered ${res.status}: ${raw.slice(0, 500)}`);
  return JSON.parse(raw) as Json;
}

async function read(s: TestService, key: string, url: string): Promise<Json> {
  const res = await fetch(`${s.base}${url}`, { headers: { authorization: `Bearer ${key}` } });
  const raw = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url} answered ${res.status}: ${raw.slice(0, 500)}`);
  return JSON.parse(raw) as Json;
}

/** Fails with the field, the value sent and the value found (as JSON, so invisible characters show). */
function same(found: unknown, sent: unknown, where: string): void {
  if (found !== sent) {
    throw new Error(`${where}: sent ${JSON.stringify(sent)}, got back ${JSON.stringify(found)}`);
  }
}

async function lastEvent(store: EventStore, streamId: string): Promise<Json> {
  const [e] = await store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  return e.data as Json;
}

/** Writes every text into a fresh store's catalog, cart and partner, and reads each one back. */
async function roundTrip(t: ExecutionContext, s: TestService, inspect: EventStore, n: number, x: Texts) {
  const P = '/platform/v1';
  const store = 5000 + n;
  const product = 6000 + n;
  const menuProduct = 7000 + n;
  const review = 8000 + n;
  const special = 9000 + n;

  // Writes: each answer shows the text as sent.
  const storeAnswer = await must(s, 'PUT', `${P}/stores/${store}`, {
    name: x.store,
    display_name: x.displayName,
    address: x.address,
    city: x.city,
    state: 'CO',
    zip: '80202',
    lat: 39.75,
    long: -104.99,
    curbside: true,
  });
  same(storeAnswer.store.name, x.store, 'store answer name');
  same((await lastEvent(inspect, `store-${store}`)).name, x.store, 'StoreUpserted name');
  await must(s, 'PUT', `${P}/stores/${store}/curbside_pickup_setting`, {
    enabled: true,
    arrival_instructions: x.instructions,
    payment_options: [x.payment],
    arrival_form_fields: [
      { name: 'vehicle_make', label: x.label, required: true },
      { name: 'notes_extra', label: 'Extra', required: false },
    ],
  });
  await must(s, 'PUT', `${P}/brands/1`, { name: x.brand });
  const productAnswer = await must(s, 'PUT', `${P}/products/${product}`, {
    name: x.product,
    brand_id: 1,
    kind: 'edible',
    kind_subtype: x.subtype,
    description: x.description,
  });
  same(productAnswer.product.name, x.product, 'product answer name');
  same(
    (await lastEvent(inspect, `product-${product}`)).description,
    x.description,
    'ProductUpserted description',
  );
  await must(s, 'PUT', `${P}/stores/${store}/menu_products/${menuProduct}`, {
    product_id: product,
    prices: { each: '5.00' },
  });
  await must(s, 'PUT', `${P}/reviews/${review}`, {
    product_id: product,
    store_id: store,
    rating: 5,
    comment: x.comment,
    feelings: [x.feeling],
    verified: true,
  });
  await must(s, 'PUT', `${P}/specials/${special}`, {
    store_id: store,
    title: x.title,
    description: x.special,
    special_type: 'product',
    discount_type: 'dollar_amount',
    discount_value: '1.00',
    starts_at: '2020-01-01T00:00:00Z',
  });
  const partner = await must(s, 'POST', '/admin/v1/partners', {
    name: x.partner,
    kind: 'store_operator',
    store_ids: [store],
  });
  same(partner.partner.name, x.partner, 'partner answer name');
  const key = partner.api_key as string;
  const partnerId = partner.partner.partner_id as string;
  const brandPartner = await must(s, 'POST', '/admin/v1/partners', {
    name: `brand ${x.partner}`,
    kind: 'brand',
    brand_ids: [1],
  });
  const cart = await must(s, 'POST', `${P}/carts`, {
    store_id: store,
    source: { channel: 'embedded', partner_id: partnerId },
  });
  const uuid = cart.cart.uuid as string;
  await must(s, 'POST', `${P}/carts/${uuid}/items`, {
    menu_product_id: menuProduct,
    price_id: 'each',
    count: 1,
  });
  await must(s, 'PUT', `${P}/carts/${uuid}/customer`, { first_name: x.first, last_name: x.last });
  await must(s, 'POST', `${P}/carts/${uuid}/checkout`, {
    reservation_mode: 'curbside',
    reservation_start_window: x.window,
    promo_code: x.promo,
  });
  await must(s, 'POST', `${P}/carts/${uuid}/status`, {
    status: 'preparing',
    assigned_employee_name: x.employee,
    checkout_message: x.message,
  });
  // The partner's own write: the arrival answer shows the form's answers as posted.
  const arrival = await fetch(`${s.base}/partner/store/v1/reservations/${uuid}/curbside_arrival`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ vehicle_make: x.label, notes: x.notes }),
  });
  const arrived = (await arrival.json()) as Json;
  if (arrival.status !== 201)
    throw new Error(`curbside arrival answered ${arrival.status}: ${JSON.stringify(arrived)}`);
  same(arrived.curbside_arrival.fields.notes, x.notes, 'arrival answer notes');
  same(arrived.curbside_arrival.fields.vehicle_make, x.label, 'arrival answer vehicle_make');

  await caughtUp(s);

  // Reads: the store partner's APIs.
  const base = '/partner/store/v1';
  const mp = (await read(s, key, `${base}/menu_products/${menuProduct}`)).menu_product;
  same(mp.name, x.product, 'menu product name');
  same(mp.brand, x.brand, 'menu product brand');
  same(mp.kind_subtype, x.subtype, 'menu product kind_subtype');
  same(mp.description, x.description, 'menu product description');
  const [r] = (await read(s, key, `${base}/products/${product}/reviews`)).reviews;
  same(r?.comment, x.comment, 'review comment');
  same(r?.feelings?.[0], x.feeling, 'review feeling');
  const [sp] = (await read(s, key, `${base}/specials`)).specials;
  same(sp?.title, x.title, 'special title');
  same(sp?.description, x.special, 'special description');
  const setting = (await read(s, key, `${base}/curbside_pickup_setting`)).curbside_pickup_setting;
  same(setting.arrival_instructions, x.instructions, 'arrival_instructions');
  same(setting.payment_options[0], x.payment, 'payment option');
  same(setting.arrival_form_fields[0].label, x.label, 'arrival form label');
  const [c] = (await read(s, key, `${base}/carts`)).carts;
  same(c?.uuid, uuid, 'cart uuid');
  same(c.store_name, x.store, 'cart store_name');
  same(c.customer_name, `${x.first} ${x.last}`, 'cart customer_name');
  same(c.reservation_start_window, x.window, 'cart reservation_start_window');
  same(c.promo_code, x.promo, 'cart promo_code');
  same(c.assigned_employee_name, x.employee, 'cart assigned_employee_name');
  same(c.checkout_message, x.message, 'cart checkout_message');
  same(c.products[0].name, x.product, 'cart line name');
  same(c.products[0].brand, x.brand, 'cart line brand');

  // The brand partner's APIs: the store, the product near its ZIP code.
  const brandKey = brandPartner.api_key as string;
  const stores = (await read(s, brandKey, '/partner/brand/v1/stores?limit=500')).stores as Json[];
  const shop = stores.find((x2) => x2.id === store);
  same(shop?.name, x.store, 'store name');
  same(shop?.display_name, x.displayName, 'store display_name');
  same(shop?.address, x.address, 'store address');
  same(shop?.city, x.city, 'store city');
  const products = (await read(s, brandKey, '/partner/brand/v1/products?zipcode=80202&limit=500'))
    .products as Json[];
  const item = products.find((p) => p.product_id === product);
  same(item?.name, x.product, 'product name');
  same(item?.brand, x.brand, 'product brand');
  same(item?.description, x.description, 'product description');

  // The operator's views.
  const shown = await must(s, 'GET', `/admin/v1/partners/${partnerId}`);
  same(shown.partner.name, x.partner, 'admin partner name');
  const history = (await must(s, 'GET', `/admin/v1/carts/${uuid}/history`)).events as Json[];
  const posted = history.find((e) => e.type === 'CurbsideArrivalPosted');
  same(posted?.data.fields.notes, x.notes, 'history arrival notes');
  t.pass();
}

test('unicode and injection-looking text round-trips exactly through writes and every read', async (t) => {
  t.timeout(120_000);
  const s = await startService(t);
  const inspect = await s.openStore();
  let n = 0;
  const runs = Math.max(1, Math.round(20 * Number(process.env.HOSTILE_RUNS_FACTOR ?? 1)));
  // Every curated value once (spread over the fields), then generated ones.
  const fields = Object.keys(fc.sample(texts, 1)[0]) as (keyof Texts)[];
  const curated = NASTY_VALID.map(
    (_, i) =>
      Object.fromEntries(
        fields.map((k, j) => {
          const values = MULTI_LINE.has(k) ? NASTY_VALID : NASTY_ONE_LINE;
          return [k, values[(i + j) % values.length]];
        }),
      ) as Texts,
  );
  await fc.assert(
    fc.asyncProperty(texts, async (x) => {
      n += 1;
      await roundTrip(t, s, inspect, n, x);
    }),
    { numRuns: curated.length + runs, examples: curated.map((x) => [x]), endOnFailure: true },
  );
  t.log(`${n} round trips (${curated.length} curated, ${runs} generated)`);
});
