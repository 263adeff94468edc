/**
 * The embedded store's journal of its own appends (eventstore/sqlite/journal.ts): a filtered reader
 * skips a wake-up only when every new event is this process's and none matches; another writer's
 * events (a gap in the positions) are always read.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { RecordedEvent } from '../eventstore/port.ts';
import { Journal } from '../eventstore/sqlite/journal.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { rawEvent } from './support/raw-events.ts';

const event = (type: string) => rawEvent(type);

test('skips only what it knows all of, and none of which matches', (t) => {
  const j = new Journal();
  t.false(j.skips(0, 1, { streamPrefixes: ['a-'] }), 'knows nothing yet');
  j.record(1, 2, 'cart-1', ['CartCreated', 'CartItemAdded']);
  j.record(3, 3, 'webhookdelivery-x', ['WebhookDeliveryScheduled']);
  t.true(j.skips(2, 3, { streamPrefixes: ['cart-'] }));
  t.false(j.skips(1, 3, { streamPrefixes: ['cart-'] }), 'position 2 is a cart event');
  t.true(j.skips(0, 3, { eventTypes: ['CartAbandoned'] }));
  t.false(j.skips(0, 3, { eventTypes: ['CartItemAdded'] }));
  t.false(j.skips(3, 4, { streamPrefixes: ['x-'] }), 'position 4 is not known');
  // Another writer took 4-5: from 6 on it is complete again, before it nothing is known.
  j.record(6, 6, 'cart-2', ['CartCreated']);
  t.false(j.skips(3, 6, { streamPrefixes: ['webhook'] }));
  t.true(j.skips(5, 6, { streamPrefixes: ['webhook'] }));
});

test("another thread's runs may arrive after later ones of this thread: a position not yet known is a gap", (t) => {
  const j = new Journal();
  j.record(1, 1, 'cart-1', ['CartCreated']);
  j.record(3, 3, 'cart-1', ['CartItemAdded']); // this thread; 2 is another thread's, not yet announced
  t.false(j.skips(0, 3, { streamPrefixes: ['webhook'] }), 'position 2 unknown');
  j.record(2, 2, 'webhookdelivery-x', ['WebhookDeliveryScheduled']);
  t.true(j.skips(0, 3, { streamPrefixes: ['product-'] }));
  t.false(j.skips(0, 3, { streamPrefixes: ['webhook'] }), 'position 2 matches');
  t.true(j.skips(2, 3, { streamPrefixes: ['webhook'] }));
});

test('passes over the runs of a matching stream that the reader reflects already, only those', (t) => {
  const j = new Journal();
  j.record(1, 2, 'webhookdelivery-a', ['WebhookDeliveryScheduled', 'WebhookDeliveryAttemptStarted']);
  j.record(3, 3, 'webhookdelivery-b', ['WebhookDeliveryScheduled']);
  const filter = { streamPrefixes: ['webhookdelivery-'] };
  const reflected = new Map([['webhookdelivery-a', 2]]);
  const reflects = (stream: string, position: number) => (reflected.get(stream) ?? 0) >= position;
  t.true(j.skips(0, 2, filter, reflects), "the reader's own append");
  t.false(j.skips(0, 3, filter, reflects), 'position 3 is wanted');
  reflected.set('webhookdelivery-a', 1);
  t.false(j.skips(0, 2, filter, reflects), 'the reader reflects the run only up to position 1');
  reflected.set('webhookdelivery-b', 3);
  reflected.set('webhookdelivery-a', 2);
  t.true(j.skips(0, 3, filter, reflects));
  t.false(j.skips(0, 4, filter, reflects), 'position 4 is not known');
});

test('a subscription passes over what its reader reflects, telling its progress, and receives the rest', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-journal-'));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const own = new Map<string, number>();
  const seen: string[] = [];
  const progress: number[] = [];
  const sub = store.subscribeToAll(
    {
      from: 'start',
      filter: { streamPrefixes: ['wanted-'] },
      known: (stream, position) => (own.get(stream) ?? 0) >= position,
    },
    {
      onEvents(events) {
        seen.push(...events.map((e) => `${e.streamId}@${e.revision}`));
      },
      onProgress(position) {
        progress.push(position);
      },
    },
  );
  await sub.caughtUp;
  const waitFor = async (done: () => boolean) => {
    const deadline = Date.now() + 5_000;
    while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  };
  // The reader's own append, applied as it returns: passed over, its position told.
  const mine = await store.append('wanted-1', [event('Wanted'), event('Wanted')]);
  own.set('wanted-1', mine.position);
  await waitFor(() => progress.includes(mine.position));
  t.deepEqual(seen, []);
  t.deepEqual(progress, [mine.position]);
  // Another append to the same stream, which the reader does not reflect: received.
  await store.append('wanted-1', [event('Wanted')]);
  await store.append('wanted-2', [event('Wanted')]);
  await waitFor(() => seen.length >= 2);
  t.deepEqual(seen, ['wanted-1@2', 'wanted-2@0']);
  await sub.stop();
});

test("a filtered subscription still receives what another connection appends between this one's", async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-journal-'));
  const file = path.join(dir, 'events.db');
  const ours = await openSqliteEventStore(file);
  const theirs = await openSqliteEventStore(file);
  t.teardown(async () => {
    await ours.close();
    await theirs.close();
    await rm(dir, { recursive: true, force: true });
  });
  const seen: RecordedEvent[] = [];
  const sub = ours.subscribeToAll(
    { from: 'start', filter: { streamPrefixes: ['wanted-'] } },
    {
      onEvents(events) {
        seen.push(...events);
      },
    },
  );
  await sub.caughtUp;
  await ours.append('other-1', [event('Other')]);
  await theirs.append('wanted-1', [event('Wanted')]);
  await ours.append('other-2', [event('Other')]);
  await ours.append('wanted-2', [event('Wanted')]);
  const deadline = Date.now() + 5_000;
  while (seen.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.deepEqual(
    seen.map((e) => e.streamId),
    ['wanted-1', 'wanted-2'],
  );
  await sub.stop();
});
