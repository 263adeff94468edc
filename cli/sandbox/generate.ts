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
 *
 * This module puts the parts together; each is made in `generate/` (the stores, the catalog, specials,
 * reviews, partners, carts), from the word lists in `generate/vocabulary.ts`.
 */
import { generateCarts, type StoreFacts } from './generate/carts.ts';
import { type SandboxData, type SandboxMenuProduct, sandboxCounts } from './generate/model.ts';
import { generatePartners } from './generate/partners.ts';
import { generateBrands, generateMenuProducts, generateProducts } from './generate/products.ts';
import { generateReviews } from './generate/reviews.ts';
import { generateSpecials } from './generate/specials.ts';
import { generateStores } from './generate/stores.ts';
import { DAY, iso } from './generate/units.ts';
import { DEFAULT_SANDBOX_SEED, DEFAULT_SANDBOX_SIZE } from './sizes.ts';

export {
  CART_TARGETS,
  type CartPlan,
  type CartStep,
  type CartTarget,
  type SandboxCounts,
  type SandboxCurbsideSetting,
  type SandboxData,
  type SandboxMenuProduct,
  type SandboxPartner,
  type SandboxProduct,
  type SandboxReview,
  type SandboxSpecial,
  type SandboxStore,
  sandboxCounts,
} from './generate/model.ts';
export { sandboxPartnerIds } from './generate/partners.ts';
export { createRng, type Rng } from './generate/rng.ts';

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
