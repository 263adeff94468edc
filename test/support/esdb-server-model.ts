/**
 * EventStoreDB as the adapter meets it, modelled around the embedded store, for what only shows at
 * scale: how much of the log the server reads to answer each call, and where a read may start.
 *
 * - Positions are log offsets with gaps, as the server's are: the embedded store's event at position
 *   n is at `n * RECORD_BYTES` here, and the record after it starts at `(n + 1) * RECORD_BYTES`. A
 *   read or a subscription that starts anywhere else (between two records) is refused, as the server
 *   refuses it ("Trying to read from an invalid position").
 * - Reads are the embedded store's answers, charged what EventStoreDB's server scans for them: a
 *   filtered `$all` read walks the log from where it starts until it has its matches or reaches the
 *   end (forwards from `after`, backwards from the end), whatever it sends; `headPosition` with a filter
 *   walks back to the last match; `countAll` is a filtered read of the events it counts (that adapter
 *   reads them); an unfiltered read, a stream read and the head cost what they return.
 * - Catch-up subscriptions are the EventStoreDB adapter's own (eventstore/esdb/catch-up.ts, on the
 *   client's `subscribeToAll` and `Subscription`), answered on the wire by a model of the server's
 *   filtered subscription (its Enumerator.AllSubscriptionFiltered): while catching up, the matching
 *   events of each page it reads and a checkpoint after it at the start of the record it reads next,
 *   (that record's position, 0), as the server sends them (every 32 events it considers; here every page
 *   of matches), then the caught-up signal; live, the matching events and a checkpoint at every 32nd
 *   event it considers, at that event's own position. The adapter's look-ups of the record before a
 *   catch-up checkpoint are answered on the wire too, and charged. Subscriptions are not charged: every
 *   follower reads the log once, whatever the code above does.
 * - Everything else (appends, stream reads, persistent subscriptions) is the embedded store's, its
 *   positions translated.
 */
import { createCatchUp } from '../../eventstore/esdb/catch-up.ts';
import type { Running } from '../../eventstore/esdb/client.ts';
import { createAllReads } from '../../eventstore/esdb/read-all.ts';
import {
  type CountAllOptions,
  type EventFilter,
  type EventStore,
  EventStoreError,
  type PersistentMessage,
  type PersistentSubscriptionInfo,
  type ReadAllOptions,
  type RecordedEvent,
} from '../../eventstore/port.ts';
import {
  caughtUpReply,
  checkpointReply,
  clientAnswering,
  confirmationReply,
  eventReply,
  filterOf,
  type ReadRequest,
  Replies,
  readStart,
} from './esdb-replies.ts';

/** What the server read to answer the calls made since the last `reset`. */
export interface ServerCosts {
  /** Calls that read the log or a stream. */
  reads: number;
  /** Events the server read for them. */
  scanned: number;
}

/** The model's log offset between one record and the next. */
export const RECORD_BYTES = 100;
/** The server's live checkpoint interval: 32 events considered (its read batch, times 1). */
const CHECKPOINT_EVERY = 32;
const CATCH_UP_PAGE = 2_048;
const ALL = 2 ** 40;

export interface ModelledStore extends EventStore {
  readonly costs: ServerCosts;
  /** Starts counting afresh. */
  reset(): void;
}

const out = (position: number) => position * RECORD_BYTES;
const scaled = <E extends RecordedEvent>(e: E): E => ({ ...e, position: out(e.position) });

/** The embedded store's position of a record's offset; refused between records, as the server does. */
function into(offset: number): number {
  if (offset % RECORD_BYTES !== 0) {
    throw new EventStoreError(`Trying to read from an invalid position: ${offset} is not a record's start`);
  }
  return offset / RECORD_BYTES;
}

const intoOptional = (offset: number | undefined) => (offset === undefined ? undefined : into(offset));

export function esdbServerModel(inner: EventStore): ModelledStore {
  const costs: ServerCosts = { reads: 0, scanned: 0 };
  const charge = (scanned: number) => {
    costs.reads += 1;
    costs.scanned += scanned;
  };
  /** Events with the embedded store's positions in (after, upTo]. */
  const between = async (after: number, upTo: number) =>
    upTo <= after
      ? 0
      : (await inner.countAll({ after, max: ALL })) - (await inner.countAll({ after: upTo, max: ALL }));

  /** A read of the embedded store (its positions), charged as the server would scan for it. */
  async function chargedRead(options: ReadAllOptions): Promise<RecordedEvent[]> {
    const read = await inner.readAll(options);
    if (!options.filter) {
      charge(read.length);
      return read;
    }
    const head = await inner.headPosition();
    const full = options.maxCount !== undefined && read.length >= options.maxCount;
    const last = read[read.length - 1];
    if (options.direction === 'backwards') {
      const before = Math.min(options.before ?? head + 1, head + 1);
      charge(await between(full ? last.position - 1 : 0, before - 1));
    } else {
      charge(await between(options.after ?? 0, full ? last.position : head));
    }
    return read;
  }

  async function readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const read = await chargedRead({
      ...options,
      after: intoOptional(options.after),
      before: intoOptional(options.before),
    });
    return read.map(scaled);
  }

  async function headPosition(filter?: EventFilter): Promise<number> {
    if (!filter) {
      charge(1);
      return out(await inner.headPosition());
    }
    const [last] = await readAll({ direction: 'backwards', maxCount: 1, filter });
    return last?.position ?? 0;
  }

  async function countAll({ after, filter, max }: CountAllOptions): Promise<number> {
    return (await readAll({ after, filter, maxCount: max })).length;
  }

  const running: Running = new Set();
  const client = clientAnswering((request) =>
    request.getOptions()?.hasSubscription()
      ? serveSubscription(inner, request)
      : serveRead(inner, request, charge),
  );
  const catchUp = createCatchUp(client, running, createAllReads(client).recordBefore);
  const scaledInfo = (info: PersistentSubscriptionInfo): PersistentSubscriptionInfo => ({
    ...info,
    lastCheckpointedPosition:
      info.lastCheckpointedPosition === undefined ? undefined : out(info.lastCheckpointedPosition),
  });

  return {
    kind: 'esdb',
    costs,
    reset() {
      costs.reads = 0;
      costs.scanned = 0;
    },
    readAll,
    headPosition,
    countAll,
    async readStream(streamId, options) {
      try {
        const read = await inner.readStream(streamId, options);
        charge(read.length);
        return read.map(scaled);
      } catch (err) {
        charge(0);
        throw err;
      }
    },
    async append(streamId, events, options) {
      const result = await inner.append(streamId, events, options);
      return { ...result, position: out(result.position) };
    },
    subscribeToAll: catchUp.subscribeToAll,
    // As the real adapter: the server drops expired events at a scavenge, not on request.
    dropExpired: async () => ({ events: 0, streams: 0 }),
    createPersistentSubscription: (group, settings = {}) =>
      inner.createPersistentSubscription(group, {
        ...settings,
        ...(typeof settings.from === 'object' && { from: { after: into(settings.from.after) } }),
      }),
    updatePersistentSubscription: (g, s) => inner.updatePersistentSubscription(g, s),
    deletePersistentSubscription: (g) => inner.deletePersistentSubscription(g),
    getPersistentSubscriptionInfo: async (g) => scaledInfo(await inner.getPersistentSubscriptionInfo(g)),
    listPersistentSubscriptions: async () => (await inner.listPersistentSubscriptions()).map(scaledInfo),
    subscribeToPersistent: (group, handler, options) =>
      inner.subscribeToPersistent(
        group,
        (message: PersistentMessage) => handler({ ...message, event: scaled(message.event) }),
        options,
      ),
    listParkedMessages: async (g, o) =>
      (await inner.listParkedMessages(g, o)).map((m) => ({ ...m, event: scaled(m.event) })),
    replayParkedMessages: (g) => inner.replayParkedMessages(g),
    async close() {
      await Promise.allSettled([...running].map((r) => r.stop()));
      await inner.close();
    },
  };
}

/**
 * Where a request starts, as the embedded store's "after" position: the server starts at a position
 * itself (inclusive: the adapter drops the event there), which must be a record's start.
 */
function afterOf(request: ReadRequest, head: number): number {
  const from = readStart(request);
  if (from === 'end') return head;
  if (from === 'start') return 0;
  if (from.commit !== from.prepare) throw new EventStoreError('Trying to read from an invalid position');
  return Math.max(0, into(Number(from.commit)) - 1);
}

/** A read that is not a subscription: the adapter's look-up of the record before a position (backwards). */
function serveRead(inner: EventStore, request: ReadRequest, charge: (scanned: number) => void): Replies {
  const options = request.getOptions();
  const count = Number(options?.getCount() ?? 1);
  const from = readStart(request);
  if (options?.getReadDirection() !== 1 || options.hasFilter()) {
    throw new Error('the model answers only unfiltered reads backwards, the adapter’s look-ups');
  }
  const replies = new Replies();
  const before = from === 'end' ? undefined : from === 'start' ? 0 : into(Number(from.commit));
  void inner.readAll({ direction: 'backwards', before, maxCount: count }).then(
    (read) => {
      charge(read.length);
      for (const e of read) replies.write(eventReply(scaled(e)));
      replies.end();
    },
    (err: Error) => replies.destroy(err),
  );
  return replies;
}

/** The server's side of one filtered `$all` subscription (see the module comment). */
function serveSubscription(inner: EventStore, request: ReadRequest): Replies {
  let live: { stop(): Promise<void> } | undefined;
  let cancelled = false;
  const replies = new Replies(() => {
    cancelled = true;
    void live?.stop();
  });
  const { port, matches } = filterOf(request);
  void (async () => {
    const head = await inner.headPosition();
    let position = afterOf(request, head);
    await replies.send(confirmationReply());
    while (!cancelled && position < head) {
      const page = await inner.readAll({ after: position, filter: port, maxCount: CATCH_UP_PAGE });
      for (const e of page) if (e.position <= head && matches(e)) await replies.send(eventReply(scaled(e)));
      const last = page[page.length - 1];
      if (page.length < CATCH_UP_PAGE || last.position >= head) break;
      position = last.position;
      // The page's end: the server reads on from the record after its last.
      await replies.send(checkpointReply(out(position + 1), 0));
    }
    if (cancelled) return;
    // The end of the catch-up, at the start of the record the server would read next.
    await replies.send(checkpointReply(out(head + 1), 0));
    await replies.send(caughtUpReply());
    let considered = 0;
    live = inner.subscribeToAll(
      { from: { after: head } },
      {
        async onEvents(events) {
          for (const e of events) {
            if (matches(e)) await replies.send(eventReply(scaled(e)));
            considered += 1;
            const at = out(e.position);
            if (considered % CHECKPOINT_EVERY === 0) await replies.send(checkpointReply(at, at));
          }
        },
      },
    );
    if (cancelled) await live.stop();
  })().catch((err: Error) => replies.destroy(err));
  return replies;
}
