import type { EventStore } from './port.ts';
import {
  type CheckpointMode,
  type EventStoreSync,
  type GroupCommit,
  openSqliteEventStore,
} from './sqlite.ts';

export * from './port.ts';
export type { CheckpointMode, EventStoreSync, GroupCommit } from './sqlite.ts';

/** How a process's connection to the embedded store behaves; an EventStoreDB connection has nothing to set. */
export interface EventStoreOptions {
  /** Who copies the embedded store's WAL into its file (`eventstore/sqlite/log.ts`). */
  checkpoints?: CheckpointMode;
  /** Which appends share a transaction (`eventstore/sqlite/appends.ts`). */
  groupCommit?: GroupCommit;
  /** When the embedded store's commits reach the disk (`PDS_EVENT_STORE_SYNC`; default `'full'`). */
  synchronous?: EventStoreSync;
}

/**
 * Opens the adapter a connection string names: `sqlite:<file>` for the embedded store, or an
 * EventStoreDB/KurrentDB connection string (`esdb://…`, `esdb+discover://…`, `kurrentdb://…`). The
 * EventStoreDB client is loaded only then: it is a tenth of a second of every embedded start otherwise.
 */
export async function openEventStore(url: string, options: EventStoreOptions = {}): Promise<EventStore> {
  if (url.startsWith('sqlite:')) return openSqliteEventStore(url.slice('sqlite:'.length), options);
  if (/^(esdb|esdb\+discover|kurrentdb|kurrentdb\+discover|kurrent|kurrent\+discover):\/\//.test(url)) {
    const { createEsdbEventStore } = await import('./esdb.ts');
    return createEsdbEventStore(url);
  }
  throw new Error(`unsupported event store URL scheme: ${url.split(':')[0]}`);
}
