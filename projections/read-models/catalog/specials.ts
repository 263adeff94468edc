/**
 * Read model `specials` (catalog projection): one document per special (`_id` special id), the partner
 * `special` record of docs/partner-api.md plus what the queries and the menu products need:
 * - `_involved_brand_ids`: the brands whose products the special involves — its `brand_ids`, the
 *   brands of its `product_ids`, and the brands with a listed menu product of one of its `kinds` at its
 *   store — kept current as menu products are listed and delisted and as products change brand or
 *   kind (GET /specials of a brand partner: the specials involving any of its brands);
 * - `_involved_product_ids`: its `product_ids` plus the products of its brands and kinds listed at its
 *   store;
 * - `_product_brands`: the brand of each of its `product_ids` that exists (a special may name a product
 *   before it is upserted; the write side does not check).
 * The time window is not applied here (projections do not read the clock): partners filter on
 * `starts_at`/`ends_at`. `updated_at` is the special's own upsert time.
 *
 * Private lookups: `catalog_store_specials` (store → its specials' terms, which menu products read for
 * `applicable_special_ids`), `catalog_store_kinds` ((store, kind) → the listed menu products of that
 * kind, with their product and brand, and a count per brand) and `catalog_product_specials` (product →
 * the specials naming it).
 */
import { kinds as allKinds } from '../../../domain/schemas.ts';
import { decider, type SpecialRecord, toRecord } from '../../../domain/special.ts';
import type { Collection, Doc } from '../../read-store.ts';
import { findPage, oneOf, type Page, type PageRequest, updatedSince } from '../paging.ts';
import {
  countEntries,
  EntryTally,
  lookupMaps,
  type MenuLookupDoc,
  menuLookups,
  partsOf,
} from './menu-lookups.ts';
import {
  CATALOG_PRODUCT_LISTINGS,
  PRODUCTS,
  type ProductDoc,
  type ProductListingsDoc,
  storeCountsOf,
} from './products.ts';
import { CATALOG_STORE_BRANDS, storeBrandKey } from './stores.ts';
import {
  type CatalogEventOf,
  type CatalogReadModel,
  type CatalogTx,
  type Facts,
  index,
  iso,
  type Kind,
  type ListingChange,
  latest,
  sortedUnique,
} from './support.ts';

export const SPECIALS = 'specials';
/** Private: store → the terms of each of its specials. */
export const CATALOG_STORE_SPECIALS = 'catalog_store_specials';
/** Private: (store, kind) → the listed menu products of that kind. */
export const CATALOG_STORE_KINDS = 'catalog_store_kinds';
/** Private: product → the specials that name it in `product_ids`. */
export const CATALOG_PRODUCT_SPECIALS = 'catalog_product_specials';

export type SpecialDoc = Doc &
  SpecialRecord & {
    _id: number;
    _product_brands: Record<string, number>;
    _involved_brand_ids: number[];
    _involved_product_ids: number[];
  };

/** What decides which menu products a special applies to. */
export interface SpecialTerms {
  product_ids: number[];
  brand_ids: number[];
  kinds: Kind[];
  enabled: boolean;
}

export interface StoreSpecialsDoc extends Doc {
  _id: number;
  /** Special id → its terms. */
  specials: Record<string, SpecialTerms>;
}

/** Menu product id → [product id, brand id], for each listed menu product of the kind at the store (menu-lookups.ts). */
export interface StoreKindDoc extends MenuLookupDoc<[number, number]> {
  /** `<store id>:<kind>`. */
  _id: string;
  store_id: number;
  kind: Kind;
  /** Brand id → how many of those menu products are of it (so a special's brands need no pass over them all). */
  brand_counts?: Record<string, number>;
}

interface ProductSpecialsDoc extends Doc {
  _id: number;
  special_ids: number[];
}

export const storeKindKey = (storeId: number, kind: string) => `${storeId}:${kind}`;

export const specialIndexes = [
  // GET /specials of a store, in id order.
  index(['store_id', 1], ['_id', 1]),
  // GET /specials of a brand partner: the specials involving any of its brands, in id order.
  index(['_involved_brand_ids', 1], ['_id', 1]),
];

/** The specials (enabled, at the menu product's store) that involve a menu product, sorted by id. */
export function applicableSpecialIds(
  specials: Record<string, SpecialTerms> | undefined,
  item: { product_id: number; brand_id: number; kind: Kind | null },
): number[] {
  const ids: number[] = [];
  for (const [id, terms] of Object.entries(specials ?? {})) {
    if (!terms.enabled) continue;
    if (
      terms.product_ids.includes(item.product_id) ||
      terms.brand_ids.includes(item.brand_id) ||
      (item.kind !== null && terms.kinds.includes(item.kind))
    ) {
      ids.push(Number(id));
    }
  }
  return sortedUnique(ids);
}

/** The entries of the store's kind, or brand: [product id, brand id], or product id, of each listed menu product. */
const storeKinds = (tx: CatalogTx, storeId: number, kind: string) =>
  lookupMaps<[number, number]>(tx, CATALOG_STORE_KINDS, storeKindKey(storeId, kind)).flatMap((map) =>
    Object.values(map),
  );
const storeBrands = (tx: CatalogTx, storeId: number, brandId: number) =>
  lookupMaps<number>(tx, CATALOG_STORE_BRANDS, storeBrandKey(storeId, brandId)).flatMap((map) =>
    Object.values(map),
  );

/** The lookup's count of menu products per brand (counted once, for a document from before they were kept). */
const brandOf = ([, brandId]: [number, number]) => brandId;
const brandCountsOf = (tx: CatalogTx, doc: StoreKindDoc) =>
  doc.brand_counts ?? countEntries(tx, CATALOG_STORE_KINDS, doc, brandOf);

type Involvement = Pick<SpecialDoc, 'store_id' | 'product_ids' | 'brand_ids' | 'kinds' | '_product_brands'>;

function involvedBrandIds(tx: CatalogTx, s: Involvement): number[] {
  const ids = [...s.brand_ids, ...Object.values(s._product_brands)];
  for (const kind of s.kinds) {
    const lookup = tx.get<StoreKindDoc>(CATALOG_STORE_KINDS, storeKindKey(s.store_id, kind));
    if (lookup) for (const brandId of Object.keys(brandCountsOf(tx, lookup))) ids.push(Number(brandId));
  }
  return sortedUnique(ids);
}

/**
 * Whether the product has a menu product listed at the store of the brand, or of the kind. A known
 * product's menu products all carry its brand and kind (its upsert moves them), so its own listings'
 * count at the store answers, whatever the store's size; an unknown product's carry the brands their
 * listings named and no kind, and the store's brand lookup answers.
 */
function listedAt(
  tx: CatalogTx,
  storeId: number,
  productId: number,
  by: { brand_id: number } | { kind: Kind },
) {
  const product = tx.get<ProductDoc>(PRODUCTS, productId);
  if (!product) return 'brand_id' in by && storeBrands(tx, storeId, by.brand_id).includes(productId);
  if ('kind' in by ? product.kind !== by.kind : product.brand_id !== by.brand_id) return false;
  const listings = tx.get<ProductListingsDoc>(CATALOG_PRODUCT_LISTINGS, productId);
  return listings !== undefined && (storeCountsOf(tx, listings)[storeId] ?? 0) > 0;
}

function involvedProductIds(tx: CatalogTx, s: Involvement): number[] {
  const ids = [...s.product_ids];
  for (const brandId of s.brand_ids) ids.push(...storeBrands(tx, s.store_id, brandId));
  for (const kind of s.kinds) {
    for (const [productId] of storeKinds(tx, s.store_id, kind)) ids.push(productId);
  }
  return sortedUnique(ids);
}

function upsertSpecial(e: CatalogEventOf<'SpecialUpserted'>, tx: CatalogTx, facts: Facts) {
  const record = toRecord(decider.evolve(decider.initialState, e));
  if (!record) return;
  const prev = facts.specialBefore;
  const key = String(record.id);

  // The store's terms: a special may move to another store.
  if (prev && prev.store_id !== record.store_id) {
    const old = tx.get<StoreSpecialsDoc>(CATALOG_STORE_SPECIALS, prev.store_id);
    if (old && key in old.specials) {
      const { [key]: _, ...rest } = old.specials;
      if (Object.keys(rest).length > 0) tx.save(CATALOG_STORE_SPECIALS, { ...old, specials: rest });
      else tx.remove(CATALOG_STORE_SPECIALS, old._id);
    }
  }
  const current = tx.get<StoreSpecialsDoc>(CATALOG_STORE_SPECIALS, record.store_id);
  const terms: SpecialTerms = {
    product_ids: record.product_ids,
    brand_ids: record.brand_ids,
    kinds: record.kinds,
    enabled: record.enabled,
  };
  tx.save(CATALOG_STORE_SPECIALS, { _id: record.store_id, specials: { ...current?.specials, [key]: terms } });

  // Which specials name each product, so a product's brand change reaches them.
  const named = new Set(record.product_ids);
  for (const productId of prev?.product_ids ?? []) {
    if (named.has(productId)) continue;
    const doc = tx.get<ProductSpecialsDoc>(CATALOG_PRODUCT_SPECIALS, productId);
    if (!doc) continue;
    const special_ids = doc.special_ids.filter((id) => id !== record.id);
    if (special_ids.length > 0) tx.save(CATALOG_PRODUCT_SPECIALS, { ...doc, special_ids });
    else tx.remove(CATALOG_PRODUCT_SPECIALS, doc._id);
  }
  for (const productId of named) {
    const doc = tx.get<ProductSpecialsDoc>(CATALOG_PRODUCT_SPECIALS, productId);
    tx.save(CATALOG_PRODUCT_SPECIALS, {
      _id: productId,
      special_ids: sortedUnique([...(doc?.special_ids ?? []), record.id]),
    });
  }

  const _product_brands: Record<string, number> = {};
  for (const productId of named) {
    const product = tx.get<ProductDoc>(PRODUCTS, productId);
    if (product) _product_brands[String(productId)] = product.brand_id;
  }
  const { updated_at, ...data } = record;
  const involvement: Involvement = { ...data, _product_brands };
  const doc: SpecialDoc = {
    _id: record.id,
    ...data,
    updated_at: latest(prev?.updated_at, iso(updated_at)),
    _product_brands,
    _involved_brand_ids: involvedBrandIds(tx, involvement),
    _involved_product_ids: involvedProductIds(tx, involvement),
  };
  tx.save(SPECIALS, doc);
}

/** Keeps the (store, kind) lookups, then the involvement of the specials at the stores concerned. */
function applyListings(tx: CatalogTx, facts: Facts) {
  const lookups = menuLookups<[number, number], StoreKindDoc>(
    tx,
    CATALOG_STORE_KINDS,
    (id) => {
      const [storeId, kind] = String(id).split(':');
      return {
        _id: String(id),
        store_id: Number(storeId),
        kind: kind as Kind,
        menu_products: {},
        brand_counts: {},
      };
    },
    // Counted before this event changes it (or splits it into parts), which the deltas then follow.
    (doc) => (doc.brand_counts ? doc : { ...doc, brand_counts: brandCountsOf(tx, doc) }),
  );
  lookups.prepare(facts.listings, (entry) =>
    entry.kind ? storeKindKey(entry.store_id, entry.kind) : undefined,
  );
  const brands = new EntryTally(brandOf);
  const byStore = new Map<number, ListingChange[]>();
  for (const change of facts.listings) {
    const { menu_product_id, before, after } = change;
    if (before?.kind && (!after || after.kind !== before.kind)) {
      const key = storeKindKey(before.store_id, before.kind);
      brands.moved(key, lookups.delete(key, menu_product_id));
    }
    if (after?.kind) {
      const key = storeKindKey(after.store_id, after.kind);
      const value: [number, number] = [after.product_id, after.brand_id];
      const { changed, previous } = lookups.set(key, menu_product_id, value);
      if (changed) brands.moved(key, previous, value);
    }
    const atStore = byStore.get(change.store_id) ?? [];
    atStore.push(change);
    byStore.set(change.store_id, atStore);
  }
  lookups.commit((doc) => {
    doc.brand_counts = brands.applied(doc._id, doc.brand_counts).counts;
  });

  for (const [storeId, changes] of byStore) {
    const entries = changes.flatMap((c) => [c.before, c.after]).filter((x) => x !== null);
    const terms = tx.get<StoreSpecialsDoc>(CATALOG_STORE_SPECIALS, storeId)?.specials ?? {};
    for (const [id, t] of Object.entries(terms)) {
      const byKind = entries.some((x) => x.kind !== null && t.kinds.includes(x.kind));
      const byBrand = entries.some((x) => t.brand_ids.includes(x.brand_id));
      if (!byKind && !byBrand) continue; // its involvement does not depend on these menu products
      const special = tx.get<SpecialDoc>(SPECIALS, Number(id));
      if (!special || special.store_id !== storeId) continue;
      // Each product these changes touch is rechecked against the lookups as they are now; a product
      // has one brand and one kind, all of which appear among the entries.
      const products = new Set(special._involved_product_ids);
      for (const productId of new Set(entries.map((x) => x.product_id))) {
        const mine = entries.filter((x) => x.product_id === productId);
        const involved =
          special.product_ids.includes(productId) ||
          mine.some(
            (x) =>
              special.brand_ids.includes(x.brand_id) &&
              listedAt(tx, storeId, productId, { brand_id: x.brand_id }),
          ) ||
          mine.some(
            (x) =>
              x.kind !== null &&
              special.kinds.includes(x.kind) &&
              listedAt(tx, storeId, productId, { kind: x.kind }),
          );
        if (involved) products.add(productId);
        else products.delete(productId);
      }
      tx.patch(SPECIALS, special, {
        _involved_brand_ids: byKind ? involvedBrandIds(tx, special) : special._involved_brand_ids,
        _involved_product_ids: sortedUnique(products),
      });
    }
  }
}

/** A product's brand (new product, or a brand change) reaches the specials that name it. */
function applyProductBrand(e: CatalogEventOf<'ProductUpserted'>, tx: CatalogTx) {
  const { product_id, brand_id } = e.data;
  const named = tx.get<ProductSpecialsDoc>(CATALOG_PRODUCT_SPECIALS, product_id)?.special_ids ?? [];
  for (const id of named) {
    const special = tx.get<SpecialDoc>(SPECIALS, id);
    if (!special?.product_ids.includes(product_id)) continue;
    const _product_brands = { ...special._product_brands, [String(product_id)]: brand_id };
    const _involved_brand_ids = involvedBrandIds(tx, { ...special, _product_brands });
    tx.patch(SPECIALS, special, { _product_brands, _involved_brand_ids });
  }
}

export const specials: CatalogReadModel = {
  collections: {
    [SPECIALS]: specialIndexes,
    [CATALOG_STORE_SPECIALS]: [],
    [CATALOG_STORE_KINDS]: [],
    [partsOf(CATALOG_STORE_KINDS)]: [],
    [CATALOG_PRODUCT_SPECIALS]: [],
  },
  prefetch(e) {
    switch (e.type) {
      case 'SpecialUpserted': {
        const { special_id, store_id, product_ids, brand_ids, kinds } = e.data;
        return [
          [SPECIALS, special_id],
          [CATALOG_STORE_SPECIALS, store_id],
          ...product_ids.flatMap(
            (p): Array<[string, number]> => [
              [PRODUCTS, p],
              [CATALOG_PRODUCT_SPECIALS, p],
            ],
          ),
          ...brand_ids.map((b): [string, string] => [CATALOG_STORE_BRANDS, storeBrandKey(store_id, b)]),
          ...kinds.map((k): [string, string] => [CATALOG_STORE_KINDS, storeKindKey(store_id, k)]),
        ];
      }
      case 'ProductUpserted':
        return [[CATALOG_PRODUCT_SPECIALS, e.data.product_id]];
      case 'MenuProductListed':
      case 'MenuProductDelisted':
        // The menu product's kind is the product's, unknown here: a store has few (store, kind) lookups.
        return [
          [CATALOG_STORE_SPECIALS, e.data.store_id],
          ...allKinds.map((k): [string, string] => [CATALOG_STORE_KINDS, storeKindKey(e.data.store_id, k)]),
        ];
      default:
        return [];
    }
  },
  apply(e, tx, facts) {
    if (e.type === 'SpecialUpserted') upsertSpecial(e, tx, facts);
    if (facts.listings.length > 0) applyListings(tx, facts);
    if (e.type === 'ProductUpserted') applyProductBrand(e, tx);
  },
};

// ---- queries of the partner routes (docs/partner-api.md) -------------------------------------------

/** The store's specials, in id order, whatever their window or `enabled`. */
export function specialsAt(
  specials: Collection<SpecialDoc>,
  storeId: number,
  updatedAfter: string | undefined,
  page: PageRequest,
): Promise<Page<SpecialDoc>> {
  return findPage(specials, updatedSince({ store_id: storeId }, updatedAfter), page);
}

/** The specials, at any store, that involve a product of the brands, in id order. */
export function specialsInvolving(
  specials: Collection<SpecialDoc>,
  brandIds: readonly number[],
  updatedAfter: string | undefined,
  page: PageRequest,
): Promise<Page<SpecialDoc>> {
  return findPage(specials, updatedSince({ _involved_brand_ids: oneOf(brandIds) }, updatedAfter), page);
}
