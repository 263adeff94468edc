/**
 * EventStoreDB as the adapter meets it, modelled around the embedded store, for what only shows at
 * scale: how much of the log the server reads to answer each call.
 *
 * - Reads are the embedded store's answers, charged what EventStoreDB's server scans for them: a
 *   filtered `$all` read walks the log from where it starts until it has its matches or reaches the
 *   end (forwards from `after`, backwards from the end), whatever it sends; `headPosition` with a filter
 *   walks back to the last match; `countAll` is a filtered read of the events it counts (that adapter
 *   reads them); an unfiltered read, a stream read and the head cost what they return.
 * - Catch-up subscriptions are the EventStoreDB adapter's own (eventstore/esdb/catch-up.ts, on the
 *   client's `subscribeToAll` and `Subscription`), answered on the wire by a model of the server's
 *   filtered subscription (its Enumerator.AllSubscriptionFiltered): the matching events, a checkpoint
 *   on reaching the end of the catch-up, then live: the matching events and a checkpoint at every 32nd
 *   event it considers (the default interval). The server also checkpoints every 32 events while it
 *   catches up; the model leaves those out, so followers move on less often here than on a server.
 *   Subscriptions are not charged: every follower reads the log once, whatever the code above does.
 * - Everything else (appends, stream reads, persistent subscriptions) is the embedded store's.
 */
import { createCatchUp } from '../../eventstore/esdb/catch-up.ts';
import type { Running } from '../../eventstore/esdb/client.ts';
import type {
  CountAllOptions,
  EventFilter,
  EventStore,
  ReadAllOptions,
  RecordedEvent,
} from '../../eventstore/port.ts';
import {
  caughtUpReply,
  checkpointReply,
  clientAnswering,
  confirmationReply,
  eventReply,
  type ReadRequest,
  Replies,
} from './esdb-replies.ts';

/** What the server read to answer the calls made since the last `reset`. */
export interface ServerCosts {
  /** Calls that read the log or a stream. */
  reads: number;
  /** Events the server read for them. */
  scanned: number;
}

/** The server's live checkpoint interval: 32 events considered (its read batch, times 1). */
const CHECKPOINT_EVERY = 32;
const CATCH_UP_PAGE = 2_048;
const ALL = 2 ** 40;

export interface ModelledStore extends EventStore {
  readonly costs: ServerCosts;
  /** Starts counting afresh. */
  reset(): void;
}

export function esdbServerModel(inner: EventStore): ModelledStore {
  const costs: ServerCosts = { reads: 0, scanned: 0 };
  const charge = (scanned: number) => {
    costs.reads += 1;
    costs.scanned += scanned;
  };
  /** Events with positions in (after, upTo]. */
  const between = async (after: number, upTo: number) =>
    upTo <= after
      ? 0
      : (await inner.countAll({ after, max: ALL })) - (await inner.countAll({ after: upTo, max: ALL }));

  async function readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
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
      const after = options.after ?? 0;
      charge(await between(after, full ? last.position : head));
    }
    return read;
  }

  async function headPosition(filter?: EventFilter): Promise<number> {
    if (!filter) {
      charge(1);
      return inner.headPosition();
    }
    const [last] = await readAll({ direction: 'backwards', maxCount: 1, filter });
    return last?.position ?? 0;
  }

  async function countAll({ after, filter, max }: CountAllOptions): Promise<number> {
    return (await readAll({ after, filter, maxCount: max })).length;
  }

  const running: Running = new Set();
  const catchUp = createCatchUp(
    clientAnswering((request) => serveSubscription(inner, request)),
    running,
  );

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
        return read;
      } catch (err) {
        charge(0);
        throw err;
      }
    },
    append: (streamId, events, options) => inner.append(streamId, events, options),
    subscribeToAll: catchUp.subscribeToAll,
    createPersistentSubscription: (g, s) => inner.createPersistentSubscription(g, s),
    updatePersistentSubscription: (g, s) => inner.updatePersistentSubscription(g, s),
    deletePersistentSubscription: (g) => inner.deletePersistentSubscription(g),
    getPersistentSubscriptionInfo: (g) => inner.getPersistentSubscriptionInfo(g),
    listPersistentSubscriptions: () => inner.listPersistentSubscriptions(),
    subscribeToPersistent: (g, h, o) => inner.subscribeToPersistent(g, h, o),
    listParkedMessages: (g, o) => inner.listParkedMessages(g, o),
    replayParkedMessages: (g) => inner.replayParkedMessages(g),
    async close() {
      await Promise.allSettled([...running].map((r) => r.stop()));
      await inner.close();
    },
  };
}

/** The port filter and the predicate of a subscription request's filter, as the adapter sends them. */
function filterOf(request: ReadRequest): { port?: EventFilter; matches(e: RecordedEvent): boolean } {
  const f = request.getOptions()?.getFilter();
  const system = (e: RecordedEvent) => e.streamId.startsWith('$') || e.type.startsWith('$');
  const byStream = f?.getStreamIdentifier();
  if (byStream) {
    const prefixes = byStream.getPrefixList();
    if (prefixes.length === 0) return { port: { streamPrefixes: [] }, matches: () => false };
    return {
      port: { streamPrefixes: prefixes },
      matches: (e) => !system(e) && prefixes.some((p) => e.streamId.startsWith(p)),
    };
  }
  const regex = f?.getEventType()?.getRegex() ?? '^[^$].*';
  const names = /^\^\(\?:(.*)\)\$$/.exec(regex);
  const pattern = new RegExp(regex);
  const matches = (e: RecordedEvent) => !system(e) && pattern.test(e.type);
  if (names) {
    const types = names[1].split('|').map((t) => t.replace(/\\(.)/g, '$1'));
    return { port: { eventTypes: types }, matches };
  }
  if (regex === '^[^$].*') return { matches };
  return { port: { streamPrefixes: [] }, matches };
}

/** Where a subscription request starts: after this position (0: the first event). */
function startOf(request: ReadRequest, head: number): number {
  const all = request.getOptions()?.getAll();
  if (all?.hasEnd()) return head;
  const position = all?.getPosition();
  // The server starts at the position itself (inclusive): the adapter drops the event there.
  return position ? Math.max(0, Number(position.getCommitPosition()) - 1) : 0;
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
    let position = startOf(request, head);
    await replies.send(confirmationReply());
    while (!cancelled && position < head) {
      const page = await inner.readAll({ after: position, filter: port, maxCount: CATCH_UP_PAGE });
      for (const e of page) if (e.position <= head && matches(e)) await replies.send(eventReply(e));
      if (page.length < CATCH_UP_PAGE || page[page.length - 1].position >= head) break;
      position = page[page.length - 1].position;
    }
    if (cancelled) return;
    // The end of the catch-up: the page the server would read next starts after the head.
    await replies.send(checkpointReply(head + 1, 0));
    await replies.send(caughtUpReply());
    let considered = 0;
    live = inner.subscribeToAll(
      { from: { after: head } },
      {
        async onEvents(events) {
          for (const e of events) {
            if (matches(e)) await replies.send(eventReply(e));
            considered += 1;
            if (considered % CHECKPOINT_EVERY === 0)
              await replies.send(checkpointReply(e.position, e.position));
          }
        },
      },
    );
    if (cancelled) await live.stop();
  })().catch((err: Error) => replies.destroy(err));
  return replies;
}
