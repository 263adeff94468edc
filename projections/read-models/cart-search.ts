/**
 * An auditor's search of the carts read model (docs/operations.md, "Auditing carts"): by store,
 * status, creation time and source partner, and by the customer's email or phone number. Newest
 * first (`_created_at`, then `id`, descending), paged like the partner lists, each query walking an
 * index of `cartIndexes` that begins with its equalities (store, status, partner, or a store's status;
 * nothing for time alone) and goes on in that order: the time range bounds the walk, so a page reads
 * about `limit + 1` carts of the range, never the carts outside it.
 *
 * The customer's values are never indexed here: the key store finds the carts of an email or a
 * phone number by keyed hashes (`application/customer-data.ts`, `cartsLinkedTo`), and the caller
 * passes their uuids, which this query keeps only while the cart's customer is that person now. An
 * erased customer is found neither way: the erasure destroys the key with its links, and
 * `CartCustomerErased` empties the cart's customer.
 */
import { phoneDigits } from '../../application/customer-key-ring.ts';
import type * as cart from '../../domain/cart.ts';
import type { Collection, Filter, SortSpec } from '../read-store.ts';
import type { CartDoc } from './carts.ts';
import { findPage } from './paging.ts';

export interface CartSearch {
  store_id?: number;
  status?: cart.CartStatus;
  partner_id?: string;
  /** ISO 8601 UTC with milliseconds; bounds are exclusive. */
  created_after?: string;
  created_before?: string;
  /** Who the cart's customer is now: compared case-blind (email), by digits (phone). */
  customer?: { email?: string; phone?: string; carts: readonly string[] };
}

/** A cart as a search lists it: where and when, never who (the audit shows the customer). */
export interface CartSummary {
  cart_uuid: string;
  id: number;
  store_id: number;
  store_name: string;
  status: cart.CartStatus;
  partner_id: string | null;
  created_at: string;
  updated_at: string;
  abandoned: boolean;
  items: number;
}

/** The search's order: newest first; `id` (the log's order) and then the uuid break ties. */
export const cartSearchSort: SortSpec = [
  ['_created_at', -1],
  ['id', -1],
  ['_id', 1],
];

/** Position in the search's order: the last cart's `created_at`, `id` and uuid. */
export type CartSearchCursor = [created_at: string, id: number, uuid: string];

const sameEmail = (a: string | null | undefined, b: string) =>
  typeof a === 'string' && a.trim().toLowerCase() === b.trim().toLowerCase();

/** Whether the cart's customer now is the one searched for. */
function customerIs(doc: CartDoc, wanted: { email?: string; phone?: string }): boolean {
  const c = doc._state.customer;
  if (!c) return false;
  if (wanted.email !== undefined && !sameEmail(c.email, wanted.email)) return false;
  if (wanted.phone !== undefined) {
    const digits = phoneDigits(wanted.phone);
    if (digits === '' || phoneDigits(c.phone_number) !== digits) return false;
  }
  return true;
}

export function toCartSummary(doc: CartDoc): CartSummary {
  return {
    cart_uuid: doc._id,
    id: doc.id,
    store_id: doc.store_id,
    store_name: doc.store_name,
    status: doc.status,
    partner_id: doc._partner_id,
    created_at: doc._created_at,
    updated_at: doc._updated_at,
    abandoned: doc._abandoned,
    items: doc._state.lines.reduce((n, l) => n + l.count, 0),
  };
}

/** The filter of a search, shaped for the indexes of `cartIndexes`. */
export function cartSearchFilter(search: CartSearch, uuids?: readonly string[]): Filter {
  const filter: Filter = {};
  if (uuids !== undefined) filter._id = { $in: [...uuids] };
  if (search.store_id !== undefined) filter.store_id = search.store_id;
  if (search.partner_id !== undefined) filter._partner_id = search.partner_id;
  if (search.status !== undefined) filter.status = search.status;
  const created: Record<string, string> = {};
  if (search.created_after !== undefined) created.$gt = search.created_after;
  if (search.created_before !== undefined) created.$lt = search.created_before;
  if (Object.keys(created).length > 0) filter._created_at = created;
  return filter;
}

/**
 * The most carts of one customer a search reads (docs/operations.md, "Auditing carts"): a shared
 * walk-in phone number can be linked to thousands, each page would read them all.
 */
export const MAX_LINKED_CARTS = 1_000;

/** One page of the carts a search finds, and the cursor of the next page (null on the last one). */
export async function searchCarts(
  collection: Collection<CartDoc>,
  search: CartSearch,
  page: { limit: number; after?: CartSearchCursor },
  maxLinked = MAX_LINKED_CARTS,
): Promise<{ carts: CartSummary[]; next: CartSearchCursor | null; linkedCartsCapped: boolean }> {
  let uuids: string[] | undefined;
  let capped = false;
  if (search.customer) {
    // The carts the key store links to the customer (the last `maxLinked` in its order, the order
    // their keys were made), kept while the cart's customer is them.
    const linked = search.customer.carts;
    capped = linked.length > maxLinked;
    const found = await collection.findByIds(capped ? linked.slice(-maxLinked) : [...linked]);
    uuids = found.filter((d) => customerIs(d, search.customer ?? {})).map((d) => d._id);
    if (uuids.length === 0) return { carts: [], next: null, linkedCartsCapped: capped };
  }
  const found = await findPage(collection, cartSearchFilter(search, uuids), page, cartSearchSort);
  return {
    carts: found.docs.map(toCartSummary),
    next: found.next as CartSearchCursor | null,
    linkedCartsCapped: capped,
  };
}
