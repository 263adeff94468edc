/**
 * What the brand and brand feed APIs share: the query of their id-ordered lists, and their verified
 * reviews (both documents name the same review page).
 */
import { z } from 'zod';
import { type ReviewDoc, verifiedReviews } from '../../projections/read-models/catalog/reviews.ts';
import type { Collection } from '../../projections/read-store.ts';
import type { AppContext } from '../http.ts';
import { answerList, idAfter, pageQuery, updatedAfter } from './common.ts';
import { pageOf, reviewRecord } from './schemas.ts';

/** `?limit=&cursor=&updated_after=`: the query of an id-ordered list. */
export const listQuery = z.strictObject({ ...pageQuery, updated_after: updatedAfter });
export type ListQuery = z.output<typeof listQuery>;

/** One page of verified reviews (shared by both brand APIs, so both documents name the same component). */
export const reviewPage = pageOf('reviews', reviewRecord, 'ReviewPage');

/**
 * `GET /reviews` of both brand APIs: one page of the verified reviews of these brands (every brand
 * when `brands` is undefined: a brand-feed policy covering all brands).
 */
export async function answerVerifiedReviews(
  ctx: AppContext,
  query: ListQuery,
  brands: readonly number[] | undefined,
  reviews: Collection<ReviewDoc>,
): Promise<void> {
  const page = await verifiedReviews(reviews, { brandIds: brands }, query.updated_after, {
    limit: query.limit,
    after: idAfter(query.cursor),
  });
  answerList(ctx, 'reviews', page);
}
