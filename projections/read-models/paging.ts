/**
 * One page of a read model: the paging of every partner list (docs/partner-api.md, "Lists"). A single
 * `find` of `limit + 1` documents in the list's order, served by an index that ends in that order
 * (docs/read-side.md); the extra document only says whether another page exists. The next page starts
 * strictly after the sort keys of the last document shown, so a walk meets every record once, also
 * while records are added.
 */
import type { Collection, Doc, Filter, SortSpec } from '../read-store.ts';

/** What the caller asks: how many, and after which sort keys (the previous page's `next`). */
export interface PageRequest {
  limit: number;
  after?: readonly unknown[];
}

export interface Page<T> {
  docs: T[];
  /** The sort keys of the last document, to ask for the next page with; null on the last page. */
  next: unknown[] | null;
}

/** The order of every list whose records are identified by `_id` (the record's numeric id). */
export const ID_ORDER: SortSpec = [['_id', 1]];

export async function findPage<T extends Doc>(
  collection: Collection<T>,
  filter: Filter,
  page: PageRequest,
  sort: SortSpec = ID_ORDER,
): Promise<Page<T>> {
  const docs = await collection.find(filter, {
    sort,
    limit: page.limit + 1,
    ...(page.after ? { after: [...page.after] } : {}),
  });
  const more = docs.length > page.limit;
  const shown = more ? docs.slice(0, page.limit) : docs;
  const last = shown[shown.length - 1] as Record<string, unknown> | undefined;
  return { docs: shown, next: more && last ? sort.map(([field]) => last[field]) : null };
}

/** The filter, with `updated_at` strictly after `after` when asked (incremental sync). */
export function updatedSince(filter: Filter, after: string | undefined): Filter {
  return after === undefined ? filter : { ...filter, updated_at: { $gt: after } };
}

/** An equality on one of several values, in the form that lets a single value walk an index. */
export const oneOf = (values: readonly number[]): unknown =>
  values.length === 1 ? values[0] : { $in: [...values] };
