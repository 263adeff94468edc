/**
 * EventStoreDB / KurrentDB adapter of the EventStore port, on `@eventstore/db-client` 6.x (gRPC); its
 * parts are in `eventstore/esdb/`.
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
 * Filters. The 6.x client filters subscriptions and persistent subscriptions server side, but not
 * `$all` reads: a filtered read is sent here as the Read request the client's own `readAll` would send
 * plus the filter (esdb/filtered-read.ts), so the server returns only matching events. Event-type
 * filters are sent as an anchored regex of the exact names (a prefix filter would also match longer
 * names, and a persistent consumer in another process could not know which ones to drop). System
 * streams and event types (`$…`) are always dropped here too.
 *
 * Persistent subscriptions. A replayed parked message comes with the position of its parked link; its
 * event's own position is read from its stream before it is handed over (esdb/persistent.ts).
 *
 * Appends use the client's unary Append call, each bounded by a timeout (esdb/streams.ts); close() lets
 * the appends under way settle before it disposes of the client. A connection string with
 * `throwOnAppendFailure=false` is refused (esdb/client.ts): the client would answer a conflict as a
 * success.
 *
 * Leader. Every read asks for the leader (`requires-leader`): a stream read is one a decision rests
 * on, a `$all` read must see what was written before it asked, and a follower may not hold the last
 * writes. A follower refuses them naming the leader, the client moves its connection there and the
 * read is made again (esdb/client.ts, `onLeader`). Catch-up subscriptions may be served by any node
 * (docs/operations.md, "EventStoreDB").
 */

import { createCatchUp } from './esdb/catch-up.ts';
import { connect, type Running } from './esdb/client.ts';
import { createPersistent } from './esdb/persistent.ts';
import { createStreams, type StreamsOptions } from './esdb/streams.ts';
import type { EventStore } from './port.ts';

export type EsdbOptions = StreamsOptions;

export function createEsdbEventStore(connectionString: string, options: EsdbOptions = {}): EventStore {
  const client = connect(connectionString);
  /** Running subscriptions and consumers, stopped by close(). */
  const running: Running = new Set();
  const streams = createStreams(client, options);
  const { subscribeToAll } = createCatchUp(client, running, streams.recordBefore);
  const persistent = createPersistent(client, running);
  return {
    kind: 'esdb',
    append: streams.append,
    readStream: streams.readStream,
    readAll: streams.readAll,
    headPosition: streams.headPosition,
    // The server keeps no count: the events are read (the filter applied by the server) and counted.
    countAll: async ({ after, filter, max }) =>
      (await streams.readAll({ after, filter, maxCount: max })).length,
    subscribeToAll,
    // The server drops expired events itself, at a scavenge (docs/operations.md, "Retention").
    dropExpired: async () => ({ events: 0, streams: 0 }),
    ...persistent,
    async close() {
      await Promise.allSettled([...running].map((r) => r.stop()));
      // Disposing cancels the client's streams: appends under way first get their answer (or time out).
      await streams.settle();
      await client.dispose();
    },
  };
}
