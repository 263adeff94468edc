/**
 * Read model `stores` (catalog projection): one document per store (`_id` store id), the partner
 * `store` record of docs/partner-api.md plus
 * - `brand_ids`: the brands with at least one listed menu product at the store, sorted (GET /stores of
 *   a brand partner: the stores carrying any of its brands). Kept from the private lookup
 *   `catalog_store_brands`, one lookup per (store, brand) holding its listed menu products, so
 *   delisting one of two products of a brand keeps the brand;
 * - `rating` (mean of the verified reviews at the store, 2 decimals, null if none) and `reviews_count`,
 *   from the private running sum `_rating_sum`.
 * `updated_at` is the latest of the store's own upsert and the changes to `brand_ids` and its rating.
 */

import { distanceMiles, EARTH_RADIUS_MILES, type LatLong, latitudeBand } from '../../../domain/geo.ts';
import { decider, type StoreRecord, toRecord } from '../../../domain/store.ts';
import type { Collection, Doc, Filter } from '../../read-store.ts';
import { findPage, oneOf, type Page, type PageRequest, updatedSince } from '../paging.ts';
import { type MenuLookupDoc, menuLookups, partsOf } from './menu-lookups.ts';
import {
  type CatalogEventOf,
  type CatalogReadModel,
  type CatalogTx,
  type Facts,
  index,
  iso,
  latest,
  mean,
  sortedUnique,
} from './support.ts';

export const STORES = 'stores';
/** Private: (store, brand) → the brand's menu products listed at the store. */
export const CATALOG_STORE_BRANDS = 'catalog_store_brands';

export type StoreDoc = Doc &
  StoreRecord & {
    _id: number;
    rating: number | null;
    reviews_count: number;
    brand_ids: number[];
    /** Sum of the verified ratings at the store (`rating` = sum / `reviews_count`). */
    _rating_sum: number;
  };

/** Menu product id → product id, for each listed menu product of the brand at the store (menu-lookups.ts). */
export interface StoreBrandDoc extends MenuLookupDoc<number> {
  /** `<store id>:<brand id>`. */
  _id: string;
  store_id: number;
  brand_id: number;
  /** How many of the brand's menu products are listed at the store. */
  count: number;
}

export const storeBrandKey = (storeId: number, brandId: number) => `${storeId}:${brandId}`;

export const storeIndexes = [
  // GET /stores for a brand partner: stores carrying any of its brands, in id order.
  index(['brand_ids', 1], ['_id', 1]),
  // GET /products?zipcode&radius: the stores in a latitude band, before the exact distance check.
  index(['lat', 1]),
];

function upsertStore(e: CatalogEventOf<'StoreUpserted'>, tx: CatalogTx) {
  const record = toRecord(decider.evolve(decider.initialState, e));
  if (!record) return;
  const prev = tx.get<StoreDoc>(STORES, record.id);
  const { updated_at, ...data } = record;
  tx.save(STORES, {
    _id: record.id,
    ...data,
    rating: prev?.rating ?? null,
    reviews_count: prev?.reviews_count ?? 0,
    updated_at: latest(prev?.updated_at, iso(updated_at)),
    brand_ids: prev?.brand_ids ?? [],
    _rating_sum: prev?._rating_sum ?? 0,
  });
}

/** Moves menu products between (store, brand) lookups, then each store's `brand_ids` follows the counts. */
function applyListings(tx: CatalogTx, facts: Facts) {
  const lookups = menuLookups<number, StoreBrandDoc>(tx, CATALOG_STORE_BRANDS, (id) => {
    const [storeId, brandId] = String(id).split(':').map(Number);
    return { _id: String(id), store_id: storeId, brand_id: brandId, count: 0, menu_products: {} };
  });
  lookups.prepare(facts.listings, (entry) => storeBrandKey(entry.store_id, entry.brand_id));
  for (const { menu_product_id, before, after } of facts.listings) {
    if (before && (!after || after.brand_id !== before.brand_id)) {
      lookups.delete(storeBrandKey(before.store_id, before.brand_id), menu_product_id);
    }
    if (after) lookups.set(storeBrandKey(after.store_id, after.brand_id), menu_product_id, after.product_id);
  }
  const changed = lookups.commit();
  const carriedByStore = new Map<number, Map<number, boolean>>();
  for (const doc of changed) {
    const carried = carriedByStore.get(doc.store_id) ?? new Map<number, boolean>();
    carried.set(doc.brand_id, (doc.count ?? 0) > 0);
    carriedByStore.set(doc.store_id, carried);
  }
  for (const [storeId, carried] of carriedByStore) {
    const store = tx.get<StoreDoc>(STORES, storeId);
    if (!store) continue; // the write side lists nothing at an unknown store
    // Most listings change how many menu products of a brand the store has, not whether it has any.
    let moved = false;
    for (const [brandId, has] of carried) if (has !== store.brand_ids.includes(brandId)) moved = true;
    if (!moved) continue;
    const ids = new Set(store.brand_ids);
    for (const [brandId, has] of carried) {
      if (has) ids.add(brandId);
      else ids.delete(brandId);
    }
    tx.patch(STORES, store, { brand_ids: sortedUnique(ids) }, facts.time);
  }
}

/** A review's share moves between stores' running sums. */
function applyRating(tx: CatalogTx, facts: Facts) {
  if (!facts.rating) return;
  const deltas = new Map<number, { sum: number; count: number }>();
  const add = (storeId: number, sum: number, count: number) => {
    const d = deltas.get(storeId) ?? { sum: 0, count: 0 };
    deltas.set(storeId, { sum: d.sum + sum, count: d.count + count });
  };
  const { before, after } = facts.rating;
  if (before) add(before.store_id, -before.rating, -1);
  if (after) add(after.store_id, after.rating, 1);
  for (const [storeId, d] of deltas) {
    if (d.sum === 0 && d.count === 0) continue;
    const store = tx.get<StoreDoc>(STORES, storeId);
    if (!store) continue; // the write side refuses reviews of unknown stores
    const sum = store._rating_sum + d.sum;
    const count = store.reviews_count + d.count;
    tx.patch(STORES, store, { rating: mean(sum, count), reviews_count: count, _rating_sum: sum }, facts.time);
  }
}

export const stores: CatalogReadModel = {
  collections: { [STORES]: storeIndexes, [CATALOG_STORE_BRANDS]: [], [partsOf(CATALOG_STORE_BRANDS)]: [] },
  prefetch(e) {
    switch (e.type) {
      case 'StoreUpserted':
      case 'MenuProductDelisted':
      case 'ReviewPosted':
      case 'ReviewRevised':
        return [[STORES, e.data.store_id]];
      case 'MenuProductListed':
        return [
          [STORES, e.data.store_id],
          [CATALOG_STORE_BRANDS, storeBrandKey(e.data.store_id, e.data.brand_id)],
        ];
      default:
        return [];
    }
  },
  apply(e, tx, facts) {
    if (e.type === 'StoreUpserted') upsertStore(e, tx);
    if (facts.listings.length > 0) applyListings(tx, facts);
    applyRating(tx, facts);
  },
};

// ---- queries of the partner routes (docs/partner-api.md) -------------------------------------------

/** The stores carrying any of the brands, in id order (the `[brand_ids, _id]` index). */
export function storesCarrying(
  stores: Collection<StoreDoc>,
  brandIds: readonly number[],
  updatedAfter: string | undefined,
  page: PageRequest,
): Promise<Page<StoreDoc>> {
  return findPage(stores, updatedSince({ brand_ids: oneOf(brandIds) }, updatedAfter), page);
}

/**
 * The ids of the stores within `miles` of `center`: one indexed range read on `lat` (the latitude band;
 * longitude bounds narrow it where they are simple), then the exact great-circle distance.
 */
export async function storesWithin(
  stores: Collection<StoreDoc>,
  center: LatLong,
  miles: number,
): Promise<Set<number>> {
  const band = latitudeBand(center, miles);
  const filter: Filter = { lat: { $gte: band.min, $lte: band.max } };
  // Longitude reach at the centre's latitude (exact on a sphere); skipped near a pole or across ±180°.
  const s = Math.sin(miles / EARTH_RADIUS_MILES) / Math.cos((center.lat * Math.PI) / 180);
  if (s < 1) {
    const reach = (Math.asin(s) * 180) / Math.PI;
    if (center.long - reach > -180 && center.long + reach < 180) {
      filter.long = { $gte: center.long - reach, $lte: center.long + reach };
    }
  }
  const near = new Set<number>();
  for (const store of await stores.find(filter)) {
    if (distanceMiles(center, { lat: store.lat, long: store.long }) <= miles) near.add(store.id);
  }
  return near;
}

/** One store, or undefined. */
export async function storeById(
  stores: Collection<StoreDoc>,
  storeId: number,
): Promise<StoreDoc | undefined> {
  return (await stores.findByIds([storeId]))[0];
}
