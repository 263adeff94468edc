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
