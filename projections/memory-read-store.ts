/**
 * In-memory ReadStore: MongoDB semantics from mingo (matching, update operators), plus real secondary
 * indexes (B+ trees) on the declared fields, so an equality or range query on an indexed field, or a
 * page in index order, examines only the entries it needs instead of scanning the collection.
 *
 * Documents are copy-on-write: a write replaces the stored object, never mutates it, so a document a
 * reader holds never changes under it. Readers must treat returned documents as read-only.
 */
import sortedBtree from 'sorted-btree';
import {
  afterDoc,
  applyTo,
  compareValues,
  compiledQuery,
  type FieldCondition,
  fieldConditions,
  indexValues,
  MAX_MERGED_WALKS,
  onlyId,
  sortComparator,
  upsertSeed,
  walkFields as walkSpec,
} from './documents.ts';

/** Kept importable from here: tests compare with the adapter's order. */
export { compareValues };

import {
  type Checkpoint,
  type Collection,
  type Doc,
  type DocId,
  type Filter,
  type FindOptions,
  type IndexSpec,
  type ReadStore,
  totalSort,
  type WriteOp,
} from './read-store.ts';

// sorted-btree is CommonJS: its class is `exports.default`.
const BTree = sortedBtree.default;
type Tree = InstanceType<typeof BTree<unknown[], DocId>>;

// ---- values, keys and their order (MongoDB's order for the types read models use) -------------

/** Sentinels that sort before and after every value, for open-ended ranges. */
const MIN = Symbol('min');
const MAX = Symbol('max');

function compareKeyPart(a: unknown, b: unknown): number {
  if (a === b) return 0;
  if (a === MIN || b === MAX) return -1;
  if (a === MAX || b === MIN) return 1;
  return compareValues(a, b);
}

function keyComparator(directions: readonly number[]) {
  return (a: unknown[], b: unknown[]): number => {
    for (let i = 0; i < a.length; i++) {
      const c = compareKeyPart(a[i], b[i]);
      if (c === 0) continue;
      // MIN and MAX are the first and last place in index order, whatever the key's direction.
      const sentinel = a[i] === MIN || a[i] === MAX || b[i] === MIN || b[i] === MAX;
      return directions[i] === -1 && !sentinel ? -c : c;
    }
    return 0;
  };
}

// ---- one index ------------------------------------------------------------------------------------

interface Index {
  spec: IndexSpec;
  fields: string[];
  tree: Tree;
  compare: (a: unknown[], b: unknown[]) => number;
  /** Some document has several entries (an array field): range bounds can't be intersected. */
  multikey: boolean;
  /** Some field is a dotted path (into embedded documents). */
  dotted: boolean;
}

function createIndex(spec: IndexSpec): Index {
  const fields = spec.keys.map(([f]) => f);
  // Entries are [...values, _id]; _id ascending breaks ties, so each entry is unique.
  const compare = keyComparator([...spec.keys.map(([, d]) => d), 1]);
  return {
    spec,
    fields,
    tree: new BTree<unknown[], DocId>(undefined, compare),
    compare,
    multikey: false,
    dotted: fields.some((f) => f.includes('.')),
  };
}

/** The index entries of a document: one per element when a field holds an array (multikey). */
function entriesOf(index: Index, doc: Doc): unknown[][] {
  // Most indexes are on top-level scalars: one entry, built without the general path walk (index
  // upkeep is most of a projection's write cost).
  if (!index.dotted) {
    const entry: unknown[] = [];
    for (const field of index.fields) {
      const value = (doc as Record<string, unknown>)[field];
      if (Array.isArray(value)) return entriesOfPaths(index, doc);
      entry.push(value ?? null);
    }
    entry.push(doc._id);
    return [entry];
  }
  return entriesOfPaths(index, doc);
}

function entriesOfPaths(index: Index, doc: Doc): unknown[][] {
  let keys: unknown[][] = [[]];
  for (const field of index.fields) {
    const values = [...new Set(indexValues(doc, field).map((x) => x ?? null))];
    keys = keys.flatMap((k) => values.map((x) => [...k, x]));
  }
  return keys.map((k) => [...k, doc._id]);
}

// ---- query planning -------------------------------------------------------------------------------

interface ScanRange {
  low: unknown[];
  high: unknown[];
}

/**
 * Key ranges of `index` that hold every document the conditions can match: equality values on a
 * prefix of the index fields, then at most one range. Returns undefined when the index can't help.
 */
function rangesFor(
  index: Index,
  conditions: Map<string, FieldCondition>,
): { ranges: ScanRange[]; used: number } | undefined {
  let prefixes: unknown[][] = [[]];
  let used = 0;
  let low: unknown[] | undefined;
  let high: unknown[] | undefined;
  for (let i = 0; i < index.fields.length; i++) {
    const c = conditions.get(index.fields[i]);
    if (c?.eq) {
      prefixes = prefixes.flatMap((p) => (c.eq ?? []).map((v) => [...p, v ?? null]));
      used += 1;
      continue;
    }
    if (c?.low || c?.high) {
      const desc = index.spec.keys[i][1] === -1;
      // On a multikey index each bound may be met by a different element: only one bound is safe.
      const upper = c.low && index.multikey ? undefined : c.high;
      // Exclusive bounds are filtered by the full match afterwards; the range only has to contain them.
      // MIN and MAX are the ends of the index order, so a descending key starts at its upper bound.
      const first = desc ? upper : c.low;
      const last = desc ? c.low : upper;
      low = [first ? first.value : MIN];
      high = [last ? last.value : MAX];
      used += 1;
    }
    break;
  }
  if (used === 0) return undefined;
  const rest = (n: number, edge: symbol) => Array.from({ length: n }, () => edge);
  const ranges = prefixes.map((p) => {
    const tail = index.fields.length - p.length - (low ? 1 : 0);
    return {
      low: [...p, ...(low ?? []), ...rest(tail, MIN), MIN],
      high: [...p, ...(high ?? []), ...rest(tail, MAX), MAX],
    };
  });
  return { ranges, used };
}

// ---- a collection's storage -----------------------------------------------------------------------

interface Storage {
  docs: Map<DocId, Doc>;
  indexes: Index[];
  /** Documents examined by the last `find`/`count`/`findOne` (for tests of the query plans). */
  lastExamined: number;
}

function createStorage(indexes: readonly IndexSpec[]): Storage {
  return { docs: new Map(), indexes: indexes.map(createIndex), lastExamined: 0 };
}

function indexDoc(storage: Storage, doc: Doc): void {
  for (const index of storage.indexes) {
    const keys = entriesOf(index, doc);
    if (keys.length > 1) index.multikey = true;
    for (const key of keys) {
      if (index.spec.unique) {
        const prefix = key.slice(0, -1);
        const holders = index.tree.getRange([...prefix, MIN], [...prefix, MAX], true, 2);
        if (holders.some(([, id]) => id !== doc._id)) {
          throw new Error(
            `duplicate key ${JSON.stringify(prefix)} in unique index ${index.fields.join(',')}`,
          );
        }
      }
      index.tree.set(key, doc._id);
    }
  }
}

function unindexDoc(storage: Storage, doc: Doc): void {
  for (const index of storage.indexes) for (const key of entriesOf(index, doc)) index.tree.delete(key);
}

const sameKeys = (a: unknown[][], b: unknown[][]) =>
  a.length === b.length && a.every((k, i) => k.length === b[i].length && k.every((v, j) => v === b[i][j]));

function store(storage: Storage, doc: Doc): void {
  const old = storage.docs.get(doc._id);
  // Rewriting a document rarely changes what it is indexed by: only the indexes whose entries changed
  // are touched (most writes replace a document whose keys are the same).
  const changed = old
    ? storage.indexes.filter((index) => !sameKeys(entriesOf(index, old), entriesOf(index, doc)))
    : storage.indexes;
  if (changed.length > 0) {
    const partial = { ...storage, indexes: changed };
    if (old) unindexDoc(partial, old);
    try {
      indexDoc(partial, doc);
    } catch (err) {
      unindexDoc(partial, doc);
      if (old) indexDoc(partial, old);
      throw err;
    }
  }
  storage.docs.set(doc._id, doc);
}

function remove(storage: Storage, id: DocId): void {
  const old = storage.docs.get(id);
  if (!old) return;
  unindexDoc(storage, old);
  storage.docs.delete(id);
}

const walkFields = (index: Index): string[] => walkSpec(index.spec);

/**
 * Finds matching documents. Plans, best first: walk an index in the requested order (a page costs
 * what it returns); collect candidates from index ranges, then sort; scan everything.
 */
function query(storage: Storage, filter: Filter, options: FindOptions = {}): Doc[] {
  const sort = totalSort(options.sort);
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const matcher = compiledQuery(filter);
  const conditions = fieldConditions(filter);
  const compare = sortComparator(sort);
  const isAfter = (doc: Doc) => !options.after || compare(doc, afterDoc(sort, options.after)) > 0;
  let examined = 0;
  if (limit <= 0) {
    storage.lastExamined = 0;
    return [];
  }

  // Plan 0 (below): equality on _id, the key of the documents; no index beats it.
  const byId = conditions.get('_id')?.eq;

  // Plan 1: an index whose fields are [equality fields…, sort fields…]: walk it in order and stop at `limit`.
  // The index with the most fields first: of those that qualify, it pins down the most equalities.
  // An equality field may hold several values (`$in`): one walk per combination of values, merged in
  // sort order (MongoDB's SORT_MERGE), up to MAX_MERGED_WALKS walks.
  const byFields = [...storage.indexes].sort((a, b) => walkFields(b).length - walkFields(a).length);
  for (const index of byId ? [] : byFields) {
    const fields = walkFields(index);
    const eqFields = fields.slice(0, fields.length - (sort.length - 1));
    const sortFields = fields.slice(eqFields.length);
    const sortWithoutId = sort.slice(0, -1);
    if (sortFields.length !== sortWithoutId.length) continue;
    const choices = eqFields.map((f) => [...new Set((conditions.get(f)?.eq ?? []).map((v) => v ?? null))]);
    if (choices.some((values) => values.length === 0)) continue;
    const prefixes = choices.reduce<unknown[][]>(
      (acc, values) => acc.flatMap((p) => values.map((v) => [...p, v])),
      [[]],
    );
    if (prefixes.length > MAX_MERGED_WALKS) continue;
    // The index order must equal the sort order (or its exact reverse, which we don't walk: skip).
    const sameOrder = sortWithoutId.every(
      ([f, d], i) => sortFields[i] === f && index.spec.keys[eqFields.length + i][1] === d,
    );
    if (!sameOrder || sort[sort.length - 1][1] !== 1) continue;
    const walks = prefixes.map((prefix) => {
      const start = options.after
        ? [...prefix, ...options.after]
        : [...prefix, ...sortWithoutId.map(() => MIN), MIN];
      const end = [...prefix, ...sortWithoutId.map(() => MAX), MAX];
      // Bounds as long as the entries (an index ending in `_id` has one part more), so every comparison is total.
      while (start.length < index.fields.length + 1) start.push(MIN);
      while (end.length < index.fields.length + 1) end.push(MAX);
      return { entries: index.tree.entries(start), end, head: undefined as [unknown[], DocId] | undefined };
    });
    const advance = (w: (typeof walks)[number]) => {
      const next = w.entries.next();
      w.head = next.done || index.compare(next.value[0], w.end) > 0 ? undefined : next.value;
    };
    for (const w of walks) advance(w);
    // Entries of different walks differ only in their equality prefix: the rest is the sort order.
    const compareRest = keyComparator([...index.spec.keys.slice(eqFields.length).map(([, d]) => d), 1]);
    const rest = (key: unknown[]) => key.slice(eqFields.length);
    const out: Doc[] = [];
    const seen = new Set<DocId>();
    for (;;) {
      let first: (typeof walks)[number] | undefined;
      for (const w of walks) {
        if (w.head && (!first?.head || compareRest(rest(w.head[0]), rest(first.head[0])) < 0)) first = w;
      }
      if (!first?.head) break;
      const id = first.head[1];
      advance(first);
      if (seen.has(id)) continue; // a multikey index holds a document once per element
      seen.add(id);
      examined += 1;
      const doc = storage.docs.get(id);
      if (!doc || !isAfter(doc) || !matcher.test(doc)) continue;
      out.push(doc);
      if (out.length >= limit) break;
    }
    storage.lastExamined = examined;
    return out;
  }

  // Plan 2: candidates from the index that pins down the most fields.
  let best: { index: Index; ranges: ScanRange[]; used: number } | undefined;
  for (const index of storage.indexes) {
    const r = rangesFor(index, conditions);
    if (r && (!best || r.used > best.used)) best = { index, ...r };
  }
  let candidates: Iterable<Doc>;
  if (byId) {
    candidates = [...new Set(byId)]
      .map((id) => storage.docs.get(id as DocId))
      .filter((d): d is Doc => d !== undefined);
  } else if (best) {
    const ids = new Set<DocId>();
    for (const range of best.ranges) {
      best.index.tree.forRange(range.low, range.high, true, (_k, id) => {
        ids.add(id);
      });
    }
    candidates = [...ids].map((id) => storage.docs.get(id)).filter((d): d is Doc => d !== undefined);
  } else {
    candidates = storage.docs.values(); // Plan 3: no index helps
  }
  const out: Doc[] = [];
  for (const doc of candidates) {
    examined += 1;
    if (isAfter(doc) && matcher.test(doc)) out.push(doc);
  }
  storage.lastExamined = examined;
  out.sort(compare);
  return Number.isFinite(limit) ? out.slice(0, limit) : out;
}

/** An upsert that matched nothing inserts; like MongoDB, it collides with a document of the same _id. */
function assertNewId(storage: Storage, id: DocId): void {
  if (storage.docs.has(id)) throw new Error(`duplicate key ${JSON.stringify(id)} in the _id index`);
}

function write(storage: Storage, op: WriteOp): void {
  if ('replaceOne' in op) {
    const { filter, replacement, upsert } = op.replaceOne;
    const id = onlyId(filter);
    const existing = id !== undefined ? storage.docs.get(id) : query(storage, filter, { limit: 1 })[0];
    if (!existing && !upsert) return;
    // The store takes ownership of a replacement (no deep copy: the projector writes fresh objects);
    // the shallow copy keeps a caller from swapping fields of a stored document afterwards.
    const doc = { ...replacement } as Doc;
    if (existing && doc._id !== existing._id) throw new Error('a replacement cannot change _id');
    if (!existing) assertNewId(storage, doc._id);
    store(storage, doc);
  } else if ('updateOne' in op) {
    const { filter, update, upsert } = op.updateOne;
    const existing = query(storage, filter, { limit: 1 })[0];
    if (existing) store(storage, applyTo(existing, update));
    else if (upsert) {
      const seed = upsertSeed(filter);
      if (seed._id === undefined) throw new Error('an upsert needs _id in its filter');
      assertNewId(storage, seed._id);
      store(storage, applyTo(seed, update));
    }
  } else if ('updateMany' in op) {
    for (const doc of query(storage, op.updateMany.filter))
      store(storage, applyTo(doc, op.updateMany.update));
  } else if ('deleteOne' in op) {
    const id = onlyId(op.deleteOne.filter);
    const existing =
      id !== undefined ? storage.docs.get(id) : query(storage, op.deleteOne.filter, { limit: 1 })[0];
    if (existing) remove(storage, existing._id);
  } else {
    for (const doc of query(storage, op.deleteMany.filter)) remove(storage, doc._id);
  }
}

// ---- the store ------------------------------------------------------------------------------------

export interface MemoryCollection<T extends Doc = Doc> extends Collection<T> {
  /** Documents examined by the last query of this collection (tests assert plans don't scan). */
  lastExamined(): number;
  size(): number;
}

export function createMemoryReadStore(): Omit<ReadStore, 'collection'> & {
  collection<T extends Doc = Doc>(name: string, indexes?: readonly IndexSpec[]): Promise<MemoryCollection<T>>;
} {
  const live = new Map<string, Storage>();
  const shadows = new WeakMap<Collection, { name: string; storage: Storage }>();
  /** Storage behind every handle this store gave out, so a commit can write without awaiting. */
  const storages = new WeakMap<Collection, () => Storage>();
  const checkpoints = new Map<string, Checkpoint>();
  let shadowSeq = 0;

  function handle<T extends Doc>(name: string, storageOf: () => Storage): MemoryCollection<T> {
    const h: MemoryCollection<T> = {
      name,
      async findOne(filter) {
        return (query(storageOf(), filter, { limit: 1 })[0] as T | undefined) ?? null;
      },
      async findByIds(ids) {
        const s = storageOf();
        const unique = [...new Set(ids)];
        s.lastExamined = unique.length;
        return unique.map((id) => s.docs.get(id)).filter((d): d is Doc => d !== undefined) as T[];
      },
      async find(filter, options) {
        return query(storageOf(), filter, options) as T[];
      },
      async count(filter = {}) {
        const s = storageOf();
        if (Object.keys(filter).length === 0) return s.docs.size;
        return query(s, filter).length;
      },
      async bulkWrite(ops) {
        const s = storageOf();
        for (const op of ops) write(s, op as WriteOp);
      },
      lastExamined: () => storageOf().lastExamined,
      size: () => storageOf().docs.size,
    };
    storages.set(h as Collection, storageOf);
    return h;
  }

  function storageOfHandle(c: Collection): Storage {
    const of = storages.get(c);
    if (!of) throw new Error(`${c.name} is not a collection of this store`);
    return of();
  }

  return {
    kind: 'memory',
    async collection<T extends Doc>(name: string, indexes: readonly IndexSpec[] = []) {
      if (!live.has(name)) live.set(name, createStorage(indexes));
      else ensureIndexes(live.get(name)!, indexes);
      return handle<T>(name, () => live.get(name)!);
    },
    async createShadow<T extends Doc>(name: string, indexes: readonly IndexSpec[] = []) {
      const storage = createStorage(indexes);
      shadowSeq += 1;
      const shadow = handle<T>(`${name}#shadow${shadowSeq}`, () => storage);
      shadows.set(shadow as Collection, { name, storage });
      return shadow;
    },
    async promote(list, named = []) {
      // Synchronous from here: readers see every old copy or every new one, never a mix.
      const found = list.map((shadow) => {
        const s = shadows.get(shadow);
        if (!s) throw new Error(`${shadow.name} is not a shadow of this store`);
        return [shadow, s] as const;
      });
      for (const [shadow, s] of found) {
        live.set(s.name, s.storage);
        shadows.delete(shadow);
      }
      for (const { name, checkpoint } of named) checkpoints.set(name, { ...checkpoint });
    },
    async commit({ writes, checkpoints: named = [] }) {
      // Synchronous, so no reader runs in the middle. All or nothing: every change of a document is
      // journaled (the document it replaced, undefined when new), and a failing op undoes them in
      // reverse order, each step back to a state that held, so indexes and unique keys stay consistent.
      const targets = writes.map(({ collection, ops }) => ({ storage: storageOfHandle(collection), ops }));
      const journal: Array<[storage: Storage, id: DocId, before: Doc | undefined]> = [];
      try {
        for (const { storage, ops } of targets) {
          const { docs } = storage;
          // A view whose document map records each change before making it (copy-on-write documents
          // make the replaced object a faithful "before").
          const set = (id: DocId, doc: Doc) => {
            journal.push([storage, id, docs.get(id)]);
            return docs.set(id, doc);
          };
          const del = (id: DocId) => {
            journal.push([storage, id, docs.get(id)]);
            return docs.delete(id);
          };
          const bound = new Map<PropertyKey, unknown>();
          const recorded = new Proxy(docs, {
            get(map, key) {
              if (key === 'set') return set;
              if (key === 'delete') return del;
              const value = Reflect.get(map, key, map);
              if (typeof value !== 'function') return value;
              if (!bound.has(key)) bound.set(key, value.bind(map));
              return bound.get(key);
            },
          });
          const view: Storage = { ...storage, docs: recorded };
          for (const op of ops) write(view, op as WriteOp);
        }
      } catch (err) {
        for (const [storage, id, before] of journal.reverse()) {
          if (before) store(storage, before);
          else remove(storage, id);
        }
        throw err;
      }
      for (const { name, checkpoint } of named) checkpoints.set(name, { ...checkpoint });
    },
    async dropShadow(shadow) {
      shadows.delete(shadow);
    },
    async getCheckpoint(name) {
      const c = checkpoints.get(name);
      return c ? { ...c } : undefined;
    },
    async setCheckpoint(name, checkpoint) {
      checkpoints.set(name, { ...checkpoint });
    },
    async close() {
      live.clear();
    },
  };
}

function ensureIndexes(storage: Storage, indexes: readonly IndexSpec[]): void {
  for (const spec of indexes) {
    const exists = storage.indexes.some((i) => JSON.stringify(i.spec.keys) === JSON.stringify(spec.keys));
    if (exists) continue;
    const index = createIndex(spec);
    storage.indexes.push(index);
    for (const doc of storage.docs.values()) {
      const keys = entriesOf(index, doc);
      if (keys.length > 1) index.multikey = true;
      for (const key of keys) index.tree.set(key, doc._id);
    }
  }
}
