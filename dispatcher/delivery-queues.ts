/**
 * The delivery worker's working set (docs/webhooks.md, "Order, isolation, durability"): the queues
 * holding a delivery neither delivered nor parked, each folded from its stream
 * (`webhookdelivery-<webhook_id>_<cart_uuid>`) with the delivery queue's decider. A queue whose
 * deliveries are all settled leaves the set; a redelivery of one of them reads its stream again.
 *
 * At most `window` queues are held (docs/webhooks.md, "Scale"); the others are cold, their documents
 * the only copy (`dispatcher/cold-queues.ts`): an event of a cold queue is applied to its document,
 * and a queue that does not fit the window goes cold.
 */
import { domainEventOf, readState, type StreamState } from '../application/read-state.ts';
import type { EventRegistry } from '../domain/events.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import type { EventStore, RecordedEvent } from '../eventstore/port.ts';
import { ColdQueues, type DeliveryQueueDoc, earliest, queueDocument, waitingSince } from './cold-queues.ts';

/** A queue's whole stream as read and folded (`readState`). */
export type StoredQueue = StreamState<delivery.DeliveryQueueState>;

export interface Queue {
  stream: string;
  /** Revision of the last event applied, -1 before the first. */
  revision: number;
  /** Global position of the event at `revision` (0 before the first). */
  position: number;
  state: delivery.DeliveryQueueState;
  /** Correlation id of each unsettled delivery (from its scheduling event), carried into its attempts. */
  correlation: Map<string, string>;
  /** An attempt of the queue is under way. */
  busy: boolean;
  /** Deliveries of it counted with the cold queues: those of the cold document it was read from. */
  cold: number;
}

export type { DeliveryQueueDoc } from './cold-queues.ts';

export interface PendingSummary {
  /** Deliveries neither delivered nor parked. */
  depth: number;
  /** When the longest queued of them was queued (`queued_since`, ISO 8601), null when none. */
  oldestQueuedSince: string | null;
}

const settled = (d: delivery.Delivery) => d.status === 'delivered' || d.status === 'parked';

export class DeliveryQueues {
  /** The working set: queues with an unsettled delivery (or an attempt under way). */
  readonly held = new Map<string, Queue>();
  /**
   * Queues that left the working set on events of this worker's own (or a stream read) the log has
   * not handed over yet: those events, when they come, are known already. Bounded by the appends in
   * flight: an entry goes once the log has passed its position.
   */
  private readonly droppedAhead = new Map<string, { revision: number; position: number }>();
  /** Global position of the last event the log handed over. */
  private followed = 0;
  private readonly store: EventStore;
  private readonly registry: EventRegistry;
  /** Told of every queue changed: its document is written with the next checkpoint. */
  private readonly onChanged: (stream: string) => void;
  /** Told of a queue that left the working set: nothing of it is due any more. */
  private readonly onDropped: (stream: string) => void;
  /** Told of a queue that went cold, and when it is due (null: never). */
  private readonly onCold: (dueAt: string | null) => void;
  /** Most queues held. */
  readonly window: number;
  readonly cold: ColdQueues;

  constructor(options: {
    store: EventStore;
    registry: EventRegistry;
    /** The cold queues' documents (none by default: every queue held). */
    cold?: ColdQueues;
    /** Most queues held. Default: no bound. */
    window?: number;
    onChanged: (stream: string) => void;
    onDropped: (stream: string) => void;
    onCold?: (dueAt: string | null) => void;
  }) {
    this.store = options.store;
    this.registry = options.registry;
    this.cold = options.cold ?? new ColdQueues();
    this.window = options.window ?? Number.POSITIVE_INFINITY;
    this.onChanged = options.onChanged;
    this.onDropped = options.onDropped;
    this.onCold = options.onCold ?? (() => {});
  }

  /** Takes a stored queue into the window (at start, or when it falls due): counted as held now. */
  restore(doc: DeliveryQueueDoc): Queue {
    const queue = fromDocument(doc);
    this.cold.take(doc._id, doc.deliveries.length, true);
    queue.cold = 0;
    this.held.set(queue.stream, queue);
    return queue;
  }

  /** Whether the window has room for another queue. */
  hasRoom(): boolean {
    return this.held.size < this.window;
  }

  /**
   * The document to store for a queue: null when it left the working set, undefined when the stored
   * one stands (a cold queue not changed here).
   */
  save(stream: string): DeliveryQueueDoc | null | undefined {
    const queue = this.held.get(stream);
    if (!queue) return this.cold.save(stream);
    if (!queue.state.exists) return null;
    return queueDocument(
      stream,
      queue.revision,
      queue.position,
      queue.state.deliveries,
      Object.fromEntries(queue.correlation),
    );
  }

  /**
   * Whether the events of `stream` up to `position` are applied already: the queue held, or dropped
   * ahead of the log, reflects its stream up to a later position. Every event this worker appends is
   * applied as its append returns (`recordOwn`), so the log need not hand it over again
   * (docs/read-side.md, "Own appends").
   */
  knows(stream: string, position: number): boolean {
    const reflected =
      this.held.get(stream)?.position ??
      this.droppedAhead.get(stream)?.position ??
      this.cold.position(stream);
    return reflected !== undefined && reflected >= position;
  }

  /** The log has handed over every event up to `position`, or passed over them (`knows`). */
  followedTo(position: number): void {
    this.followed = position;
    for (const [stream, gone] of this.droppedAhead) {
      if (gone.position <= position) this.droppedAhead.delete(stream);
    }
  }

  /** Applies a batch of the log in order, telling `changed` of every queue it changed (to schedule). */
  async applyAll(events: RecordedEvent[], changed: (queue: Queue) => void): Promise<void> {
    for (const event of events) {
      const queue = await this.apply(event);
      if (queue) changed(queue);
    }
    this.followedTo(events[events.length - 1].position);
  }

  /** Applies one event of the log; answers the queue it changed (to schedule), if any. */
  async apply(event: RecordedEvent): Promise<Queue | undefined> {
    let queue = this.held.get(event.streamId);
    if (!queue) {
      const gone = this.droppedAhead.get(event.streamId);
      // Written by this worker (or read) before the queue left the working set: known already.
      if (gone && event.revision <= gone.revision) return undefined;
      this.droppedAhead.delete(event.streamId);
      const doc = await this.cold.get(event.streamId);
      // Taken into the window while its document was read.
      queue = this.held.get(event.streamId) ?? (doc ? fromDocument(doc) : undefined);
      if (!queue) {
        // Events of deliveries all settled change nothing; a new delivery or a redelivery does.
        if (event.type !== 'WebhookDeliveryScheduled' && event.type !== 'WebhookRedeliveryRequested') {
          return undefined;
        }
        queue = emptyQueue(event.streamId, event.revision);
      }
    }
    if (event.revision <= queue.revision) return undefined; // written by this worker, applied already
    const data = event.data as { delivery_id?: string };
    const unknownRedelivery =
      event.type === 'WebhookRedeliveryRequested' &&
      data.delivery_id !== undefined &&
      !delivery.findDelivery(queue.state, data.delivery_id);
    if (event.revision !== queue.revision + 1 || unknownRedelivery) {
      // A settled delivery is wanted again (or events were skipped): read the whole queue.
      await this.reload(queue);
    } else {
      this.evolve(queue, event);
    }
    this.keepOrDrop(queue);
    // A cold queue has no timer of its own: the window's fill finds it when it is due.
    return this.held.get(queue.stream) === queue ? queue : undefined;
  }

  /** Applies the events this worker appended to a queue (at revisions from `first`). */
  recordOwn(queue: Queue, events: delivery.WebhookDeliveryEvent[], first: number, position: number): void {
    const last = first + events.length - 1;
    events.forEach((e, i) => {
      // The catch-up subscription may have applied some of these already while the append returned.
      if (first + i <= queue.revision) return;
      queue.state = delivery.decider.evolve(queue.state, e);
      queue.revision = first + i;
      if (first + i === last) queue.position = position;
    });
    this.prune(queue);
    this.onChanged(queue.stream);
  }

  /** Reads the queue's whole stream again (a redelivery of a settled delivery, or a conflict). */
  async reload(queue: Queue): Promise<void> {
    this.adopt(queue, await readState(this.store, this.registry, queue.stream, delivery.decider));
    this.onChanged(queue.stream);
  }

  /**
   * The queue held for `stream`, or one as its whole stream was read and folded (not held yet), its
   * cold document's deliveries (when it has one) counted as cold still.
   */
  async heldOr(stream: string, stored: StoredQueue): Promise<Queue> {
    const held = this.held.get(stream);
    if (held) return held;
    const doc = await this.cold.get(stream);
    const heldNow = this.held.get(stream);
    if (heldNow) return heldNow;
    const queue = doc ? fromDocument(doc) : emptyQueue(stream, 0);
    if (queue.revision < stored.revision) this.adopt(queue, stored);
    return queue;
  }

  /**
   * Applies what this worker appended (`own`, the last at `revision` and `position`) right after the
   * queue's whole stream as it read it (`stored`), with `correlationId`: the state as stored, unless
   * the log has handed it over already. The revisions are the append's: a queue deleted by the
   * retention and started again goes on after its deleted revisions on EventStoreDB.
   */
  recordOwnAfterRead(
    queue: Queue,
    stored: StoredQueue,
    own: {
      events: delivery.WebhookDeliveryEvent[];
      revision: number;
      position: number;
      correlationId: string;
    },
  ): void {
    if (queue.revision < stored.revision) this.adopt(queue, stored);
    for (const e of own.events) {
      if (e.type === 'WebhookDeliveryScheduled') queue.correlation.set(e.data.delivery_id, own.correlationId);
    }
    this.recordOwn(queue, own.events, own.revision - own.events.length + 1, own.position);
  }

  /** Takes the queue's whole stream as read and folded, settled deliveries forgotten. */
  private adopt(queue: Queue, stored: StoredQueue): void {
    queue.state = stored.state;
    queue.revision = stored.revision;
    queue.position = stored.position;
    queue.correlation.clear();
    for (const e of stored.events) noteCorrelation(queue, e);
    this.prune(queue);
  }

  /**
   * Keeps the queue in the working set while it holds an unsettled delivery (and while it is worked),
   * or cold when the window is full and the queue is not worked; a settled one leaves both.
   */
  keepOrDrop(queue: Queue): void {
    this.onChanged(queue.stream);
    const held = this.held.get(queue.stream);
    if (queue.busy || delivery.head(queue.state)) {
      if (held === undefined && !queue.busy && !this.hasRoom()) {
        this.cool(queue);
        return;
      }
      if (held !== queue) this.cold.take(queue.stream, queue.cold, false);
      queue.cold = 0;
      this.held.set(queue.stream, queue);
      return;
    }
    if (held === queue) this.held.delete(queue.stream);
    // Its document, stored as held or cold, is deleted with the next commit.
    if (held === queue || held === undefined) this.cold.settle(queue.stream, queue.cold);
    queue.cold = 0;
    this.dropped(queue);
  }

  /** A held queue waiting for a later time leaves the window for a due one: its document is its copy. */
  evict(queue: Queue): void {
    if (queue.busy || this.held.get(queue.stream) !== queue) return;
    this.held.delete(queue.stream);
    this.onChanged(queue.stream);
    this.cool(queue);
  }

  /** The queue goes cold: written with the next commit, no timer or ready-list entry of its own. */
  private cool(queue: Queue): void {
    // Counted as cold now: a copy of it taken back into the window (`keepOrDrop`) or cooled again
    // counts only what it adds.
    queue.cold = this.cold.put(queue, queue.cold);
    this.dropped(queue);
    this.onCold(delivery.headDueAt(queue.state));
  }

  /** The queue is held no more: the log's events of it up to its position are known already. */
  private dropped(queue: Queue): void {
    this.onDropped(queue.stream);
    if (queue.position > this.followed) {
      this.droppedAhead.set(queue.stream, { revision: queue.revision, position: queue.position });
    }
  }

  /** Deliveries neither delivered nor parked, held and cold. */
  pending(): PendingSummary {
    let depth = this.cold.coldDepth();
    let oldest: string | null = this.cold.oldest();
    for (const queue of this.held.values()) {
      if (!queue.state.exists) continue;
      for (const d of queue.state.deliveries) {
        depth += 1;
        // Aged from its last redelivery as the admin API ages it (docs/operations.md, "Health").
        oldest = earliest(oldest, waitingSince(d));
      }
    }
    return { depth, oldestQueuedSince: oldest };
  }

  /** Applies one event of the log. */
  private evolve(queue: Queue, event: RecordedEvent): void {
    const domainEvent = domainEventOf<delivery.WebhookDeliveryEvent>(this.registry, event);
    queue.state = delivery.decider.evolve(queue.state, domainEvent);
    queue.revision = event.revision;
    queue.position = event.position;
    noteCorrelation(queue, event);
    this.prune(queue);
  }

  /** Forgets settled deliveries: only the head and what follows it matter to the worker. */
  private prune(queue: Queue): void {
    if (!queue.state.exists || !queue.state.deliveries.some(settled)) return;
    for (const d of queue.state.deliveries) if (settled(d)) queue.correlation.delete(d.delivery_id);
    queue.state = { exists: true, deliveries: queue.state.deliveries.filter((d) => !settled(d)) };
  }
}

/** A scheduling's correlation id, carried into its delivery's attempts. */
function noteCorrelation(queue: Queue, event: RecordedEvent): void {
  if (event.type !== 'WebhookDeliveryScheduled') return;
  queue.correlation.set((event.data as { delivery_id: string }).delivery_id, event.metadata.correlation_id);
}

/** A cold queue as its document stores it (not held). */
function fromDocument(doc: DeliveryQueueDoc): Queue {
  return {
    stream: doc._id,
    revision: doc.revision,
    position: doc.position,
    state: { exists: true, deliveries: doc.deliveries },
    correlation: new Map(Object.entries(doc.correlation)),
    busy: false,
    cold: doc.deliveries.length,
  };
}

/**
 * A queue the worker does not hold, as of the event before `revision`: no document (it would be held
 * or cold), so no unsettled delivery: an empty one. Not yet in the working set.
 */
function emptyQueue(stream: string, revision: number): Queue {
  return {
    stream,
    revision: revision - 1,
    position: 0,
    state: revision === 0 ? delivery.decider.initialState : { exists: true, deliveries: [] },
    correlation: new Map(),
    busy: false,
    cold: 0,
  };
}
