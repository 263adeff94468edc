/**
 * An event store that fails the way a real server does, around the embedded one: it drops catch-up
 * subscriptions and persistent consumers mid-stream, refuses appends as unavailable (before writing,
 * or after writing with the answer lost), fails the reads of a stream until told to stop, delays
 * acknowledgements, loses what a replay of parked messages moves, and hides a group's checkpoint
 * while it loads, as EventStoreDB can. Its persistent consumers can run their handlers as the
 * EventStoreDB adapter does (at most a buffer's worth at once). Everything else passes through. The
 * supervisor, the followers and the dispatcher are tested through it (docs/operations.md, "Recovery").
 */
import { randomUUID } from 'node:crypto';
import {
  type AppendOptions,
  type AppendResult,
  type CatchUpHandlers,
  type CatchUpSubscription,
  type CatchUpSubscriptionOptions,
  type EventStore,
  EventStoreUnavailableError,
  type NewEvent,
  type PersistentConsumer,
  type PersistentConsumerOptions,
  type PersistentMessage,
  type PersistentSubscriptionInfo,
  type ReadStreamOptions,
  type RecordedEvent,
} from '../../eventstore/port.ts';

/** One open subscription or consumer the wrapper can drop. */
interface Droppable {
  drop(error: Error): void;
}

export interface FaultyStore extends EventStore {
  /** Ends every open subscription and consumer with an unavailable error; returns how many. */
  dropSubscriptions(): number;
  /**
   * While on, the server is out of reach (an outage, not a blip): every new subscription and consumer
   * ends at once with an unavailable error, before any event. The open ones `dropSubscriptions` ends.
   */
  refuseSubscriptions(on: boolean): void;
  /**
   * While on, reads fail as unavailable too (`readStream`, `readAll`, `headPosition`, `countAll`): with
   * `refuseSubscriptions`, a server that is down, as when a process starts during an outage.
   */
  refuseReads(on: boolean): void;
  /** The next `count` appends fail as unavailable: `before` writing, or `after` (the answer is lost). */
  failAppends(count: number, when?: 'before' | 'after'): void;
  /** Acknowledgements of persistent messages wait this long first (0: none). */
  delayAcks(ms: number): void;
  /**
   * Forgets event ids where EventStoreDB may (after a restart, or once its cache of recent ids has
   * moved on): an append that expects no exact revision no longer finds an earlier write of its ids.
   */
  forgetEventIds(): void;
  /**
   * Reads of `streamId` fail as unavailable until `cure()` (a poison: an event whose handling fails
   * until a deploy or the store fixes it); `failed` counts them.
   */
  failReads(streamId: string): { readonly failed: number; cure(): void };
  /**
   * Persistent consumers run at most `n` handler calls at once, the others waiting in order: as the
   * EventStoreDB adapter's consumer does (its buffer, eventstore/esdb/persistent.ts), where the
   * embedded one bounds the messages not yet answered instead.
   */
  limitRunningHandlers(n: number): void;
  /** How many times persistent consumers were handed the event with this id. */
  handedOut(eventId: string): number;
  /** How many of those copies were acknowledged. */
  acked(eventId: string): number;
  /**
   * From now on a replay of parked messages goes as EventStoreDB's can: the server moves them into the
   * group's memory and truncates the parked list at once, while the group's checkpoint is past them, and
   * the group is rebuilt before they are acknowledged (a restart, a leader change, another dispatcher's
   * settings update), so they are dropped: they leave the parked list and are never handed out.
   * `before` runs at each replay, before anything moves; `lost` names the events dropped.
   */
  loseReplayedParkedMessages(before?: (group: string) => Promise<void> | void): { readonly lost: string[] };
  /**
   * The group reports no checkpoint until `loaded()`, as an EventStoreDB group does while the server
   * loads it after a restart (its PersistentSubscription, before OnCheckpointLoaded); `looks` counts
   * the answers that hid it.
   */
  loadingCheckpoint(group: string): { readonly looks: number; loaded(): void };
  /** What was injected so far. */
  readonly injected: { drops: number; failedAppends: number };
}

const unavailable = (what: string) => new EventStoreUnavailableError(`injected fault: ${what}`);

/** What a subscription or consumer the server refused settles with: an unavailable error, nothing else. */
function refused(): { done: Promise<void>; stop(): Promise<void> } {
  const done = Promise.reject(unavailable('subscription refused: the server is out of reach'));
  done.catch(() => {});
  return { done, stop: async () => {} };
}

/** Wraps a subscription so that `drop` stops the inner one and ends this one with the error. */
function droppableSubscription(
  open: (handlers: CatchUpHandlers) => CatchUpSubscription,
  handlers: CatchUpHandlers,
  live: Set<Droppable>,
): CatchUpSubscription {
  let dropped: Error | undefined;
  const ended = Promise.withResolvers<void>();
  ended.promise.catch(() => {});
  // After a drop nothing more reaches the handlers, as with a closed connection.
  const inner = open({
    onEvents: (events) => (dropped ? undefined : handlers.onEvents(events)),
    onCaughtUp: () => (dropped ? undefined : handlers.onCaughtUp?.()),
    ...(handlers.onProgress && {
      onProgress: (position: number) => (dropped ? undefined : handlers.onProgress?.(position)),
    }),
  });
  const self: Droppable = {
    drop(error) {
      if (dropped) return;
      dropped = error;
      live.delete(self);
      void inner.stop().catch(() => {});
      ended.reject(error);
    },
  };
  live.add(self);
  inner.done.then(
    () => {
      live.delete(self);
      ended.resolve();
    },
    (err: unknown) => {
      live.delete(self);
      ended.reject(err);
    },
  );
  return {
    caughtUp: inner.caughtUp,
    done: ended.promise,
    lastPosition: () => inner.lastPosition(),
    async stop() {
      live.delete(self);
      await inner.stop();
    },
  };
}

export function faultyStore(inner: EventStore): FaultyStore {
  const live = new Set<Droppable>();
  const injected = { drops: 0, failedAppends: 0 };
  let failing: { count: number; when: 'before' | 'after' } = { count: 0, when: 'before' };
  let ackDelayMs = 0;
  let forgetIds = false;
  const poisoned = new Map<string, { failed: number }>();
  let handlerLimit = Number.POSITIVE_INFINITY;
  const handed = new Map<string, number>();
  const acks = new Map<string, number>();
  /** While replays lose what they move: what runs before each, and the events dropped, by group. */
  let losing: { before?: (group: string) => Promise<void> | void; lost: string[] } | undefined;
  const dropping = new Map<string, Set<string>>();
  /** Groups whose checkpoint is being loaded: how many answers hid it. */
  const loading = new Map<string, { looks: number }>();
  const asLoaded = (info: PersistentSubscriptionInfo): PersistentSubscriptionInfo => {
    const hiding = loading.get(info.group);
    if (!hiding) return info;
    hiding.looks += 1;
    return { ...info, lastCheckpointedPosition: undefined };
  };

  let refusingReads = false;
  /** Runs a read, or fails it as the server out of reach would. */
  const read = async <T>(what: string, run: () => Promise<T>): Promise<T> => {
    if (refusingReads) throw unavailable(`${what} refused: the server is out of reach`);
    return run();
  };

  async function readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]> {
    if (refusingReads) throw unavailable(`read of ${streamId} refused: the server is out of reach`);
    const poison = poisoned.get(streamId);
    if (poison) {
      poison.failed += 1;
      throw unavailable(`read of ${streamId} refused`);
    }
    return inner.readStream(streamId, options);
  }

  /** A handler that runs at most `handlerLimit` calls at once, the others queued in order. */
  function limited(handler: (message: PersistentMessage) => Promise<void> | void) {
    let running = 0;
    const queue: Array<() => void> = [];
    return async (message: PersistentMessage): Promise<void> => {
      handed.set(message.event.id, (handed.get(message.event.id) ?? 0) + 1);
      if (running >= handlerLimit) await new Promise<void>((resolve) => queue.push(resolve));
      running += 1;
      try {
        await handler(message);
      } finally {
        running -= 1;
        queue.shift()?.();
      }
    };
  }
  let refusing = false;

  async function append(
    streamId: string,
    events: NewEvent[],
    options?: AppendOptions,
  ): Promise<AppendResult> {
    if (failing.count > 0) {
      failing.count -= 1;
      injected.failedAppends += 1;
      if (failing.when === 'before') throw unavailable('append refused');
      await inner.append(streamId, events, options);
      throw unavailable('append written, answer lost');
    }
    const exact = typeof options?.expectedRevision === 'number' || options?.expectedRevision === 'no_stream';
    const sent = forgetIds && !exact ? events.map((e) => ({ ...e, id: randomUUID() })) : events;
    return inner.append(streamId, sent, options);
  }

  function subscribeToAll(
    options: CatchUpSubscriptionOptions,
    handlers: CatchUpHandlers,
  ): CatchUpSubscription {
    if (refusing)
      return { ...refused(), caughtUp: new Promise<void>(() => {}), lastPosition: () => undefined };
    return droppableSubscription((h) => inner.subscribeToAll(options, h), handlers, live);
  }

  function subscribeToPersistent(
    group: string,
    handler: (message: PersistentMessage) => Promise<void> | void,
    options?: PersistentConsumerOptions,
  ): PersistentConsumer {
    if (refusing) return refused();
    let dropped = false;
    const delayed = (message: PersistentMessage): PersistentMessage => ({
      ...message,
      ack: async () => {
        if (ackDelayMs > 0) await new Promise((r) => setTimeout(r, ackDelayMs));
        if (dropped) throw unavailable('ack after the connection dropped');
        await message.ack();
        acks.set(message.event.id, (acks.get(message.event.id) ?? 0) + 1);
      },
    });
    const run = limited((message) => {
      // A replayed copy the rebuilt group no longer has: it goes away unseen (acked, so the embedded
      // store forgets it too).
      if (dropping.get(group)?.delete(message.event.id)) return message.ack();
      return dropped ? undefined : handler(delayed(message));
    });
    const consumer = inner.subscribeToPersistent(group, run, options);
    const ended = Promise.withResolvers<void>();
    ended.promise.catch(() => {});
    const self: Droppable = {
      drop(error) {
        if (dropped) return;
        dropped = true;
        live.delete(self);
        // Unacked messages go back to the group, as when the server loses a connection.
        void consumer.stop().catch(() => {});
        ended.reject(error);
      },
    };
    live.add(self);
    consumer.done.then(ended.resolve, ended.reject);
    return {
      done: ended.promise,
      async stop() {
        live.delete(self);
        await consumer.stop();
      },
    };
  }

  return {
    kind: inner.kind,
    append,
    readStream,
    readAll: (o) => read('read of $all', () => inner.readAll(o)),
    headPosition: (f) => read('read of the head', () => inner.headPosition(f)),
    countAll: (o) => read('count of $all', () => inner.countAll(o)),
    subscribeToAll,
    dropExpired: () => inner.dropExpired(),
    createPersistentSubscription: (g, s) => inner.createPersistentSubscription(g, s),
    updatePersistentSubscription: (g, s) => inner.updatePersistentSubscription(g, s),
    deletePersistentSubscription: (g) => inner.deletePersistentSubscription(g),
    getPersistentSubscriptionInfo: async (g) => asLoaded(await inner.getPersistentSubscriptionInfo(g)),
    listPersistentSubscriptions: async () => (await inner.listPersistentSubscriptions()).map(asLoaded),
    subscribeToPersistent,
    listParkedMessages: (g, o) => inner.listParkedMessages(g, o),
    async replayParkedMessages(g) {
      if (losing) {
        await losing.before?.(g);
        const moved = (await inner.listParkedMessages(g)).map((m) => m.event.id);
        const lost = dropping.get(g) ?? new Set<string>();
        for (const id of moved) lost.add(id);
        dropping.set(g, lost);
        losing.lost.push(...moved);
      }
      await inner.replayParkedMessages(g);
    },
    close: () => inner.close(),
    dropSubscriptions() {
      const all = [...live];
      for (const d of all) d.drop(unavailable('subscription dropped'));
      injected.drops += all.length;
      return all.length;
    },
    refuseSubscriptions(on) {
      refusing = on;
    },
    refuseReads(on) {
      refusingReads = on;
    },
    failAppends(count, when = 'before') {
      failing = { count, when };
    },
    delayAcks(ms) {
      ackDelayMs = ms;
    },
    forgetEventIds() {
      forgetIds = true;
    },
    failReads(streamId) {
      const poison = { failed: 0 };
      poisoned.set(streamId, poison);
      return {
        get failed() {
          return poison.failed;
        },
        cure: () => poisoned.delete(streamId),
      };
    },
    limitRunningHandlers(n) {
      handlerLimit = n;
    },
    handedOut: (eventId) => handed.get(eventId) ?? 0,
    acked: (eventId) => acks.get(eventId) ?? 0,
    loadingCheckpoint(group) {
      const hiding = { looks: 0 };
      loading.set(group, hiding);
      return {
        get looks() {
          return hiding.looks;
        },
        loaded: () => loading.delete(group),
      };
    },
    loseReplayedParkedMessages(before) {
      losing = { before, lost: [] };
      return losing;
    },
    injected,
  };
}
