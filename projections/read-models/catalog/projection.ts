/**
 * The `catalog` projection: the partner read models of the menu data — stores, products, menu
 * products, reviews, specials, curbside pickup settings — and the private lookups they keep
 * (this folder, one module each). One projection, one checkpoint: these models copy one another's data
 * (brand names, product data, ratings, specials, listings), so they advance together and a partner
 * never sees a menu product ahead of its product or a store's `brand_ids` behind its menu.
 *
 * For each event, the projection first reads what the event changes (facts: listing entries before
 * and after, a review's share of ratings before and after, the previous product, special, brand),
 * then lets each read model apply the event in a fixed order, each seeing the writes of those before
 * it: brand names first; stores, products and specials keep their listing lookups before specials
 * derive involvement from them; menu products copy products and specials after both are current.
 *
 * Deterministic (docs/read-side.md): every time comes from event data; nothing reads the clock.
 *
 * A batch's writes to every collection and its checkpoint are one commit (docs/read-side.md): a crash
 * leaves all of a batch or none of it, and replaying events the documents already reflect changes nothing.
 */
import type { RecordedEvent } from '../../../eventstore/port.ts';
import type { Projection, ProjectionTx } from '../../projection.ts';
import type { DocId, IndexSpec } from '../../read-store.ts';
import { brands, CATALOG_BRANDS } from './brands.ts';
import { CURBSIDE_PICKUP_SETTINGS, curbsidePickupSettings } from './curbside-pickup-settings.ts';
import { listingChangesOf, MENU_PRODUCTS, menuProducts } from './menu-products.ts';
import { PRODUCTS, type ProductDoc, products } from './products.ts';
import { REVIEWS, ratingChangeOf, reviews } from './reviews.ts';
import { SPECIALS, type SpecialDoc, specials } from './specials.ts';
import { STORES, stores } from './stores.ts';
import {
  CATALOG_STREAM_PREFIXES,
  type CatalogEvent,
  type CatalogReadModel,
  type CatalogTx,
  catalogTx,
  eventTime,
  type Facts,
  parseCatalogEvent,
  reflects,
} from './support.ts';

export const CATALOG = 'catalog';

/** The order each event is applied in (see above for why). */
const readModels: readonly CatalogReadModel[] = [
  brands,
  stores,
  products,
  specials,
  menuProducts,
  reviews,
  curbsidePickupSettings,
];

/**
 * The document an event is about, written whenever the event is applied: its stream's aggregate in
 * the catalog. Once it reflects the event (its `_position` is at or past it), the event has been
 * applied — documents are only ever ahead of the log on a replay over them (a restart, a reset
 * checkpoint) — and applying it again would mix the event's old values with the documents' later ones.
 */
function sourceOf(e: CatalogEvent): [collection: string, id: DocId] {
  switch (e.type) {
    case 'StoreUpserted':
      return [STORES, e.data.store_id];
    case 'CurbsidePickupSettingChanged':
      return [CURBSIDE_PICKUP_SETTINGS, e.data.store_id];
    case 'BrandUpserted':
      return [CATALOG_BRANDS, e.data.brand_id];
    case 'ProductUpserted':
      return [PRODUCTS, e.data.product_id];
    case 'MenuProductListed':
    case 'MenuProductDelisted':
      return [MENU_PRODUCTS, e.data.menu_product_id];
    case 'ReviewPosted':
    case 'ReviewRevised':
      return [REVIEWS, e.data.review_id];
    case 'SpecialUpserted':
      return [SPECIALS, e.data.special_id];
  }
}

/** What the event changes, read before any read model writes. */
function factsOf(e: CatalogEvent, tx: CatalogTx): Facts {
  const facts: Facts = {
    time: eventTime(e),
    listings: listingChangesOf(e, tx),
    rating: ratingChangeOf(e, tx),
    brandExisted: false,
  };
  if (e.type === 'ProductUpserted') facts.productBefore = tx.get<ProductDoc>(PRODUCTS, e.data.product_id);
  if (e.type === 'SpecialUpserted') facts.specialBefore = tx.get<SpecialDoc>(SPECIALS, e.data.special_id);
  if (e.type === 'BrandUpserted') facts.brandExisted = tx.get(CATALOG_BRANDS, e.data.brand_id) !== undefined;
  return facts;
}

const collections: Record<string, readonly IndexSpec[]> = {};
for (const model of readModels) {
  for (const [name, indexes] of Object.entries(model.collections)) {
    if (name in collections) throw new Error(`catalog collection ${name} declared twice`);
    collections[name] = indexes;
  }
}

export const catalogProjection: Projection = {
  name: CATALOG,
  version: 3,
  collections,
  filter: { streamPrefixes: CATALOG_STREAM_PREFIXES },
  prefetch(event: RecordedEvent) {
    const e = parseCatalogEvent(event);
    return e ? readModels.flatMap((m) => m.prefetch?.(e) ?? []) : [];
  },
  prefetchNamed(event, fetched) {
    const e = parseCatalogEvent(event);
    return e ? readModels.flatMap((m) => m.prefetchNamed?.(e, fetched) ?? []) : [];
  },
  apply(event: RecordedEvent, tx: ProjectionTx) {
    const e = parseCatalogEvent(event);
    if (!e) return; // another type on these streams: nothing in the catalog depends on it
    const ctx = catalogTx(tx);
    const [collection, id] = sourceOf(e);
    if (reflects(ctx.get(collection, id), ctx.position)) return;
    const facts = factsOf(e, ctx);
    for (const model of readModels) model.apply(e, ctx, facts);
  },
};
