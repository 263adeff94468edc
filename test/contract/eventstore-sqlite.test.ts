import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { EventStore, NewEvent } from '../../eventstore/port.ts';
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

test('sqlite: a filtered subscription tells how far it has read past the events it skips', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pds-es-'));
  const store = await openSqliteEventStore(join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const event = (type: string): NewEvent => ({
    id: randomUUID(),
    type,
    data: {},
    metadata: {
      correlation_id: randomUUID(),
      causation_id: null,
      actor: { type: 'platform', id: 'test' },
      occurred_at: '2026-11-24T00:00:00.000Z',
      schema_version: 1,
    },
  });
  await store.append('partner-1', [event('PartnerRegistered')]);
  // Far more skipped events than one scan window, so the report does not come from a single read.
  for (let i = 0; i < 30; i++) {
    await store.append(
      `cart-${i}`,
      Array.from({ length: 5_000 }, () => event('CartCreated')),
    );
  }
  const head = await store.headPosition();
  const delivered: number[] = [];
  const progress: number[] = [];
  const sub = store.subscribeToAll(
    { from: 'start', filter: { streamPrefixes: ['partner-'] } },
    {
      onEvents: (events) => {
        delivered.push(...events.map((e) => e.position));
      },
      onProgress: (position) => {
        progress.push(position);
      },
    },
  );
  await sub.caughtUp;
  t.deepEqual(delivered, [1]);
  t.true(progress.length >= 2, `reported along the way and at the head (${progress.join(', ')})`);
  t.is(progress[progress.length - 1], head);
  t.deepEqual(
    progress,
    [...progress].sort((a, b) => a - b),
    'never backwards',
  );
  t.true(
    progress.every((p) => p > 1),
    'only beyond the last delivered event',
  );
  // A new matching event is delivered, not reported as progress.
  await store.append('partner-2', [event('PartnerRegistered')]);
  await store.append('cart-x', [event('CartCreated')]);
  for (let i = 0; i < 100 && progress[progress.length - 1] !== head + 2; i++)
    await new Promise((r) => setTimeout(r, 10));
  t.deepEqual(delivered, [1, head + 1]);
  t.is(progress[progress.length - 1], head + 2);
  await sub.stop();
});
