import type { EventStore } from './port.ts';
import { openSqliteEventStore } from './sqlite.ts';

export * from './port.ts';

/**
 * Opens the adapter a connection string names: `sqlite:<file>` for the embedded store, or an
 * EventStoreDB/KurrentDB connection string (`esdb://…`, `esdb+discover://…`, `kurrentdb://…`). The
 * EventStoreDB client is loaded only then: it is a tenth of a second of every embedded start otherwise.
 */
export async function openEventStore(url: string): Promise<EventStore> {
  if (url.startsWith('sqlite:')) return openSqliteEventStore(url.slice('sqlite:'.length));
  if (/^(esdb|esdb\+discover|kurrentdb|kurrentdb\+discover|kurrent|kurrent\+discover):\/\//.test(url)) {
    const { createEsdbEventStore } = await import('./esdb.ts');
    return createEsdbEventStore(url);
  }
  throw new Error(`unsupported event store URL scheme: ${url.split(':')[0]}`);
}
