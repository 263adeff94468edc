/**
 * Read model `products` (catalog projection): one document per product (`_id` product id), the partner
 * `product` record of docs/partner-api.md:
 * - `brand`: the brand's current name (renames arrive by `updateMany` on `brand_id`);
 * - `aggregate_rating` (mean of the product's verified reviews, 2 decimals, null if none) and
 *   `review_count`, from the private running sum `_rating_sum`;
 * - `store_ids`: the stores where a menu product of it is listed, sorted, from the private lookup
 *   `catalog_product_listings` (product → its listed menu products and their stores), so a product
 *   listed twice at one store stays there until both are delisted.
 * `updated_at` is the latest of the product's own upsert and the changes copied or derived into it.
 */
import { decider, type ProductRecord, toRecord } from '../../../domain/product.ts';
import type { Collection, Doc } from '../../read-store.ts';
import { findPage, oneOf, type Page, type PageRequest, updatedSince } from '../paging.ts';
import { brandName } from './brands.ts';
import { countEntries, EntryTally, type MenuLookupDoc, menuLookups, partsOf } from './menu-lookups.ts';
import {
  type CatalogEventOf,
  type CatalogReadModel,
  type CatalogTx,
  type Facts,
  index,
  iso,
  latest,
  mean,
  readWhileApplying,
  sortedUnique,
} from './support.ts';

export const PRODUCTS = 'products';
/** Private: product → its listed menu products. */
export const CATALOG_PRODUCT_LISTINGS = 'catalog_product_listings';

export type ProductDoc = Doc &
  ProductRecord & {
    _id: number;
    brand: string | null;
    aggregate_rating: number | null;
    review_count: number;
    store_ids: number[];
    /** Sum of the product's verified ratings (`aggregate_rating` = sum / `review_count`). */
    _rating_sum: number;
  };

/** Menu product id → store id, for each listed menu product of the product (menu-lookups.ts). */
export interface ProductListingsDoc extends MenuLookupDoc<number> {
  _id: number;
  /** Store id → how many of those menu products it lists (so `store_ids` needs no pass over them all). */
  store_counts?: Record<string, number>;
}

export const productIndexes = [
  // GET /products of a brand partner, in id order; also a brand's rename, read while applying
  // (docs/read-side.md, "How a build writes its shadows").
  readWhileApplying(index(['brand_id', 1], ['_id', 1])),
  // GET /products?zipcode&radius: the products carried by the stores within the radius.
  index(['store_ids', 1]),
];

/**
 * A product's count of menu products per store (counted once from its entries, for a document
 * written before the counts were kept: an older version's live copy).
 */
export const storeCountsOf = (tx: CatalogTx, listings: ProductListingsDoc): Record<string, number> =>
  listings.store_counts ?? countEntries(tx, CATALOG_PRODUCT_LISTINGS, listings, (storeId) => storeId);

const storeIdsOf = (tx: CatalogTx, listings: ProductListingsDoc | undefined) =>
  listings ? sortedUnique(Object.keys(storeCountsOf(tx, listings)).map(Number)) : [];

function upsertProduct(e: CatalogEventOf<'ProductUpserted'>, tx: CatalogTx) {
  const record = toRecord(decider.evolve(decider.initialState, e));
  if (!record) return;
  const prev = tx.get<ProductDoc>(PRODUCTS, record.product_id);
  const doc: ProductDoc = {
    _id: record.product_id,
    product_id: record.product_id,
    name: record.name,
    brand: brandName(tx, record.brand_id),
    brand_id: record.brand_id,
    kind: record.kind,
    kind_subtype: record.kind_subtype,
    lineage: record.lineage,
    description: record.description,
    percent_thc: record.percent_thc,
    percent_cbd: record.percent_cbd,
    image_urls: record.image_urls,
    aggregate_rating: prev?.aggregate_rating ?? null,
    review_count: prev?.review_count ?? 0,
    store_ids: storeIdsOf(tx, tx.get<ProductListingsDoc>(CATALOG_PRODUCT_LISTINGS, record.product_id)),
    updated_at: latest(prev?.updated_at, iso(record.updated_at)),
    _rating_sum: prev?._rating_sum ?? 0,
  };
  tx.save(PRODUCTS, doc);
}

/** Moves menu products between products' listings; each product's `store_ids` follows. */
function applyListings(tx: CatalogTx, facts: Facts) {
  const stores = new EntryTally<number>((storeId) => storeId);
  const lookups = menuLookups<number, ProductListingsDoc>(
    tx,
    CATALOG_PRODUCT_LISTINGS,
    (id) => ({ _id: Number(id), menu_products: {}, store_counts: {} }),
    // Counted before this event changes it (or splits it into parts), which the tally then follows.
    (doc) => (doc.store_counts ? doc : { ...doc, store_counts: storeCountsOf(tx, doc) }),
  );
  lookups.prepare(facts.listings, (entry) => entry.product_id);
  for (const { menu_product_id, before, after } of facts.listings) {
    if (before && (!after || after.product_id !== before.product_id)) {
      stores.moved(before.product_id, lookups.delete(before.product_id, menu_product_id));
    }
    if (after) {
      const { changed, previous } = lookups.set(after.product_id, menu_product_id, after.store_id);
      if (changed) stores.moved(after.product_id, previous, after.store_id);
    }
  }
  // A product's `store_ids` changes only when it is listed at a new store or no longer at one: most
  // listings add a menu product at a store where the product is listed already.
  const moved = new Set<number>();
  const changedDocs = lookups.commit((doc) => {
    const { counts, crossed } = stores.applied(doc._id, doc.store_counts);
    doc.store_counts = counts;
    if (crossed) moved.add(doc._id);
  });
  for (const doc of changedDocs) {
    if (!moved.has(doc._id)) continue;
    const product = tx.get<ProductDoc>(PRODUCTS, doc._id);
    if (product) tx.patch(PRODUCTS, product, { store_ids: storeIdsOf(tx, doc) }, facts.time);
  }
}

/** A review's share moves between products' running sums. */
function applyRating(tx: CatalogTx, facts: Facts) {
  if (!facts.rating) return;
  const deltas = new Map<number, { sum: number; count: number }>();
  const add = (productId: number, sum: number, count: number) => {
    const d = deltas.get(productId) ?? { sum: 0, count: 0 };
    deltas.set(productId, { sum: d.sum + sum, count: d.count + count });
  };
  const { before, after } = facts.rating;
  if (before) add(before.product_id, -before.rating, -1);
  if (after) add(after.product_id, after.rating, 1);
  for (const [productId, d] of deltas) {
    if (d.sum === 0 && d.count === 0) continue;
    const product = tx.get<ProductDoc>(PRODUCTS, productId);
    if (!product) continue; // the write side refuses reviews of unknown products
    const sum = product._rating_sum + d.sum;
    const count = product.review_count + d.count;
    const changes = { aggregate_rating: mean(sum, count), review_count: count, _rating_sum: sum };
    tx.patch(PRODUCTS, product, changes, facts.time);
  }
}

export const products: CatalogReadModel = {
  collections: {
    [PRODUCTS]: productIndexes,
    [CATALOG_PRODUCT_LISTINGS]: [],
    [partsOf(CATALOG_PRODUCT_LISTINGS)]: [],
  },
  prefetch(e) {
    switch (e.type) {
      case 'ProductUpserted':
      case 'MenuProductListed':
        return [
          [PRODUCTS, e.data.product_id],
          [CATALOG_PRODUCT_LISTINGS, e.data.product_id],
        ];
      case 'ReviewPosted':
      case 'ReviewRevised':
        return [[PRODUCTS, e.data.product_id]];
      default:
        return [];
    }
  },
  apply(e, tx, facts) {
    if (e.type === 'BrandUpserted' && facts.brandExisted) {
      const { brand_id, name } = e.data;
      // A rename reaches every product of the brand; `updated_at` advances on those it changes.
      tx.updateMany(
        PRODUCTS,
        { brand_id, brand: { $ne: name } },
        { $set: { brand: name }, $max: { updated_at: facts.time } },
      );
    }
    if (e.type === 'ProductUpserted') upsertProduct(e, tx);
    if (facts.listings.length > 0) applyListings(tx, facts);
    applyRating(tx, facts);
  },
};

// ---- queries of the partner routes (docs/partner-api.md) -------------------------------------------

/** The brands' products carried by any of the stores, in id order (the `store_ids` index). */
export function productsCarriedBy(
  products: Collection<ProductDoc>,
  brandIds: readonly number[],
  storeIds: readonly number[],
  updatedAfter: string | undefined,
  page: PageRequest,
): Promise<Page<ProductDoc>> {
  const filter = { brand_id: oneOf(brandIds), store_ids: { $in: [...storeIds].sort((a, b) => a - b) } };
  return findPage(products, updatedSince(filter, updatedAfter), page);
}

/** One product, or undefined. */
export async function productById(
  products: Collection<ProductDoc>,
  productId: number,
): Promise<ProductDoc | undefined> {
  return (await products.findByIds([productId]))[0];
}
