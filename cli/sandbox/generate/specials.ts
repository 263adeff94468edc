/** The stores' specials: brand, kind, product, bulk, bundle and cart-total deals, some over, some on. */
import type { SandboxMenuProduct, SandboxSpecial, SandboxStore } from './model.ts';
import { stream } from './rng.ts';
import { DAY, HOUR, iso, money, shares } from './units.ts';

export function generateSpecials(
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
