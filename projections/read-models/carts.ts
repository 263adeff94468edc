/**
 * Read model `carts`: one document per cart, holding the folded cart state and the fields the partner
 * queries filter, sort and index on (the private ones prefixed `_`). The partner cart record
 * (docs/partner-api.md, "Records") is rendered from the state by `toPartnerCart` as it is read: kept
 * beside the state, it doubled every document the projector writes and reads back (docs/read-side.md,
 * "Projections and checkpoints").
 *
 * Denormalized names follow their sources: a store rename rewrites the store's carts (`store_name`),
 * a brand rename the carts holding that brand (their lines' `brand`). The projection keeps the names
 * it needs in two private lookup collections, so it never reads another read model.
 *
 * Deterministic (docs/read-side.md): every time comes from event data; nothing reads the clock.
 */

import { domainEventOf } from '../../application/read-state.ts';
import type { BrandEvent } from '../../domain/brand.ts';
import * as cart from '../../domain/cart.ts';
import { eventRegistry } from '../../domain/index.ts';
import type { StoreEvent } from '../../domain/store.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import type { Projection, ProjectionTx } from '../projection.ts';
import type { Collection, Doc, DocId, Filter, FindOptions, IndexSpec, SortSpec } from '../read-store.ts';
import { findPage, oneOf } from './paging.ts';

export const CARTS = 'carts';
/** Private: the current name of every store (`_id` store id), for `store_name`. */
export const CART_STORE_NAMES = 'carts_store_names';
/** Private: the current name of every brand (`_id` brand id), for the lines' `brand`. */
export const CART_BRAND_NAMES = 'carts_brand_names';

export type PartnerCart = ReturnType<typeof cart.toPartnerCart>;

/** The stored document: the folded state, and what the queries filter, sort and index on. */
export type CartDoc = Doc & {
  /** The cart uuid. */
  _id: string;
  /** The record's `id`: the global position of the cart's first event. */
  id: number;
  store_id: number;
  status: cart.CartStatus;
  /** The store's current name, the record's `store_name`. */
  store_name: string;
  /** The folded domain state, with line brand names kept current: the record is rendered from it. */
  _state: cart.Cart;
  /** ISO 8601 UTC (the record's `created_at` is `YYYY-MM-DD HH:MM:SS`, not fit for range filters). */
  _created_at: string;
  /** ISO 8601 UTC. */
  _updated_at: string;
  /** `source.partner_id`: the partner whose channel created the cart, if any. */
  _partner_id: string | null;
  /** The platform user the cart is of, if any: what an export by user id lists (`api/admin-customer-export.ts`). */
  _user_id: number | null;
  /** The brands on its lines, sorted, without duplicates. */
  _brand_ids: number[];
  _abandoned: boolean;
};

type NameDoc = Doc & { _id: number; name: string };

/**
 * Each serves one query without a scan. A partner query's order is `id`, then `_id` (the store
 * appends `_id`), so `[scope field, id]` indexes give a page in index order; an auditor's search is
 * newest first, on the `[scope…, _created_at, id]` indexes at the end.
 *
 * Every index ends in `id`, which grows with the log (as `_created_at` does): a batch's entries land at the end of each key's
 * range instead of at random places among the uuids. A `_brand_ids` index without it made a rebuild
 * rewrite ~1,200 random pages per batch, 5 GB written for 1 GB of carts (docs/read-side.md).
 */
export const cartIndexes: readonly IndexSpec[] = [
  {
    keys: [
      ['_partner_id', 1],
      ['id', 1],
    ],
  },
  {
    keys: [
      ['_partner_id', 1],
      ['_updated_at', 1],
    ],
  },
  // Also a store's or a brand's rename (`renameStore`, `renameBrand`): read while applying, so a
  // build keeps them up to date from its first write (docs/read-side.md, "How a build writes its shadows").
  {
    keys: [
      ['store_id', 1],
      ['id', 1],
    ],
    readWhileApplying: true,
  },
  {
    keys: [
      ['_brand_ids', 1],
      ['id', 1],
    ],
    readWhileApplying: true,
  },
  {
    keys: [
      ['_abandoned', 1],
      ['_partner_id', 1],
      ['id', 1],
    ],
  },
  // An export by user id (docs/operations.md, "Customer data"), not a partner query.
  {
    keys: [
      ['_user_id', 1],
      ['id', 1],
    ],
  },
  // An auditor's search (`cart-search.ts`): newest first, by nothing but time, or by a store, a partner,
  // a status or a store's status, each walk bounded by the search's time range. `_id` last so that
  // MongoDB's walk gives the search's whole order (`_id` breaks ties) without a sort. The partner's
  // before the status's: of two that fit a search, the embedded store walks the first declared, and a
  // partner's carts are fewer than a status's.
  ...[[], ['store_id'], ['_partner_id'], ['status'], ['store_id', 'status']].map(
    (scope): IndexSpec => ({
      keys: [...scope.map((field): [string, 1] => [field, 1]), ['_created_at', -1], ['id', -1], ['_id', 1]],
    }),
  ),
];

const CART_PREFIX = 'cart-';
const STORE_PREFIX = 'store-';
const BRAND_PREFIX = 'brand-';
const cartEventTypes = new Set<string>(Object.keys(cart.events));

const iso = (at: string) => new Date(at).toISOString();

/** Whether `doc` already reflects the event at `position` (a batch replayed after a crash). */
const reflects = (doc: Doc | undefined, position: number) =>
  doc !== undefined && typeof doc._position === 'number' && doc._position >= position;

/** The state with every line of `brandId` named `name`; the same object when nothing changes. */
function withBrandName(state: cart.Cart, brandId: number, name: string): cart.Cart {
  if (!state.lines.some((l) => l.brand_id === brandId && l.brand !== name)) return state;
  return { ...state, lines: state.lines.map((l) => (l.brand_id === brandId ? { ...l, brand: name } : l)) };
}

/**
 * What `apply` writes: the folded state, the record's id and store name; `finalize` derives the query
 * fields once per cart per batch (`documentOf`; a cart gets ~20 events).
 */
function draft(uuid: string, state: cart.Cart, id: number, storeName: string): CartDoc {
  return { _id: uuid, _state: state, id, store_name: storeName } as CartDoc;
}

/** The stored document of a cart: its state and the fields the queries filter, sort and index on. */
function documentOf(uuid: string, state: cart.Cart, id: number, storeName: string): CartDoc {
  return {
    _id: uuid,
    id,
    store_id: state.store_id,
    status: state.status,
    store_name: storeName,
    _state: state,
    _created_at: iso(state.created_at),
    _updated_at: iso(state.updated_at),
    _partner_id: state.source.partner_id,
    _user_id: state.user_id ?? null,
    _brand_ids: [...new Set(state.lines.map((l) => l.brand_id))].sort((a, b) => a - b),
    _abandoned: state.abandoned_at !== null,
  };
}

function applyCartEvent(event: RecordedEvent, tx: ProjectionTx): void {
  if (!cartEventTypes.has(event.type)) return;
  const uuid = event.streamId.slice(CART_PREFIX.length);
  const current = tx.get<CartDoc>(CARTS, uuid);
  if (reflects(current, event.position)) return;
  const e = domainEventOf<cart.CartEvent>(eventRegistry, event);
  if (e.type === 'CartCreated') {
    // The decider refuses a second CartCreated; one in the log would be a bug, not a new cart.
    if (current) return;
    const state = cart.decider.evolve({ exists: false }, e);
    if (!state.exists) return;
    const storeName = tx.get<NameDoc>(CART_STORE_NAMES, state.store_id)?.name ?? '';
    // The record's id is the global position of the cart's first event (as the platform API answers).
    tx.put(CARTS, draft(uuid, state, event.position, storeName));
    return;
  }
  if (!current) return; // no CartCreated before it: nothing to apply it to
  let state = cart.decider.evolve(current._state, e);
  if (!state.exists) return;
  if (e.type === 'CartItemAdded') {
    // The line's snapshot carries the brand name the handler read; the lookup knows later renames.
    const known = tx.get<NameDoc>(CART_BRAND_NAMES, e.data.brand_id);
    if (known) state = withBrandName(state, known._id, known.name);
  }
  tx.put(CARTS, draft(uuid, state, current.id, current.store_name));
}

/**
 * Records a name and says whether carts may need rewriting: the name is new or changed, or this
 * is a replay (then the carts' writes may not have landed before the crash although the lookup's did;
 * rewriting is harmless, since carts that reflect the event drop the write).
 */
function recordName(tx: ProjectionTx, collection: string, id: number, name: string): boolean {
  const known = tx.get<NameDoc>(collection, id);
  if (reflects(known, tx.event.position)) return true;
  tx.put(collection, { _id: id, name });
  return known === undefined || known.name !== name;
}

function applyStoreUpserted(event: RecordedEvent, tx: ProjectionTx): void {
  const e = domainEventOf<StoreEvent>(eventRegistry, event);
  if (e.type !== 'StoreUpserted') return;
  const { store_id, name } = e.data;
  if (!recordName(tx, CART_STORE_NAMES, store_id, name)) return;
  for (const doc of tx.find<CartDoc>(CARTS, { store_id })) {
    if (doc.store_name === name) continue;
    tx.put(CARTS, draft(doc._id, doc._state, doc.id, name));
  }
}

function applyBrandUpserted(event: RecordedEvent, tx: ProjectionTx): void {
  const { data } = domainEventOf<BrandEvent>(eventRegistry, event);
  const { brand_id, name } = data;
  if (!recordName(tx, CART_BRAND_NAMES, brand_id, name)) return;
  for (const doc of tx.find<CartDoc>(CARTS, { _brand_ids: brand_id })) {
    const state = withBrandName(doc._state, brand_id, name);
    if (state === doc._state) continue;
    tx.put(CARTS, draft(doc._id, state, doc.id, doc.store_name));
  }
}

const idOf = (streamId: string, prefix: string) => Number(streamId.slice(prefix.length));

export const cartsProjection: Projection = {
  name: 'carts',
  version: 3,
  finalize(collection, doc) {
    if (collection !== CARTS) return doc;
    const d = doc as CartDoc;
    return { ...documentOf(d._id, d._state, d.id, d.store_name), _position: doc._position };
  },
  collections: { [CARTS]: cartIndexes, [CART_STORE_NAMES]: [], [CART_BRAND_NAMES]: [] },
  filter: { streamPrefixes: [CART_PREFIX, STORE_PREFIX, BRAND_PREFIX] },
  prefetch(event) {
    // Hints only (a document not prefetched is fetched on demand), so raw data is good enough here.
    const data = event.data as { store_id?: unknown; brand_id?: unknown } | null;
    const out: Array<[string, DocId]> = [];
    if (event.streamId.startsWith(CART_PREFIX)) {
      if (!cartEventTypes.has(event.type)) return out;
      out.push([CARTS, event.streamId.slice(CART_PREFIX.length)]);
      if (event.type === 'CartCreated' && typeof data?.store_id === 'number') {
        out.push([CART_STORE_NAMES, data.store_id]);
      }
      if (event.type === 'CartItemAdded' && typeof data?.brand_id === 'number') {
        out.push([CART_BRAND_NAMES, data.brand_id]);
      }
    } else if (event.type === 'StoreUpserted') {
      out.push([CART_STORE_NAMES, idOf(event.streamId, STORE_PREFIX)]);
    } else if (event.type === 'BrandUpserted') {
      out.push([CART_BRAND_NAMES, idOf(event.streamId, BRAND_PREFIX)]);
    }
    return out;
  },
  apply(event, tx) {
    if (event.streamId.startsWith(CART_PREFIX)) applyCartEvent(event, tx);
    else if (event.streamId.startsWith(STORE_PREFIX) && event.type === 'StoreUpserted')
      applyStoreUpserted(event, tx);
    else if (event.streamId.startsWith(BRAND_PREFIX) && event.type === 'BrandUpserted')
      applyBrandUpserted(event, tx);
    // Anything else (curbside settings, unknown types) does not touch a cart record.
  },
};

// ---- queries --------------------------------------------------------------------------------------

/**
 * Whose carts: a partner's own (by `source.partner_id`, at some stores only when given), one store's, or
 * those holding some brands.
 */
export type CartScope =
  | { partner_id: string; store_ids?: readonly number[] }
  | { store_id: number }
  | { brand_ids: readonly number[] };

/** docs/partner-api.md filters. Times are ISO 8601 (validated by the API); bounds are exclusive. */
export interface CartFilters {
  created_after?: string;
  created_before?: string;
  updated_after?: string;
  status?: cart.CartStatus;
  abandoned?: boolean;
}

/** Position in the result order: the last record's `id` and uuid. */
export type CartCursor = [id: number, uuid: string];

export interface CartPage {
  limit: number;
  after?: CartCursor;
}

export const cartSort: SortSpec = [
  ['id', 1],
  ['_id', 1],
];

/** The filter and options of one page of a partner cart query, shaped for the indexes above. */
export function cartsQuery(
  scope: CartScope,
  filters: CartFilters,
  page: CartPage,
): { filter: Filter; options: FindOptions } {
  const filter: Filter = {};
  if ('partner_id' in scope) {
    filter._partner_id = scope.partner_id;
    if (scope.store_ids) filter.store_id = oneOf(scope.store_ids);
  } else if ('store_id' in scope) filter.store_id = scope.store_id;
  else filter._brand_ids = oneOf(scope.brand_ids);
  const created: Record<string, string> = {};
  if (filters.created_after !== undefined) created.$gt = iso(filters.created_after);
  if (filters.created_before !== undefined) created.$lt = iso(filters.created_before);
  if (Object.keys(created).length > 0) filter._created_at = created;
  if (filters.updated_after !== undefined) filter._updated_at = { $gt: iso(filters.updated_after) };
  if (filters.status !== undefined) filter.status = filters.status;
  if (filters.abandoned !== undefined) filter._abandoned = filters.abandoned;
  return {
    filter,
    options: { sort: cartSort, limit: page.limit, ...(page.after ? { after: page.after } : {}) },
  };
}

/** The partner record, rendered from the document's state. */
export const toCartRecord = (doc: CartDoc): PartnerCart =>
  cart.toPartnerCart(doc._state, { id: doc.id, store_name: doc.store_name });

/** One page of carts in `id` order, and the cursor of the next page (null on the last one). */
export async function findCarts(
  collection: Collection<CartDoc>,
  scope: CartScope,
  filters: CartFilters,
  page: CartPage,
): Promise<{ carts: PartnerCart[]; next: CartCursor | null }> {
  const { filter } = cartsQuery(scope, filters, page);
  const found = await findPage(collection, filter, page, cartSort);
  return { carts: found.docs.map(toCartRecord), next: found.next as CartCursor | null };
}

/** A partner's carts (from its own site), at some of its stores only when `storeIds` is given. */
export const cartsOfPartner = (
  collection: Collection<CartDoc>,
  partnerId: string,
  filters: CartFilters,
  page: CartPage,
  storeIds?: readonly number[],
) =>
  findCarts(
    collection,
    { partner_id: partnerId, ...(storeIds ? { store_ids: storeIds } : {}) },
    filters,
    page,
  );

export const cartsOfStore = (
  collection: Collection<CartDoc>,
  storeId: number,
  filters: CartFilters,
  page: CartPage,
) => findCarts(collection, { store_id: storeId }, filters, page);

export const cartsOfBrands = (
  collection: Collection<CartDoc>,
  brandIds: readonly number[],
  filters: CartFilters,
  page: CartPage,
) => findCarts(collection, { brand_ids: brandIds }, filters, page);

/** One cart by uuid, or null. */
export async function cartByUuid(collection: Collection<CartDoc>, uuid: string): Promise<CartDoc | null> {
  return (await collection.findByIds([uuid]))[0] ?? null;
}
