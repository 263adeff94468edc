import test from 'ava';
import { createMemoryReadStore } from '../../projections/memory-read-store.ts';
import { readStoreContract } from './read-store.ts';

// The in-memory adapter always runs the whole contract, each test on its own store.
readStoreContract(test, 'memory', async () => {
  const store = createMemoryReadStore();
  return { store, cleanup: () => store.close() };
});
