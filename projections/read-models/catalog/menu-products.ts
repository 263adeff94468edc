/**
 * Read model `menu_products` (catalog projection): one document per listed menu product (`_id` menu
 * product id), the partner `menu_product` record of docs/partner-api.md: its own listing (prices, weights,
 * stock), the product's data (name, brand, kind, …) and ratings copied from `products`, and
 * `applicable_special_ids`: the enabled specials at its store that involve it (by product, brand or
 * kind), whatever their time window (projections do not read the clock; partners filter specials by
 * window). Delisting deletes the document.
 *
 * Copies follow their sources: a brand rename (`updateMany` on `brand_id`), a product upsert (its menu
 * products by `product_id`), a review (the product's rating), a special (the menu products at its
 * store that its terms, before and after, involve). `updated_at` is the latest of the menu product's own change and the changes copied into it.
 */
import { isDeepStrictEqual } from 'node:util';
import { decider, type MenuProductRecord, priceFields, toRecord } from '../../../domain/menu-product.ts';
import type { Collection, Doc, DocId, Filter } from '../../read-store.ts';
import { findPage, ID_ORDER, oneOf, type Page, type PageRequest, updatedSince } from '../paging.ts';
import { brandName } from './brands.ts';
import { lookupMenuProductIds, namedBy } from './menu-lookups.ts';
import { CATALOG_PRODUCT_LISTINGS, PRODUCTS, type ProductDoc } from './products.ts';
import {
  applicableSpecialIds,
  CATALOG_STORE_KINDS,
  CATALOG_STORE_SPECIALS,
  type SpecialTerms,
  type StoreSpecialsDoc,
  storeKindKey,
} from './specials.ts';
import { CATALOG_STORE_BRANDS, storeBrandKey } from './stores.ts';
import {
  type CatalogEvent,
  type CatalogEventOf,
  type CatalogReadModel,
  type CatalogTx,
  type Facts,
  index,
  iso,
  type Kind,
  type ListingChange,
  type ListingEntry,
  latest,
  readWhileApplying,
} from './support.ts';

export const MENU_PRODUCTS = 'menu_products';

/** The product's data as a menu product carries it. */
interface ProductPart {
  name: string | null;
  brand: string | null;
  brand_id: number;
  kind: Kind | null;
  kind_subtype: string | null;
  lineage: ProductDoc['lineage'];
  description: string | null;
  percent_thc: number | null;
  percent_cbd: number | null;
  image_urls: string[];
}

export type MenuProductDoc = Doc &
  Omit<MenuProductRecord, 'brand_id'> &
  ProductPart & {
    _id: number;
    price_each: string | null;
    price_half_gram: string | null;
    price_gram: string | null;
    price_two_gram: string | null;
    price_eighth_ounce: string | null;
    price_quarter_ounce: string | null;
    price_half_ounce: string | null;
    price_ounce: string | null;
    aggregate_rating: number | null;
    review_count: number;
    applicable_special_ids: number[];
  };

export const menuProductIndexes = [
  // GET /menu_products of a store, in id order. Not read while applying (a special reads its menu
  // products by id, through the lookups), so a rebuild builds it after its load, unlike the brand's
  // below (docs/read-side.md, "How a build writes its shadows").
  index(['store_id', 1], ['_id', 1]),
  // GET /stores/{store_id}/menu_products of a brand partner: the store's menu products of its brands.
  index(['store_id', 1], ['brand_id', 1], ['_id', 1]),
  // GET /products/{product_id}/recommendations of a store: the product's own listings at the store,
  // and the store's menu products of one kind (the candidates), in id order.
  index(['store_id', 1], ['product_id', 1], ['_id', 1]),
  index(['store_id', 1], ['kind', 1], ['_id', 1]),
  // Propagation: a product's menu products (upserts, ratings).
  index(['product_id', 1]),
  // Propagation: a brand's menu products (renames).
  readWhileApplying(index(['brand_id', 1])),
];

const entryOf = (doc: MenuProductDoc): ListingEntry => ({
  menu_product_id: doc.id,
  store_id: doc.store_id,
  product_id: doc.product_id,
  brand_id: doc.brand_id,
  kind: doc.kind,
});

/**
 * The product's menu products, in id order, by the ids its listings document holds: read by id, they
 * come from the batch's own documents where it has them. A query instead committed the batch whenever
 * more than 500 documents were pending, which a catalog of reviews did every few reviews
 * (docs/read-side.md).
 */
function menuProductsOf(tx: CatalogTx, productId: number): MenuProductDoc[] {
  const ids = lookupMenuProductIds(tx, CATALOG_PRODUCT_LISTINGS, [productId]);
  if (ids.length === 0) return [];
  return tx.getMany<MenuProductDoc>(MENU_PRODUCTS, ids).filter((doc) => doc !== undefined);
}

/**
 * The listing entries the event changes, read before any model writes: a listing (new, or a relisting
 * that changes the product), a delisting, or a product upsert that changes its brand or kind.
 */
export function listingChangesOf(e: CatalogEvent, tx: CatalogTx): ListingChange[] {
  switch (e.type) {
    case 'MenuProductListed': {
      const { menu_product_id, store_id, product_id } = e.data;
      const prev = tx.get<MenuProductDoc>(MENU_PRODUCTS, menu_product_id);
      const product = tx.get<ProductDoc>(PRODUCTS, product_id);
      const before = prev ? entryOf(prev) : null;
      const after: ListingEntry = {
        menu_product_id,
        store_id,
        product_id,
        // The product's current brand: the event's is the one it had when listed.
        brand_id: product?.brand_id ?? e.data.brand_id,
        kind: product?.kind ?? null,
      };
      return isDeepStrictEqual(before, after) ? [] : [{ menu_product_id, store_id, before, after }];
    }
    case 'MenuProductDelisted': {
      const prev = tx.get<MenuProductDoc>(MENU_PRODUCTS, e.data.menu_product_id);
      if (!prev) return [];
      return [{ menu_product_id: prev.id, store_id: prev.store_id, before: entryOf(prev), after: null }];
    }
    case 'ProductUpserted': {
      const { product_id, brand_id, kind } = e.data;
      const out: ListingChange[] = [];
      for (const doc of menuProductsOf(tx, product_id)) {
        if (doc.brand_id === brand_id && doc.kind === kind) continue;
        const before = entryOf(doc);
        out.push({
          menu_product_id: doc.id,
          store_id: doc.store_id,
          before,
          after: { ...before, brand_id, kind },
        });
      }
      return out;
    }
    default:
      return [];
  }
}

function productPart(tx: CatalogTx, product: ProductDoc | undefined, brandId: number): ProductPart {
  return {
    name: product?.name ?? null,
    brand: product?.brand ?? brandName(tx, brandId),
    brand_id: product?.brand_id ?? brandId,
    kind: product?.kind ?? null,
    kind_subtype: product?.kind_subtype ?? null,
    lineage: product?.lineage ?? null,
    description: product?.description ?? null,
    percent_thc: product?.percent_thc ?? null,
    percent_cbd: product?.percent_cbd ?? null,
    image_urls: product?.image_urls ?? [],
  };
}

const specialsAt = (tx: CatalogTx, storeId: number) =>
  tx.get<StoreSpecialsDoc>(CATALOG_STORE_SPECIALS, storeId)?.specials;

function list(e: CatalogEventOf<'MenuProductListed'>, tx: CatalogTx) {
  const record = toRecord(decider.evolve(decider.initialState, e));
  if (!record) return;
  const { id, product_id, store_id, available_weights, in_stock, updated_at } = record;
  const prices = priceFields(e.data.prices);
  const prev = tx.get<MenuProductDoc>(MENU_PRODUCTS, id);
  const product = tx.get<ProductDoc>(PRODUCTS, product_id);
  const part = productPart(tx, product, record.brand_id);
  const {
    name,
    brand,
    brand_id,
    kind,
    kind_subtype,
    lineage,
    description,
    percent_thc,
    percent_cbd,
    image_urls,
  } = part;
  const doc: MenuProductDoc = {
    _id: id,
    id,
    product_id,
    store_id,
    name,
    brand,
    brand_id,
    kind,
    kind_subtype,
    lineage,
    description,
    available_weights,
    price_each: prices.price_each,
    price_half_gram: prices.price_half_gram,
    price_gram: prices.price_gram,
    price_two_gram: prices.price_two_gram,
    price_eighth_ounce: prices.price_eighth_ounce,
    price_quarter_ounce: prices.price_quarter_ounce,
    price_half_ounce: prices.price_half_ounce,
    price_ounce: prices.price_ounce,
    percent_thc,
    percent_cbd,
    image_urls,
    in_stock,
    aggregate_rating: product?.aggregate_rating ?? null,
    review_count: product?.review_count ?? 0,
    applicable_special_ids: applicableSpecialIds(specialsAt(tx, store_id), { product_id, brand_id, kind }),
    updated_at: latest(prev?.updated_at, iso(updated_at)),
  };
  tx.save(MENU_PRODUCTS, doc);
}

/** A product upsert reaches its menu products: its data, and the specials when its brand or kind moved. */
function copyProduct(e: CatalogEventOf<'ProductUpserted'>, tx: CatalogTx, facts: Facts) {
  const product = tx.get<ProductDoc>(PRODUCTS, e.data.product_id);
  if (!product) return;
  const part = productPart(tx, product, product.brand_id);
  for (const doc of menuProductsOf(tx, product.product_id)) {
    const changes: Partial<MenuProductDoc> = { ...part };
    if (doc.brand_id !== part.brand_id || doc.kind !== part.kind) {
      changes.applicable_special_ids = applicableSpecialIds(specialsAt(tx, doc.store_id), {
        ...doc,
        ...part,
      });
    }
    tx.patch(MENU_PRODUCTS, doc, changes, facts.time);
  }
}

/** A review changed products' ratings: their menu products copy them. */
function copyRatings(tx: CatalogTx, facts: Facts) {
  if (!facts.rating) return;
  const { before, after } = facts.rating;
  const productIds = new Set([before?.product_id, after?.product_id].filter((p) => p !== undefined));
  for (const productId of productIds) {
    const product = tx.get<ProductDoc>(PRODUCTS, productId);
    if (!product) continue;
    const changes = { aggregate_rating: product.aggregate_rating, review_count: product.review_count };
    for (const doc of menuProductsOf(tx, productId)) tx.patch(MENU_PRODUCTS, doc, changes, facts.time);
  }
}

/**
 * The menu products at the store that the terms involve (by product, brand or kind), in id order, by
 * the lookups: a special's change can move `applicable_special_ids` of those only. Read by id, they
 * come from the batch's own documents where it has them: a query of the store's menu products
 * committed the batch whenever more than 500 documents were pending, which a catalog of specials did
 * at every special (docs/read-side.md).
 */
function involvedAt(tx: CatalogTx, storeId: number, terms: readonly SpecialTerms[]): MenuProductDoc[] {
  const brands = new Set<string>();
  const kinds = new Set<string>();
  const productIds = new Set<number>();
  for (const t of terms) {
    for (const brandId of t.brand_ids) brands.add(storeBrandKey(storeId, brandId));
    for (const kind of t.kinds) kinds.add(storeKindKey(storeId, kind));
    for (const productId of t.product_ids) productIds.add(productId);
  }
  // Each lookup collection's documents read together (menu-lookups.ts).
  const ids = new Set([
    ...lookupMenuProductIds(tx, CATALOG_STORE_BRANDS, [...brands]),
    ...lookupMenuProductIds(tx, CATALOG_STORE_KINDS, [...kinds]),
    ...lookupMenuProductIds(tx, CATALOG_PRODUCT_LISTINGS, [...productIds]),
  ]);
  const sorted = [...ids].sort((a, b) => a - b);
  // Listings name a product's menu products at every store: this store's only.
  return tx
    .getMany<MenuProductDoc>(MENU_PRODUCTS, sorted)
    .filter((doc): doc is MenuProductDoc => doc !== undefined && doc.store_id === storeId);
}

/**
 * A special changed (or moved): the menu products at its store(s) that its terms before or after
 * involve recompute `applicable_special_ids` (the others' do not depend on it).
 */
function applySpecial(e: CatalogEventOf<'SpecialUpserted'>, tx: CatalogTx, facts: Facts) {
  const before = facts.specialBefore;
  // Its terms as the specials model stored them (none: the event changed nothing), and before.
  const after = specialsAt(tx, e.data.store_id)?.[String(e.data.special_id)];
  const terms = [after, before].filter((t) => t !== undefined);
  const storeIds = new Set([e.data.store_id]);
  if (before) storeIds.add(before.store_id);
  for (const storeId of storeIds) {
    const specials = specialsAt(tx, storeId);
    for (const doc of involvedAt(tx, storeId, terms)) {
      tx.patch(
        MENU_PRODUCTS,
        doc,
        { applicable_special_ids: applicableSpecialIds(specials, doc) },
        facts.time,
      );
    }
  }
}

/** The menu products a fetched lookup (listings, a store's brand or kind) names, or its parts. */
const named = (fetched: (collection: string, id: DocId) => Doc | undefined, collection: string, id: DocId) =>
  namedBy(collection, id, fetched(collection, id), MENU_PRODUCTS);

export const menuProducts: CatalogReadModel = {
  collections: { [MENU_PRODUCTS]: menuProductIndexes },
  prefetch(e) {
    switch (e.type) {
      case 'MenuProductListed':
      case 'MenuProductDelisted':
        return [[MENU_PRODUCTS, e.data.menu_product_id]];
      case 'ReviewPosted':
      case 'ReviewRevised':
        return [[CATALOG_PRODUCT_LISTINGS, e.data.product_id]];
      case 'SpecialUpserted':
        return e.data.product_ids.map((p): [string, number] => [CATALOG_PRODUCT_LISTINGS, p]);
      default:
        return [];
    }
  },
  // A review's and a product upsert's menu products, which their product's listings name: fetched
  // with the batch's other documents rather than one product at a time, each after an attempt at
  // the event that stopped for them.
  prefetchNamed(e, fetched) {
    switch (e.type) {
      case 'ReviewPosted':
      case 'ReviewRevised':
      case 'ProductUpserted':
        return named(fetched, CATALOG_PRODUCT_LISTINGS, e.data.product_id);
      // What a delisting's menu product names: its product and listings, and its store's brand lookup,
      // which the stores, products and specials read for it.
      case 'MenuProductDelisted': {
        const doc = fetched(MENU_PRODUCTS, e.data.menu_product_id) as MenuProductDoc | undefined;
        if (!doc) return [];
        return [
          [PRODUCTS, doc.product_id],
          [CATALOG_PRODUCT_LISTINGS, doc.product_id],
          [CATALOG_STORE_BRANDS, storeBrandKey(doc.store_id, doc.brand_id)],
        ];
      }
      // The menu products its terms involve, as `involvedAt` reads them (its terms before: not known yet).
      case 'SpecialUpserted': {
        const { store_id, product_ids, brand_ids, kinds } = e.data;
        return [
          ...product_ids.flatMap((p) => named(fetched, CATALOG_PRODUCT_LISTINGS, p)),
          ...brand_ids.flatMap((b) => named(fetched, CATALOG_STORE_BRANDS, storeBrandKey(store_id, b))),
          ...kinds.flatMap((k) => named(fetched, CATALOG_STORE_KINDS, storeKindKey(store_id, k))),
        ];
      }
      default:
        return [];
    }
  },
  apply(e, tx, facts) {
    switch (e.type) {
      case 'BrandUpserted':
        if (facts.brandExisted) {
          const { brand_id, name } = e.data;
          tx.updateMany(
            MENU_PRODUCTS,
            { brand_id, brand: { $ne: name } },
            { $set: { brand: name }, $max: { updated_at: facts.time } },
          );
        }
        return;
      case 'MenuProductListed':
        return list(e, tx);
      case 'MenuProductDelisted':
        return tx.remove(MENU_PRODUCTS, e.data.menu_product_id);
      case 'ProductUpserted':
        return copyProduct(e, tx, facts);
      case 'ReviewPosted':
      case 'ReviewRevised':
        return copyRatings(tx, facts);
      case 'SpecialUpserted':
        return applySpecial(e, tx, facts);
      default:
        return;
    }
  },
};

// ---- queries of the partner routes (docs/partner-api.md) -------------------------------------------

/** The store's menu products (of some brands only, when given), in id order. */
export function menuProductsAt(
  menuProducts: Collection<MenuProductDoc>,
  storeId: number,
  options: { brandIds?: readonly number[]; updatedAfter?: string },
  page: PageRequest,
): Promise<Page<MenuProductDoc>> {
  const filter: Filter = { store_id: storeId };
  if (options.brandIds) filter.brand_id = oneOf(options.brandIds);
  return findPage(menuProducts, updatedSince(filter, options.updatedAfter), page);
}

/** One menu product, if it is listed at the store. */
export async function menuProductAt(
  menuProducts: Collection<MenuProductDoc>,
  storeId: number,
  menuProductId: number,
): Promise<MenuProductDoc | undefined> {
  const [doc] = await menuProducts.findByIds([menuProductId]);
  return doc?.store_id === storeId ? doc : undefined;
}

/** The product's listings at the store, in id order (none: the store does not carry it). */
export function listingsOfProductAt(
  menuProducts: Collection<MenuProductDoc>,
  storeId: number,
  productId: number,
): Promise<MenuProductDoc[]> {
  return menuProducts.find({ store_id: storeId, product_id: productId }, { sort: ID_ORDER });
}

/**
 * Menu products of the store to score as recommendations beside a product: up to `limit` of its kind,
 * then, when those hold fewer than `enough` products, up to `limit` of other kinds; never the product.
 */
export async function recommendationCandidates(
  menuProducts: Collection<MenuProductDoc>,
  storeId: number,
  subject: { product_id: number; kind: Kind | null },
  limit: number,
  enough: number,
): Promise<MenuProductDoc[]> {
  const others: Filter = { store_id: storeId, product_id: { $ne: subject.product_id } };
  const candidates =
    subject.kind === null
      ? []
      : await menuProducts.find({ ...others, kind: subject.kind }, { sort: ID_ORDER, limit });
  if (new Set(candidates.map((c) => c.product_id)).size < enough) {
    const otherKinds = subject.kind === null ? others : { ...others, kind: { $ne: subject.kind } };
    candidates.push(...(await menuProducts.find(otherKinds, { sort: ID_ORDER, limit })));
  }
  return candidates;
}
