/**
 * Embedded EventStore adapter on Node's built-in `node:sqlite` (its parts in `eventstore/sqlite/`).
 *
 * - One table of events: the global position is the rowid (never reused: only operational streams'
 *   expired events are ever deleted, never the last one; `sqlite/expiry.ts`), `(stream_id, revision)`
 *   and `event_id` are unique. Appends of one event-loop turn share one
 *   IMMEDIATE transaction, each in its own savepoint (group commit).
 * - WAL journal. `synchronous=FULL` by default: an acknowledged append survives a power cut (the WAL
 *   is synced at each commit, one sync per group); `synchronous: 'normal'` survives the process being
 *   killed (the WAL write has reached the OS) but not a power cut (`EventStoreSync`).
 * - Live subscribers are woken by the append itself (same process) or by a file-system watch on the
 *   WAL (another process appending to the same file); nothing polls.
 * - Persistent subscription state (settings, checkpoint, retry counts, parked messages) lives in the
 *   same database, so a crash loses no acknowledgement and skips no unacknowledged message.
 *   Consumers of one group must live in one process (use EventStoreDB to spread a group over processes).
 */
import type { EventStore } from './port.ts';
import { createAppends } from './sqlite/appends.ts';
import { subscribeToAll } from './sqlite/catch-up.ts';
import { deleteStream, dropExpired } from './sqlite/expiry.ts';
import { openLog, type SqliteEventStoreOptions } from './sqlite/log.ts';
import { createPersistentSubscriptions } from './sqlite/persistent.ts';
import { createReads } from './sqlite/reads.ts';
import { toRecorded } from './sqlite/rows.ts';

export type { CheckpointMode, EventStoreSync, GroupCommit, SqliteEventStoreOptions } from './sqlite/log.ts';
export { prefixUpperBound } from './sqlite/rows.ts';

export async function openSqliteEventStore(
  path: string,
  options: SqliteEventStoreOptions = {},
): Promise<EventStore> {
  return createSqliteEventStore(path, options);
}

export function createSqliteEventStore(path: string, options: SqliteEventStoreOptions = {}): EventStore {
  const log = openLog(path, options);
  const reads = createReads(log);
  const { append } = createAppends(log, reads, options.groupCommit);
  const persistent = createPersistentSubscriptions(log, reads);
  return {
    kind: 'sqlite',
    append,
    readStream: reads.readStream,
    readAll: async (opts = {}) => reads.readAllSync(opts).map(toRecorded),
    headPosition: async (filter) => reads.headSync(filter),
    countAll: async (opts) => reads.countSync(opts),
    subscribeToAll: (opts, handlers) => subscribeToAll(log, reads, opts, handlers),
    dropExpired: () => dropExpired(log),
    deleteStream: async (streamId, expected) => deleteStream(log, streamId, expected),
    createPersistentSubscription: persistent.createPersistentSubscription,
    updatePersistentSubscription: persistent.updatePersistentSubscription,
    deletePersistentSubscription: persistent.deletePersistentSubscription,
    getPersistentSubscriptionInfo: persistent.getPersistentSubscriptionInfo,
    listPersistentSubscriptions: persistent.listPersistentSubscriptions,
    subscribeToPersistent: persistent.subscribeToPersistent,
    listParkedMessages: persistent.listParkedMessages,
    replayParkedMessages: persistent.replayParkedMessages,
    async close() {
      persistent.shutdownAll();
      log.close();
    },
  };
}
