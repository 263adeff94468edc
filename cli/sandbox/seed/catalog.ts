/**
 * The sandbox catalog, written as the platform routes would write it: stores and their curbside
 * settings, brands, products, specials, reviews and menu products. What it writes is kept as
 * `CatalogFacts`, the context later records look up (a route would read it from the streams).
 */
import * as brand from '../../../domain/brand.ts';
import * as menuProduct from '../../../domain/menu-product.ts';
import type { PricingSpecial } from '../../../domain/pricing.ts';
import * as product from '../../../domain/product.ts';
import * as review from '../../../domain/review.ts';
import * as special from '../../../domain/special.ts';
import * as store from '../../../domain/store.ts';
import type { SandboxData } from '../generate.ts';
import type { SeedWriter } from './writer.ts';

/** What the catalog holds once written, by id: the context the later commands are decided with. */
export interface CatalogFacts {
  stores: Map<number, store.StoreFields>;
  curbside: Map<number, store.CurbsidePickupSettingFields>;
  brandNames: Map<number, string>;
  products: Map<number, product.ProductFields>;
  /** In the data set's order, which is the order the cart lines' pricing sees them in. */
  specialsByStore: Map<number, PricingSpecial[]>;
  listings: Map<number, { store_id: number; fields: menuProduct.MenuProductFields }>;
}

export function catalogFacts(data: SandboxData): CatalogFacts {
  return {
    stores: new Map(),
    curbside: new Map(),
    brandNames: new Map(data.brands.map((b) => [b.id, b.name])),
    products: new Map(),
    specialsByStore: new Map(),
    listings: new Map(),
  };
}

/** What PUT /stores, /curbside_pickup_setting, /brands and /products run. */
export async function writeCatalog(w: SeedWriter, data: SandboxData, facts: CatalogFacts): Promise<void> {
  const at = data.catalog_at;
  w.phase = 'stores';
  await w.each(data.stores, (s) => {
    const fields = store.storeFields.parse(s.body);
    facts.stores.set(s.id, fields);
    return w.run(
      store.streamId(s.id),
      store.decider,
      { type: 'UpsertStore', store_id: s.id, fields, at },
      w.meta(at),
    );
  });
  w.phase = 'curbside settings';
  await w.each(data.curbside_settings, (c) => {
    const fields = store.curbsidePickupSettingFields.parse(c.body);
    facts.curbside.set(c.store_id, fields);
    return w.run(
      store.streamId(c.store_id),
      store.decider,
      { type: 'SetCurbsidePickupSetting', store_id: c.store_id, fields, at },
      w.meta(at),
    );
  });
  w.phase = 'brands';
  await w.each(data.brands, (b) => {
    const fields = brand.brandFields.parse({ name: b.name });
    return w.run(
      brand.streamId(b.id),
      brand.decider,
      { type: 'UpsertBrand', brand_id: b.id, fields, at },
      w.meta(at),
    );
  });
  w.phase = 'products';
  await w.each(data.products, (p) => {
    const fields = product.productFields.parse(p.body);
    facts.products.set(p.id, fields);
    return w.run(
      product.streamId(p.id),
      product.decider,
      { type: 'UpsertProduct', product_id: p.id, fields, brand_exists: true, at },
      w.meta(at),
    );
  });
}

/** What PUT /specials runs; the specials that exist afterwards are kept by store, for pricing. */
export async function writeSpecials(w: SeedWriter, data: SandboxData, facts: CatalogFacts): Promise<void> {
  w.phase = 'specials';
  const specialFields = data.specials.map((sp) => special.specialFields.parse(sp.body));
  const upserted = await w.each(data.specials, (sp, i) => {
    const fields = specialFields[i];
    return w.run(
      special.streamId(sp.id),
      special.decider,
      {
        type: 'UpsertSpecial',
        special_id: sp.id,
        fields,
        store_exists: facts.stores.has(fields.store_id),
        at: sp.at,
      },
      w.meta(sp.at),
    );
  });
  upserted.forEach(({ state: s }, i) => {
    if (!s.exists) return;
    const list = facts.specialsByStore.get(s.store_id) ?? [];
    list.push({ id: s.special_id, ...specialFields[i], starts_at: s.starts_at, ends_at: s.ends_at });
    facts.specialsByStore.set(s.store_id, list);
  });
}

/** What PUT /reviews runs. */
export async function writeReviews(w: SeedWriter, data: SandboxData, facts: CatalogFacts): Promise<void> {
  w.phase = 'reviews';
  await w.each(data.reviews, (r) => {
    const fields = review.reviewFields.parse(r.body);
    const reviewed = facts.products.get(fields.product_id);
    return w.run(
      review.streamId(r.id),
      review.decider,
      {
        type: 'PostReview',
        review_id: r.id,
        fields,
        product: reviewed ? { brand_id: reviewed.brand_id } : null,
        store_exists: facts.stores.has(fields.store_id),
        at: r.at,
      },
      w.meta(r.at),
    );
  });
}

/** What PUT /menu_products runs. */
export async function writeMenuProducts(
  w: SeedWriter,
  data: SandboxData,
  facts: CatalogFacts,
): Promise<void> {
  const at = data.catalog_at;
  w.phase = 'menu products';
  await w.each(data.menu_products, (m) => {
    const fields = menuProduct.menuProductFields.parse(m.body);
    facts.listings.set(m.id, { store_id: m.store_id, fields });
    const listed = facts.products.get(fields.product_id);
    return w.run(
      menuProduct.streamId(m.id),
      menuProduct.decider,
      {
        type: 'ListMenuProduct',
        menu_product_id: m.id,
        store_id: m.store_id,
        fields,
        store_exists: facts.stores.has(m.store_id),
        product: listed ? { product_id: fields.product_id, brand_id: listed.brand_id } : null,
        at,
      },
      w.meta(at),
    );
  });
}
