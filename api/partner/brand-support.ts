/**
 * What the brand and brand feed APIs share: lists in id order paged by an `_id` cursor (one indexed
 * `find` of `limit + 1` documents per page), the `updated_after` filter, and brand-scope filters.
 */
import { z } from 'zod';
import type { Collection, Doc, Filter, SortSpec } from '../../projections/read-store.ts';
import type { AppContext } from '../http.ts';
import { answerPage, decodeCursor, pageQuery, publicFields } from './common.ts';
import { pageOf, reviewRecord } from './schemas.ts';

/** An ISO 8601 date-time with `Z` or an offset, normalized to UTC with milliseconds (as read models store times). */
export const dateTime = z.iso
  .datetime({ offset: true })
  .transform((s) => new Date(s).toISOString())
  .describe('ISO 8601 date-time, e.g. 2026-01-31T00:00:00Z');

export const updatedAfter = dateTime
  .optional()
  .describe('only records updated strictly after this time (for incremental sync)');

/** `?limit=&cursor=&updated_after=`: the query of an id-ordered list. */
export const listQuery = z.strictObject({ ...pageQuery, updated_after: updatedAfter });
export type ListQuery = z.output<typeof listQuery>;

/** Lists are in id order; every collection listed this way keeps the record id as `_id`. */
const BY_ID: SortSpec = [['_id', 1]];
const idCursor = z.tuple([z.number().int().positive().max(Number.MAX_SAFE_INTEGER)]);

/** The position a list resumes after (`undefined` for the first page); a foreign cursor is a 400. */
export function idAfter(cursor: string | undefined): [number] | undefined {
  return decodeCursor(cursor, idCursor) as [number] | undefined;
}

/** An equality filter on one of several values, in the form that lets one value walk an index. */
export const oneOf = (values: readonly number[]): unknown =>
  values.length === 1 ? values[0] : { $in: [...values] };

/** The filter with `updated_at > updated_after` when asked. */
export function withUpdatedAfter(filter: Filter, updated_after: string | undefined): Filter {
  return updated_after === undefined ? filter : { ...filter, updated_at: { $gt: updated_after } };
}

/**
 * Answers one page of `collection` in id order: a single `find` of `limit + 1` documents (the extra
 * one says whether a next page exists), each shown through `render` (by default without `_` fields).
 */
export async function answerIdPage<T extends Doc>(
  ctx: AppContext,
  collection: Collection<T>,
  filter: Filter,
  page: { limit: number; after: [number] | undefined },
  plural: string,
  render: (docs: T[]) => unknown[] = (docs) => docs.map((d) => publicFields(d)),
): Promise<void> {
  const docs = await collection.find(filter, {
    sort: BY_ID,
    limit: page.limit + 1,
    ...(page.after ? { after: page.after } : {}),
  });
  const more = docs.length > page.limit;
  const shown = more ? docs.slice(0, page.limit) : docs;
  answerPage(ctx, plural, render(shown), more ? [shown[shown.length - 1]._id] : null);
}

/** One page of verified reviews (shared by both brand APIs, so both documents name the same component). */
export const reviewPage = pageOf('reviews', reviewRecord, 'ReviewPage');

/**
 * `GET /reviews` of both brand APIs: one page of the verified reviews of these brands (every brand
 * when `brands` is undefined: a brand-feed policy covering all brands).
 */
export function answerVerifiedReviews(
  ctx: AppContext,
  query: ListQuery,
  brands: readonly number[] | undefined,
  reviews: Collection<Doc>,
): Promise<void> {
  const scope: Filter =
    brands === undefined ? { verified: true } : { brand_id: oneOf(brands), verified: true };
  return answerIdPage(
    ctx,
    reviews,
    withUpdatedAfter(scope, query.updated_after),
    {
      limit: query.limit,
      after: idAfter(query.cursor),
    },
    'reviews',
  );
}
