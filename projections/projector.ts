/**
 * The projector: runs read-model projections from catch-up subscriptions.
 *
 * - Each projection starts from its stored checkpoint and receives its events in batches.
 * - A batch is applied through a unit of work: documents are read once (prefetched where the
 *   projection says which it needs), changed in memory, and written with the checkpoint of the last
 *   event they reflect in one read-store `commit`, so a crash leaves a batch wholly stored or not at all
 *   (docs/read-side.md). A flush the projection needs mid-batch is such a commit of its own.
 * - Versions: a checkpoint records the definition (version and indexes) its documents were built by.
 *   At start a projection whose stored definition differs keeps serving its old documents and is
 *   rebuilt into shadows, promoted together with the new checkpoint.
 * - A filtered subscription tells how far it read past others' events (`onProgress`): the checkpoint
 *   moves there, so a restart does not read them again.
 * - Idempotent: every document records `_position`, the global position of the last event applied to
 *   it, and a write for an event the document already reflects is dropped. A batch replayed after a
 *   crash therefore changes nothing.
 * - Rebuild without downtime: the projection is replayed from the start into fresh shadow copies
 *   while the live copies keep serving; when the copy has caught up, the live projection pauses, the
 *   copy drains the last events, the shadows are promoted and the live projection resumes.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { createFollower } from '../application/follower.ts';
import type { EventFilter, EventStore, RecordedEvent } from '../eventstore/port.ts';
import { compiledQuery, sortComparator } from './documents.ts';
import type {
  Checkpoint,
  Collection,
  Doc,
  DocId,
  Filter,
  FindOptions,
  IndexSpec,
  ReadStore,
  Update,
  WriteOp,
} from './read-store.ts';

/** What a projection may do with its documents while applying one event. */
export interface ProjectionTx {
  /** The document as of this point of the batch (undefined when absent). Prefetched or fetched on demand. */
  get<T extends Doc>(collection: string, id: DocId): T | undefined;
  /**
   * Documents by id, in the order asked (undefined where absent): those not prefetched are fetched
   * together, in one round trip, where `get` would fetch them one event attempt at a time.
   */
  getMany<T extends Doc>(collection: string, ids: readonly DocId[]): Array<T | undefined>;
  /** Writes the document (stamped with this event's position); dropped if it already reflects this event. */
  put(collection: string, doc: Doc): void;
  delete(collection: string, id: DocId): void;
  /** Queues an update of every matching document (for denormalized copies: renames and the like). */
  updateMany(collection: string, filter: Filter, update: Update): void;
  /** Documents matching a query, as of the start of this event (pending writes are flushed first). */
  find<T extends Doc>(collection: string, filter: Filter, options?: FindOptions): T[];
  /** The event being applied. */
  readonly event: RecordedEvent;
  /**
   * Scratch space shared by the events of a batch until the next flush (then emptied): lets a
   * projection know which documents it created since, and so may still change in place.
   */
  readonly scratch: Map<string, unknown>;
  /**
   * Undoes a change the projection made in place (to a document of `scratch`) if this attempt at the
   * event is abandoned: the event is then applied again from scratch, once what it missed is fetched.
   */
  onAbort(undo: () => void): void;
}

export interface Projection {
  /** Stable name: the checkpoint key and the name operators rebuild by. */
  name: string;
  /**
   * Raised whenever the same events would produce other documents (a field added, a rule changed):
   * read models stored by another version are rebuilt at start (docs/read-side.md).
   */
  version: number;
  /** The collections it owns (logical names) with their indexes. */
  collections: Record<string, readonly IndexSpec[]>;
  /** Which events it reads. */
  filter: EventFilter;
  /** Documents `apply` will read for this event, so a batch fetches them in one round trip per collection. */
  prefetch?(event: RecordedEvent): Array<[collection: string, id: DocId]>;
  /** Applies one event. Synchronous: everything it reads comes from `tx`. */
  apply(event: RecordedEvent, tx: ProjectionTx): void;
  /**
   * Completes a document just before it is written (once per document per batch, however many events
   * changed it): where a projection derives its expensive fields, such as a rendered record.
   */
  finalize?(collection: string, doc: Doc): Doc;
}

export interface ProjectionStatus {
  name: string;
  state: 'starting' | 'live' | 'rebuilding' | 'failed';
  checkpoint: number;
  events_applied: number;
  lag_events: number;
  lag_seconds: number;
  error: string | null;
  progress: RebuildProgress | null;
}

export interface RebuildProgress {
  started_at: string;
  events_done: number;
  /** Position the rebuild must reach (the head of the log when it started; it follows new events). */
  target_position: number;
  position: number;
  percent: number;
  rate_per_second: number;
  eta_seconds: number | null;
}

/**
 * Raised inside `apply` when documents were not prefetched, or a query not run: the runner fetches
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

type Collections = Record<string, Collection>;

/**
 * Stores a unit of work: the writes and the checkpoint of the last event they reflect, in one commit.
 * `applied` counts the events since the previous commit.
 */
type CommitWork = (
  writes: Array<{ collection: Collection; ops: WriteOp[] }>,
  last: RecordedEvent,
  applied: number,
) => Promise<void>;

/**
 * Pending documents a mid-batch query is checked against before they are committed instead: each query
 * tests them all, so past this many a commit costs less.
 */
const MAX_OVERLAID = 500;

/** Applies batches of events to a set of collections (live ones or rebuild shadows). */
function createApplier(projection: Projection, collections: Collections, commitWork: CommitWork) {
  const POSITION = '_position';

  async function applyBatch(events: RecordedEvent[]): Promise<void> {
    /** The last event applied, and how many since the last commit. */
    let last: RecordedEvent | undefined;
    let uncommitted = 0;
    // Documents as the batch sees them: fetched (or known absent) and changed so far.
    const cache = new Map<string, Map<DocId, Doc | null>>();
    /**
     * Writes waiting for the flush: the latest version of each changed document (null: deleted), so a
     * document changed by many events of the batch is written once. An `updateMany` first turns the
     * documents changed so far into operations, so every write keeps its place relative to it.
     */
    const pending = new Map<string, { ops: WriteOp[]; docs: Map<DocId, Doc | null> }>();
    const docOps = (name: string, docs: Map<DocId, Doc | null>): WriteOp[] =>
      [...docs].map(([id, doc]) =>
        doc
          ? {
              replaceOne: {
                filter: { _id: id },
                replacement: projection.finalize ? projection.finalize(name, doc) : doc,
                upsert: true,
              },
            }
          : { deleteOne: { filter: { _id: id } } },
      );
    /** Query results fetched for this batch, by collection and query; dropped when that collection changes. */
    const found = new Map<string, Map<string, Doc[]>>();
    for (const name of Object.keys(collections)) {
      cache.set(name, new Map());
      pending.set(name, { ops: [], docs: new Map() });
      found.set(name, new Map());
    }
    const coll = (name: string) => {
      const c = cache.get(name);
      if (!c) throw new Error(`projection ${projection.name} has no collection ${name}`);
      return c;
    };

    async function fetch(keys: Array<[string, DocId]>): Promise<void> {
      const byCollection = new Map<string, DocId[]>();
      for (const [name, id] of keys) {
        if (coll(name).has(id)) continue;
        const list = byCollection.get(name) ?? [];
        list.push(id);
        byCollection.set(name, list);
      }
      await Promise.all(
        [...byCollection].map(async ([name, ids]) => {
          const unique = [...new Set(ids)];
          const found = await collections[name].findByIds(unique);
          const c = coll(name);
          for (const id of unique) c.set(id, null);
          for (const doc of found) c.set(doc._id, doc);
        }),
      );
    }

    /** See `ProjectionTx.scratch`: documents handed to a flush are the store's from then on. */
    let scratch = new Map<string, unknown>();

    /**
     * Commits the pending writes with the checkpoint of the last event applied. Mid-batch only when
     * there are writes; at the end of the batch always (the checkpoint moves even if nothing changed).
     */
    async function flush(end = false): Promise<void> {
      scratch = new Map();
      const writes: Array<{ collection: Collection; ops: WriteOp[] }> = [];
      for (const [name, { ops, docs }] of pending) {
        if (docs.size === 0 && ops.length === 0) continue;
        pending.set(name, { ops: [], docs: new Map() });
        writes.push({ collection: collections[name], ops: [...ops, ...docOps(name, docs)] });
      }
      if (!last || (writes.length === 0 && (!end || uncommitted === 0))) return;
      await commitWork(writes, last, uncommitted);
      uncommitted = 0;
    }

    let i = 0;
    while (i < events.length) {
      // Prefetch what the rest of the batch says it needs, then apply until something forces a flush.
      if (projection.prefetch) await fetch(events.slice(i).flatMap((e) => projection.prefetch?.(e) ?? []));
      while (i < events.length) {
        const event = events[i];
        const attempt: Array<() => void> = [];
        const undos: Array<() => void> = [];
        let needsFlush = false;
        const tx: ProjectionTx = {
          event,
          get scratch() {
            return scratch;
          },
          onAbort(undo) {
            undos.push(undo);
          },
          get<T extends Doc>(name: string, id: DocId) {
            const c = coll(name);
            if (!c.has(id)) throw new Miss(name, [id]);
            return (c.get(id) ?? undefined) as T | undefined;
          },
          getMany<T extends Doc>(name: string, ids: readonly DocId[]) {
            const c = coll(name);
            const missing = ids.filter((id) => !c.has(id));
            if (missing.length > 0) throw new Miss(name, missing);
            return ids.map((id) => (c.get(id) ?? undefined) as T | undefined);
          },
          put(name, doc) {
            const c = coll(name);
            const current = c.get(doc._id);
            // Already reflects this event (a batch replayed after a crash): nothing to do.
            if (current && typeof current[POSITION] === 'number' && current[POSITION] >= event.position)
              return;
            const stamped = { ...doc, [POSITION]: event.position };
            attempt.push(() => {
              found.get(name)?.clear();
              c.set(doc._id, stamped);
              pending.get(name)?.docs.set(doc._id, stamped);
            });
          },
          delete(name, id) {
            attempt.push(() => {
              found.get(name)?.clear();
              coll(name).set(id, null);
              pending.get(name)?.docs.set(id, null);
            });
          },
          updateMany(name, filter, update) {
            coll(name);
            attempt.push(() => {
              const p = pending.get(name);
              if (p) {
                p.ops.push(...docOps(name, p.docs), { updateMany: { filter, update } });
                p.docs.clear();
              }
              cache.set(name, new Map()); // cached copies may be stale now
              found.get(name)?.clear();
              needsFlush = true;
            });
          },
          find<T extends Doc>(name: string, filter: Filter, options?: FindOptions): T[] {
            coll(name);
            const key = JSON.stringify({ filter, options });
            const hit = found.get(name)?.get(key);
            if (!hit) throw new Miss(name, [], key);
            return hit as T[];
          },
        };
        try {
          projection.apply(event, tx);
        } catch (err) {
          for (const undo of undos.reverse()) undo();
          if (!(err instanceof Miss)) {
            throw new Error(
              `projection ${projection.name} failed on ${event.type} at ${event.position}: ${(err as Error).message}`,
            );
          }
          // A document (or query) it did not prefetch: fetch it and apply this event again from scratch.
          if (err.query !== undefined) {
            await runFind(err.collection, err.query);
          } else {
            await fetch(err.ids.map((id): [string, DocId] => [err.collection, id]));
          }
          continue;
        }
        for (const op of attempt) op();
        last = event;
        uncommitted += 1;
        i += 1;
        if (needsFlush) {
          await flush();
          break;
        }
      }
    }
    await flush(true);

    /**
     * Runs a query the projection asked for, on the collection with every pending write applied. The
     * pending documents are laid over the store's answer, so a query does not cost a commit (a batch
     * of reviews queries the menu products it has just patched, once per review). A pending
     * `updateMany`, a limit or cursor (where the store's page would depend on what is pending), or
     * more pending documents than are worth testing at every query, commit first.
     */
    async function runFind(name: string, key: string): Promise<void> {
      const q = JSON.parse(key) as { filter: Filter; options?: FindOptions };
      const p = pending.get(name);
      const overlay =
        p &&
        p.ops.length === 0 &&
        p.docs.size <= MAX_OVERLAID &&
        q.options?.limit === undefined &&
        q.options?.after === undefined
          ? p.docs
          : undefined;
      if (!overlay) await flush();
      const stored = await collections[name].find(q.filter, q.options);
      const c = coll(name);
      const docs: Doc[] = [];
      for (const d of stored) {
        if (overlay?.has(d._id)) continue; // the pending version decides
        c.set(d._id, d);
        docs.push(d);
      }
      if (overlay && overlay.size > 0) {
        const matcher = compiledQuery(q.filter);
        for (const doc of overlay.values()) {
          if (!doc) continue;
          // As the store will hold it, which is what the store's answer holds for the others.
          const held = projection.finalize ? projection.finalize(name, doc) : doc;
          if (matcher.test(held)) docs.push(held);
        }
        const sort = q.options?.sort;
        if (sort) {
          const bySort = sortComparator(sort.some(([f]) => f === '_id') ? sort : [...sort, ['_id', 1]]);
          docs.sort(bySort);
        }
      }
      found.get(name)?.set(key, docs);
    }
  }

  return { applyBatch };
}

export interface ProjectorOptions {
  store: EventStore;
  readStore: ReadStore;
  projections: readonly Projection[];
  /**
   * Largest batch of events applied in one unit of work (default 5,000). A catch-up fills its batches; a
   * document many of a batch's events change is written once per batch, so larger batches rebuild
   * faster (1,000,000 events: 27.9 s at 1,000, 24.2 s at 5,000, 23.5 s at 10,000) for the memory of
   * the batch's events and the documents they change. A live projection's batches are what arrived.
   */
  batchSize?: number;
  onError?(projection: string, error: Error): void;
  /** Told of rebuilds (a version change at start, a finished rebuild) and of dropped shadows. */
  logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
}

export interface Projector {
  start(): Promise<void>;
  /** Resolves when every projection has caught up with the log (once, after start). */
  readonly caughtUp: Promise<void>;
  status(): Promise<ProjectionStatus[]>;
  /** Rebuilds into fresh copies while the live ones serve; resolves when the copies are live. */
  rebuild(name: string): Promise<void>;
  names(): string[];
  stop(): Promise<void>;
}

export function createProjector(options: ProjectorOptions): Projector {
  const { store, readStore } = options;
  const batchSize = options.batchSize ?? 5_000;

  interface Running {
    projection: Projection;
    state: ProjectionStatus['state'];
    collections: Collections;
    checkpoint: number;
    events: number;
    lastRecordedAt: string | undefined;
    error: string | null;
    stopSubscription?: () => Promise<void>;
    caughtUp?: Promise<void>;
    /** Settles once the live subscription has caught up, or has ended (stopped or failed). */
    liveSettled?: Promise<unknown>;
    progress: RebuildProgress | null;
    rebuilding?: Promise<void>;
    /** What this code builds (`definitionOf`), and what the live documents were built by (null: unknown). */
    definition: string;
    storedVersion: string | null;
  }
  const running = new Map<string, Running>();
  let resolveCaughtUp!: () => void;
  const caughtUp = new Promise<void>((r) => {
    resolveCaughtUp = r;
  });

  /**
   * Subscribes an applier to the log after a checkpoint: every commit stores its writes with the
   * checkpoint `checkpointKey` of the last event they reflect, stamped with `version`; a position the
   * log was read through past others' events is stored too.
   */
  function follow(
    projection: Projection,
    collections: Collections,
    checkpointKey: string,
    from: Checkpoint | undefined,
    version: string,
    onProgress: (position: number, events: RecordedEvent[]) => void,
  ) {
    let events = from?.events ?? 0;
    const checkpoint = (position: number, updatedAt: string): Checkpoint => ({
      position,
      events,
      updated_at: updatedAt,
      version,
    });
    const applier = createApplier(projection, collections, async (writes, last, applied) => {
      events += applied;
      await readStore.commit({
        writes,
        checkpoints: [{ name: checkpointKey, checkpoint: checkpoint(last.position, last.recordedAt) }],
      });
    });
    const follower = createFollower({
      name: `projection ${checkpointKey}`,
      store,
      filter: projection.filter,
      maxBatchSize: batchSize,
      async apply(batch) {
        await applier.applyBatch(batch);
        onProgress(batch[batch.length - 1].position, batch);
      },
      async onProgress(reached) {
        const updatedAt = new Date().toISOString();
        await readStore.commit({
          writes: [],
          checkpoints: [{ name: checkpointKey, checkpoint: checkpoint(reached, updatedAt) }],
        });
        onProgress(reached, []);
      },
    });
    follower.start(from?.position ?? 0);
    return follower;
  }

  /** The definition a projection's documents are built by: its version and its collections' indexes. */
  function definitionOf(projection: Projection): string {
    const indexes = createHash('sha256').update(JSON.stringify(projection.collections)).digest('hex');
    return `v${projection.version}+${indexes.slice(0, 12)}`;
  }

  async function openCollections(projection: Projection): Promise<Collections> {
    const out: Collections = {};
    for (const [name, indexes] of Object.entries(projection.collections)) {
      out[name] = await readStore.collection(name, indexes);
    }
    return out;
  }

  /**
   * Follows the log into the live collections from the stored checkpoint. A checkpoint of another
   * definition keeps its version (the documents are still of that one) until a rebuild replaces them.
   */
  async function startLive(r: Running): Promise<void> {
    const saved = await readStore.getCheckpoint(r.projection.name);
    r.checkpoint = saved?.position ?? 0;
    r.events = saved?.events ?? 0;
    r.storedVersion = saved ? (saved.version ?? null) : r.definition;
    const version = r.storedVersion ?? r.definition;
    const subscription = follow(
      r.projection,
      r.collections,
      r.projection.name,
      saved,
      version,
      (position, batch) => {
        r.checkpoint = position;
        r.events += batch.length;
        if (batch.length > 0) r.lastRecordedAt = batch[batch.length - 1].recordedAt;
      },
    );
    r.stopSubscription = () => subscription.stop();
    r.caughtUp = subscription.caughtUp.then(() => {
      if (r.state === 'starting') r.state = 'live';
    });
    r.liveSettled = Promise.race([r.caughtUp, subscription.done]).catch(() => undefined);
    subscription.done.catch((err: Error) => {
      r.state = 'failed';
      r.error = err.message;
      options.onError?.(r.projection.name, err);
    });
  }

  async function lag(r: Running): Promise<{ events: number; seconds: number }> {
    const behind = await store.readAll({
      after: r.checkpoint,
      maxCount: 10_001,
      filter: r.projection.filter,
    });
    if (behind.length === 0) return { events: 0, seconds: 0 };
    const oldest = Date.parse(behind[0].recordedAt);
    return { events: behind.length, seconds: Math.max(0, (Date.now() - oldest) / 1000) };
  }

  async function rebuild(name: string): Promise<void> {
    const r = running.get(name);
    if (!r) throw new Error(`no projection named ${name}`);
    if (r.rebuilding) return r.rebuilding;
    const work = (async () => {
      const shadows: Collections = {};
      for (const [c, indexes] of Object.entries(r.projection.collections)) {
        shadows[c] = await readStore.createShadow(c, indexes);
      }
      const key = `${name}#rebuild`;
      await readStore.setCheckpoint(key, { position: 0, events: 0, updated_at: new Date().toISOString() });
      const startedAt = Date.now();
      const target = await store.headPosition(r.projection.filter);
      const progress: RebuildProgress = {
        started_at: new Date(startedAt).toISOString(),
        events_done: 0,
        target_position: target,
        position: 0,
        percent: target === 0 ? 100 : 0,
        rate_per_second: 0,
        eta_seconds: null,
      };
      r.progress = progress;
      r.state = 'rebuilding';
      let position = 0;
      const onBatch = (reached: number, batch: RecordedEvent[]) => {
        position = reached;
        progress.events_done += batch.length;
        progress.position = position;
        progress.target_position = Math.max(progress.target_position, position);
        progress.percent = Math.min(
          100,
          Math.round((position / Math.max(1, progress.target_position)) * 1000) / 10,
        );
        const seconds = (Date.now() - startedAt) / 1000;
        progress.rate_per_second = Math.round(progress.events_done / Math.max(seconds, 0.001));
        const remaining = progress.target_position - position;
        progress.eta_seconds =
          progress.rate_per_second > 0 ? Math.round((remaining / progress.rate_per_second) * 10) / 10 : null;
      };
      try {
        const copy = follow(r.projection, shadows, key, undefined, r.definition, onBatch);
        await Promise.race([copy.caughtUp, copy.done]);
        // Switch over: pause the live projection, let the copy drain what it still lacks, promote.
        // Not before the live copy has caught up: readiness at start waits for it (a copy of a short
        // log can finish first, and a live subscription stopped before catching up never would).
        await r.liveSettled;
        await r.stopSubscription?.();
        await copy.stop();
        await copy.done;
        const drained = await readStore.getCheckpoint(key);
        const drain = follow(r.projection, shadows, key, drained, r.definition, onBatch);
        await Promise.race([drain.caughtUp, drain.done]);
        await drain.stop();
        await drain.done;
        const final = (await readStore.getCheckpoint(key)) ?? {
          position: 0,
          events: 0,
          updated_at: new Date().toISOString(),
        };
        // The copies and their checkpoint, of this code's definition, become live in one step.
        await readStore.promote(Object.values(shadows), [
          { name, checkpoint: { ...final, version: r.definition } },
        ]);
        progress.percent = 100;
        progress.eta_seconds = 0;
        options.logger?.info(
          {
            projection: name,
            events: progress.events_done,
            ms: Date.now() - startedAt,
            version: r.definition,
          },
          'projection rebuilt: the new copy is live',
        );
      } catch (err) {
        for (const s of Object.values(shadows)) await readStore.dropShadow(s).catch(() => undefined);
        throw err;
      } finally {
        r.rebuilding = undefined;
        r.state = 'live';
        await startLive(r);
      }
    })();
    r.rebuilding = work;
    return work;
  }

  return {
    async start() {
      // Shadows of a rebuild a crash interrupted: this projector is the only one writing here.
      const orphans = (await readStore.dropOrphanShadows?.()) ?? 0;
      if (orphans > 0) options.logger?.info({ shadows: orphans }, 'dropped shadows of an unfinished rebuild');
      for (const projection of options.projections) {
        const r: Running = {
          projection,
          state: 'starting',
          collections: await openCollections(projection),
          checkpoint: 0,
          events: 0,
          lastRecordedAt: undefined,
          error: null,
          progress: null,
          definition: definitionOf(projection),
          storedVersion: null,
        };
        running.set(projection.name, r);
        await startLive(r);
      }
      // Ready once every live copy has caught up; rebuilds of another version go on behind it.
      // A projection that failed is never caught up: its state says why, and readiness stays false.
      Promise.all([...running.values()].map((r) => r.caughtUp)).then(
        () => resolveCaughtUp(),
        () => undefined,
      );
      for (const r of running.values()) {
        if (r.storedVersion === r.definition) continue;
        options.logger?.warn(
          { projection: r.projection.name, stored: r.storedVersion, version: r.definition },
          'projection stored by another version: rebuilding it while the old copy serves',
        );
        rebuild(r.projection.name).catch((err: Error) => {
          options.logger?.error({ err, projection: r.projection.name }, 'projection rebuild failed');
          options.onError?.(r.projection.name, err);
        });
      }
    },
    caughtUp,
    async status() {
      const out: ProjectionStatus[] = [];
      for (const r of running.values()) {
        const l = await lag(r);
        out.push({
          name: r.projection.name,
          state: r.state,
          checkpoint: r.checkpoint,
          events_applied: r.events,
          lag_events: l.events,
          lag_seconds: Math.round(l.seconds * 1000) / 1000,
          error: r.error,
          progress: r.progress ? { ...r.progress } : null,
        });
      }
      return out;
    },
    rebuild,
    names: () => [...running.keys()],
    async stop() {
      for (const r of running.values()) {
        await r.rebuilding?.catch(() => undefined);
        await r.stopSubscription?.();
      }
    },
  };
}
