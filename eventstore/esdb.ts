/**
 * EventStoreDB / KurrentDB adapter of the EventStore port, on `@eventstore/db-client` 6.x (gRPC).
 *
 * Global positions. EventStoreDB addresses an event in `$all` by a (commit, prepare) pair of log
 * offsets. Every append made over gRPC is an implicit transaction whose events are each written as a
 * self-committing prepare record: the server reports commit == prepare == the event's own log position,
 * distinct per event and increasing in `$all` order, even for multi-event appends (AllReader's
 * committed-prepare branch; the append reply carries the last event's position as both values). Only
 * explicit transactions of the legacy TCP protocol (gone from 24.x servers) make events share a commit
 * position with different prepare positions. So the port's position is the commit position as a number,
 * and a position p maps back to {commit: p, prepare: p}, which is that event's own record boundary:
 * forward reads and subscriptions start there (inclusive on the server) and drop every event whose
 * (commit, prepare) is not beyond it, so `{after: p}` resumes strictly after p. An event whose commit and
 * prepare differ cannot be encoded losslessly and is refused with an error rather than silently
 * mis-ordered. Requires EventStoreDB 23.10 or later (caught-up signal, positions on stream reads).
 *
 * Filters. The 6.x client only filters subscriptions and persistent subscriptions server side; `$all`
 * reads are filtered here, page by page. Event-type filters are sent as an anchored regex of the exact
 * names (a prefix filter would also match longer names, and a persistent consumer in another process
 * could not know which ones to drop). System streams and event types (`$…`) are always dropped here too.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type {
  AllStreamResolvedEvent,
  AppendExpectedRevision,
  Filter,
  JSONEventData,
  JSONType,
  PersistentAction,
  PersistentSubscriptionToAllResolvedEvent,
  PersistentSubscriptionToAllSettings,
  Position,
  ReadPosition,
} from '@eventstore/db-client';
import {
  ANY,
  BACKWARDS,
  CancelledError,
  DeadlineExceededError,
  END,
  PersistentSubscriptionExistsError as EsdbPersistentSubscriptionExistsError,
  StreamNotFoundError as EsdbStreamNotFoundError,
  WrongExpectedVersionError as EsdbWrongExpectedVersionError,
  EventStoreDBClient,
  eventTypeFilter,
  excludeSystemEvents,
  FORWARDS,
  InvalidArgumentError,
  MaxAppendSizeExceededError,
  NO_STREAM,
  NotFoundError,
  NotLeaderError,
  PARK,
  PersistentSubscriptionDoesNotExistError,
  PersistentSubscriptionDroppedError,
  PINNED,
  persistentSubscriptionToAllSettingsFromDefaults,
  RETRY,
  SKIP,
  START,
  STREAM_EXISTS,
  StreamDeletedError,
  streamNameFilter,
  TimeoutError,
  UnavailableError,
} from '@eventstore/db-client';
import {
  type AppendOptions,
  type AppendResult,
  type CatchUpHandlers,
  type CatchUpSubscription,
  type CatchUpSubscriptionOptions,
  type EventFilter,
  type EventMetadata,
  type EventStore,
  EventStoreError,
  EventStoreUnavailableError,
  type ExpectedRevision,
  InvalidEventError,
  type NackAction,
  type NewEvent,
  type ParkedMessage,
  type PersistentConsumer,
  type PersistentConsumerOptions,
  type PersistentMessage,
  PersistentSubscriptionExistsError,
  type PersistentSubscriptionInfo,
  PersistentSubscriptionNotFoundError,
  type PersistentSubscriptionSettings,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  StreamNotFoundError,
  type SubscriptionStart,
  WrongExpectedVersionError,
} from './port.ts';

const DEFAULT_BATCH_SIZE = 500;
const DEFAULT_BUFFER_SIZE = 10;
const DEFAULT_MAX_RETRY = 10;
const DEFAULT_MESSAGE_TIMEOUT_MS = 30_000;
/** Checkpoint soon after acks, so a restarted consumer redelivers little. */
const CHECKPOINT_AFTER_MS = 250;
/** Raw `$all` page bounds: system events (projection links, metadata) sit between ours. */
const PAGE_MIN = 128;
const PAGE_MAX = 2_048;
/** -1 as u64: what the server reports for a position it does not know. */
const NO_POSITION = 0xffff_ffff_ffff_ffffn;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A .NET regex no stream name or event type matches (an empty filter list matches nothing). */
const MATCH_NOTHING = '^(?!)';

const NACK_ACTIONS: Record<NackAction, PersistentAction> = { park: PARK, retry: RETRY, skip: SKIP };

/** The fields of a client event record this adapter reads. */
interface EsdbRecord {
  id: string;
  streamId: string;
  type: string;
  revision: bigint;
  created: Date;
  isJson: boolean;
  data: unknown;
  metadata: unknown;
  position?: Position;
}

/** Records read from `$all` always carry their position. */
type AllRecord = EsdbRecord & { position: Position };

/** Lets `stop()` called from inside a handler skip waiting for that very handler (it would deadlock). */
const handlerScope = new AsyncLocalStorage<object>();

export function createEsdbEventStore(connectionString: string): EventStore {
  const client = connect(connectionString);
  /** Running subscriptions and consumers, stopped by close(). */
  const running = new Set<{ stop(): Promise<void> }>();

  // ---- append and read a stream ------------------------------------------------------------------

  async function append(
    streamId: string,
    events: NewEvent[],
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    validateStreamId(streamId);
    const expected = options.expectedRevision ?? 'any';
    const expectedRevision = toEsdbExpected(expected);
    const proposed = events.map(toEventData);
    if (proposed.length === 0) return checkOnly(streamId, expected);
    try {
      const result = await client.appendToStream(streamId, proposed, { expectedRevision });
      // An idempotent re-append gets no position from the server: report the original write's.
      const position = result.position
        ? Number(result.position.commit)
        : (await readAt(streamId, result.nextExpectedRevision)).position;
      return { nextExpectedRevision: Number(result.nextExpectedRevision), position };
    } catch (err) {
      throw mapError(err, { streamId, expected });
    }
  }

  /** An empty append only checks the expected revision, as EventStoreDB does; nothing is written. */
  async function checkOnly(streamId: string, expected: ExpectedRevision): Promise<AppendResult> {
    const [last] = await readStream(streamId, { direction: 'backwards', maxCount: 1 }).catch((err) => {
      if (err instanceof StreamNotFoundError) return [];
      throw err;
    });
    const actual = last ? last.revision : 'no_stream';
    const ok =
      expected === 'any' ||
      (expected === 'no_stream' && actual === 'no_stream') ||
      (expected === 'stream_exists' && actual !== 'no_stream') ||
      expected === actual;
    if (!ok) throw new WrongExpectedVersionError(streamId, expected, actual);
    return { nextExpectedRevision: last ? last.revision : -1, position: await headPosition() };
  }

  async function readAt(streamId: string, revision: bigint): Promise<RecordedEvent> {
    const [event] = await readStream(streamId, { fromRevision: Number(revision), maxCount: 1 });
    if (!event) throw new EventStoreError(`stream ${streamId} has no event at revision ${revision}`);
    return event;
  }

  async function readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const direction = options.direction ?? 'forwards';
    const maxCount = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    if (maxCount <= 0) return [];
    const fromRevision =
      options.fromRevision !== undefined
        ? toBigInt(options.fromRevision, 'fromRevision')
        : direction === 'forwards'
          ? START
          : END;
    const out: RecordedEvent[] = [];
    try {
      const read = client.readStream(streamId, {
        direction: direction === 'forwards' ? FORWARDS : BACKWARDS,
        fromRevision,
        maxCount,
      });
      for await (const resolved of read) {
        if (resolved.event) out.push(toRecorded(resolved.event));
      }
    } catch (err) {
      // The port has no deletion: a stream deleted by other means reads as absent.
      if (err instanceof StreamDeletedError) throw new StreamNotFoundError(streamId);
      throw mapError(err, { streamId });
    }
    return out;
  }

  // ---- $all ----------------------------------------------------------------------------------------

  /** One raw page of `$all`, system events included; `count` says whether the page was full. */
  async function readRaw(from: ReadPosition, forwards: boolean, maxCount: number) {
    const events: AllRecord[] = [];
    let count = 0;
    try {
      const read = client.readAll({
        fromPosition: from,
        direction: forwards ? FORWARDS : BACKWARDS,
        maxCount,
      });
      for await (const resolved of read) {
        count += 1;
        if (resolved.event) events.push(resolved.event);
      }
    } catch (err) {
      throw mapError(err);
    }
    return { events, count };
  }

  async function readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const forwards = (options.direction ?? 'forwards') === 'forwards';
    const limit = options.maxCount ?? Number.POSITIVE_INFINITY;
    const bound = forwards ? options.after : options.before;
    let cursor = bound === undefined ? undefined : positionOf(bound);
    const out: RecordedEvent[] = [];
    while (out.length < limit) {
      const pageSize = Math.min(Math.max(limit - out.length + 1, PAGE_MIN), PAGE_MAX);
      const page = await readRaw(cursor ?? (forwards ? START : END), forwards, pageSize);
      // Pages start at the cursor's own record (inclusive forwards): keep only what lies beyond it.
      const start = cursor;
      for (const event of page.events) {
        if (start && !isBeyond(event.position, start, forwards)) continue;
        cursor = event.position;
        if (!visible(event, options.filter)) continue;
        out.push(toRecorded(event));
        if (out.length >= limit) break;
      }
      if (page.count < pageSize) break;
      if (cursor === start) throw new EventStoreError(`reading $all made no progress at ${describe(start)}`);
    }
    return out;
  }

  async function headPosition(filter?: EventFilter): Promise<number> {
    const [last] = await readAll({ direction: 'backwards', maxCount: 1, filter });
    return last ? last.position : 0;
  }

  // ---- catch-up subscriptions ----------------------------------------------------------------------

  function subscribeToAll(
    options: CatchUpSubscriptionOptions,
    handlers: CatchUpHandlers,
  ): CatchUpSubscription {
    const maxBatch = Math.max(1, options.maxBatchSize ?? DEFAULT_BATCH_SIZE);
    const from = options.from ?? 'start';
    const after = typeof from === 'object' ? positionOf(from.after) : undefined;
    const caughtUp = settleable();
    const done = settleable();
    const scope = {};
    const sub = client.subscribeToAll({
      fromPosition: readPositionOf(from),
      filter: serverFilter(options.filter),
    });

    // Every item the stream hands over gets a sequence number; an item is settled once it was
    // delivered (its handler call resolved) or dropped by the filters here.
    let received = 0;
    let settled = 0;
    /** Items that must be settled before caught up: those the server sent before its caught-up signal. */
    let caughtUpAt: number | undefined;
    let isCaughtUp = false;
    const queue: Array<{ seq: number; event: RecordedEvent }> = [];
    let pumping: Promise<void> | undefined;
    let lastPosition: number | undefined;
    let stopped = false;
    const entry = { stop };
    running.add(entry);

    sub.on('data', (resolved: AllStreamResolvedEvent) => {
      if (stopped) return;
      const seq = ++received;
      const event = resolved.event;
      try {
        if (event && (!after || isBeyond(event.position, after, true)) && visible(event, options.filter)) {
          queue.push({ seq, event: toRecorded(event) });
          // Back-pressure: hold the stream once a full batch waits for the handler.
          if (queue.length >= maxBatch) sub.pause();
          if (!pumping) pumping = pump();
        } else if (queue.length === 0 && !pumping) {
          settled = seq;
          checkCaughtUp();
        }
      } catch (err) {
        fail(mapError(err));
      }
    });
    sub.on('caughtUp', () => {
      // Events the server sent before the signal were handed over or still sit in the stream buffer.
      caughtUpAt ??= received + sub.readableLength;
      checkCaughtUp();
    });
    sub.on('error', (err) => fail(mapError(err)));
    sub.on('close', () =>
      fail(new EventStoreUnavailableError('the $all subscription was closed by the server')),
    );

    async function pump(): Promise<void> {
      // Yield once so `pumping` is set before anything below can clear it.
      await Promise.resolve();
      try {
        // The loop test and the `finally` run in one turn: an item queued meanwhile is never stranded.
        while (queue.length > 0 && !stopped) {
          const batch = queue.splice(0, maxBatch);
          if (sub.isPaused()) sub.resume();
          await handlerScope.run(scope, () => handlers.onEvents(batch.map((b) => b.event)));
          if (stopped) return;
          lastPosition = batch[batch.length - 1].event.position;
          settled = queue.length > 0 ? queue[0].seq - 1 : received;
          checkCaughtUp();
        }
      } catch (err) {
        // A handler error ends the subscription with that very error.
        fail(err instanceof Error ? err : new Error(String(err)));
      } finally {
        pumping = undefined;
      }
    }

    function checkCaughtUp(): void {
      if (isCaughtUp || stopped || caughtUpAt === undefined || settled < caughtUpAt) return;
      isCaughtUp = true;
      try {
        handlers.onCaughtUp?.();
      } catch (err) {
        fail(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      caughtUp.resolve();
    }

    function end(err?: Error): void {
      stopped = true;
      running.delete(entry);
      queue.length = 0;
      void sub.unsubscribe().catch(() => {});
      caughtUp.reject(err ?? new EventStoreError('the subscription stopped before it caught up'));
      if (err) done.reject(err);
      else done.resolve();
    }

    function fail(err: Error): void {
      if (!stopped) end(err);
    }

    async function stop(): Promise<void> {
      const current = pumping;
      if (!stopped) end();
      if (current && handlerScope.getStore() !== scope) await current;
    }

    return {
      caughtUp: caughtUp.promise,
      done: done.promise,
      lastPosition: () => lastPosition,
      stop,
    };
  }

  // ---- persistent subscriptions --------------------------------------------------------------------

  async function createPersistentSubscription(
    group: string,
    settings: PersistentSubscriptionSettings = {},
  ): Promise<void> {
    const from = settings.from ?? 'start';
    try {
      await client.createPersistentSubscriptionToAll(
        group,
        persistentSubscriptionToAllSettingsFromDefaults({
          // A position start is inclusive on the server; consumers skip the event at it (see below).
          startFrom: from === 'start' ? START : from === 'end' ? END : positionOf(from.after),
          resolveLinkTos: false,
          extraStatistics: false,
          maxRetryCount: settings.maxRetryCount ?? DEFAULT_MAX_RETRY,
          messageTimeout: settings.messageTimeoutMs ?? DEFAULT_MESSAGE_TIMEOUT_MS,
          checkPointAfter: CHECKPOINT_AFTER_MS,
          checkPointLowerBound: 1,
          // Pinned: a stream's events go to the same consumer while it is connected, so consumers that
          // handle one stream's events in order (the webhook fan-out, per cart) keep that order.
          consumerStrategyName: PINNED,
        }),
        { filter: serverFilter(settings.filter) },
      );
    } catch (err) {
      throw mapError(err, { group });
    }
  }

  async function updatePersistentSubscription(
    group: string,
    settings: Pick<PersistentSubscriptionSettings, 'maxRetryCount' | 'messageTimeoutMs'>,
  ): Promise<void> {
    try {
      // The server replaces all settings at once: start from the current ones.
      const current = (await client.getPersistentSubscriptionToAllInfo(group)).settings;
      const next: PersistentSubscriptionToAllSettings = {
        ...current,
        startFrom: current.startFrom ?? START,
        maxRetryCount: settings.maxRetryCount ?? current.maxRetryCount,
        messageTimeout: settings.messageTimeoutMs ?? current.messageTimeout,
      };
      await client.updatePersistentSubscriptionToAll(group, next);
    } catch (err) {
      throw mapError(err, { group });
    }
  }

  async function deletePersistentSubscription(group: string): Promise<void> {
    try {
      await client.deletePersistentSubscriptionToAll(group);
    } catch (err) {
      throw mapError(err, { group });
    }
  }

  async function getPersistentSubscriptionInfo(group: string): Promise<PersistentSubscriptionInfo> {
    try {
      const info = await client.getPersistentSubscriptionToAllInfo(group);
      const checkpoint = info.stats.lastCheckpointedEventPosition;
      return {
        group: info.groupName,
        // The server does not report a group's filter, so `filter` stays absent.
        settings: {
          from: startOf(info.settings.startFrom),
          maxRetryCount: info.settings.maxRetryCount,
          messageTimeoutMs: info.settings.messageTimeout,
        },
        // A bound rather than an event: its commit half is what positions compare by.
        lastCheckpointedPosition:
          checkpoint && checkpoint.commit > 0n && checkpoint.commit < NO_POSITION
            ? Number(checkpoint.commit)
            : undefined,
        parkedCount: Number(info.stats.parkedMessageCount),
        connections: info.connections.length,
      };
    } catch (err) {
      throw mapError(err, { group });
    }
  }

  /** Events at or before this position are not "after" the group's start and are acked unseen. */
  async function startBoundOf(group: string): Promise<Position | undefined> {
    try {
      const { startFrom } = (await client.getPersistentSubscriptionToAllInfo(group)).settings;
      return typeof startFrom === 'object' ? startFrom : undefined;
    } catch (err) {
      throw mapError(err, { group });
    }
  }

  function subscribeToPersistent(
    group: string,
    handler: (message: PersistentMessage) => Promise<void> | void,
    options: PersistentConsumerOptions = {},
  ): PersistentConsumer {
    const bufferSize = Math.max(1, options.bufferSize ?? DEFAULT_BUFFER_SIZE);
    const done = settleable();
    const scope = {};
    const sub = client.subscribeToPersistentSubscriptionToAll(group, { bufferSize });
    const startBound = startBoundOf(group);
    const waiting: PersistentSubscriptionToAllResolvedEvent[] = [];
    const inFlight = new Set<Promise<void>>();
    let stopped = false;
    const entry = { stop };
    running.add(entry);

    startBound.catch((err: Error) => fail(err));
    sub.on('data', (resolved: PersistentSubscriptionToAllResolvedEvent) => {
      if (stopped) return;
      waiting.push(resolved);
      drain();
    });
    sub.on('error', (err) => fail(mapError(err, { group })));
    sub.on('close', () =>
      fail(new EventStoreUnavailableError(`persistent subscription ${group} was closed by the server`)),
    );

    /** Runs handlers concurrently, at most `bufferSize` at a time. */
    function drain(): void {
      while (!stopped && waiting.length > 0 && inFlight.size < bufferSize) {
        const task: Promise<void> = handle(waiting.shift()!).finally(() => {
          inFlight.delete(task);
          drain();
        });
        inFlight.add(task);
      }
      if (stopped) return;
      if (waiting.length > 0) sub.pause();
      else if (sub.isPaused()) sub.resume();
    }

    async function handle(resolved: PersistentSubscriptionToAllResolvedEvent): Promise<void> {
      let answered = false;
      /** The first ack or nack of a delivery wins; after stop() the server redelivers anyway. */
      const answer = async (send: () => Promise<void>): Promise<void> => {
        if (answered) return;
        answered = true;
        try {
          await send();
        } catch (err) {
          if (!stopped) throw mapError(err, { group });
        }
      };
      try {
        const bound = await startBound;
        const event = resolved.event;
        if (!event || isSystem(event) || (bound !== undefined && !isBeyond(event.position, bound, true))) {
          await answer(() => sub.ack(resolved));
          return;
        }
        const message: PersistentMessage = {
          event: toRecorded(event),
          retryCount: resolved.retryCount,
          ack: () => answer(() => sub.ack(resolved)),
          nack: (action, reason) => answer(() => sub.nack(NACK_ACTIONS[action], reason, resolved)),
        };
        try {
          await handlerScope.run(scope, () => handler(message));
        } catch (err) {
          await message.nack('retry', err instanceof Error ? err.message : String(err));
        }
      } catch (err) {
        fail(err instanceof Error ? err : new Error(String(err)));
      }
    }

    function end(err?: Error): void {
      stopped = true;
      running.delete(entry);
      // Messages not handed to the handler yet are redelivered once this consumer is gone.
      waiting.length = 0;
      if (err) {
        void sub.unsubscribe().catch(() => {});
        done.reject(err);
      }
    }

    function fail(err: Error): void {
      if (!stopped) end(err);
    }

    async function stop(): Promise<void> {
      if (stopped) return;
      end();
      // Let running handlers send their acks before the connection goes.
      if (handlerScope.getStore() !== scope) await Promise.allSettled([...inFlight]);
      await sub.unsubscribe().catch(() => {});
      done.resolve();
    }

    return { done: done.promise, stop };
  }

  async function listParkedMessages(
    group: string,
    options: { maxCount?: number } = {},
  ): Promise<ParkedMessage[]> {
    const maxCount = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    if (maxCount <= 0) return [];
    const out: ParkedMessage[] = [];
    try {
      // Parked messages are links to the original events, with the park reason in the link's metadata.
      const read = client.readStream(`$persistentsubscription-$all::${group}-parked`, {
        resolveLinkTos: true,
        maxCount,
      });
      for await (const { event, link } of read) {
        if (!event || !link) continue; // the original event is gone (scavenged)
        out.push({
          event: toRecorded(event),
          reason: parkReason(link.metadata),
          parkedAt: link.created.toISOString(),
        });
      }
    } catch (err) {
      if (err instanceof EsdbStreamNotFoundError || err instanceof StreamDeletedError) return [];
      throw mapError(err, { group });
    }
    return out;
  }

  async function replayParkedMessages(group: string): Promise<void> {
    try {
      await client.replayParkedMessagesToAll(group);
    } catch (err) {
      throw mapError(err, { group });
    }
  }

  async function close(): Promise<void> {
    await Promise.allSettled([...running].map((r) => r.stop()));
    await client.dispose();
  }

  return {
    kind: 'esdb',
    append,
    readStream,
    readAll,
    headPosition,
    subscribeToAll,
    createPersistentSubscription,
    updatePersistentSubscription,
    deletePersistentSubscription,
    getPersistentSubscriptionInfo,
    subscribeToPersistent,
    listParkedMessages,
    replayParkedMessages,
    close,
  };
}

// ---- connection ------------------------------------------------------------------------------------

/** The 6.x client only knows the `esdb` schemes; KurrentDB's names mean the same connection strings. */
function connect(connectionString: string): EventStoreDBClient {
  const normalized = connectionString.replace(/^(?:kurrentdb|kurrent)(\+discover)?:\/\//, 'esdb$1://');
  try {
    return EventStoreDBClient.connectionString(normalized);
  } catch (err) {
    throw new EventStoreError(`invalid EventStoreDB connection string: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

// ---- positions -------------------------------------------------------------------------------------

function positionOf(position: number): Position {
  const p = toBigInt(position, 'position');
  return { commit: p, prepare: p };
}

function readPositionOf(from: SubscriptionStart): ReadPosition {
  return from === 'start' ? START : from === 'end' ? END : positionOf(from.after);
}

function startOf(startFrom: PersistentSubscriptionToAllSettings['startFrom'] | undefined): SubscriptionStart {
  if (startFrom === undefined || startFrom === START) return 'start';
  if (startFrom === END) return 'end';
  return { after: Number(startFrom.commit) };
}

/** The port's number for an event's position (see the module comment). */
function toPortPosition(position: Position | undefined): number {
  // The server sends -1 (u64 max) for both halves of a position it does not know.
  if (
    position &&
    position.commit === position.prepare &&
    position.commit > 0n &&
    position.commit < NO_POSITION
  ) {
    return Number(position.commit);
  }
  throw new EventStoreError(
    `cannot map the $all position ${describe(position)} to a number: events of explicit transactions ` +
      '(commit != prepare) and servers that report no event positions are not supported',
  );
}

function compare(a: Position, b: Position): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  if (a.prepare !== b.prepare) return a.prepare < b.prepare ? -1 : 1;
  return 0;
}

/** Whether `position` comes strictly after `bound` in the read direction. */
function isBeyond(position: Position, bound: Position, forwards: boolean): boolean {
  const c = compare(position, bound);
  return forwards ? c > 0 : c < 0;
}

function describe(position: Position | undefined): string {
  return position ? `C:${position.commit}/P:${position.prepare}` : 'none';
}

function toBigInt(n: number, what: string): bigint {
  if (!Number.isSafeInteger(n) || n < 0)
    throw new InvalidEventError(`${what} must be a non-negative integer, got ${n}`);
  return BigInt(n);
}

// ---- events ----------------------------------------------------------------------------------------

function validateStreamId(streamId: string): void {
  if (typeof streamId !== 'string' || streamId.length === 0 || streamId.startsWith('$')) {
    throw new InvalidEventError(`invalid stream id ${JSON.stringify(streamId)}`);
  }
}

function toEsdbExpected(expected: ExpectedRevision): AppendExpectedRevision {
  if (expected === 'any') return ANY;
  if (expected === 'no_stream') return NO_STREAM;
  if (expected === 'stream_exists') return STREAM_EXISTS;
  return toBigInt(expected, 'expectedRevision');
}

function fromEsdbExpected(expected: AppendExpectedRevision): ExpectedRevision {
  return typeof expected === 'bigint' ? Number(expected) : expected;
}

function toEventData(event: NewEvent): JSONEventData {
  const { type, data, metadata } = event;
  if (typeof type !== 'string' || type.length === 0 || type.startsWith('$')) {
    throw new InvalidEventError(`invalid event type ${JSON.stringify(type)}`);
  }
  if (data === undefined) throw new InvalidEventError(`event ${type} has no data`);
  if (typeof metadata !== 'object' || metadata === null)
    throw new InvalidEventError(`event ${type} has no metadata`);
  assertJson(data, `data of event ${type}`);
  assertJson(metadata, `metadata of event ${type}`);
  const id = event.id ?? randomUUID();
  if (!UUID.test(id)) throw new InvalidEventError(`event id ${JSON.stringify(id)} is not a UUID`);
  // The client serialises any JSON value, not only the objects, arrays and strings its type names.
  return { id, contentType: 'application/json', type, data: data as JSONType, metadata: { ...metadata } };
}

function assertJson(value: unknown, what: string): void {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new InvalidEventError(`${what} is not JSON: ${(err as Error).message}`);
  }
  if (text === undefined) throw new InvalidEventError(`${what} is not JSON`);
}

function toRecorded(event: EsdbRecord): RecordedEvent {
  return {
    id: event.id,
    streamId: event.streamId,
    type: event.type,
    revision: Number(event.revision),
    position: toPortPosition(event.position),
    data: decodeJson(event.data, event.isJson),
    metadata: (decodeJson(event.metadata, false) ?? {}) as EventMetadata,
    recordedAt: event.created.toISOString(),
  };
}

/** The client parses JSON events itself; bytes of events written by other tools may still be JSON. */
function decodeJson(value: unknown, parsed: boolean): unknown {
  if (parsed || !(value instanceof Uint8Array)) return value;
  try {
    return JSON.parse(Buffer.from(value).toString('utf8'));
  } catch {
    return value;
  }
}

function parkReason(metadata: unknown): string {
  if (typeof metadata !== 'object' || metadata === null) return '';
  const { reason, Reason } = metadata as { reason?: unknown; Reason?: unknown };
  return typeof reason === 'string' ? reason : typeof Reason === 'string' ? Reason : '';
}

// ---- filters ---------------------------------------------------------------------------------------

function isSystem(event: { streamId: string; type: string }): boolean {
  return event.streamId.startsWith('$') || event.type.startsWith('$');
}

function matches(event: { streamId: string; type: string }, filter: EventFilter | undefined): boolean {
  if (!filter) return true;
  if ('streamPrefixes' in filter) return filter.streamPrefixes.some((p) => event.streamId.startsWith(p));
  return filter.eventTypes.includes(event.type);
}

function visible(event: { streamId: string; type: string }, filter: EventFilter | undefined): boolean {
  return !isSystem(event) && matches(event, filter);
}

function serverFilter(filter: EventFilter | undefined): Filter {
  if (!filter) return excludeSystemEvents();
  if ('streamPrefixes' in filter) {
    return filter.streamPrefixes.length > 0
      ? streamNameFilter({ prefixes: filter.streamPrefixes })
      : streamNameFilter({ regex: MATCH_NOTHING });
  }
  if (filter.eventTypes.length === 0) return eventTypeFilter({ regex: MATCH_NOTHING });
  const names = filter.eventTypes.map((t) => t.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&'));
  return eventTypeFilter({ regex: `^(?:${names.join('|')})$` });
}

// ---- errors ----------------------------------------------------------------------------------------

interface ErrorContext {
  streamId?: string;
  expected?: ExpectedRevision;
  group?: string;
}

/** gRPC status codes meaning "try again later": DEADLINE_EXCEEDED, UNAVAILABLE. */
const RETRYABLE_GRPC_CODES = new Set([4, 14]);
const NETWORK_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'EHOSTUNREACH',
]);

/** Maps client errors to the port's typed errors; callers never see the client's classes. */
function mapError(err: unknown, context: ErrorContext = {}): Error {
  if (err instanceof EventStoreError) return err;
  if (!(err instanceof Error)) return new EventStoreError(String(err));
  if (err instanceof EsdbWrongExpectedVersionError) {
    const actual = err.actualVersion === 'no_stream' ? 'no_stream' : Number(err.actualVersion);
    const expected = context.expected ?? fromEsdbExpected(err.expectedVersion);
    return new WrongExpectedVersionError(context.streamId ?? err.streamName, expected, actual);
  }
  if (err instanceof EsdbStreamNotFoundError)
    return new StreamNotFoundError(context.streamId ?? err.streamName);
  if (err instanceof EsdbPersistentSubscriptionExistsError) {
    return new PersistentSubscriptionExistsError(context.group ?? err.groupName);
  }
  if (
    err instanceof PersistentSubscriptionDoesNotExistError ||
    (err instanceof NotFoundError && context.group !== undefined)
  ) {
    return new PersistentSubscriptionNotFoundError(
      context.group ?? (err as { groupName?: string }).groupName ?? '',
    );
  }
  if (err instanceof InvalidArgumentError || err instanceof MaxAppendSizeExceededError) {
    return new InvalidEventError(err.message, { cause: err });
  }
  if (isUnavailable(err)) {
    return new EventStoreUnavailableError(err.message || 'EventStoreDB is unavailable', { cause: err });
  }
  return new EventStoreError(err.message || err.name, { cause: err });
}

function isUnavailable(err: Error): boolean {
  if (
    err instanceof UnavailableError ||
    err instanceof NotLeaderError ||
    err instanceof DeadlineExceededError ||
    err instanceof TimeoutError ||
    err instanceof CancelledError ||
    err instanceof PersistentSubscriptionDroppedError
  ) {
    return true;
  }
  const { code } = err as { code?: unknown };
  // A refused connection can surface as a plain Error carrying the gRPC status code.
  if (typeof code === 'number') return RETRYABLE_GRPC_CODES.has(code);
  if (typeof code === 'string') return NETWORK_ERROR_CODES.has(code);
  return /^Failed to discover/.test(err.message);
}

// ---- small helpers ---------------------------------------------------------------------------------

/** A promise settled from outside; marked handled so an unobserved rejection does not crash the process. */
function settleable() {
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  promise.catch(() => {});
  return { promise, resolve: () => resolve(), reject: (err: Error) => reject(err) };
}
