/**
 * The catalog's private lookups keyed by menu product: `catalog_store_kinds`, `catalog_store_brands`
 * and `catalog_product_listings` map each listed menu product of a store's kind or brand, or of a
 * product, to what the other read models need of it (docs/read-side.md, "The catalog's lookups").
 *
 * A lookup is one document while it holds at most `lookupParts.maxEntries` menu products. Past that,
 * its menu products move to documents of `<collection>_parts`, each holding those from its lower bound
 * up to the next part's (`parts` of the lookup's document, ascending, the first 0), and a part that
 * outgrows the limit splits at its median. The lookup's document keeps its own fields and counts. A
 * batch of listings at a store of 150,000 menu products reads and writes the parts its menu products
 * fall in: read and written whole at every batch, that store's lookups were most of a rebuild's heap.
 */
import type { Doc, DocId } from '../../read-store.ts';
import { type CatalogTx, type ListingChange, type ListingEntry, reflects, sameValue } from './support.ts';

/** The most menu products a lookup's document, or one of its parts, holds (tests lower it). */
export const lookupParts = { maxEntries: 2_048 };

/**
 * A lookup's document: `count` menu products, in `menu_products` (menu product id → what it needs),
 * or, once in parts, in the parts that `parts` names by their lower bounds. The count is kept as
 * entries come and go: counting a store's map at every listing would make its listings quadratic.
 */
export type MenuLookupDoc<V> = Doc & { menu_products?: Record<string, V>; count?: number; parts?: number[] };

/** One part of a lookup: its menu products from its lower bound up to the next part's. */
export interface LookupPartDoc<V> extends Doc {
  /** `<lookup id>@<lower bound>`. */
  _id: string;
  menu_products: Record<string, V>;
  count: number;
}

/** The collection of a lookup collection's parts. */
export const partsOf = (collection: string) => `${collection}_parts`;
export const partId = (id: DocId, lower: number) => `${id}@${lower}`;

/** The lower bound of the part holding the menu product: the last bound at or below it. */
function boundOf(parts: readonly number[], menuProductId: number): number {
  let lo = 0;
  let hi = parts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (parts[mid] <= menuProductId) lo = mid;
    else hi = mid - 1;
  }
  return parts[lo];
}

/** The maps of a lookup as of this point of the event: none without a document; its parts read together. */
export function lookupMaps<V>(tx: CatalogTx, collection: string, id: DocId): Array<Record<string, V>> {
  const doc = tx.get<MenuLookupDoc<V>>(collection, id);
  if (!doc) return [];
  if (!doc.parts) return [doc.menu_products ?? {}];
  const ids = doc.parts.map((lower) => partId(id, lower));
  return tx.getMany<LookupPartDoc<V>>(partsOf(collection), ids).map((part) => part?.menu_products ?? {});
}

/**
 * The ids of the menu products the lookups hold, each lookup's in order. Their documents, then all
 * their parts, are read together: a special naming many products stops for one read, not one each.
 */
export function lookupMenuProductIds(tx: CatalogTx, collection: string, ids: readonly DocId[]): number[] {
  const docs = tx.getMany<MenuLookupDoc<unknown>>(collection, ids);
  const partIds = ids.flatMap((id, i) => (docs[i]?.parts ?? []).map((lower) => partId(id, lower)));
  const parts = partIds.length > 0 ? tx.getMany<LookupPartDoc<unknown>>(partsOf(collection), partIds) : [];
  const out: number[] = [];
  let next = 0;
  for (const doc of docs) {
    if (!doc) continue;
    const maps = doc.parts
      ? doc.parts.map(() => parts[next++]?.menu_products ?? {})
      : [doc.menu_products ?? {}];
    for (const map of maps) for (const mp of Object.keys(map)) out.push(Number(mp));
  }
  return out;
}

/**
 * What a batch fetches for the menu products of a lookup it fetched (`prefetchNamed`): the menu
 * products a lookup in one document names, or the parts of one in parts (their menu products are
 * then fetched when the event is applied).
 */
export function namedBy(
  collection: string,
  id: DocId,
  doc: Doc | undefined,
  menuProducts: string,
): Array<[string, DocId]> {
  const lookup = doc as MenuLookupDoc<unknown> | undefined;
  if (lookup?.parts) return lookup.parts.map((lower) => [partsOf(collection), partId(id, lower)]);
  return Object.keys(lookup?.menu_products ?? {}).map((mp) => [menuProducts, Number(mp)]);
}

/**
 * How many of a lookup's entries carry each key of their value (a store, a brand), from every part:
 * for a document written before its counts were kept (an older version's live copy, which this code
 * follows while the new one is built: docs/read-side.md, "Upgrades of read models").
 */
export function countEntries<V>(
  tx: CatalogTx,
  collection: string,
  doc: MenuLookupDoc<V>,
  keyOf: (value: V) => number,
): Record<string, number> {
  const counts: Record<string, number> = {};
  const maps = doc.parts ? lookupMaps<V>(tx, collection, doc._id) : [doc.menu_products ?? {}];
  for (const map of maps) {
    for (const value of Object.values(map)) {
      const key = keyOf(value);
      counts[key] = (counts[key] ?? 0) + 1;
    }
  }
  return counts;
}

/**
 * Counts of lookups' entries by a key of their value, kept on each lookup's document: what an event's
 * `set`s and `delete`s moved, gathered, then applied once per document at `commit` (so a store's
 * listing needs no pass over its entries).
 */
export class EntryTally<V> {
  readonly #keyOf: (value: V) => number;
  readonly #deltas = new Map<DocId, Map<number, number>>();

  constructor(keyOf: (value: V) => number) {
    this.#keyOf = keyOf;
  }

  /** An entry of the lookup lost `removed` (when there was one) and took `added` (when given). */
  moved(id: DocId, removed: V | undefined, added?: V): void {
    if (removed !== undefined) this.#add(id, this.#keyOf(removed), -1);
    if (added !== undefined) this.#add(id, this.#keyOf(added), 1);
  }

  /** The lookup's counts with what moved; `crossed` when a key came or went. */
  applied(
    id: DocId,
    before: Record<string, number> | undefined,
  ): { counts: Record<string, number>; crossed: boolean } {
    const counts = { ...before };
    let crossed = false;
    for (const [key, by] of this.#deltas.get(id) ?? []) {
      const was = counts[key] ?? 0;
      const n = was + by;
      if (n > 0) counts[key] = n;
      else delete counts[key];
      if (was > 0 !== n > 0) crossed = true;
    }
    return { counts, crossed };
  }

  #add(id: DocId, key: number, by: number): void {
    let d = this.#deltas.get(id);
    if (!d) {
      d = new Map();
      this.#deltas.set(id, d);
    }
    d.set(key, (d.get(key) ?? 0) + by);
  }
}

const OWNED_MAPS = 'menuLookups.owned';

interface Open<T> {
  doc: T;
  dirty: boolean;
}

/**
 * A lookup's document as this event changes it. `frozen`: the document, or a part the event touches,
 * reflects a later event (a replay over documents ahead of the log); the event then writes nothing of
 * the lookup, as it would write nothing of a lookup in one document, and `undos` put back what it
 * changed in place.
 */
interface OpenLookup<T> extends Open<T> {
  frozen: boolean;
  undos: Array<() => void>;
}

/**
 * Working copies of the lookups of one collection for one event: entries are set and deleted, then
 * `commit` writes the changed documents and parts once (and deletes emptied ones: an empty lookup is
 * no lookup, so a replay that creates and empties one leaves nothing behind).
 *
 * A map is changed in place when the batch owns its document (fetched for it, `owns`), else copied
 * on its first change in the batch only; the batch's later events change it in place (the batch's
 * scratch remembers the maps it may change; a flush hands them to the store and forgets them)
 * (docs/read-side.md, "Documents a batch owns"). `complete` fills in what a document written before
 * a field was kept lacks, when it is read.
 */
export function menuLookups<V, D extends MenuLookupDoc<V>>(
  tx: CatalogTx,
  collection: string,
  create: (id: DocId) => D,
  complete: (doc: D) => D = (doc) => doc,
): MenuLookups<V, D> {
  return new MenuLookups(tx, collection, create, complete);
}

type Holder<V> = Open<MenuLookupDoc<V>>;

class MenuLookups<V, D extends MenuLookupDoc<V>> {
  readonly #tx: CatalogTx;
  readonly #collection: string;
  readonly #parts: string;
  readonly #create: (id: DocId) => D;
  readonly #complete: (doc: D) => D;
  /** The maps the batch may change in place (its scratch's). */
  readonly #mine: WeakSet<object>;
  readonly #heads = new Map<DocId, OpenLookup<D>>();
  readonly #partDocs = new Map<string, Open<LookupPartDoc<V>> & { lookup: OpenLookup<D> }>();

  constructor(tx: CatalogTx, collection: string, create: (id: DocId) => D, complete: (doc: D) => D) {
    this.#tx = tx;
    this.#collection = collection;
    this.#parts = partsOf(collection);
    this.#create = create;
    this.#complete = complete;
    let owned = tx.scratch.get(OWNED_MAPS) as WeakSet<object> | undefined;
    if (!owned) {
      owned = new WeakSet();
      tx.scratch.set(OWNED_MAPS, owned);
    }
    this.#mine = owned;
  }

  /**
   * Fetches together the documents and parts these listing changes' entries fall in (`keyOf` names
   * an entry's lookup, or none): one stop of the event for all of them, not one each.
   */
  prepare(changes: readonly ListingChange[], keyOf: (entry: ListingEntry) => DocId | undefined): void {
    const entries: Array<[DocId, number]> = [];
    for (const { menu_product_id, before, after } of changes) {
      for (const entry of [before, after]) {
        const id = entry && keyOf(entry);
        if (id !== undefined && id !== null) entries.push([id, menu_product_id]);
      }
    }
    const ids = [...new Set(entries.map(([id]) => id))];
    const found = this.#tx.getMany<D>(this.#collection, ids);
    const bounds = new Map<DocId, readonly number[]>();
    ids.forEach((id, i) => {
      const parts = found[i]?.parts;
      if (parts) bounds.set(id, parts);
    });
    // Most lookups are one document each: nothing more to fetch.
    if (bounds.size === 0) return;
    const wanted = new Set<string>();
    for (const [id, mp] of entries) {
      const parts = bounds.get(id);
      if (parts) wanted.add(partId(id, boundOf(parts, mp)));
    }
    this.#tx.getMany(this.#parts, [...wanted]);
  }

  /** Sets the entry; answers whether it changed and its previous value. */
  set(id: DocId, menuProductId: number, value: V): { changed: boolean; previous: V | undefined } {
    const { h, e } = this.#holderOf(id, menuProductId);
    const key = String(menuProductId);
    const current = e.doc.menu_products ?? {};
    const had = Object.hasOwn(current, key);
    if (had && sameValue(current[key], value)) return { changed: false, previous: current[key] };
    const doc = this.#changing(e);
    const map = doc.menu_products ?? {};
    const previous = map[key];
    map[key] = value;
    // The map may be shared with this batch's earlier version of the document.
    this.#undoable(h, () => {
      if (had) map[key] = previous;
      else delete map[key];
    });
    // The lookup's document changes with any of its parts: its counts (`commit`'s `finish`) follow.
    const lookup = e === (h as Holder<V>) ? doc : this.#changing(h);
    if (!had) {
      doc.count = (doc.count ?? 0) + 1;
      if (lookup !== doc) lookup.count = (lookup.count ?? 0) + 1;
      if (doc.count > lookupParts.maxEntries) this.#split(id, h, e);
    }
    return { changed: true, previous: had ? previous : undefined };
  }

  /** Deletes the entry; answers the value it held (undefined when there was none). */
  delete(id: DocId, menuProductId: number): V | undefined {
    const { h, e, lower } = this.#holderOf(id, menuProductId);
    const key = String(menuProductId);
    if (!Object.hasOwn(e.doc.menu_products ?? {}, key)) return undefined;
    const doc = this.#changing(e);
    const map = doc.menu_products ?? {};
    const previous = map[key];
    delete map[key];
    this.#undoable(h, () => {
      map[key] = previous;
    });
    doc.count = (doc.count ?? 1) - 1;
    if (e !== (h as Holder<V>)) {
      const lookup = this.#changing(h);
      lookup.count = (lookup.count ?? 1) - 1;
      // An emptied part's range goes to the part below it (the first part's start is the lookup's).
      if (doc.count === 0 && lower !== 0) {
        lookup.parts = (lookup.parts ?? [0]).filter((bound) => bound !== lower);
      }
    }
    return previous;
  }

  /** Writes the changed documents (after `finish`, e.g. to update a count); answers the changed ones. */
  commit(finish?: (doc: D) => void): D[] {
    for (const { doc, dirty, lookup } of this.#partDocs.values()) {
      if (!dirty || lookup.frozen) continue;
      if (doc.count > 0) this.#tx.write(this.#parts, doc);
      else this.#tx.remove(this.#parts, doc._id);
    }
    const changed: D[] = [];
    for (const h of this.#heads.values()) {
      if (!h.dirty) continue;
      finish?.(h.doc);
      if (h.frozen) for (const undo of h.undos.splice(0).reverse()) undo();
      else if ((h.doc.count ?? 0) > 0) this.#tx.write(this.#collection, h.doc);
      else this.#tx.remove(this.#collection, h.doc._id);
      changed.push(h.doc);
    }
    return changed;
  }

  /** Whether this event may write over the stored document (a replay's write over one ahead of it is dropped). */
  #writable(stored: Doc | undefined): boolean {
    return !stored || !reflects(stored, this.#tx.position);
  }

  #open<T extends MenuLookupDoc<V>>(stored: T | undefined, writes: boolean, fresh: () => T): Open<T> {
    const doc = stored ?? fresh();
    // A new document's map, or one the batch owns, is changed in place; not one this event cannot
    // write (a replay over a document ahead of it: the write is dropped, the map must stay as stored).
    if (doc.menu_products && (!stored || (this.#tx.owns(stored) && writes)))
      this.#mine.add(doc.menu_products);
    return { doc, dirty: false };
  }

  #head(id: DocId): OpenLookup<D> {
    let e = this.#heads.get(id);
    if (!e) {
      const stored = this.#tx.get<D>(this.#collection, id);
      const writes = this.#writable(stored);
      const opened = this.#open(stored, writes, () => this.#create(id));
      // Documents written before counts were kept (an older version's live copy, which this code
      // follows while the new one is built: docs/read-side.md, "Upgrades of read models"): counted once.
      const count = opened.doc.count ?? Object.keys(opened.doc.menu_products ?? {}).length;
      const doc = this.#complete(opened.doc.count === count ? opened.doc : { ...opened.doc, count });
      e = { doc, dirty: false, frozen: !writes, undos: [] };
      this.#heads.set(id, e);
    }
    return e;
  }

  #part(id: DocId, lower: number): Open<LookupPartDoc<V>> {
    const key = partId(id, lower);
    let e = this.#partDocs.get(key);
    if (!e) {
      const lookup = this.#head(id);
      const stored = this.#tx.get<LookupPartDoc<V>>(this.#parts, key);
      const writes = this.#writable(stored);
      if (!writes) lookup.frozen = true;
      // In place only while the lookup's document may be written too.
      const fresh = () => ({ _id: key, menu_products: {}, count: 0 });
      e = { ...this.#open(stored, writes && !lookup.frozen, fresh), lookup };
      this.#partDocs.set(key, e);
    }
    return e;
  }

  /** The document or part that holds the menu product's entry, and its lower bound (0 for the document). */
  #holderOf(id: DocId, menuProductId: number): { h: OpenLookup<D>; e: Holder<V>; lower: number } {
    const h = this.#head(id);
    if (!h.doc.parts) return { h, e: h as Holder<V>, lower: 0 };
    const lower = boundOf(h.doc.parts, menuProductId);
    return { h, e: this.#part(id, lower) as Holder<V>, lower };
  }

  /** Undone if this attempt at the event is abandoned (it is applied again), or writes nothing (`frozen`). */
  #undoable(h: OpenLookup<D>, undo: () => void): void {
    h.undos.push(undo);
    this.#tx.onAbort(undo);
  }

  /**
   * A new document object on the first change of the event (the stored one stays as it was); its map
   * is copied unless the batch may change it in place.
   */
  #changing<T extends MenuLookupDoc<V>>(e: Open<T>): T {
    if (!e.dirty) {
      const stored = e.doc.menu_products;
      const map = stored && !this.#mine.has(stored) ? { ...stored } : stored;
      if (map) this.#mine.add(map);
      e.doc = map ? { ...e.doc, menu_products: map } : { ...e.doc };
    }
    e.dirty = true;
    return e.doc;
  }

  /**
   * Moves the upper half of an oversized document's or part's menu products to a new part at their
   * median. Not in a lookup the event writes nothing of (`frozen`), nor onto a part that holds menu
   * products already.
   */
  #split(id: DocId, h: OpenLookup<D>, e: Holder<V>): void {
    const self = e === (h as Holder<V>);
    const map = e.doc.menu_products ?? {};
    const ids = Object.keys(map)
      .map(Number)
      .sort((a, b) => a - b);
    const median = ids[ids.length >> 1];
    // The new parts: the one at the median, and the first one when the document goes into parts,
    // fetched together (one stop of the event at most).
    const bounds = self ? [median, 0] : [median];
    this.#tx.getMany(
      this.#parts,
      bounds.map((lower) => partId(id, lower)),
    );
    const fresh = bounds.map((lower) => this.#part(id, lower));
    // A new part that holds menu products already is one a replay left beyond what the lookup's
    // document names: left alone, and the part stays over the limit until a later listing splits it.
    if (h.frozen || fresh.some((p) => p.doc.count > 0)) return;
    const below: Record<string, V> = {};
    const above: Record<string, V> = {};
    for (const mp of ids) (mp < median ? below : above)[mp] = map[mp];
    this.#mine.add(below);
    this.#mine.add(above);
    Object.assign(this.#changing(fresh[0]), { menu_products: above, count: ids.length - (ids.length >> 1) });
    Object.assign(this.#changing<MenuLookupDoc<V>>(self ? fresh[1] : e), {
      menu_products: below,
      count: ids.length >> 1,
    });
    const doc = this.#changing(h);
    if (self) {
      delete doc.menu_products;
      doc.parts = [0, median];
    } else {
      doc.parts = [...(doc.parts ?? [0]), median].sort((a, b) => a - b);
    }
  }
}
