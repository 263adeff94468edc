import test from 'ava';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { readStoreContract } from './read-store.ts';

// The SQLite adapter runs the whole contract, each test on its own in-memory database (the file-backed
// cases, reopening and self-healing, are in test/read-store-sqlite.test.ts).
readStoreContract(test, 'sqlite', async () => {
  const store = openSqliteReadStore(':memory:');
  return { store, cleanup: () => store.close() };
});
