/**
 * The delivery queues the worker does not hold (docs/webhooks.md, "Scale"): beyond its window
 * (`PDS_WEBHOOK_QUEUE_WINDOW`), a queue with an unsettled delivery is *cold*, its document in
 * `webhook_delivery_queues` (or its shard's collection, `dispatcher/shards.ts`) the only copy. Each document carries when its head next needs the worker
 * (`due_at`) and since when its oldest delivery waits (`queued_since`), both indexed, so the due ones
 * are found in due order, and the oldest, without a scan.
 *
 * A cold queue an event changes is loaded, changed and kept here until the durable follower's next
 * commit has stored it with its checkpoint (`committed`): until then this is its only current copy,
 * and what an event, a fill or a scheduling of the queue reads. Documents only read are forgotten two
 * commits later. Both are bounded by the events applied between commits (`commitEveryEvents`).
 */
import { GUARD, type GuardIds } from '../application/durable-follower.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import { type Collection, compareStrings, type Doc, type IndexSpec } from '../projections/read-store.ts';

/** A queue as stored (`webhook_delivery_queues`): its unsettled deliveries and what attempts need. */
export interface DeliveryQueueDoc extends Doc {
  _id: string;
  revision: number;
  /** Global position of the queue's event at `revision`. */
  position: number;
  deliveries: delivery.Delivery[];
  /** Correlation id of each delivery, by delivery id. */
  correlation: Record<string, string>;
  /** When the head next needs the worker: its next attempt, or its lease's end; null when never. */
  due_at: string | null;
  /** When the delivery waiting longest started waiting (`queued_since`), null when none waits. */
  queued_since: string | null;
}

/** What a queue going cold is stored from (`dispatcher/delivery-queues.ts`, `Queue`). */
interface QueueState {
  stream: string;
  revision: number;
  position: number;
  state: delivery.DeliveryQueueState;
  correlation: Map<string, string>;
}

/** Indexes of `webhook_delivery_queues`: the due queues in due order, the oldest delivery waiting. */
export const QUEUE_INDEXES: readonly IndexSpec[] = [
  { keys: [['due_at', 1]] },
  { keys: [['queued_since', 1]] },
];

/**
 * The guard of the queue collections: not the one of version 1's release (`GUARD`), which each of
 * them holds fenced, so that a worker of that release still running writes nothing into them.
 */
export const QUEUE_GUARD: GuardIds = { id: '$guard', retired: [GUARD] };

/** Field of the guard document (`durable-follower.ts`) counting the deliveries of every document. */
export const PENDING_FIELD = 'pending_deliveries';

/** Documents read at a time when the window is filled. */
const PAGE = 500;

/** When a delivery started waiting: its last redelivery's request, else its scheduling. */
export const waitingSince = (d: delivery.Delivery) => d.queued_since ?? d.scheduled_at;

/** The earliest of ISO times (null: none). */
export function earliest(a: string | null, b: string | null): string | null {
  if (a === null) return b;
  if (b === null) return a;
  return Date.parse(a) <= Date.parse(b) ? a : b;
}

/** The document of a queue's unsettled `deliveries`, with the fields its indexes find it by. */
export function queueDocument(
  stream: string,
  revision: number,
  position: number,
  deliveries: delivery.Delivery[],
  correlation: Record<string, string>,
): DeliveryQueueDoc {
  const state = { exists: true as const, deliveries };
  let since: string | null = null;
  for (const d of deliveries) since = earliest(since, waitingSince(d));
  return {
    _id: stream,
    revision,
    position,
    deliveries,
    correlation,
    due_at: delivery.headDueAt(state),
    queued_since: since,
  };
}

/** The version of the documents upgraded in place (`upgradedDocument`). */
export const UPGRADED_FROM = '1';

/** A document of version 1 (without `due_at` and `queued_since`), as version 2 stores it. */
export function upgradedDocument(old: Doc): DeliveryQueueDoc {
  const d = old as unknown as DeliveryQueueDoc;
  return queueDocument(d._id, d.revision, d.position, d.deliveries, d.correlation);
}

/** The guard's count of deliveries, with the documents `docs` added (an upgrade's copy). */
export function countedIn(docs: readonly DeliveryQueueDoc[], fields: Record<string, unknown>) {
  const before = typeof fields[PENDING_FIELD] === 'number' ? (fields[PENDING_FIELD] as number) : 0;
  return { [PENDING_FIELD]: before + docs.reduce((n, doc) => n + doc.deliveries.length, 0) };
}

/** A document's place in the `due_at` index: its `due_at`, then its `_id`. */
type IndexKey = readonly [string, string];

const compareKeys = (a: IndexKey, b: IndexKey) => compareStrings(a[0], b[0]) || compareStrings(a[1], b[1]);

const lower = (a: IndexKey | undefined, b: IndexKey) => (a === undefined || compareKeys(b, a) < 0 ? b : a);

/** What happens here during a walk of the `due_at` index. */
interface Walk {
  /** The lowest key written here: the cursor the walk ends with is before it. */
  low: IndexKey | undefined;
  /** Streams whose change here a commit stored: a page read before it holds their previous copy. */
  committed: Set<string>;
}

interface InMemory {
  /** The document as last read or changed; null once its queue settled (to delete). */
  doc: DeliveryQueueDoc | null;
  /** Changed and not yet stored. */
  changed: boolean;
  /** The commit it was read in (`commits`), for a read one to be forgotten. */
  commit: number;
}

export class ColdQueues {
  private collection: Collection<DeliveryQueueDoc> | undefined;
  /** Cold documents read or changed since the commit before the last. */
  private readonly docs = new Map<string, InMemory>();
  /** Streams written here while a read was on its way, one set per read: what it read may be stale. */
  private readonly watchers = new Set<Set<string>>();
  private commits = 0;
  /** Deliveries in cold documents (those not held), as stored or changed here. */
  private depth = 0;
  /** The oldest `queued_since` stored, as of the last commit. */
  private storedOldest: string | null = null;
  /**
   * Where the next fill's walk of the `due_at` index starts (undefined: at its start). Every document
   * stored at or before it is held (or one a fill handed over to be held, `rewind` else), or written
   * here since with a later `due_at`: the held queues due first are not read again by each fill.
   */
  private heldUpTo: IndexKey | undefined;
  /** Streams taken into the window (`take`) and not written here since: their deliveries are held. */
  private readonly taken = new Set<string>();
  /** The walks of the index under way (`Walk`). */
  private readonly walks = new Set<Walk>();

  /** The collection, once the follower opened it; `pending` is the guard's count of every delivery. */
  attach(collection: Collection<DeliveryQueueDoc>, pending: number): void {
    this.collection = collection;
    this.depth = pending;
    this.heldUpTo = undefined;
    this.taken.clear();
  }

  /** A document `due` handed over was not taken into the window: the next walk starts from the start. */
  rewind(): void {
    this.heldUpTo = undefined;
  }

  /** The guard's count of deliveries stored at start (0 before the first commit). */
  static async storedPending(collection: Collection<DeliveryQueueDoc>): Promise<number> {
    const guard = (await collection.findOne({ _id: QUEUE_GUARD.id })) as Record<string, unknown> | null;
    const n = guard?.[PENDING_FIELD];
    return typeof n === 'number' ? n : 0;
  }

  /** Deliveries in cold documents. */
  coldDepth(): number {
    return this.depth;
  }

  /** The oldest delivery waiting in a cold document or a stored one (held queues as of the last commit). */
  oldest(): string | null {
    let oldest = this.storedOldest;
    for (const entry of this.docs.values())
      if (entry.changed && entry.doc) oldest = earliest(oldest, entry.doc.queued_since);
    return oldest;
  }

  /** The position a cold document in memory reflects its stream up to. */
  position(stream: string): number | undefined {
    return this.docs.get(stream)?.doc?.position;
  }

  /**
   * The document to store for `stream` when it is not held: its change, null when its queue settled
   * here, undefined when the stored one stands.
   */
  save(stream: string): DeliveryQueueDoc | null | undefined {
    const entry = this.docs.get(stream);
    return entry?.changed ? entry.doc : undefined;
  }

  /** The cold document of `stream` (its current copy), or null when it has none. */
  async get(stream: string): Promise<DeliveryQueueDoc | null> {
    for (;;) {
      const entry = this.docs.get(stream);
      if (entry) return entry.doc;
      const collection = this.collection;
      if (!collection) return null;
      const touched = new Set<string>();
      this.watchers.add(touched);
      let doc: DeliveryQueueDoc | null;
      try {
        doc = await collection.findOne({ _id: stream });
      } finally {
        this.watchers.delete(touched);
      }
      // Written here meanwhile (and maybe stored and forgotten): read again.
      if (touched.has(stream)) continue;
      const again = this.docs.get(stream);
      if (again) return again.doc;
      this.docs.set(stream, { doc, changed: false, commit: this.commits });
      return doc;
    }
  }

  /**
   * The queue of `stream` goes cold (or stays so) as `queue` holds it, `previous` of its deliveries
   * counted here already; answers how many of the stream's deliveries are counted here now.
   */
  put(queue: QueueState, previous: number): number {
    const deliveries = queue.state.exists ? queue.state.deliveries : [];
    const doc = queueDocument(
      queue.stream,
      queue.revision,
      queue.position,
      deliveries,
      Object.fromEntries(queue.correlation),
    );
    const entry = this.docs.get(queue.stream);
    const current = entry?.doc;
    // A later state written here already (an event applied while this one's append returned) stands,
    // and so does the same state written (and counted) by another copy of the queue.
    if (
      current &&
      (current.revision > doc.revision || (entry.changed && current.revision === doc.revision))
    ) {
      // The queue leaves the window all the same: its document is a cold one from now on.
      this.taken.delete(queue.stream);
      this.reconsider(queue.stream, current);
      return current.deliveries.length;
    }
    this.depth += deliveries.length - previous;
    this.write(queue.stream, doc);
    return deliveries.length;
  }

  /** The cold queue of `stream` settled: its document is deleted with the next commit. */
  settle(stream: string, previous: number): void {
    this.depth -= previous;
    this.write(stream, null);
  }

  /**
   * The cold queue of `stream` enters the window: its deliveries (`previous`, read from its document:
   * `stored` when read from the store itself, else through `get` or as it went cold) are counted with
   * the held queues. A copy taken once already (by another reader of it) counts nothing more.
   */
  take(stream: string, previous: number, stored: boolean): void {
    if (stored || !this.taken.has(stream)) this.depth -= previous;
    this.taken.add(stream);
    this.docs.delete(stream);
    this.touch(stream);
  }

  /**
   * The cold documents due at `now`, in due order, up to `room` of them, skipping those `held`;
   * and when the next one not held falls due after those (null: none). The stored ones are one walk
   * of the `due_at` index from `heldUpTo`, a page at a time of at most the room left and one more (to
   * find the next due time); those changed here and not stored yet are among them. Each document
   * handed over is to be held (restored) by the caller, else it calls `rewind`.
   */
  async due(
    now: Date,
    room: number,
    held: (stream: string) => boolean,
  ): Promise<{ docs: DeliveryQueueDoc[]; next: string | null }> {
    const collection = this.collection;
    const found: DeliveryQueueDoc[] = [];
    let next: string | null = null;
    const isDue = (doc: DeliveryQueueDoc) => doc.due_at !== null && Date.parse(doc.due_at) <= now.getTime();
    for (const [stream, entry] of this.docs) {
      if (!entry.changed || !entry.doc?.due_at || held(stream)) continue;
      if (isDue(entry.doc)) found.push(entry.doc);
      else next = earliest(next, entry.doc.due_at);
    }
    const touched = new Set<string>();
    this.watchers.add(touched);
    const walk: Walk = { low: undefined, committed: new Set() };
    this.walks.add(walk);
    // The walk's first documents, up to the first neither held nor handed over: the cursor's next place.
    const prefix: { key: IndexKey; found: DeliveryQueueDoc | undefined }[] = [];
    let inPrefix = true;
    try {
      let stored = 0;
      let walked = false;
      for (let after: unknown[] | undefined = this.heldUpTo && [...this.heldUpTo]; collection && !walked; ) {
        const limit = Math.min(PAGE, Math.max(0, room - stored) + 1);
        const page = await collection.find({ due_at: { $gte: '' } }, { sort: [['due_at', 1]], limit, after });
        for (const doc of page) {
          const key: IndexKey = [doc.due_at as string, doc._id];
          if (held(doc._id)) {
            if (inPrefix) prefix.push({ key, found: undefined });
            continue;
          }
          // Changed here (its copy here is the current one, or the one a commit stored meanwhile) is
          // not the store's to give.
          if (touched.has(doc._id) || walk.committed.has(doc._id) || this.docs.get(doc._id)?.changed) {
            inPrefix = false;
            continue;
          }
          if (stored >= room || !isDue(doc)) {
            next = earliest(next, doc.due_at);
            walked = true;
            break;
          }
          found.push(doc);
          stored += 1;
          if (inPrefix) prefix.push({ key, found: doc });
        }
        if (page.length < limit) break;
        const last = page[page.length - 1];
        after = [last.due_at, last._id];
      }
    } finally {
      this.watchers.delete(touched);
      this.walks.delete(walk);
    }
    found.sort((a, b) => Date.parse(a.due_at as string) - Date.parse(b.due_at as string));
    // Those beyond the room are due already: the next fill takes them.
    for (const doc of found.slice(room)) next = earliest(next, doc.due_at);
    // The current copy of each: the one here when written meanwhile (none when it settled meanwhile).
    const handed = new Set(found.slice(0, room));
    const docs: DeliveryQueueDoc[] = [];
    for (const doc of handed) {
      const entry = this.docs.get(doc._id);
      const current = entry ? entry.doc : touched.has(doc._id) ? null : doc;
      if (current) docs.push(current);
    }
    this.moveCursor(prefix, handed, walk.low);
    return { docs, next };
  }

  /**
   * Moves `heldUpTo` over the walk's first documents held or handed over (`handed`), unless a document
   * was written here meanwhile at or before where it would go (`low`).
   */
  private moveCursor(
    prefix: readonly { key: IndexKey; found: DeliveryQueueDoc | undefined }[],
    handed: ReadonlySet<DeliveryQueueDoc>,
    low: IndexKey | undefined,
  ): void {
    let upTo = this.heldUpTo;
    for (const { key, found } of prefix) {
      if (found && !handed.has(found)) break;
      upTo = key;
    }
    if (upTo === this.heldUpTo || (low && upTo && compareKeys(low, upTo) <= 0)) return;
    this.heldUpTo = upTo;
  }

  /** The earliest `due_at` of the documents changed here and not stored yet. */
  unsavedDue(): string | null {
    let due: string | null = null;
    for (const entry of this.docs.values())
      if (entry.changed && entry.doc) due = earliest(due, entry.doc.due_at);
    return due;
  }

  /** A commit stored `saved`: those still as saved are the store's now; read ones age out. */
  committed(saved: ReadonlyMap<string, DeliveryQueueDoc | null>): void {
    this.commits += 1;
    for (const [stream, entry] of this.docs) {
      if (
        entry.changed ? saved.has(stream) && saved.get(stream) === entry.doc : entry.commit < this.commits - 1
      ) {
        this.docs.delete(stream);
        if (entry.changed) for (const walk of this.walks) walk.committed.add(stream);
      }
    }
    void this.refreshOldest();
  }

  /** Reads the oldest `queued_since` stored (one step of its index). */
  async refreshOldest(): Promise<void> {
    const collection = this.collection;
    if (!collection) return;
    try {
      const [doc] = await collection.find(
        { queued_since: { $gte: '' } },
        { sort: [['queued_since', 1]], limit: 1 },
      );
      this.storedOldest = doc?.queued_since ?? null;
    } catch {
      // The store unavailable: the next commit reads it again.
    }
  }

  private write(stream: string, doc: DeliveryQueueDoc | null): void {
    this.docs.set(stream, { doc, changed: true, commit: this.commits });
    this.taken.delete(stream);
    this.touch(stream);
    if (doc) this.reconsider(stream, doc);
  }

  /** `doc` is a cold document now: a walk from the cursor must not pass it by. */
  private reconsider(stream: string, doc: DeliveryQueueDoc): void {
    if (doc.due_at === null) return;
    const key: IndexKey = [doc.due_at, stream];
    if (this.heldUpTo && compareKeys(key, this.heldUpTo) <= 0) this.heldUpTo = undefined;
    for (const walk of this.walks) walk.low = lower(walk.low, key);
  }

  private touch(stream: string): void {
    for (const touched of this.watchers) touched.add(stream);
  }
}
