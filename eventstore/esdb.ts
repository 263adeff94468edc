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
 * Filters. The 6.x client only filters subscriptions and persistent subscriptions server side; `$all`
 * reads are filtered here, page by page. Event-type filters are sent as an anchored regex of the exact
 * names (a prefix filter would also match longer names, and a persistent consumer in another process
 * could not know which ones to drop). System streams and event types (`$…`) are always dropped here too.
 */

import { createCatchUp } from './esdb/catch-up.ts';
import { connect, type Running } from './esdb/client.ts';
import { createPersistent } from './esdb/persistent.ts';
import { createStreams } from './esdb/streams.ts';
import type { EventStore } from './port.ts';

export function createEsdbEventStore(connectionString: string): EventStore {
  const client = connect(connectionString);
  /** Running subscriptions and consumers, stopped by close(). */
  const running: Running = new Set();
  const streams = createStreams(client);
  const { subscribeToAll } = createCatchUp(client, running);
  const persistent = createPersistent(client, running);
  return {
    kind: 'esdb',
    append: streams.append,
    readStream: streams.readStream,
    readAll: streams.readAll,
    headPosition: streams.headPosition,
    subscribeToAll,
    ...persistent,
    async close() {
      await Promise.allSettled([...running].map((r) => r.stop()));
      await client.dispose();
    },
  };
}
