/**
 * One batch of events applied to a projection's collections (see docs/read-side.md): documents are read once (prefetched where the projection says which it
 * needs, else fetched when an event asks and the event applied again), changed in memory, and written with the
 * checkpoint of the last event they reflect in one read-store commit. A flush the projection needs
 * mid-batch (an `updateMany`, or a query that cannot see the pending writes) is a commit of its own.
 *
 * Idempotent: every document records `_position`, the global position of the last event applied to
 * it, and a write for an event the document already reflects is dropped.
 */
import type { RecordedEvent } from '../eventstore/port.ts';
import { compiledQuery, sortComparator } from './documents.ts';
import type { Projection, ProjectionTx } from './projection.ts';
import type { Collection, Doc, DocId, Filter, FindOptions, WriteOp } from './read-store.ts';

export type Collections = Record<string, Collection>;

/**
 * Stores a unit of work: the writes and the checkpoint of the last event they reflect, in one commit.
 * `applied` counts the events since the previous commit.
 */
export type CommitWork = (
  writes: Array<{ collection: Collection; ops: WriteOp[] }>,
  last: RecordedEvent,
  applied: number,
) => Promise<void>;

/**
 * Pending documents a mid-batch query is checked against before they are committed instead: each query
 * tests them all, so past this many a commit costs less.
 */
const MAX_OVERLAID = 500;

const POSITION = '_position';

/**
 * Raised inside `apply` when documents were not prefetched, or a query not run: the unit fetches
 * them (or runs it) and applies the event again.
 */
class Miss {
  readonly collection: string;
  /** The document ids, or the query (as JSON) when `query` is set. */
  readonly ids: readonly DocId[];
  readonly query: string | undefined;
  constructor(collection: string, ids: readonly DocId[], query?: string) {
    this.collection = collection;
    this.ids = ids;
    this.query = query;
  }
}

/** Applies `events` to `collections` through one unit of work, committed by `commitWork`. */
export function applyBatch(
  projection: Projection,
  collections: Collections,
  commitWork: CommitWork,
  events: RecordedEvent[],
): Promise<void> {
  return new UnitOfWork(projection, collections, commitWork).run(events);
}

/**
 * What one attempt at an event did, applied only if the attempt completes. One object serves every
 * event of a batch (`begin` empties it): a build applies millions of events, and a new object, its
 * arrays and a closure per write at each were garbage at once, as
 * docs/read-side.md, "How a build runs and what it costs" says. Its writes are three lists in step:
 * the collection, the document's id, and the document (null: deleted) or, for an `updateMany`, what
 * to do once the attempt completes.
 */
class Attempt {
  event: RecordedEvent | undefined;
  readonly names: string[] = [];
  readonly ids: DocId[] = [];
  readonly writes: Array<Doc | null | (() => void)> = [];
  readonly undos: Array<() => void> = [];
  needsFlush = false;

  begin(event: RecordedEvent): RecordedEvent {
    this.event = event;
    if (this.writes.length > 0) {
      this.names.length = 0;
      this.ids.length = 0;
      this.writes.length = 0;
    }
    if (this.undos.length > 0) this.undos.length = 0;
    this.needsFlush = false;
    return event;
  }

  write(name: string, id: DocId, doc: Doc | null | (() => void)): void {
    this.names.push(name);
    this.ids.push(id);
    this.writes.push(doc);
  }
}

class UnitOfWork {
  private readonly projection: Projection;
  private readonly collections: Collections;
  private readonly commitWork: CommitWork;
  /** The last event applied, and how many since the last commit. */
  private last: RecordedEvent | undefined;
  private uncommitted = 0;
  /** Documents as the batch sees them: fetched (or known absent) and changed so far. */
  private readonly cache = new Map<string, Map<DocId, Doc | null>>();
  /**
   * Ids the store holds no document of, once the writes handed to it so far are applied: a lookup
   * found none, or a delete was handed. Such a document is written as an insert, which spares the
   * store a lookup of the version it would replace (its old index entries). Writing one makes it
   * stored: any later write of it replaces (docs/read-side.md, "Projections and checkpoints").
   */
  private readonly absent = new Map<string, Set<DocId>>();
  /**
   * Writes waiting for the flush: the latest version of each changed document (null: deleted), so a
   * document changed by many events of the batch is written once. An `updateMany` first turns the
   * documents changed so far into operations, so every write keeps its place relative to it.
   */
  private readonly pending = new Map<string, { ops: WriteOp[]; docs: Map<DocId, Doc | null> }>();
  /** Query results fetched for this batch, by collection and query; dropped when that collection changes. */
  private readonly found = new Map<string, Map<string, Doc[]>>();
  /** See `ProjectionTx.scratch`: documents handed to a flush are the store's from then on. */
  private scratch = new Map<string, unknown>();
  /** See `ProjectionTx.owns`: the documents fetched (`own`) since the last flush. */
  private owned = new WeakSet<Doc>();
  /** The attempt at the event being applied (`event` undefined between events). */
  private readonly attempt = new Attempt();
  /** What the projection may do while applying an event: one object for the batch, as `attempt`. */
  private readonly tx: ProjectionTx = this.batchTx();

  constructor(projection: Projection, collections: Collections, commitWork: CommitWork) {
    this.projection = projection;
    this.collections = collections;
    this.commitWork = commitWork;
    for (const name of Object.keys(collections)) {
      this.cache.set(name, new Map());
      this.absent.set(name, new Set());
      this.pending.set(name, { ops: [], docs: new Map() });
      this.found.set(name, new Map());
    }
  }

  async run(events: RecordedEvent[]): Promise<void> {
    let i = 0;
    while (i < events.length) {
      // Prefetch what the rest of the batch says it needs, then apply until something forces a flush.
      const { prefetch, prefetchNamed } = this.projection;
      const rest = events.slice(i);
      if (prefetch) await this.fetch(rest.flatMap((e) => prefetch(e)));
      if (prefetchNamed) {
        const fetched = (name: string, id: DocId) => this.cache.get(name)?.get(id) ?? undefined;
        await this.fetch(rest.flatMap((e) => prefetchNamed(e, fetched)));
      }
      while (i < events.length) {
        const outcome = this.applyOne(events[i]);
        if (outcome instanceof Miss) {
          await this.fetchMissed(outcome);
          continue;
        }
        i += 1;
        if (outcome === 'flush') {
          await this.flush();
          break;
        }
      }
    }
    await this.flush(true);
  }

  /**
   * Applies one event: `flush` when it asks for one, the `Miss` when it needed documents fetched
   * first (then nothing of it is kept, and it is applied again once they are). Synchronous: an
   * `await` at each of a build's millions of events cost a promise and a turn of the microtask queue.
   */
  private applyOne(event: RecordedEvent): 'applied' | 'flush' | Miss {
    const { attempt } = this;
    attempt.begin(event);
    try {
      this.projection.apply(event, this.tx);
    } catch (err) {
      for (const undo of attempt.undos.reverse()) undo();
      if (err instanceof Miss) return err;
      throw new Error(
        `projection ${this.projection.name} failed on ${event.type} at ${event.position}: ${(err as Error).message}`,
      );
    } finally {
      attempt.event = undefined;
    }
    this.complete(attempt);
    this.last = event;
    this.uncommitted += 1;
    return attempt.needsFlush ? 'flush' : 'applied';
  }

  /** Fetches the documents (or runs the query) an event missed. */
  private async fetchMissed(miss: Miss): Promise<void> {
    if (miss.query !== undefined) await this.runFind(miss.collection, miss.query);
    else await this.fetch(miss.ids.map((id): [string, DocId] => [miss.collection, id]));
  }

  /** Applies the writes of a completed attempt to the batch's documents and pending writes. */
  private complete(attempt: Attempt): void {
    const { names, ids, writes } = attempt;
    for (let i = 0; i < writes.length; i++) {
      const write = writes[i];
      if (typeof write === 'function') {
        write();
        continue;
      }
      this.found.get(names[i])?.clear();
      this.coll(names[i]).set(ids[i], write);
      this.pending.get(names[i])?.docs.set(ids[i], write);
    }
  }

  /** The batch's `tx`: an event's changes are kept in its attempt until the attempt completes. */
  private batchTx(): ProjectionTx {
    const unit = this;
    const { attempt } = this;
    const now = () => {
      if (!attempt.event) throw new Error(`projection ${unit.projection.name} used its tx outside apply`);
      return attempt.event;
    };
    return {
      get event() {
        return now();
      },
      get scratch() {
        return unit.scratch;
      },
      onAbort: (undo) => {
        now();
        attempt.undos.push(undo);
      },
      owns: (doc) => unit.owned.has(doc),
      get: <T extends Doc>(name: string, id: DocId) => {
        const c = this.coll(name);
        if (!c.has(id)) throw new Miss(name, [id]);
        return (c.get(id) ?? undefined) as T | undefined;
      },
      getMany: <T extends Doc>(name: string, ids: readonly DocId[]) => {
        const c = this.coll(name);
        const missing = ids.filter((id) => !c.has(id));
        if (missing.length > 0) throw new Miss(name, missing);
        return ids.map((id) => (c.get(id) ?? undefined) as T | undefined);
      },
      put: (name, doc) => {
        const event = now();
        const c = this.coll(name);
        const current = c.get(doc._id);
        // Already reflects this event (a batch replayed after a crash): nothing to do.
        if (current && typeof current[POSITION] === 'number' && current[POSITION] >= event.position) {
          return undefined;
        }
        const stamped = { ...doc, [POSITION]: event.position };
        // By the copy's id: the projection may hand over an object it goes on using (catalog's `write`).
        attempt.write(name, stamped._id, stamped);
        return stamped;
      },
      delete: (name, id) => {
        now();
        this.coll(name);
        attempt.write(name, id, null);
      },
      updateMany: (name, filter, update) => {
        now();
        this.coll(name);
        attempt.write(name, '', () => {
          const p = this.pending.get(name);
          if (p) {
            p.ops.push(...this.docOps(name, p.docs), { updateMany: { filter, update } });
            p.docs.clear();
          }
          this.cache.set(name, new Map()); // cached copies may be stale now
          this.found.get(name)?.clear();
          attempt.needsFlush = true;
        });
      },
      find: <T extends Doc>(name: string, filter: Filter, options?: FindOptions): T[] => {
        this.coll(name);
        const key = JSON.stringify({ filter, options });
        const hit = this.found.get(name)?.get(key);
        if (!hit) throw new Miss(name, [], key);
        return hit as T[];
      },
    };
  }

  private coll(name: string): Map<DocId, Doc | null> {
    const c = this.cache.get(name);
    if (!c) throw new Error(`projection ${this.projection.name} has no collection ${name}`);
    return c;
  }

  /** The document as the store will hold it (a projection may complete it just before the write). */
  private held(name: string, doc: Doc): Doc {
    return this.projection.finalize ? this.projection.finalize(name, doc) : doc;
  }

  /** The writes of the changed documents, in the order the store applies them (see `absent`). */
  private docOps(name: string, docs: Map<DocId, Doc | null>): WriteOp[] {
    const absent = this.absentIn(name);
    return [...docs].map(([id, doc]): WriteOp => {
      if (!doc) {
        absent.add(id);
        return { deleteOne: { filter: { _id: id } } };
      }
      const held = this.held(name, doc);
      if (absent.delete(id)) return { insertOne: { document: held } };
      return { replaceOne: { filter: { _id: id }, replacement: held, upsert: true } };
    });
  }

  private absentIn(name: string): Set<DocId> {
    return this.absent.get(name) ?? new Set();
  }

  private async fetch(keys: Array<[string, DocId]>): Promise<void> {
    const byCollection = new Map<string, DocId[]>();
    for (const [name, id] of keys) {
      if (this.coll(name).has(id)) continue;
      const list = byCollection.get(name) ?? [];
      list.push(id);
      byCollection.set(name, list);
    }
    await Promise.all(
      [...byCollection].map(async ([name, ids]) => {
        const unique = [...new Set(ids)];
        // Its own: a document the batch rewrites need not be copied to be changed (`owns`).
        const found = await this.collections[name].findByIds(unique, { own: true });
        const c = this.coll(name);
        const absent = this.absentIn(name);
        // The store's answer tells only of what no write waiting for the commit changes.
        const p = this.pending.get(name);
        const settled = (id: DocId) => p !== undefined && p.ops.length === 0 && !p.docs.has(id);
        for (const id of unique) {
          c.set(id, null);
          if (settled(id)) absent.add(id);
        }
        for (const doc of found) {
          c.set(doc._id, doc);
          this.owned.add(doc);
          absent.delete(doc._id);
        }
      }),
    );
  }

  /**
   * Commits the pending writes with the checkpoint of the last event applied. Mid-batch only when
   * there are writes; at the end of the batch always (the checkpoint moves even if nothing changed).
   */
  private async flush(end = false): Promise<void> {
    this.scratch = new Map();
    this.owned = new WeakSet();
    const writes: Array<{ collection: Collection; ops: WriteOp[] }> = [];
    for (const [name, { ops, docs }] of this.pending) {
      if (docs.size === 0 && ops.length === 0) continue;
      this.pending.set(name, { ops: [], docs: new Map() });
      writes.push({ collection: this.collections[name], ops: [...ops, ...this.docOps(name, docs)] });
    }
    if (!this.last || (writes.length === 0 && (!end || this.uncommitted === 0))) return;
    await this.commitWork(writes, this.last, this.uncommitted);
    this.uncommitted = 0;
  }

  /**
   * Runs a query the projection asked for, on the collection with every pending write applied. The
   * pending documents are laid over the store's answer, so a query does not cost a commit (a batch
   * of reviews queries the menu products it has just patched, once per review). A pending
   * `updateMany`, a limit or cursor (where the store's page would depend on what is pending), or
   * more pending documents than are worth testing at every query, commit first.
   */
  private async runFind(name: string, key: string): Promise<void> {
    const q = JSON.parse(key) as { filter: Filter; options?: FindOptions };
    const p = this.pending.get(name);
    const overlay =
      p &&
      p.ops.length === 0 &&
      p.docs.size <= MAX_OVERLAID &&
      q.options?.limit === undefined &&
      q.options?.after === undefined
        ? p.docs
        : undefined;
    if (!overlay) await this.flush();
    const stored = await this.collections[name].find(q.filter, q.options);
    const c = this.coll(name);
    const docs: Doc[] = [];
    for (const d of stored) {
      this.absentIn(name).delete(d._id);
      if (overlay?.has(d._id)) continue; // the pending version decides
      c.set(d._id, d);
      docs.push(d);
    }
    if (overlay && overlay.size > 0) {
      const matcher = compiledQuery(q.filter);
      for (const doc of overlay.values()) {
        if (!doc) continue;
        // As the store will hold it, which is what the store's answer holds for the others.
        const held = this.held(name, doc);
        if (matcher.test(held)) docs.push(held);
      }
      const sort = q.options?.sort;
      if (sort) docs.sort(sortComparator(sort.some(([f]) => f === '_id') ? sort : [...sort, ['_id', 1]]));
    }
    this.found.get(name)?.set(key, docs);
  }
}
