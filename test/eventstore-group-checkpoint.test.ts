/**
 * The embedded store writes a persistent group's checkpoint at most once a second
 * (eventstore/sqlite/group-runtime.ts), and when its last consumer stops: a filtered group moved past
 * every other append by another thread no longer takes the store's write lock each time.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { rawEvent } from './support/raw-events.ts';

const event = (type: string) => rawEvent(type);

test('a filtered group moved past a burst of others’ events stores its checkpoint once, then at stop', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-group-checkpoint-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(() => store.close());
  await store.createPersistentSubscription('g', { from: 'start', filter: { eventTypes: ['Wanted'] } });
  let handled = 0;
  const consumer = store.subscribeToPersistent('g', async (m) => {
    handled += 1;
    await m.ack();
  });
  await store.append('s-0', [event('Wanted')]);
  while (handled === 0) await new Promise((r) => setTimeout(r, 5));

  for (let i = 1; i <= 100; i++) {
    await store.append(`s-${i}`, [event('Other')]);
    await new Promise((r) => setImmediate(r)); // the group reads past each one
  }
  const head = await store.headPosition();
  const during = (await store.getPersistentSubscriptionInfo('g')).lastCheckpointedPosition ?? 0;
  t.true(during >= 1, 'the first advance is written at once');
  t.true(during < head, `stored ${during} of ${head}: not once per append`);

  await consumer.stop();
  t.is((await store.getPersistentSubscriptionInfo('g')).lastCheckpointedPosition, head, 'stored at stop');
  t.is(handled, 1);
});
