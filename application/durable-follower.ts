/**
 * A follower of the log whose working state is durable, so a start costs the working set and the
 * events written since, not the history: the abandonment timer (pending carts) and the delivery worker
 * (queues with unsettled deliveries) are built on it.
 *
 * The owner keeps its items in memory and says which it changed (`changed(key)`); the follower writes
 * those items' documents (`save`: the document, or null when the item left the working set and its
 * document is deleted) together with its checkpoint, in one read-store commit: a crash leaves the
 * changes and their checkpoint both stored or both not. It commits after `commitEveryEvents` events,
 * else `commitEveryMs` after the first event not yet committed, and at `stop()`: a burst of small
 * batches costs one commit, not one each (on SQLite a commit rewrites every page it touches, and the
 * documents are spread over the file by their random ids), and a crash only means that the events
 * after the last commit are applied again. The checkpoint also moves past other streams' events the
 * subscription read through (`onProgress`), and past the owner's own appends it reflects already
 * (`known`), which the embedded store need not read back.
 *
 * At start it reads the checkpoint and every document (`restore`), then subscribes after the
 * checkpoint. Without a checkpoint, or with one of another `version` (the documents' shape changed),
 * the collection is emptied and the working set rebuilt from the first event, unless the owner
 * upgrades documents of that version in place (`upgrade`).
 *
 * Several processes may follow into one shared read store (dispatchers on one MongoDB). Each folds the
 * same log, and a store that is ahead of the events is safe for both owners (they skip what an item
 * already reflects and re-read a stream when an item is missing); a store behind its checkpoint is not.
 * So a commit never moves the checkpoint back: it carries a guard, an upsert of `{ _id: GUARD,
 * position }` filtered on `position <= this batch's`, which collides with the stored guard (a
 * duplicate key: the whole commit is refused, nothing of it applied) when another follower has
 * committed further. The refused follower then forgets what it had changed (the store reflects all
 * of it and more) and commits again later, with what changes after it. An owner whose guard `_id`
 * changed between releases (`guard`) keeps the earlier ones fenced in its collection, so that a
 * follower of such a release still running has every commit refused the same way.
 */
import type { Logger } from 'pino';
import type { Clock } from '../domain/clock.ts';
import type { EventFilter, EventStore, RecordedEvent } from '../eventstore/port.ts';
import type {
  Checkpoint,
  Collection,
  Doc,
  IndexSpec,
  ReadStore,
  WriteOp,
} from '../projections/read-store.ts';
import { createFollower, type Follower } from './follower.ts';
import type { Supervisor } from './supervisor.ts';

/** `_id` of the guard document in the follower's collection (a stream id never starts with `$`). */
export const GUARD = '$checkpoint';

/** A fenced guard's position: past any checkpoint, so that every commit through it is refused. */
export const FENCED = Number.MAX_SAFE_INTEGER;

/**
 * The guard of a follower (`_id`), and those of its earlier releases (`retired`): each collection it
 * writes holds these fenced, so that a writer of such a release still running (a rolling update) has
 * each of its commits refused whole rather than writing documents of the earlier shape.
 */
export interface GuardIds {
  id: string;
  retired: readonly string[];
}

/** Documents read at a time at start. */
const PAGE = 5_000;

export interface DurableFollowerOptions<D extends Doc> {
  /** The checkpoint's name (and the logs'). */
  name: string;
  /** The collection of the working set: one document per item. */
  collection: string;
  /** The documents' shape: a working set stored by another version is discarded and rebuilt. */
  version: string;
  store: EventStore;
  readStore: ReadStore;
  clock: Clock;
  filter: EventFilter;
  /** Largest batch handed to `apply`. Default 1,000. */
  maxBatchSize?: number;
  /** Most events applied before a commit. Default 10,000. */
  commitEveryEvents?: number;
  /**
   * Longest wait, in real time, before applied events are committed. Default 250 ms; 0 commits after
   * every batch. Only how far a restart replays depends on it, never what the owner does.
   */
  commitEveryMs?: number;
  logger?: Logger;
  /** Takes back one stored document at start, before any event is applied. */
  restore(doc: D): void;
  /** Applies a batch in order, calling `changed` for every item it changed. */
  apply(events: RecordedEvent[]): Promise<void> | void;
  /** Whether the owner reflects already the events of `streamId` up to `position` (`follower.ts`). */
  known?(streamId: string, position: number): boolean;
  /** The log was read through `position` with nothing handed to `apply` since the last batch. */
  passed?(position: number): void;
  /**
   * The document to store for a changed item, null when it left the working set (its document is
   * deleted), or undefined when its stored document stays as it is.
   */
  save(key: string): D | null | undefined;
  /** The collection's indexes (created with it, or with an upgrade's copy). */
  indexes?: readonly IndexSpec[];
  /**
   * Takes back the working set at start instead of every document (`restore`): an owner that holds
   * part of it reads what it holds itself. Answers how many documents it took back.
   */
  restoreFrom?(collection: Collection<D>): Promise<number>;
  /** Fields the guard document carries with each checkpoint (a summary of the working set). */
  guardFields?(): Record<string, unknown>;
  /** The guard's `_id` and those of earlier releases, fenced. Default: `GUARD`, none retired. */
  guard?: GuardIds;
  /**
   * The documents a commit stored (null: deleted), as `save` answered them, once the store holds them
   * (or reflects more: another follower stored further).
   */
  committed?(saved: ReadonlyMap<string, D | null>): void;
  /**
   * Documents of version `from` are upgraded in place of a rebuild: copied through `document` into a
   * new collection with `indexes`, which replaces the old one with the checkpoint of this version
   * (docs/read-side.md, "Start-up and restart"). `summary` folds the documents into the guard's fields.
   */
  upgrade?: {
    from: string;
    document(old: Doc): D;
    summary(docs: readonly D[], fields: Record<string, unknown>): Record<string, unknown>;
  };
  /** Paces resubscriptions after a drop and reports this follower's health. */
  supervisor?: Supervisor;
}

export interface DurableFollower {
  /** Restores the working set and subscribes after the checkpoint; `caughtUp` tells when the tail is in. */
  start(): Promise<void>;
  /** Resolves once every event that existed at start is applied (rejects if it is stopped first). */
  readonly caughtUp: Promise<void>;
  /** Marks an item changed: its document is written, or deleted, with the next checkpoint. */
  changed(key: string): void;
  /** Resolves once every event of the filter up to the store's current head is applied (in memory). */
  settle(timeoutMs?: number): Promise<void>;
  /** Commits what is applied now: the changed documents and the checkpoint. */
  flush(): Promise<void>;
  /** Where the last start resumed: the checkpoint (0: the first event) and the documents restored. */
  resumed(): { position: number; documents: number };
  stop(): Promise<void>;
}

/** The guard: refuses the whole commit when the stored checkpoint is past `position`. */
function guard(id: string, position: number, fields: Record<string, unknown> = {}): WriteOp {
  return {
    updateOne: {
      filter: { _id: id, position: { $lte: position } },
      update: { $set: { ...fields, position } },
      upsert: true,
    },
  };
}

const guardId = (options: DurableFollowerOptions<Doc>) => options.guard?.id ?? GUARD;

/** The guard document `id` at `position`, whatever it was (fencing it, or setting it after a move). */
export const guardAt = (id: string, position: number, fields: Record<string, unknown> = {}): WriteOp => ({
  replaceOne: { filter: { _id: id }, replacement: { _id: id, ...fields, position }, upsert: true },
});

/** The earlier releases' guards, fenced. */
const fences = (options: DurableFollowerOptions<Doc>): WriteOp[] =>
  (options.guard?.retired ?? []).map((id) => guardAt(id, FENCED));

/** Fences the earlier releases' guards in a collection resumed from that does not hold them fenced. */
async function fenceRetired<D extends Doc>(options: DurableFollowerOptions<D>, c: Collection<D>) {
  const open: string[] = [];
  for (const id of options.guard?.retired ?? []) {
    const stored = (await c.findOne({ _id: id })) as { position?: unknown } | null;
    if (stored?.position !== FENCED) open.push(id);
  }
  if (open.length === 0) return;
  await options.readStore.commit({
    writes: [{ collection: c as Collection, ops: open.map((id) => guardAt(id, FENCED)) }],
  });
}

/** Where a start resumes: after `position` (0: the first event), `events` applied before it. */
interface Resumed {
  position: number;
  events: number;
  documents: number;
}

/**
 * Reads the working set back and says where to resume. Without a checkpoint of this version, the
 * working set starts from the first event: documents are only ever committed with a checkpoint past 0,
 * so the collection holds none of this version (at most the guard); a changed version's all go. If
 * another follower stores a batch meanwhile, the guard refuses this reset and that is read back.
 */
async function restoreWorkingSet<D extends Doc>(
  options: DurableFollowerOptions<D>,
  c: Collection<D>,
): Promise<Resumed> {
  const { name, readStore, logger } = options;
  for (;;) {
    const checkpoint = await readStore.getCheckpoint(name);
    if (checkpoint && checkpoint.position > 0 && checkpoint.version === options.upgrade?.from) {
      await upgradeWorkingSet(options, c, checkpoint);
      continue;
    }
    if (checkpoint && checkpoint.position > 0 && checkpoint.version === options.version) {
      await fenceRetired(options, c);
      const documents = options.restoreFrom ? await options.restoreFrom(c) : await loadWorkingSet(options, c);
      return { position: checkpoint.position, events: checkpoint.events, documents };
    }
    const changed = checkpoint !== undefined && checkpoint.version !== options.version;
    if (changed) {
      logger?.info(
        { follower: name, stored: checkpoint.version ?? null, version: options.version },
        'working state of another version discarded: rebuilt from the events',
      );
    }
    const ops: WriteOp[] = [
      ...(changed ? [{ deleteMany: { filter: {} } }] : [guard(guardId(options), 0)]),
      ...fences(options),
    ];
    const updated_at = options.clock.now().toISOString();
    try {
      await readStore.commit({
        writes: [{ collection: c as Collection, ops }],
        checkpoints: [{ name, checkpoint: { position: 0, events: 0, updated_at, version: options.version } }],
      });
      // An owner that reads its documents itself gets the collection it will read them from.
      await options.restoreFrom?.(c);
      return { position: 0, events: 0, documents: 0 };
    } catch (err) {
      const stored = await readStore.getCheckpoint(name);
      if (changed || !stored || stored.position === 0) throw err;
    }
  }
}

/**
 * Copies the documents of the version `upgrade.from` through `upgrade.document` into a new collection
 * with the declared indexes (an index is never built over a live collection's documents), which
 * replaces the old one together with the checkpoint of this version: the working set is upgraded at
 * the cost of its documents, not rebuilt from the first event.
 */
async function upgradeWorkingSet<D extends Doc>(
  options: DurableFollowerOptions<D>,
  c: Collection<D>,
  checkpoint: Checkpoint,
): Promise<void> {
  const { readStore, upgrade, logger } = options;
  if (!upgrade) return;
  const shadow = await readStore.createShadow<D>(options.collection, options.indexes);
  let fields: Record<string, unknown> = {};
  let documents = 0;
  for (let after: unknown[] | undefined; ; ) {
    const page = await c.find({}, { sort: [['_id', 1]], limit: PAGE, after });
    const upgraded = page
      .filter((doc) => !String(doc._id).startsWith('$'))
      .map((doc) => upgrade.document(doc));
    fields = upgrade.summary(upgraded, fields);
    documents += upgraded.length;
    if (upgraded.length > 0) {
      await shadow.bulkWrite(
        upgraded.map((doc) => ({ replaceOne: { filter: { _id: doc._id }, replacement: doc, upsert: true } })),
      );
    }
    if (page.length < PAGE) break;
    after = [page[page.length - 1]._id];
  }
  // The guard of this release, and the earlier ones' fenced: a writer of the release upgraded from
  // has its commits refused from the promote on (its guard's upsert collides with the fenced one).
  await shadow.bulkWrite([
    guard(guardId(options), checkpoint.position, fields),
    ...fences(options),
  ] as WriteOp<D>[]);
  const updated_at = options.clock.now().toISOString();
  await readStore.promote(
    [shadow as Collection],
    [{ name: options.name, checkpoint: { ...checkpoint, updated_at, version: options.version } }],
  );
  logger?.info(
    { follower: options.name, from: upgrade.from, version: options.version, documents },
    'working state upgraded in place',
  );
}

/** Hands every stored document back to the owner, page by page; answers how many there were. */
async function loadWorkingSet<D extends Doc>(options: DurableFollowerOptions<D>, c: Collection<D>) {
  let documents = 0;
  for (let after: unknown[] | undefined; ; ) {
    const page = await c.find({}, { sort: [['_id', 1]], limit: PAGE, after });
    for (const doc of page) {
      // Guards and the like: an item's key never starts with `$`.
      if (String(doc._id).startsWith('$')) continue;
      options.restore(doc);
      documents += 1;
    }
    if (page.length < PAGE) return documents;
    after = [page[page.length - 1]._id];
  }
}

/**
 * Writes the documents of the changed `keys` with the checkpoint, in one commit guarded against moving
 * the stored checkpoint back: `ahead` when another follower stored further (nothing of ours is then
 * missing), `failed` when nothing was stored (the caller keeps the changes for the next commit).
 */
async function storeChanges<D extends Doc>(
  options: DurableFollowerOptions<D>,
  c: Collection<D>,
  keys: string[],
  at: { position: number; events: number },
): Promise<'stored' | 'ahead' | 'failed'> {
  const { name, readStore, logger } = options;
  const saved = new Map<string, D | null>();
  const ops: WriteOp[] = [];
  for (const key of keys) {
    const doc = options.save(key);
    if (doc === undefined) continue;
    saved.set(key, doc);
    ops.push(
      doc
        ? { replaceOne: { filter: { _id: key }, replacement: doc, upsert: true } }
        : { deleteOne: { filter: { _id: key } } },
    );
  }
  // Taken with the documents: the summary and the documents it sums are of one moment.
  ops.unshift(guard(guardId(options), at.position, options.guardFields?.()));
  const updated_at = options.clock.now().toISOString();
  try {
    await readStore.commit({
      writes: [{ collection: c as Collection, ops }],
      checkpoints: [{ name, checkpoint: { ...at, updated_at, version: options.version } }],
    });
    options.committed?.(saved);
    return 'stored';
  } catch (err) {
    const stored = await readStore.getCheckpoint(name).catch(() => undefined);
    if (stored && stored.position > at.position) {
      logger?.debug(
        { follower: name, position: at.position, stored: stored.position },
        'another follower is ahead',
      );
      options.committed?.(saved);
      return 'ahead';
    }
    logger?.error(
      { err, follower: name, position: at.position },
      'working state not stored; retried with the next batch',
    );
    return 'failed';
  }
}

export function createDurableFollower<D extends Doc>(options: DurableFollowerOptions<D>): DurableFollower {
  const { name, store, readStore, filter } = options;
  const maxBatchSize = options.maxBatchSize ?? 1_000;
  const commitEveryEvents = options.commitEveryEvents ?? 10_000;
  const commitEveryMs = options.commitEveryMs ?? 250;
  const dirty = new Set<string>();
  let collection: Collection<D> | undefined;
  let started = false;
  let stopped = false;
  /** Events applied since the follower started from the first event, as of the last commit. */
  let events = 0;
  /** Events applied and not yet committed. */
  let uncommitted = 0;
  /** How far the log is applied (its last event, or a position the subscription read through). */
  let appliedPosition = 0;
  /** The position of the last commit (or of the store's, when another follower was further). */
  let committedPosition = 0;
  /** A batch is being applied: a commit waits for its end. */
  let applying = false;
  /** The commit timer ran out while a batch was being applied. */
  let commitDue = false;
  let commitTimer: NodeJS.Timeout | undefined;
  /** Commits run one after another. */
  let committing: Promise<void> = Promise.resolve();
  let resumed = { position: 0, documents: 0 };
  const {
    promise: caughtUp,
    resolve: resolveCaughtUp,
    reject: rejectCaughtUp,
  } = Promise.withResolvers<void>();
  // A rejection nobody awaits must not crash the process; the owner reports it.
  caughtUp.catch(() => {});

  /** Commits what is applied, after the commits before it; a batch being applied waits for its end. */
  function commitNow(): Promise<void> {
    if (commitTimer !== undefined) clearTimeout(commitTimer);
    commitTimer = undefined;
    // A commit that failed (reported to its caller) does not stop the ones after it.
    committing = committing
      .catch(() => {})
      .then(() => {
        const c = collection;
        if (!c || appliedPosition <= committedPosition) return;
        const count = uncommitted;
        uncommitted = 0;
        return commit(c, appliedPosition, count);
      });
    return committing;
  }

  function commitSoon(): void {
    if (commitTimer !== undefined) return;
    commitTimer = setTimeout(() => {
      commitTimer = undefined;
      if (applying) commitDue = true;
      else void commitNow();
    }, commitEveryMs);
    commitTimer.unref();
  }
  /** Stores the changed items with the checkpoint `position`, unless another follower stored further. */
  async function commit(c: Collection<D>, position: number, count: number): Promise<void> {
    // Taken now, between batches: every key changed up to `position` is in it (and some after, from
    // stream re-reads or own appends: a document ahead of its checkpoint is safe, see the header).
    const keys = [...dirty];
    dirty.clear();
    const outcome = await storeChanges(options, c, keys, { position, events: events + count });
    if (outcome === 'stored') events += count;
    if (outcome !== 'failed') {
      committedPosition = position;
      return;
    }
    // Kept in memory and committed later; the working set itself is intact.
    for (const key of keys) dirty.add(key);
    uncommitted += count;
  }

  const follower: Follower = createFollower({
    name,
    store,
    filter,
    maxBatchSize,
    supervisor: options.supervisor,
    known: options.known,
    async apply(batch) {
      applying = true;
      try {
        await options.apply(batch);
      } finally {
        applying = false;
      }
      appliedPosition = batch[batch.length - 1].position;
      uncommitted += batch.length;
      if (uncommitted >= commitEveryEvents || commitEveryMs === 0 || commitDue) {
        commitDue = false;
        await commitNow();
      } else commitSoon();
    },
    // The log is read through `position` with no event of ours in between: the checkpoint
    // moves past the others' events, so a restart does not read them again.
    onProgress(position) {
      if (position <= appliedPosition) return;
      appliedPosition = position;
      options.passed?.(position);
      commitSoon();
    },
  });

  return {
    async start() {
      if (started || stopped) return;
      started = true;
      try {
        const c = await readStore.collection<D>(options.collection, options.indexes);
        const from = await restoreWorkingSet(options, c);
        events = from.events;
        resumed = { position: from.position, documents: from.documents };
        const position = from.position;
        if (stopped) {
          rejectCaughtUp(new Error(`${name} stopped before it caught up`));
          return;
        }
        collection = c;
        appliedPosition = position;
        committedPosition = position;
        follower.start(position);
        follower.caughtUp.then(resolveCaughtUp, rejectCaughtUp);
      } catch (err) {
        rejectCaughtUp(err);
        throw err;
      }
    },
    caughtUp,
    changed(key) {
      dirty.add(key);
    },
    settle: (timeoutMs = 5_000) => follower.settle(timeoutMs),
    flush: () => commitNow(),
    resumed: () => ({ ...resumed }),
    async stop() {
      stopped = true;
      await follower.stop();
      // What was applied is committed: a clean stop resumes exactly where it ended. (Changes made
      // after, by stream re-reads or own appends, have their events in the log, applied after a restart.)
      await commitNow();
    },
  };
}
