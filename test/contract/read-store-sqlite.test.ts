import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { readStoreContract } from './read-store.ts';
import { readStoreProcessesContract } from './read-store-processes.ts';

// The SQLite adapter runs the whole contract, each test on its own in-memory database (the file-backed
// cases, reopening and self-healing, are in test/read-store-sqlite.test.ts).
readStoreContract(test, 'sqlite', async () => {
  const store = openSqliteReadStore(':memory:');
  return { store, cleanup: () => store.close() };
});

// Two processes: two connections on one file.
readStoreProcessesContract(test, 'sqlite', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-contract-'));
  const file = path.join(dir, 'read.db');
  const stores = [openSqliteReadStore(file), openSqliteReadStore(file)] as const;
  t.teardown(async () => {
    for (const s of stores) await s.close();
    await rm(dir, { recursive: true, force: true });
  });
  return [...stores];
});
