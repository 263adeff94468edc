/**
 * The ReadStore port: document collections with MongoDB semantics, the shape every read model is
 * stored in. Two adapters pass one contract suite (test/contract/read-store.ts): SQLite (embedded,
 * file or memory: projections/sqlite/) and MongoDB (the `mongodb` driver); docs/read-side.md.
 *
 * Filters and update documents are MongoDB's own query and update languages, so a projection written
 * against the embedded store behaves the same on MongoDB. Where MongoDB's behaviour is easy to miss,
 * every adapter follows it too (docs/read-side.md, "Read stores"):
 *
 * - Strings compare by code point, which is their UTF-8 byte order (MongoDB's simple binary collation),
 *   in sorts, ranges and cursors: 'Z' < 'a' < 'é' < '中' < '\uFFFD' < '😀' (`compareStrings`).
 * - A sort on a field holding an array uses its smallest element ascending and its largest
 *   descending; an empty array sorts before null and missing. A cursor (`after`) can't hold an array.
 * - A unique index holds null for a missing field: a second document without it is a duplicate. An
 *   empty array is a key of its own (a second empty array collides, a missing field does not).
 * - A document over 16 MiB of BSON is refused (`DocumentTooLargeError`), and so is its whole commit.
 * - A commit over a transaction limit is refused whole (`CommitTooLargeError`).
 */

export type DocId = string | number;
export interface Doc {
  _id: DocId;
  [field: string]: unknown;
}

/** A MongoDB query document, e.g. `{ store_id: 3, updated_at: { $gt: '2026-01-01' } }`. */
export type Filter = Record<string, unknown>;
/** A MongoDB update document with operators, e.g. `{ $set: { brand: 'Kiva' } }`. */
export type Update = Record<string, unknown>;

export type SortDirection = 1 | -1;
export type SortSpec = Array<[field: string, direction: SortDirection]>;

export interface IndexSpec {
  /** Fields in order, each ascending (1) or descending (-1). A field holding an array is indexed per element. */
  keys: SortSpec;
  unique?: boolean;
  /**
   * The projection queries by this index while it applies events (its own `find`s and `updateMany`s),
   * so a build keeps it up to date from the first write; a build's other indexes are built once its
   * documents are loaded (`ShadowOptions.bulk`; docs/read-side.md, "How a build writes its shadows").
   */
  readWhileApplying?: true;
}

export interface ShadowOptions {
  /**
   * A build (docs/read-side.md, "How a build writes its shadows"): the indexes not marked
   * `readWhileApplying` are deferred, left empty while the documents are written and built each in one
   * pass by `finishBulk`. A query on the shadow that one of them would serve, and no live one,
   * is refused (`DeferredIndexError`) rather than answered by reading every document.
   */
  bulk?: boolean;
}

export interface FindOptions {
  /**
   * Sort order; `_id` is appended as the last key when absent, so every order is total and stable. A
   * field holding an array sorts by its smallest element ascending, its largest descending.
   */
  sort?: SortSpec;
  limit?: number;
  /**
   * Range cursor: only documents strictly after these values of the sort keys (`_id` last). An array
   * is refused (`ArrayCursorError`): MongoDB's ranges match any element of an array, not the element
   * the array sorts by, so paging by a field holding arrays would skip or repeat documents.
   */
  after?: unknown[];
}

export type WriteOp<T extends Doc = Doc> =
  /**
   * A document the writer knows is not stored (a unit of work looked it up and found nothing): stored
   * without looking for an old version to replace. As MongoDB's insert, an `_id` already stored is
   * refused as a duplicate key, and the collection is left as it was.
   */
  | { insertOne: { document: T } }
  | { replaceOne: { filter: Filter; replacement: T; upsert?: boolean } }
  | { updateOne: { filter: Filter; update: Update; upsert?: boolean } }
  | { updateMany: { filter: Filter; update: Update } }
  | { deleteOne: { filter: Filter } }
  | { deleteMany: { filter: Filter } };

/**
 * A collection of documents. Documents a read returns may be shared with other readers (a cache of
 * parsed documents): a reader treats them as read-only and writes new objects, unless it asked for
 * documents of its own (`findByIds` with `own`).
 */
export interface Collection<T extends Doc = Doc> {
  /** The logical name the read model uses. */
  readonly name: string;
  findOne(filter: Filter): Promise<T | null>;
  /**
   * Documents with these ids (in no particular order); missing ids are left out. With `own`, documents
   * no other reader holds, which the caller may change in place: the SQLite store parses them afresh
   * and keeps them out of its cache, for the projector's units of work
   * (docs/read-side.md, "Documents a batch owns").
   */
  findByIds(ids: readonly DocId[], options?: { own?: boolean }): Promise<T[]>;
  find(filter: Filter, options?: FindOptions): Promise<T[]>;
  count(filter?: Filter): Promise<number>;
  /**
   * Applies the operations in order (MongoDB: one ordered bulk write): a failing one stops it, those
   * before it stay. A document over the size limit fails its operation (`DocumentTooLargeError`).
   */
  bulkWrite(ops: readonly WriteOp<T>[]): Promise<void>;
}

export interface Checkpoint {
  /** Global position of the last event applied. */
  position: number;
  /** Events applied since the projection (or its rebuild) started. */
  events: number;
  updated_at: string;
  /**
   * The definition the documents were built by (a projection's version). A durable store keeps read
   * models across restarts, so a projection whose definition changed is rebuilt (docs/read-side.md).
   */
  version?: string;
}

/** A checkpoint to store under a name, as part of a commit or a promote. */
export interface NamedCheckpoint {
  name: string;
  checkpoint: Checkpoint;
}

/**
 * One unit of work, applied all or nothing: writes to several collections (each list in order), then
 * checkpoints. A projector commits a batch's documents with its checkpoint, so a crash leaves either
 * the whole batch applied and recorded or none of it (exactly-once batches).
 */
export interface Commit {
  writes: ReadonlyArray<{ collection: Collection; ops: readonly WriteOp[] }>;
  checkpoints?: readonly NamedCheckpoint[];
  /** The lease the writer holds: the commit is refused, whole, once another acquired it (`Fence`). */
  fence?: Fence;
}

/**
 * What a lease's holder passes with its writes (docs/read-side.md, "One projector at a time"): the
 * lease's name and the token of the holder's acquisition. Every acquisition's token is higher than
 * the one before, and a store refuses a write whose token is not the lease's current one
 * (`LeaseLostError`, nothing applied), checking it inside the write's own transaction.
 */
export interface Fence {
  lease: string;
  token: number;
}

/** An attempt at a lease: acquired with a new token, or held by another for about `expiresInMs` more. */
export type LeaseAttempt =
  | { acquired: true; fence: Fence }
  | { acquired: false; holder: string; expiresInMs: number };

export interface ReadStore {
  readonly kind: 'mongodb' | 'sqlite';
  /**
   * The live collection of that name. The declared indexes it lacks are created while it holds no
   * document (a new collection, or an empty one); one that holds documents keeps the indexes it has,
   * since building one over them may take long or break a new unique index: a read model's new
   * indexes come with a rebuild, on its shadows
   * (docs/read-side.md, "Upgrades of read models"). The handle stays valid across `promote`: it
   * always reaches the collection currently live under that name.
   */
  collection<T extends Doc = Doc>(name: string, indexes?: readonly IndexSpec[]): Promise<Collection<T>>;
  /** A fresh, empty copy to rebuild into while the live collection keeps serving reads. */
  createShadow<T extends Doc = Doc>(
    name: string,
    indexes?: readonly IndexSpec[],
    options?: ShadowOptions,
  ): Promise<Collection<T>>;
  /**
   * Builds the deferred indexes of a bulk shadow from its documents, each from its entries in key
   * order; nothing for another shadow. A unique index its documents break fails it with the duplicate
   * key error a write would have met, the shadow left unpromotable: the caller drops it. A bulk shadow
   * is promoted only after this. Refused under a stale `fence`.
   */
  finishBulk(shadow: Collection, fence?: Fence): Promise<void>;
  /**
   * Makes the shadows live and stores the checkpoints, in one step: a reader sees every old copy or
   * every new one, never a mix. The old copies are dropped. Refused under a stale `fence`.
   */
  promote(
    shadows: readonly Collection[],
    checkpoints?: readonly NamedCheckpoint[],
    fence?: Fence,
  ): Promise<void>;
  /** Drops a shadow that will not be promoted (an abandoned rebuild). Refused under a stale `fence`. */
  dropShadow(shadow: Collection, fence?: Fence): Promise<void>;
  /**
   * Drops the shadows of rebuilds that never finished (a crash): every shadow neither live, nor kept
   * for readers after a promote, nor created by this store (a rebuild of its own still running).
   * Only the one projector writing the read models may call it
   * (docs/read-side.md, "Upgrades of read models"), under its `fence`. Resolves with how many.
   */
  dropOrphanShadows(fence?: Fence): Promise<number>;
  getCheckpoint(name: string): Promise<Checkpoint | undefined>;
  /** Stores a checkpoint on its own (progress past others' events). Refused under a stale `fence`. */
  setCheckpoint(name: string, checkpoint: Checkpoint, fence?: Fence): Promise<void>;
  /**
   * Applies the writes and checkpoints of `commit` atomically (see `Commit`). A document over the size
   * limit refuses the whole commit (`DocumentTooLargeError`), and so does a commit over a transaction
   * limit (`CommitTooLargeError`): nothing of it is applied.
   */
  commit(commit: Commit): Promise<void>;
  /**
   * Acquires the lease `lease` for `owner` for `ttlMs`: when no one holds it, its holder's time has
   * run out, `owner` holds it already (the same process, started again after its holder ended), or
   * `from` holds it (a holder the caller knows has ended: a process of its machine that is gone).
   * Every acquisition raises the token. The expiry is the store's time: MongoDB's server clock, the
   * SQLite store's clock (every process on one file shares the machine's).
   */
  acquireLease(lease: string, owner: string, ttlMs: number, from?: string): Promise<LeaseAttempt>;
  /** Holds the lease `ttlMs` more from now while `fence` is its last acquisition; false once it is not. */
  renewLease(fence: Fence, ttlMs: number): Promise<boolean>;
  /** Lets the lease go at once (a clean stop), unless another acquired it since. */
  releaseLease(fence: Fence): Promise<void>;
  /**
   * Asks the server for an answer, within the store's bounded server selection time: resolves when it
   * answers, rejects with `ReadStoreUnavailableError` when it cannot be reached. A store in the
   * process (SQLite) leaves this out: it has no server to lose. `/readyz` asks it.
   */
  ping?(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The read store's server can't be reached, or can't serve as the read store (at connect time or
 * later): a deployment problem, not the request's. HTTP answers it with 503 `read_store_unavailable`
 * (docs/operations.md, "MongoDB").
 */
export class ReadStoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReadStoreUnavailableError';
  }
}

/** A write carried the fence of a lease acquired by another since: refused, nothing of it applied. */
export class LeaseLostError extends Error {
  readonly fence: Fence;
  constructor(fence: Fence) {
    super(
      `the ${fence.lease} lease was acquired by another holder after token ${fence.token}: ` +
        'the write is refused and nothing of it was applied',
    );
    this.name = 'LeaseLostError';
    this.fence = fence;
  }
}

/** MongoDB's largest document: 16 MiB of BSON. */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/**
 * A write would store a document over MAX_DOCUMENT_BYTES. It fails the operation (and a commit
 * whole): retrying can't help, the read model must keep its documents smaller (docs/read-side.md).
 */
export class DocumentTooLargeError extends Error {
  /** The collection handle's name. */
  readonly collection: string;
  /** The document's `_id`, where the adapter can tell (MongoDB can't for an `updateMany`). */
  readonly id: DocId | undefined;
  /** Its size as the adapter measured it (BSON, or an upper bound of it), where known. */
  readonly bytes: number | undefined;
  constructor(
    collection: string,
    id: DocId | undefined,
    bytes: number | undefined,
    options?: { cause?: unknown },
  ) {
    const which = id === undefined ? 'a document' : `document ${JSON.stringify(id)}`;
    const size = bytes === undefined ? '' : ` (${bytes} bytes)`;
    super(
      `${which} of ${collection} is over ${MAX_DOCUMENT_BYTES} bytes of BSON${size}, MongoDB's limit: ` +
        'the write is refused (a commit holding it applies nothing)',
      options,
    );
    this.name = 'DocumentTooLargeError';
    this.collection = collection;
    this.id = id;
    this.bytes = bytes;
  }
}

/**
 * The store refused a commit for its size or duration (MongoDB's transaction limits: the oplog, the
 * storage cache a transaction may dirty, its lifetime): nothing of it was applied. A smaller commit
 * may pass, so the projector applies a refused batch in halves (docs/read-side.md, "Oversized batches").
 */
export class CommitTooLargeError extends Error {
  readonly operations: number;
  readonly collections: number;
  /** @param limit the limit, in the adapter's words: `a MongoDB transaction limit (TransactionTooLargeForCache)` */
  constructor(operations: number, collections: number, limit: string, options?: { cause?: unknown }) {
    super(
      `a commit of ${operations} write operations on ${collections} collections exceeds ${limit}; ` +
        'nothing of it was applied: commit smaller batches',
      options,
    );
    this.name = 'CommitTooLargeError';
    this.operations = operations;
    this.collections = collections;
  }
}

/**
 * A query on a bulk shadow needs an index its build creates only after the load (`ShadowOptions.bulk`):
 * a programming error of the read model, which marks the indexes it queries while applying
 * `readWhileApplying`. Never answered by reading every document instead.
 */
export class DeferredIndexError extends Error {
  constructor(collection: string, index: IndexSpec) {
    super(
      `a query on ${collection} needs the index ${JSON.stringify(index.keys)}, which this build creates ` +
        'only after loading the documents: mark it readWhileApplying in the read model',
    );
    this.name = 'DeferredIndexError';
  }
}

/** A bulk shadow promoted before `finishBulk` built its deferred indexes: every adapter refuses it. */
export class UnfinishedBulkShadowError extends Error {
  constructor(name: string) {
    super(`the shadow of ${name} is a bulk one whose indexes are not built: finishBulk it first`);
    this.name = 'UnfinishedBulkShadowError';
  }
}

/** A cursor (`after`) holds an array: see `FindOptions.after`. */
export class ArrayCursorError extends Error {
  constructor(field: string) {
    super(
      `the cursor's value for ${field} is an array: a field holding arrays can be sorted by but not paged by`,
    );
    this.name = 'ArrayCursorError';
  }
}

/** Refuses a cursor holding an array (every adapter, before it reads). */
export function assertCursor(sort: SortSpec, after: readonly unknown[]): void {
  after.forEach((value, i) => {
    if (Array.isArray(value)) throw new ArrayCursorError(sort[i]?.[0] ?? `key ${i}`);
  });
}

/** Surrogates (D800–DFFF, halves of a code point above FFFF) moved above E000–FFFF. */
const codePointUnit = (unit: number) => (unit >= 0xe000 ? unit - 0x800 : unit + 0x2000);

/**
 * The port's string order: by code point, which is UTF-8 byte order and MongoDB's. JavaScript's `<`
 * compares UTF-16 code units and puts '😀' (D83D DE00) before '\uFFFD'; this puts it after.
 */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    return x >= 0xd800 && y >= 0xd800 ? codePointUnit(x) - codePointUnit(y) : x - y;
  }
  return a.length - b.length;
}

/** The sort the store uses: the given one with `_id` appended (ascending) unless already present. */
export function totalSort(sort: SortSpec | undefined): SortSpec {
  const s = sort ?? [];
  return s.some(([f]) => f === '_id') ? s : [...s, ['_id', 1]];
}

/**
 * `$type` aliases in MongoDB's comparison order, the order sorts use; null and a missing field come
 * before all of them. Entry i holds the types of rank i + 1 (see `typeRank`).
 */
const TYPE_ORDER: readonly (readonly string[])[] = [
  ['number'],
  ['string'],
  ['object'],
  ['array'],
  ['binData'],
  ['objectId'],
  ['bool'],
  ['date'],
  ['timestamp'],
  ['regex'],
];

/** A value's place in MongoDB's type order: 0 for null and missing, then the ranks of TYPE_ORDER. */
function typeRank(v: unknown): number {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number' || typeof v === 'bigint') return 1;
  if (typeof v === 'string') return 2;
  if (typeof v === 'boolean') return 7;
  if (v instanceof Date) return 8;
  if (v instanceof RegExp) return 10;
  return Array.isArray(v) ? 4 : 3;
}

/**
 * Conditions (any one suffices) for `field` to sort strictly after `value` in `direction`. MongoDB's
 * `$gt`/`$lt` only compare values of the same type (and `$gt: null` matches nothing), so values of the
 * types sorting after (or before) `value` are selected by `$type`; null and missing by `{ $eq: null }`.
 */
function beyond(field: string, direction: SortDirection, value: unknown): Filter[] {
  const rank = typeRank(value);
  const out: Filter[] = [];
  if (direction === 1) {
    if (rank > 0) out.push({ [field]: { $gt: value } });
    const later = TYPE_ORDER.slice(rank).flat();
    if (later.length > 0) out.push({ [field]: { $type: later } });
  } else if (rank > 0) {
    out.push({ [field]: { $lt: value } });
    const earlier = TYPE_ORDER.slice(0, rank - 1).flat();
    if (earlier.length > 0) out.push({ [field]: { $type: earlier } });
    out.push({ [field]: { $eq: null } });
  }
  return out;
}

/**
 * The filter that selects documents strictly after `after` in `sort` order (for adapters without seek),
 * in MongoDB's order across types: null and missing, numbers, strings, objects, arrays, …, booleans.
 */
export function afterFilter(sort: SortSpec, after: readonly unknown[]): Filter {
  const branches: Filter[] = [];
  for (let i = 0; i < sort.length && i < after.length; i++) {
    const conditions = beyond(sort[i][0], sort[i][1], after[i] ?? null);
    if (conditions.length === 0) continue; // nothing sorts after this value: the branch can't match
    const branch: Filter = {};
    for (let j = 0; j < i; j++) branch[sort[j][0]] = { $eq: after[j] ?? null };
    if (conditions.length === 1) Object.assign(branch, conditions[0]);
    else branch.$or = conditions;
    branches.push(branch);
  }
  if (branches.length === 0) return { _id: { $in: [] } };
  return branches.length === 1 ? branches[0] : { $or: branches };
}

const RANGES = new Set(['$gt', '$gte', '$lt', '$lte']);

/**
 * A bound on the first sort field that a cursor implies, for a filter that holds that field to the
 * cursor value's type by a range (`$gt`, `$gte`, `$lt`, `$lte`; MongoDB compares within one type):
 * every document after the cursor is then at or beyond its value. Given beside `afterFilter`, whose
 * `$or` an index's bounds do not take, it starts the walk at the cursor instead of at the range's
 * start, so a later page reads about its own documents. Undefined when the filter does not hold the
 * field to one type (numbers, strings or dates).
 */
export function cursorBound(filter: Filter, sort: SortSpec, after: readonly unknown[]): Filter | undefined {
  const [field, direction] = sort[0];
  const rank = typeRank(after[0]);
  if (rank !== 1 && rank !== 2 && rank !== 8) return undefined;
  const condition = filter[field];
  if (condition === null || typeof condition !== 'object' || Array.isArray(condition)) return undefined;
  if (condition instanceof Date) return undefined;
  const ops = Object.entries(condition);
  if (ops.length === 0 || !ops.every(([op, v]) => RANGES.has(op) && typeRank(v) === rank)) return undefined;
  return { [field]: { [direction === 1 ? '$gte' : '$lte']: after[0] } };
}
