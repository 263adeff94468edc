/**
 * Bulk shadows of the MongoDB read store (docs/read-side.md, "How a build writes its shadows"): a
 * build's shadow is created with its indexes read while applying only; the deferred ones are created
 * by one `createIndexes` once the documents are loaded (the server builds each from one sorted scan
 * of the collection), before the promote. Until then, a query a deferred index would serve is refused
 * with the rule the SQLite store follows (projections/deferred-indexes.ts).
 */
import { type Collection as MongoCollection, MongoServerError } from 'mongodb';
import { assertNoDeferredIndexNeeded, isDeferred } from '../deferred-indexes.ts';
import {
  type Collection,
  type Commit,
  type Doc,
  type Filter,
  type IndexSpec,
  type SortSpec,
  UnfinishedBulkShadowError,
  type WriteOp,
} from '../read-store.ts';

const DUPLICATE_KEY = 11000;

interface Pending {
  coll: MongoCollection<Doc>;
  live: readonly IndexSpec[];
  deferred: readonly IndexSpec[];
}

/** The filter an operation selects its documents by (an insert selects none). */
function filterOf(op: WriteOp): Filter | undefined {
  if ('insertOne' in op) return undefined;
  if ('replaceOne' in op) return op.replaceOne.filter;
  if ('updateOne' in op) return op.updateOne.filter;
  if ('updateMany' in op) return op.updateMany.filter;
  if ('deleteOne' in op) return op.deleteOne.filter;
  return op.deleteMany.filter;
}

/** A unique index's duplicate, as the port words it (the error a write of the second would meet). */
function duplicateKeyError(err: MongoServerError, specs: readonly IndexSpec[]): Error {
  const keyValue = (err as { keyValue?: Record<string, unknown> }).keyValue;
  const keyPattern = (err as { keyPattern?: Record<string, unknown> }).keyPattern;
  const fields = keyPattern ? Object.keys(keyPattern) : undefined;
  const index = fields ?? specs.find((s) => s.unique)?.keys.map(([f]) => f) ?? [];
  const key = keyValue ? `${JSON.stringify(Object.values(keyValue))} ` : '';
  return new Error(`duplicate key ${key}in unique index ${index.join(',')}`, { cause: err });
}

export class BulkShadows {
  /** Bulk shadows whose deferred indexes are not created yet, by handle. */
  private readonly pending = new WeakMap<Collection, Pending>();

  /** The indexes to create with a shadow now: all of them, or for a bulk one those read while applying. */
  static createdAtOnce(indexes: readonly IndexSpec[], bulk: boolean): IndexSpec[] {
    return bulk ? indexes.filter((spec) => !isDeferred(spec)) : [...indexes];
  }

  /** Records a bulk shadow whose deferred indexes `finish` creates. */
  add(shadow: Collection, coll: MongoCollection<Doc>, indexes: readonly IndexSpec[]): void {
    const deferred = indexes.filter(isDeferred);
    if (deferred.length === 0) return;
    this.pending.set(shadow, { coll, live: indexes.filter((s) => !isDeferred(s)), deferred });
  }

  /** Refuses to promote a shadow that still waits for its deferred indexes. */
  assertFinished(shadow: Collection, name: string): void {
    if (this.pending.has(shadow)) {
      throw new UnfinishedBulkShadowError(name);
    }
  }

  /** Refuses a query that a deferred index of this shadow would serve (`DeferredIndexError`). */
  assertQuery(shadow: Collection, filter: Filter, sort?: SortSpec): void {
    const p = this.pending.get(shadow);
    if (p) assertNoDeferredIndexNeeded(shadow.name, p.live, p.deferred, filter, sort);
  }

  /** Refuses a commit whose operations a deferred index would serve (`assertOps`). */
  assertCommit(writes: Commit['writes']): void {
    for (const { collection, ops } of writes) this.assertOps(collection, ops);
  }

  /** Refuses operations whose filters a deferred index would serve (an `updateMany` by a field). */
  assertOps(shadow: Collection, ops: readonly WriteOp[]): void {
    if (!this.pending.has(shadow)) return;
    for (const op of ops) {
      const filter = filterOf(op);
      if (filter) this.assertQuery(shadow, filter);
    }
  }

  /**
   * Creates the deferred indexes of a bulk shadow in one command; a unique one its documents break
   * fails it (E11000) with the port's duplicate key error, the shadow left unfinished.
   */
  async finish(shadow: Collection, isShadow: boolean, assertFence: () => Promise<void>): Promise<void> {
    if (!isShadow) throw new Error(`${shadow.name} is not a shadow of this store`);
    const p = this.pending.get(shadow);
    if (!p) return;
    await assertFence();
    const specs = p.deferred.map((spec) => ({
      key: new Map(spec.keys.map(([field, direction]) => [field, direction] as const)),
      ...(spec.unique ? { unique: true } : {}),
    }));
    try {
      await p.coll.createIndexes(specs);
    } catch (err) {
      if (err instanceof MongoServerError && err.code === DUPLICATE_KEY) {
        throw duplicateKeyError(err, p.deferred);
      }
      throw err;
    }
    this.pending.delete(shadow);
  }
}
