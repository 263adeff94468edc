/**
 * The EventStore port: what the domain, projections and dispatcher need from an event store.
 * Two adapters implement it (embedded `node:sqlite` and EventStoreDB) and pass one contract suite
 * (test/contract/eventstore.ts). Semantics follow EventStoreDB so that code written against the
 * embedded store behaves the same in production.
 *
 * Revisions and positions are plain numbers: a stream revision starts at 0; a global position is a
 * positive integer, strictly increasing in `$all` order. JavaScript numbers are exact up to 2^53,
 * far beyond any log this service will hold.
 */
import { randomUUIDv7 } from 'node:crypto';
import { STREAM_PREFIX as DELIVERY_QUEUE_PREFIX } from '../domain/webhook-delivery/vocabulary.ts';

/** Who caused an event (docs/write-side.md). */
export type ActorType = 'platform' | 'operator' | 'partner' | 'system';
export interface Actor {
  type: ActorType;
  id: string;
}

/** Metadata carried by every event (docs/write-side.md). */
export interface EventMetadata {
  correlation_id: string;
  causation_id: string | null;
  actor: Actor;
  /** ISO 8601 UTC: when the command that produced the event was decided. */
  occurred_at: string;
  /** Version of the event's data schema, so old events stay readable as schemas evolve. */
  schema_version: number;
}

/**
 * A fresh event id: a version 7 UUID, whose first 48 bits are the time in milliseconds. Event ids are
 * unique in an index; ids that grow with time add to its last pages, where random ones dirty a page
 * of it per append, pages every commit writes again (docs/operations.md, "Threads").
 */
export const newEventId = (): string => randomUUIDv7();

export interface NewEvent<Data = unknown> {
  /** A UUID. Re-appending an event with the same id to the same stream is a no-op. Generated if absent (`newEventId`). */
  id?: string;
  type: string;
  data: Data;
  metadata: EventMetadata;
}

export interface RecordedEvent<Data = unknown> {
  id: string;
  streamId: string;
  type: string;
  /** 0-based revision of the event within its stream. */
  revision: number;
  /** Global position in `$all`. */
  position: number;
  data: Data;
  metadata: EventMetadata;
  /** ISO 8601 UTC time at which the store recorded the event. */
  recordedAt: string;
}

/**
 * Expected state of a stream for an append (optimistic concurrency), as in EventStoreDB:
 * `any` never conflicts, `no_stream` requires the stream to be absent, `stream_exists` requires it to
 * hold at least one event, a number requires that revision to be the stream's last.
 */
export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | number;

export interface AppendOptions {
  expectedRevision?: ExpectedRevision;
  /**
   * For operational streams only, never business ones (docs/operations.md, "Retention"): the
   * stream's events may be dropped once they are older than this (ms, from when each was recorded).
   * EventStoreDB: the stream's `$maxAge` (whole seconds, rounded up), set by the append that starts the
   * stream; its reads leave expired events out and a scavenge deletes them, but for the stream's last
   * event, which the server keeps (with the `$$` metadata record). The embedded store
   * deletes the stream whole at `dropExpired` once its last event has expired (it is absent again),
   * and until then its reads return every event. A caller judges expiry by its own clock either way.
   */
  maxAgeMs?: number;
}

/**
 * The streams `EventStore.deleteStream` may delete: webhook delivery queues, operational records
 * (docs/operations.md, "Retention"). Never a business stream.
 */
export const DELETABLE_STREAM_PREFIXES: readonly string[] = [DELIVERY_QUEUE_PREFIX];

/** Whether `EventStore.deleteStream` may delete the stream. */
export const isDeletableStream = (streamId: string): boolean =>
  DELETABLE_STREAM_PREFIXES.some((prefix) => streamId.startsWith(prefix));

/** Refuses a stream `EventStore.deleteStream` may not delete. */
export function checkDeletable(streamId: string): void {
  if (!isDeletableStream(streamId)) {
    throw new InvalidEventError(`${streamId} is not an operational stream that may be deleted`);
  }
}

/** Refuses a `maxAgeMs` that is not a whole number of milliseconds above zero. */
export function checkMaxAge(maxAgeMs: number): void {
  if (!Number.isSafeInteger(maxAgeMs) || maxAgeMs <= 0) {
    throw new InvalidEventError(`maxAgeMs must be a whole number of milliseconds above 0, got ${maxAgeMs}`);
  }
}

/** What `dropExpired` removed. */
export interface DroppedEvents {
  events: number;
  streams: number;
}

export interface AppendResult {
  /** The stream's revision after the append (the last event's revision). */
  nextExpectedRevision: number;
  /** Global position of the last event written (or of the original write, for an idempotent re-append). */
  position: number;
}

export type Direction = 'forwards' | 'backwards';

export interface ReadStreamOptions {
  direction?: Direction;
  /** First revision to read (inclusive). Defaults to the start (forwards) or the end (backwards). */
  fromRevision?: number;
  maxCount?: number;
}

/** Server-side filter for `$all` reads and subscriptions. System streams (`$…`) are always excluded. */
export type EventFilter = { streamPrefixes: string[] } | { eventTypes: string[] };

export interface ReadAllOptions {
  direction?: Direction;
  /**
   * Exclusive bound: forwards reads return events with position > `after`; backwards reads return
   * events with position < `before`. Omitted: from the start (forwards) or the end (backwards).
   */
  after?: number;
  before?: number;
  maxCount?: number;
  filter?: EventFilter;
}

/** What `countAll` counts: events after a position, matching a filter, up to a bound. */
export interface CountAllOptions {
  /** Exclusive: events with position > `after`. */
  after: number;
  filter?: EventFilter;
  /** The count stops here: a lag shown as "more than this" costs no more than this. */
  max: number;
}

/** Where a subscription starts: the beginning, the current end, or after a checkpointed position. */
export type SubscriptionStart = 'start' | 'end' | { after: number };

export interface CatchUpSubscriptionOptions {
  from?: SubscriptionStart;
  filter?: EventFilter;
  /** Largest batch handed to `onEvents` at once. */
  maxBatchSize?: number;
  /**
   * Whether the subscriber reflects already the events of `streamId` up to `position` (its own
   * appends, applied as they returned). An adapter that knows an append's stream and positions
   * without reading it (the embedded store's journal) may pass over such events without delivering
   * them, telling `onProgress` instead (docs/read-side.md, "Own appends"); another delivers them.
   */
  known?(streamId: string, position: number): boolean;
}

export interface CatchUpHandlers {
  /**
   * Receives events in `$all` order. The next batch is not delivered before the returned promise
   * settles (back-pressure). A rejection stops the subscription with that error.
   */
  onEvents(events: RecordedEvent[]): Promise<void> | void;
  /** Called once, when the subscription has delivered everything that existed when it caught up. */
  onCaughtUp?(): void;
  /**
   * Told that the log has been read through `position`, beyond the last event delivered, with every
   * matching event up to it delivered: a filtered subscription skipping others' events (EventStoreDB's
   * checkpoint reached). A follower stores it as its checkpoint, so a restart does not read the skipped
   * events again (docs/read-side.md). Awaited like `onEvents`. Optional for adapters: the embedded one
   * tells it; one that does not leaves followers' checkpoints at their last event, as before.
   */
  onProgress?(position: number): Promise<void> | void;
}

export interface CatchUpSubscription {
  /** Resolves when the subscription first caught up with the end of `$all`. */
  readonly caughtUp: Promise<void>;
  /** Settles when the subscription ends: resolves after `stop()`, rejects on a handler or store error. */
  readonly done: Promise<void>;
  /** Position of the last event handed to `onEvents`, if any. */
  lastPosition(): number | undefined;
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Persistent subscriptions (competing consumers with server-side checkpoints, as in EventStoreDB)

export interface PersistentSubscriptionSettings {
  /** Where the group starts reading when it is created. Defaults to 'start' (EventStoreDB's own default is 'end'). */
  from?: SubscriptionStart;
  filter?: EventFilter;
  /**
   * A message nacked with `retry` (or timed out) more than this many times is parked. At most
   * `MAX_RETRY_COUNT`, which a group that must never park asks for.
   */
  maxRetryCount?: number;
  /** A message not acked or nacked within this time is redelivered (counts as a retry). */
  messageTimeoutMs?: number;
}

export type NackAction = 'park' | 'retry' | 'skip';

export interface PersistentMessage {
  event: RecordedEvent;
  /** How many times this message was delivered before (0 on the first delivery). */
  retryCount: number;
  ack(): Promise<void>;
  nack(action: NackAction, reason: string): Promise<void>;
}

export interface PersistentConsumerOptions {
  /** How many unacknowledged messages this consumer may hold at once. */
  bufferSize?: number;
}

export interface PersistentConsumer {
  /** Settles when the consumer ends: resolves after `stop()`, rejects on a store error. */
  readonly done: Promise<void>;
  /** Stops receiving; messages held and not acked are redelivered to other consumers or later. */
  stop(): Promise<void>;
}

export interface ParkedMessage {
  event: RecordedEvent;
  reason: string;
  parkedAt: string;
}

/** The largest `maxRetryCount`: EventStoreDB keeps a group's retry count and its bound as 32-bit integers. */
export const MAX_RETRY_COUNT = 2_147_483_647;

export interface PersistentSubscriptionInfo {
  group: string;
  /** The filter only where the store reports it: EventStoreDB does not. */
  settings: Required<Omit<PersistentSubscriptionSettings, 'filter'>> & { filter?: EventFilter };
  /**
   * The settings the adapter chooses itself (EventStoreDB: the consumer strategy, checkpointing, buffers)
   * that differ on this group from those it creates groups with now, by name: an earlier version made
   * the group. `updatePersistentSubscription` sets them as it would create them. Empty on the embedded
   * store, which has no others.
   */
  outdated: string[];
  /** Every event at or before this position has been acked, skipped or parked. */
  lastCheckpointedPosition: number | undefined;
  parkedCount: number;
  connections: number;
}

export interface EventStore {
  /** Name of the adapter, for logs and `/readyz`. */
  readonly kind: 'sqlite' | 'esdb';

  append(streamId: string, events: NewEvent[], options?: AppendOptions): Promise<AppendResult>;
  /**
   * The stream as written: what a decision rests on, so a replicated store reads it where the writes
   * are (EventStoreDB: the leader). Throws `StreamNotFoundError` when the stream holds no event.
   */
  readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  /**
   * One page of `$all` as written (a replicated store reads where the writes are); call again with the
   * last position to continue.
   */
  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * Position of the last event in `$all` as written (0 when empty), optionally of the events matching
   * a filter.
   */
  headPosition(filter?: EventFilter): Promise<number>;
  /**
   * How many events of `$all` after a position match a filter, at most `max`: a projection's lag
   * (docs/operations.md, "Projections"), without reading the events themselves where the store can.
   */
  countAll(options: CountAllOptions): Promise<number>;

  subscribeToAll(options: CatchUpSubscriptionOptions, handlers: CatchUpHandlers): CatchUpSubscription;

  /**
   * Deletes expired events of streams appended with `maxAgeMs` (docs/operations.md, "Retention"), and
   * reports how many. The embedded store deletes here each stream whose last event has expired (but
   * not the log's last event, whose position the next append's follows); EventStoreDB drops them
   * itself, at a scavenge, and reports none.
   */
  dropExpired(): Promise<DroppedEvents>;

  /**
   * Deletes an operational stream whole (finished webhook deliveries past their retention,
   * docs/operations.md, "Retention"): only a stream of `DELETABLE_STREAM_PREFIXES` (any other throws
   * `InvalidEventError`), and only if its last event is the one the caller read, at `expected.revision`
   * and `expected.position`: otherwise throws `WrongExpectedVersionError` (the stream moved on, is
   * absent, or was deleted and started again up to the same revision), and nothing goes.
   * Answers false when the store cannot delete it yet: the embedded store keeps the stream of the log's
   * last event (the next append's position follows it); the caller tries again later. Afterwards the
   * stream reads as absent and an append expecting `no_stream` or `any` starts it again; its revisions
   * then start at 0 on the embedded store and go on after the deleted ones on EventStoreDB (which is
   * why the revision alone identifies the last event there), so a caller takes them from the append's
   * result. The embedded store deletes the events at once, and keeps no revision of these streams
   * cached. EventStoreDB deletes it softly: its reads answer "not found" at once, and `$all` reads and
   * subscriptions hand the events out until a scavenge, which removes all of them but the last (the
   * server keeps a deleted stream's last event, so that the stream's next revision is known) and
   * leaves the stream's metadata record (`$$<stream>`).
   */
  deleteStream(streamId: string, expected: { revision: number; position: number }): Promise<boolean>;

  /** Creates a persistent subscription group on `$all`. Throws `PersistentSubscriptionExistsError`. */
  createPersistentSubscription(group: string, settings?: PersistentSubscriptionSettings): Promise<void>;
  /**
   * Changes retry and timeout settings of a group, and sets the adapter's own settings as it creates
   * groups now (`outdated` in its info); its start and filter cannot change. Its consumers may be
   * dropped (EventStoreDB restarts the group) and join again; its checkpoint is kept. Throws
   * `PersistentSubscriptionNotFoundError`.
   */
  updatePersistentSubscription(
    group: string,
    settings: Pick<PersistentSubscriptionSettings, 'maxRetryCount' | 'messageTimeoutMs'>,
  ): Promise<void>;
  deletePersistentSubscription(group: string): Promise<void>;
  getPersistentSubscriptionInfo(group: string): Promise<PersistentSubscriptionInfo>;
  /** Every persistent subscription group on `$all`, by name. */
  listPersistentSubscriptions(): Promise<PersistentSubscriptionInfo[]>;
  /**
   * Joins a group as one consumer. Several consumers of one group (in this or other processes)
   * share its messages; each message is delivered to one of them at a time, at least once.
   */
  subscribeToPersistent(
    group: string,
    handler: (message: PersistentMessage) => Promise<void> | void,
    options?: PersistentConsumerOptions,
  ): PersistentConsumer;
  /** Parked messages of a group, oldest first. */
  listParkedMessages(group: string, options?: { maxCount?: number }): Promise<ParkedMessage[]>;
  /** Moves every parked message of a group back to delivery. */
  replayParkedMessages(group: string): Promise<void>;

  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Typed errors. Adapters map their engine's errors to these; callers never see engine errors.

export class EventStoreError extends Error {
  override name = 'EventStoreError';
}

export class WrongExpectedVersionError extends EventStoreError {
  override name = 'WrongExpectedVersionError';
  readonly streamId: string;
  readonly expected: ExpectedRevision;
  /** The stream's actual last revision, or 'no_stream'. */
  readonly actual: number | 'no_stream';
  constructor(streamId: string, expected: ExpectedRevision, actual: number | 'no_stream') {
    super(`stream ${streamId}: expected revision ${String(expected)}, actual ${String(actual)}`);
    this.streamId = streamId;
    this.expected = expected;
    this.actual = actual;
  }
}

export class StreamNotFoundError extends EventStoreError {
  override name = 'StreamNotFoundError';
  readonly streamId: string;
  constructor(streamId: string) {
    super(`stream ${streamId} not found`);
    this.streamId = streamId;
  }
}

export class PersistentSubscriptionExistsError extends EventStoreError {
  override name = 'PersistentSubscriptionExistsError';
  readonly group: string;
  constructor(group: string) {
    super(`persistent subscription group ${group} already exists`);
    this.group = group;
  }
}

export class PersistentSubscriptionNotFoundError extends EventStoreError {
  override name = 'PersistentSubscriptionNotFoundError';
  readonly group: string;
  constructor(group: string) {
    super(`persistent subscription group ${group} not found`);
    this.group = group;
  }
}

/** The engine cannot be reached or is shutting down; the operation may be retried. */
export class EventStoreUnavailableError extends EventStoreError {
  override name = 'EventStoreUnavailableError';
}

/** Input the store refuses (bad stream id, event type or JSON); never retried. */
export class InvalidEventError extends EventStoreError {
  override name = 'InvalidEventError';
}
