/**
 * How each process, and each thread of role `all`, connects to the embedded event store
 * (docs/operations.md, "Threads"): who copies its WAL into the file, and which appends share a
 * transaction. An EventStoreDB connection ignores both.
 */
import type { EventStoreOptions } from '../eventstore/index.ts';
import type { Role } from './roles.ts';

/** Where a connection is opened: a process's main thread, or one of role `all`'s threads. */
export type StoreUser =
  | { role: Role; thread?: never }
  | { role: 'all'; thread: 'dispatcher' | 'projector' | 'delivery' };

/**
 * - Checkpoints: with a projector thread, that thread checkpoints `events.db` for the whole process
 *   and the main and dispatcher threads leave it to it, so a partner's write or a webhook attempt
 *   never waits for the copy; otherwise each connection does so in its commits, as SQLite does.
 * - Group commit: where the APIs take writes (the main thread of `all`, and `api`), the appends of a
 *   whole turn of the event loop share a transaction (many requests at once); elsewhere those of one
 *   callback (a delivery's appends wait for each other, and a turn's wait would slow them) while a
 *   turn has one such callback, and the turn's others together at its end (`'adaptive'`: a backlog
 *   of deliveries, many answers a turn).
 */
export function eventStoreOptionsOf(user: StoreUser, projectorThread: boolean): EventStoreOptions {
  const inAll = user.role === 'all' && projectorThread;
  return {
    checkpoints: !inAll ? 'commit' : user.thread === 'projector' ? 'background' : 'elsewhere',
    groupCommit:
      user.thread === undefined && (user.role === 'all' || user.role === 'api') ? 'turn' : 'adaptive',
  };
}
