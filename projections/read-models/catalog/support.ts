/**
 * What the read models of the `catalog` projection share: the events they read (typed through the
 * registry), the facts the projection derives from an event before any model writes, and a view of the
 * projector's unit of work in which each model sees what the models before it wrote for the same event.
 *
 * Replays (a restart, a reset checkpoint) meet documents that are ahead of the log. The projection
 * skips an event whose own document (its aggregate's: the store, product, menu product, review,
 * special, brand lookup) already reflects it; whatever else an event writes goes through `save`,
 * `write`, `patch` and `remove` here, which leave alone a document that reflects the event or a later
 * one — so an event re-applied because its own document is gone (a delisted menu product) cannot undo
 * later changes. The `updateMany` renames run only for events applied the first time (brands and
 * products are never deleted). The tests replay random histories from several checkpoints and compare.
 */
import { isDeepStrictEqual } from 'node:util';
import { domainEventOf } from '../../../application/read-state.ts';
import { type BrandEvent, events as brandEvents } from '../../../domain/brand.ts';
import { eventRegistry } from '../../../domain/index.ts';
import { type MenuProductEvent, events as menuProductEvents } from '../../../domain/menu-product.ts';
import { type ProductEvent, events as productEvents } from '../../../domain/product.ts';
import { type ReviewEvent, events as reviewEvents } from '../../../domain/review.ts';
import type { kinds } from '../../../domain/schemas.ts';
import { type SpecialEvent, events as specialEvents } from '../../../domain/special.ts';
import { type StoreEvent, events as storeEvents } from '../../../domain/store.ts';
import type { RecordedEvent } from '../../../eventstore/port.ts';
import type { ProjectionTx } from '../../projection.ts';
import type { Doc, DocId, Filter, FindOptions, IndexSpec, Update } from '../../read-store.ts';

export type CatalogEvent =
  | StoreEvent
  | BrandEvent
  | ProductEvent
  | MenuProductEvent
  | ReviewEvent
  | SpecialEvent;
export type Kind = (typeof kinds)[number];
export type CatalogEventOf<T extends CatalogEvent['type']> = Extract<CatalogEvent, { type: T }>;

/** The streams the catalog reads (docs/write-side.md). */
export const CATALOG_STREAM_PREFIXES = [
  'store-',
  'brand-',
  'product-',
  'menuproduct-',
  'review-',
  'special-',
];

const catalogTypes = new Set<string>(
  [storeEvents, brandEvents, productEvents, menuProductEvents, reviewEvents, specialEvents].flatMap((defs) =>
    Object.keys(defs),
  ),
);

// `prefetch` and every (re)try of `apply` see the same recorded event object: parse it once.
const parsed = new WeakMap<RecordedEvent, CatalogEvent | null>();

/** The typed event (upcast through the registry), or null for a type the catalog does not read. */
export function parseCatalogEvent(event: RecordedEvent): CatalogEvent | null {
  const known = parsed.get(event);
  if (known !== undefined) return known;
  const out = catalogTypes.has(event.type)
    ? // The registry answers this type's data (checked when appended, upcast if older): that union member.
      domainEventOf<CatalogEvent>(eventRegistry, event)
    : null;
  parsed.set(event, out);
  return out;
}

/** ISO 8601 UTC with milliseconds, so times compare as strings (and `$max` works on them). */
export const iso = (time: string) => new Date(time).toISOString();

/** The later of two ISO times (either may be absent). */
export function latest(a: string | undefined, b: string): string {
  return a !== undefined && a > b ? a : b;
}

/** When the change an event records happened: its own time field (never the clock). */
export function eventTime(e: CatalogEvent): string {
  switch (e.type) {
    case 'StoreUpserted':
    case 'BrandUpserted':
    case 'ProductUpserted':
    case 'SpecialUpserted':
      return iso(e.data.upserted_at);
    case 'CurbsidePickupSettingChanged':
      return iso(e.data.changed_at);
    case 'MenuProductListed':
      return iso(e.data.listed_at);
    case 'MenuProductDelisted':
      return iso(e.data.delisted_at);
    case 'ReviewPosted':
      return iso(e.data.posted_at);
    case 'ReviewRevised':
      return iso(e.data.revised_at);
  }
}

export const sortedUnique = (ids: Iterable<number>): number[] => [...new Set(ids)].sort((a, b) => a - b);

/** Mean rounded to 2 decimals, or null when there is nothing to average. */
export const mean = (sum: number, count: number): number | null =>
  count > 0 ? Math.round((sum / count) * 100) / 100 : null;

// ---- facts: what an event changes, read before any model writes ---------------------------------

/** Where a listed menu product sits in the catalog: what the lookups and the specials key on. */
export interface ListingEntry {
  menu_product_id: number;
  store_id: number;
  product_id: number;
  brand_id: number;
  /** The product's kind; null only if the product were unknown (the write side prevents it). */
  kind: Kind | null;
}

/** A menu product's entry before and after the event (null: not listed). */
export interface ListingChange {
  menu_product_id: number;
  store_id: number;
  before: ListingEntry | null;
  after: ListingEntry | null;
}

/** A verified review's share of a product's and a store's rating. */
export interface RatingShare {
  product_id: number;
  store_id: number;
  rating: number;
}

export interface Facts {
  /** The event's time (ISO UTC): what `updated_at` advances to when the event changes a record. */
  time: string;
  /** Menu products whose listing entry changes (listing, delisting, relisting, a product's brand or kind). */
  listings: ListingChange[];
  /** A review's share of ratings before and after (null: not verified, or no review). */
  rating: { before: RatingShare | null; after: RatingShare | null } | null;
  /**
   * ProductUpserted: what the models read of the product before the event. (Shapes, not the models'
   * document types: the models import this module, so it imports none of them.)
   */
  productBefore?: { brand_id: number };
  /** SpecialUpserted: what the models read of the special before the event. */
  specialBefore?: {
    store_id: number;
    product_ids: number[];
    brand_ids: number[];
    kinds: Kind[];
    enabled: boolean;
    updated_at: string;
  };
  /** BrandUpserted: whether the brand was known before (a new brand has nothing to rename). */
  brandExisted: boolean;
}

// ---- the unit of work as the models see it ---------------------------------------------------------

export interface CatalogTx {
  readonly position: number;
  /** The document as of this point of the event: this event's earlier writes first, then the store's. */
  get<T extends Doc>(collection: string, id: DocId): T | undefined;
  /** `get` of several documents, fetched together (`ProjectionTx.getMany`). */
  getMany<T extends Doc>(collection: string, ids: readonly DocId[]): Array<T | undefined>;
  /**
   * Documents matching a query as of the start of the event, with this event's writes laid over
   * them (a document this event created is not added: the models query only what existed before).
   */
  find<T extends Doc>(collection: string, filter: Filter, options?: FindOptions): T[];
  /** Writes the document unless it is unchanged or already reflects this event. */
  save(collection: string, doc: Doc): void;
  /** Writes the document as given (the caller knows it changed) unless it already reflects this event. */
  write(collection: string, doc: Doc): void;
  /**
   * Writes `doc` with `changes` when one of them differs from it (compared by value). With `time`,
   * `updated_at` advances to it when a partner-visible field (no `_`) changes: a copied or derived
   * value counts as a change of the record, so `updated_after` syncs pick it up.
   */
  patch<T extends Doc>(collection: string, doc: T, changes: Partial<T>, time?: string): void;
  /** Deletes the document unless it is absent or reflects a later event (e.g. relisted since). */
  remove(collection: string, id: DocId): void;
  updateMany(collection: string, filter: Filter, update: Update): void;
  /** The batch's scratch space (`ProjectionTx.scratch`). */
  readonly scratch: Map<string, unknown>;
  /** `ProjectionTx.onAbort`. */
  onAbort(undo: () => void): void;
  /** `ProjectionTx.owns`. */
  owns(doc: Doc): boolean;
}

/**
 * Whether the document already reflects the event at `position` (or a later one): replaying an event
 * over documents that are ahead. A read model then takes the event's effects as applied already: they
 * were written in the same unit of work as the document.
 */
/** Whether two values are equal as `isDeepStrictEqual` says; primitives by `Object.is`, without its set-up. */
export const sameValue = (a: unknown, b: unknown): boolean =>
  Object.is(a, b) || (typeof b === 'object' && b !== null && isDeepStrictEqual(a, b));

export const reflects = (doc: Doc | undefined, position: number): boolean =>
  doc !== undefined && typeof doc._position === 'number' && doc._position >= position;

/**
 * The document as the projector's stamp will leave it: its `_id` and every other field in their
 * order, `_position` last. Most are so already (a stored document, or one patched in fields it had),
 * and are handed over as they are: a batch of reviews patches tens of thousands of menu products, and
 * a copy of each is garbage at once.
 */
function readyToStamp(doc: Doc): Doc {
  let last: string | undefined;
  let stamped = false;
  for (const field in doc) {
    last = field;
    if (field === '_position') stamped = true;
  }
  if (!stamped || last === '_position') return doc;
  const { _position: _, ...rest } = doc;
  return rest as Doc;
}

/** Whether two documents are the same but for the projector's stamp, without copying either. */
function sameButStamp(a: Doc, b: Doc): boolean {
  let fields = 0;
  for (const field in a) {
    if (field === '_position') continue;
    if (!Object.hasOwn(b, field) || !isDeepStrictEqual(a[field], b[field])) return false;
    fields += 1;
  }
  for (const field in b) if (field !== '_position') fields -= 1;
  return fields === 0;
}

export function catalogTx(tx: ProjectionTx): CatalogTx {
  const position = tx.event.position;
  /** This event's writes, as the store will hold them once the event is applied (null: deleted). */
  const written = new Map<string, Map<DocId, Doc | null>>();
  const writesOf = (collection: string) => {
    let m = written.get(collection);
    if (!m) {
      m = new Map();
      written.set(collection, m);
    }
    return m;
  };
  const get = <T extends Doc>(collection: string, id: DocId): T | undefined => {
    const mine = written.get(collection);
    if (mine?.has(id)) return (mine.get(id) ?? undefined) as T | undefined;
    return tx.get<T>(collection, id);
  };
  const write = (collection: string, doc: Doc) => {
    // Read through the projector first: its guard against replays needs the stored document.
    const stored = tx.get(collection, doc._id);
    if (stored && reflects(stored, position)) return; // a replay: the document is ahead of this event
    // As the projector stamps it: the same object serves this event's later reads.
    const stamped = tx.put(collection, readyToStamp(doc));
    if (stamped) writesOf(collection).set(doc._id, stamped);
  };
  return {
    position,
    get,
    getMany<T extends Doc>(collection: string, ids: readonly DocId[]) {
      const stored = tx.getMany<T>(collection, ids);
      const mine = written.get(collection);
      if (!mine) return stored;
      return ids.map((id, i) => (mine.has(id) ? ((mine.get(id) ?? undefined) as T | undefined) : stored[i]));
    },
    find<T extends Doc>(collection: string, filter: Filter, options?: FindOptions) {
      const docs = tx.find<T>(collection, filter, options);
      const mine = written.get(collection);
      if (!mine) return docs;
      const out: T[] = [];
      for (const doc of docs) {
        if (!mine.has(doc._id)) out.push(doc);
        else {
          const now = mine.get(doc._id);
          if (now) out.push(now as T);
        }
      }
      return out;
    },
    save(collection, doc) {
      const current = get(collection, doc._id);
      if (current && sameButStamp(current, doc)) return;
      write(collection, doc);
    },
    write,
    patch(collection, doc, changes, time) {
      let changed = false;
      let visible = false;
      for (const [field, value] of Object.entries(changes)) {
        if (sameValue(doc[field], value)) continue;
        changed = true;
        if (!field.startsWith('_')) visible = true;
      }
      if (!changed) return;
      const next: Doc = { ...doc, ...changes };
      if (visible && time !== undefined) next.updated_at = latest(doc.updated_at as string | undefined, time);
      write(collection, next);
    },
    remove(collection, id) {
      const stored = tx.get(collection, id);
      if (stored && reflects(stored, position)) return;
      if (!get(collection, id)) return;
      tx.delete(collection, id);
      writesOf(collection).set(id, null);
    },
    updateMany(collection, filter, update) {
      tx.updateMany(collection, filter, update);
    },
    get scratch() {
      return tx.scratch;
    },
    onAbort: (undo) => tx.onAbort(undo),
    owns: (doc) => tx.owns(doc),
  };
}

/** One read model of the catalog: its collections, the documents it will read, and how it applies an event. */
export interface CatalogReadModel {
  collections: Record<string, readonly IndexSpec[]>;
  /** Documents `apply` reads for this event (hints: anything else is fetched on demand). */
  prefetch?(e: CatalogEvent): Array<[collection: string, id: DocId]>;
  /** Documents `apply` reads that the prefetched ones name (`Projection.prefetchNamed`). */
  prefetchNamed?(
    e: CatalogEvent,
    fetched: (collection: string, id: DocId) => Doc | undefined,
  ): Array<[collection: string, id: DocId]>;
  apply(e: CatalogEvent, tx: CatalogTx, facts: Facts): void;
}

export const index = (...keys: Array<[string, 1 | -1]>): IndexSpec => ({ keys });

/** An index the read model queries while applying events: a build keeps it from its first write. */
export const readWhileApplying = (spec: IndexSpec): IndexSpec => ({ ...spec, readWhileApplying: true });
