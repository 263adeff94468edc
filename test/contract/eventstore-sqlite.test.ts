import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import type { EventStore, NewEvent, SubscriptionStart } from '../../eventstore/port.ts';
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

/** A store holding two partner events among 150,000 cart events, and its head. */
async function sparse(t: ExecutionContext) {
  const dir = mkdtempSync(join(tmpdir(), 'pds-es-'));
  const store = await openSqliteEventStore(join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  await store.append('partner-1', [event('PartnerRegistered')]);
  // Far more events than one scan window.
  for (let i = 0; i < 30; i++) {
    await store.append(
      `cart-${i}`,
      Array.from({ length: 5_000 }, () => event('CartCreated')),
    );
  }
  await store.append('partner-2', [event('PartnerRegistered')]);
  return { store, head: await store.headPosition() };
}

function event(type: string): NewEvent {
  return {
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
  };
}

/** Follows a filter from `from` until caught up: what it delivered and what progress it told. */
async function follow(
  store: EventStore,
  streamPrefixes: string[],
  from: SubscriptionStart,
  maxBatchSize = 500,
) {
  const delivered: number[] = [];
  const progress: number[] = [];
  const sub = store.subscribeToAll(
    { from, filter: { streamPrefixes }, maxBatchSize },
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
  return { sub, delivered, progress };
}

test('sqlite: a filtered subscription delivers a rare stream kind in order and tells how far it has read', async (t) => {
  const { store, head } = await sparse(t);
  // From the start, a rare prefix is read through the stream index; from a late position too.
  const rare = await follow(store, ['partner-'], 'start', 1);
  t.deepEqual(rare.delivered, [1, head]);
  t.deepEqual(rare.progress, [], 'its last event is the head: nothing was skipped after it');
  await rare.sub.stop();
  const late = await follow(store, ['partner-'], { after: 1 });
  t.deepEqual(late.delivered, [head]);
  await late.sub.stop();

  // The common prefix is scanned by position; what it skips at the end (partner-2) is told as progress.
  const common = await follow(store, ['cart-'], 'start', 5_000);
  t.is(common.delivered.length, 150_000);
  t.deepEqual(
    common.delivered,
    [...common.delivered].sort((a, b) => a - b),
  );
  t.is(common.delivered[0], 2);
  t.deepEqual(common.progress, [head]);

  // A new matching event is delivered, not told as progress; one skipped afterwards is.
  const live = await follow(store, ['partner-'], { after: head });
  await store.append('partner-3', [event('PartnerRegistered')]);
  await store.append('cart-x', [event('CartCreated')]);
  for (let i = 0; i < 200 && live.progress.at(-1) !== head + 2; i++)
    await new Promise((r) => setTimeout(r, 10));
  t.deepEqual(live.delivered, [head + 1]);
  t.deepEqual(live.progress, [head + 2]);
  await live.sub.stop();
  await common.sub.stop();
});

test('sqlite: a subscription far behind on a rare prefix tells progress past the events it skipped', async (t) => {
  const { store, head } = await sparse(t);
  const skipped = await follow(store, ['brand-'], 'start');
  t.deepEqual(skipped.delivered, []);
  t.deepEqual(skipped.progress, [head], 'one step: the stream index says there is nothing to read');
  await skipped.sub.stop();
});
