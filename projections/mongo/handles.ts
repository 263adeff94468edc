/**
 * The collection handles of the MongoDB read store: the port's queries and bulk writes on the physical
 * collection a handle reaches (a live handle resolves its name at each use).
 *
 * `find` sorts by `totalSort` (so `_id` breaks ties) and turns an `after` cursor into a filter with
 * `afterFilter`, combined with the caller's filter through `$and` (with `cursorBound` where the filter
 * allows it, so that the index walk starts at the cursor); `bulkWrite` is one ordered bulk
 * write: it stops at the first failing operation. Every read carries `maxTimeMS`: a server that can't
 * answer it in time refuses it, and the guard reports that as unavailable (docs/operations.md, "MongoDB").
 */
import type { Collection as MongoCollection, Filter as MongoFilter, Sort } from 'mongodb';
import {
  afterFilter,
  assertCursor,
  type Collection,
  cursorBound,
  type Doc,
  type Filter,
  type FindOptions,
  type SortSpec,
  totalSort,
  type WriteOp,
} from '../read-store.ts';
import type { BulkShadows } from './bulk-shadows.ts';
import type { Guard } from './connection.ts';
import { firstTooLarge, plain, toModel, writeFailure } from './translate.ts';

type Target = () => Promise<MongoCollection<Doc>>;

/** The query `find` sends: the filter and, past a cursor, what sorts after it and the bound it implies. */
export function findQuery(filter: Filter, sort: SortSpec, after: readonly unknown[] | undefined): Filter {
  if (!after) return filter;
  const bound = cursorBound(filter, sort, after);
  return { $and: [filter, afterFilter(sort, after), ...(bound ? [bound] : [])] };
}

export class Handles {
  private readonly guard: Guard;
  /** How long the server may work on one read. */
  private readonly maxTimeMS: number;
  /** The physical collection behind every handle this store gave out (live: resolved at each use). */
  private readonly targets = new WeakMap<Collection, Target>();
  /** Bulk shadows still loading: the queries their deferred indexes would serve are refused. */
  private readonly bulk: BulkShadows | undefined;

  constructor(guard: Guard, readMaxTimeMs: number, bulk?: BulkShadows) {
    this.guard = guard;
    this.maxTimeMS = readMaxTimeMs;
    this.bulk = bulk;
  }

  /** The target of a handle of this store; undefined for another store's. */
  targetOf(collection: Collection): Target | undefined {
    return this.targets.get(collection);
  }

  create<T extends Doc>(name: string, target: Target): Collection<T> {
    const { guard, maxTimeMS, bulk } = this;
    const h: Collection<T> = {
      name,
      findOne: (filter) =>
        guard(async () => {
          bulk?.assertQuery(h as Collection, filter);
          // Lowest _id first, as the SQLite adapter answers, when several documents match.
          const doc = await (await target()).findOne(filter as MongoFilter<Doc>, {
            sort: [['_id', 1]],
            maxTimeMS,
          });
          return doc === null ? null : (plain(doc) as T);
        }),
      // The driver's documents are new objects at every read: `own` holds already.
      findByIds: (ids) =>
        guard(async () => {
          if (ids.length === 0) return [];
          const docs = await (await target())
            .find({ _id: { $in: [...new Set(ids)] } }, { maxTimeMS })
            .toArray();
          return docs.map((d) => plain(d) as T);
        }),
      find: (filter: Filter, opts: FindOptions = {}) =>
        guard(async () => {
          // MongoDB reads a limit of 0 as "no limit"; the port means no documents.
          if (opts.limit !== undefined && opts.limit <= 0) return [];
          const sort = totalSort(opts.sort);
          if (opts.after) assertCursor(sort, opts.after);
          bulk?.assertQuery(h as Collection, filter, opts.sort);
          const query = findQuery(filter, sort, opts.after);
          const docs = await (await target())
            .find(query as MongoFilter<Doc>, {
              sort: sort as Sort,
              maxTimeMS,
              ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
            })
            .toArray();
          return docs.map((d) => plain(d) as T);
        }),
      count: (filter = {}) =>
        guard(async () => {
          bulk?.assertQuery(h as Collection, filter);
          return (await target()).countDocuments(filter as MongoFilter<Doc>, { maxTimeMS });
        }),
      bulkWrite: (ops) =>
        guard(async () => {
          if (ops.length === 0) return; // the driver refuses an empty batch
          bulk?.assertOps(h as Collection, ops as readonly WriteOp[]);
          const models = ops.map((op) => toModel(op as WriteOp));
          // Ordered: the operations before a replacement too large to send are applied, then it fails.
          const refused = firstTooLarge(name, ops as readonly WriteOp[]);
          const sent = refused ? models.slice(0, refused.index) : models;
          if (sent.length > 0) {
            await (await target()).bulkWrite(sent, { ordered: true }).catch((err: unknown) => {
              throw writeFailure(err, name, ops as readonly WriteOp[]);
            });
          }
          if (refused) throw refused.error;
        }),
    };
    this.targets.set(h as Collection, target);
    return h;
  }
}
