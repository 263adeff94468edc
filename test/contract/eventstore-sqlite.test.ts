import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { eventStoreContract } from './eventstore.ts';

// The embedded adapter always runs the whole contract, each test on its own database file.
eventStoreContract(test, 'sqlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pds-es-'));
  const file = join(dir, 'events.db');
  let current: EventStore = await openSqliteEventStore(file);
  return {
    store: current,
    async reopen() {
      await current.close();
      current = await openSqliteEventStore(file);
      return current;
    },
    async cleanup() {
      await current.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
