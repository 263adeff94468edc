/**
 * What a read-model projection is, for the projector that runs it
 * (docs/read-side.md, "Projections and checkpoints"): its name and version, its collections and filter, and how it applies an event through
 * a unit of work (`ProjectionTx`).
 */
import type { EventFilter, RecordedEvent } from '../eventstore/port.ts';
import type { Doc, DocId, Filter, FindOptions, IndexSpec, Update } from './read-store.ts';

/** What a projection may do with its documents while applying one event. */
export interface ProjectionTx {
  /** The document as of this point of the batch (undefined when absent). Prefetched or fetched on demand. */
  get<T extends Doc>(collection: string, id: DocId): T | undefined;
  /**
   * Documents by id, in the order asked (undefined where absent): those not prefetched are fetched
   * together, in one round trip, where `get` would fetch them one event attempt at a time.
   */
  getMany<T extends Doc>(collection: string, ids: readonly DocId[]): Array<T | undefined>;
  /**
   * Writes the document stamped with this event's position, and answers that stamped copy (which the
   * caller must not change); dropped, answering undefined, if it already reflects this event.
   */
  put(collection: string, doc: Doc): Doc | undefined;
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
  /**
   * Whether `doc` is one this unit of work fetched for itself and has not handed to a flush yet: the
   * projection may change it in place (undoing each change with `onAbort`), where any other document
   * is copied first (docs/read-side.md, "Documents a batch owns").
   */
  owns(doc: Doc): boolean;
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
  /**
   * Documents `apply` will read that the prefetched ones name (a product's menu products, by its
   * listings document), asked once those are fetched: `fetched` answers a document of the batch as
   * it stands (undefined when absent or not fetched). Hints too: anything missed is fetched on demand.
   */
  prefetchNamed?(
    event: RecordedEvent,
    fetched: (collection: string, id: DocId) => Doc | undefined,
  ): Array<[collection: string, id: DocId]>;
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
  /** `standby`: another projector holds the read store's lease and writes the read models. */
  state: 'starting' | 'live' | 'rebuilding' | 'failed' | 'standby';
  checkpoint: number;
  events_applied: number;
  lag_events: number;
  lag_seconds: number;
  error: string | null;
  progress: RebuildProgress | null;
  /**
   * The last rebuild's failure, why and when, until a rebuild of it succeeds (null when none failed).
   * A rebuild an upgrade asked for is tried again after a pause
   * (docs/read-side.md, "Upgrades of read models"); one an operator asked for, by the operator.
   */
  rebuild_failure: RebuildFailure | null;
}

export interface RebuildFailure {
  error: string;
  at: string;
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
