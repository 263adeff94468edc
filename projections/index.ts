/** Opens the read store `PDS_READ_STORE` names: `memory` or a MongoDB URL. */
import { createMemoryReadStore } from './memory-read-store.ts';
import { createMongoReadStore } from './mongo-read-store.ts';
import type { ReadStore } from './read-store.ts';

export async function openReadStore(url: string): Promise<ReadStore> {
  if (url === 'memory') return createMemoryReadStore();
  if (/^mongodb(\+srv)?:\/\//.test(url)) return createMongoReadStore(url);
  throw new Error(`unsupported read store: ${url.split(':')[0]}`);
}
