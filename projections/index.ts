/**
 * Opens the read store `PDS_READ_STORE` names: `sqlite:<file>`, a MongoDB URL, or `memory`: SQLite
 * without a file, this process's own copy, built from the events at every start (docs/read-side.md).
 * The MongoDB driver is loaded only for a MongoDB URL, so an embedded start does not pay for it.
 */
import type { ReadStore } from './read-store.ts';
import { openSqliteReadStore } from './sqlite/read-store.ts';

export interface OpenReadStoreOptions {
  /** SQLite's page cache, in MiB (`sqlite:` only). */
  cacheMiB?: number;
}

export async function openReadStore(url: string, options: OpenReadStoreOptions = {}): Promise<ReadStore> {
  if (url === 'memory') return openSqliteReadStore(':memory:', options);
  if (url.startsWith('sqlite:')) return openSqliteReadStore(url.slice('sqlite:'.length), options);
  if (/^mongodb(\+srv)?:\/\//.test(url)) {
    const { createMongoReadStore } = await import('./mongo-read-store.ts');
    return createMongoReadStore(url);
  }
  throw new Error(`unsupported read store: ${url.split(':')[0]}`);
}
