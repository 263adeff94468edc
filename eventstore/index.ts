import { createEsdbEventStore } from './esdb.ts';
import type { EventStore } from './port.ts';
import { openSqliteEventStore } from './sqlite.ts';

export * from './port.ts';

/**
 * Opens the adapter a connection string names: `sqlite:<file>` for the embedded store, or an
 * EventStoreDB/KurrentDB connection string (`esdb://…`, `esdb+discover://…`, `kurrentdb://…`).
 */
export async function openEventStore(url: string): Promise<EventStore> {
  if (url.startsWith('sqlite:')) return openSqliteEventStore(url.slice('sqlite:'.length));
  if (/^(esdb|esdb\+discover|kurrentdb|kurrentdb\+discover|kurrent|kurrent\+discover):\/\//.test(url)) {
    return createEsdbEventStore(url);
  }
  throw new Error(`unsupported event store URL scheme: ${url.split(':')[0]}`);
}
