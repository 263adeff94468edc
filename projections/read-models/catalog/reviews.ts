/**
 * Read model `reviews` (catalog projection): one document per review (`_id` review id), the partner
 * `review` record of docs/partner-api.md plus `updated_at` (a review can be revised; for `updated_after`
 * syncs). Unverified reviews are kept with `verified: false`: partners see verified ones only, so
 * their queries filter on it. `brand_id` is the product's current brand: when a product moves to
 * another brand its reviews follow (`updateMany` on `product_id`).
 *
 * The review's previous version (this document) is what the ratings of products, menu products and
 * stores move away from when it is revised: `ratingChangeOf` reads it before anything is written.
 */
import { isDeepStrictEqual } from 'node:util';
import { decider, type ReviewRecord, toRecord } from '../../../domain/review.ts';
import type { Collection, Doc, Filter } from '../../read-store.ts';
import { findPage, oneOf, type Page, type PageRequest, updatedSince } from '../paging.ts';
import { PRODUCTS, type ProductDoc } from './products.ts';
import {
  type CatalogEvent,
  type CatalogEventOf,
  type CatalogReadModel,
  type CatalogTx,
  type Facts,
  index,
  iso,
  latest,
  type RatingShare,
  readWhileApplying,
} from './support.ts';

export const REVIEWS = 'reviews';

export type ReviewDoc = Doc & ReviewRecord & { _id: number };

export const reviewIndexes = [
  // GET /reviews of a brand or brand feed partner (its brands), in id order. Partners see verified
  // reviews only: with `verified` in the key a page reads no unverified review.
  index(['brand_id', 1], ['verified', 1], ['_id', 1]),
  // GET /products/{product_id}/reviews (verified), in id order; also a product's reviews (brand moves),
  // read while applying (docs/read-side.md, "How a build writes its shadows").
  readWhileApplying(index(['product_id', 1], ['verified', 1], ['_id', 1])),
  // A store's reviews, in id order.
  index(['store_id', 1], ['_id', 1]),
  // GET /products/{product_id}/reviews of a store partner: the product's verified reviews at the store.
  index(['store_id', 1], ['product_id', 1], ['verified', 1], ['_id', 1]),
  // GET /reviews of a brand feed partner with all brands: every verified review, in id order.
  index(['verified', 1], ['_id', 1]),
];

/** The review's share of ratings before and after the event; null when ratings do not change. */
export function ratingChangeOf(e: CatalogEvent, tx: CatalogTx): Facts['rating'] {
  if (e.type !== 'ReviewPosted' && e.type !== 'ReviewRevised') return null;
  const prev = tx.get<ReviewDoc>(REVIEWS, e.data.review_id);
  const share = (r: {
    verified: boolean;
    product_id: number;
    store_id: number;
    rating: number;
  }): RatingShare | null =>
    r.verified ? { product_id: r.product_id, store_id: r.store_id, rating: r.rating } : null;
  const before = prev ? share(prev) : null;
  const after = share(e.data);
  return isDeepStrictEqual(before, after) ? null : { before, after };
}

function post(e: CatalogEventOf<'ReviewPosted' | 'ReviewRevised'>, tx: CatalogTx) {
  const record = toRecord(decider.evolve(decider.initialState, e));
  if (!record) return;
  const prev = tx.get<ReviewDoc>(REVIEWS, record.id);
  const product = tx.get<ProductDoc>(PRODUCTS, record.product_id);
  const doc: ReviewDoc = {
    _id: record.id,
    ...record,
    brand_id: product?.brand_id ?? record.brand_id,
    // A revision keeps the time the review was first posted.
    created_at: prev?.created_at ?? iso(record.created_at),
    updated_at: latest(prev?.updated_at, iso(record.updated_at)),
  };
  tx.save(REVIEWS, doc);
}

export const reviews: CatalogReadModel = {
  collections: { [REVIEWS]: reviewIndexes },
  prefetch(e) {
    if (e.type === 'ReviewPosted' || e.type === 'ReviewRevised') return [[REVIEWS, e.data.review_id]];
    return [];
  },
  apply(e, tx, facts) {
    if (e.type === 'ReviewPosted' || e.type === 'ReviewRevised') post(e, tx);
    if (
      e.type === 'ProductUpserted' &&
      facts.productBefore &&
      facts.productBefore.brand_id !== e.data.brand_id
    ) {
      const { product_id, brand_id } = e.data;
      tx.updateMany(
        REVIEWS,
        { product_id, brand_id: { $ne: brand_id } },
        { $set: { brand_id }, $max: { updated_at: facts.time } },
      );
    }
  },
};

// ---- queries of the partner routes (docs/partner-api.md) -------------------------------------------

/**
 * Verified reviews, in id order: of some brands (every brand when `brandIds` is undefined), or of one
 * product, at one store when given.
 */
export function verifiedReviews(
  reviews: Collection<ReviewDoc>,
  scope: { brandIds?: readonly number[] } | { productId: number; storeId?: number },
  updatedAfter: string | undefined,
  page: PageRequest,
): Promise<Page<ReviewDoc>> {
  const filter: Filter = { verified: true };
  if ('productId' in scope) {
    if (scope.storeId !== undefined) filter.store_id = scope.storeId;
    filter.product_id = scope.productId;
  } else if (scope.brandIds) filter.brand_id = oneOf(scope.brandIds);
  return findPage(reviews, updatedSince(filter, updatedAfter), page);
}
