/**
 * The catalog: brands, products described by kind (name, subtype, lineage, potency, base prices), and
 * each store's menu of them with its own markup (docs/partner-api.md).
 */
import { type Weight, weights } from '../../../domain/schemas.ts';
import type { Kind, ProductFacts, SandboxMenuProduct, SandboxProduct, SandboxStore } from './model.ts';
import { type Rng, stream } from './rng.ts';
import { money, shares } from './units.ts';
import { BRAND_WORDS, BRANDS, FLAVORS, KIND_WEIGHTS, STRAINS } from './vocabulary.ts';

const round1 = (n: number) => Math.round(n * 10) / 10;
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

export function generateBrands(seed: number, count: number) {
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

/** What describing a product drew first, whatever its kind. */
interface Draw {
  rng: Rng;
  strain: string;
  strainLineage: (typeof STRAINS)[number][1];
  flavor: string;
  /** A potency percent from `min` to `max`, to one decimal. */
  thc: (min: number, max: number) => number;
}

/** The product body's own fields, and its base prices by weight. */
type ProductDescription = Omit<SandboxProduct['body'], 'brand_id' | 'kind' | 'image_urls'> & {
  base: ProductFacts['base'];
};

function describeFlower({ rng, strain, strainLineage, thc }: Draw): ProductDescription {
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

function describePreRoll({ rng, strain, strainLineage, thc }: Draw): ProductDescription {
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

function describeVape({ rng, strain, strainLineage, thc }: Draw): ProductDescription {
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

function describeExtract({ rng, strain, strainLineage, thc }: Draw): ProductDescription {
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

function describeEdible({ rng, flavor }: Draw): ProductDescription {
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

function describeTincture({ rng }: Draw): ProductDescription {
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

function describeTopical({ rng }: Draw): ProductDescription {
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

function describeGear({ rng }: Draw): ProductDescription {
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

function describeMerch({ rng }: Draw): ProductDescription {
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

function describeGrow({ rng, strain, strainLineage }: Draw): ProductDescription {
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
const DESCRIBE: Record<Kind, (draw: Draw) => ProductDescription> = {
  flower: describeFlower,
  'pre-roll': describePreRoll,
  vape: describeVape,
  extract: describeExtract,
  edible: describeEdible,
  tincture: describeTincture,
  topical: describeTopical,
  gear: describeGear,
  merch: describeMerch,
  grow: describeGrow,
};

/** A product's name, subtype, lineage, potency and base prices, by kind. */
function describeProduct(rng: Rng, kind: Kind): ProductDescription {
  // Every kind draws a strain and a flavor first, used or not: the products stream keeps its order.
  const [strain, strainLineage] = rng.pick(STRAINS);
  const flavor = rng.pick(FLAVORS);
  const thc = (min: number, max: number) => round1(rng.float(min, max));
  return DESCRIBE[kind]({ rng, strain, strainLineage, flavor, thc });
}

export function generateProducts(seed: number, count: number, brands: ReturnType<typeof generateBrands>) {
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

export function generateMenuProducts(
  seed: number,
  total: number,
  stores: SandboxStore[],
  facts: ProductFacts[],
) {
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
