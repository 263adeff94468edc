/**
 * A build's progress (`projections/build-progress.ts`; docs/operations.md, "Projections"): the rate
 * of the last 30 s and the time left at it, and a projection catching up at a start shows its
 * progress as a rebuild does, until it has caught up.
 */
import test from 'ava';
import { manualClock } from '../../domain/clock.ts';
import { RATE_WINDOW_MS, trackProgress } from '../../projections/build-progress.ts';
import { createProjector, type Projection } from '../../projections/projector.ts';
import type { Doc } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { heldReadStore } from '../support/held-read-store.ts';
import { until } from '../support/probes.ts';
import { eventStoreFor, seedThings } from './support.ts';

test('the rate is of the last 30 s, so the time left follows a build that slows down', (t) => {
  const clock = manualClock('2026-03-01T10:00:00.000Z');
  const { progress, advance, finish } = trackProgress(0, 100_000, clock);
  t.like(progress, { started_at: '2026-03-01T10:00:00.000Z', percent: 0, eta_seconds: null, position: 0 });
  // 10 s at 1,000 positions a second.
  for (let s = 1; s <= 10; s++) {
    clock.advance(1_000);
    advance(s * 1_000, 1_000);
  }
  t.like(progress, { position: 10_000, percent: 10, rate_per_second: 1_000, eta_seconds: 90 });
  // Then 40 s at 100 a second: the window holds only these.
  for (let s = 1; s <= 40; s++) {
    clock.advance(1_000);
    advance(10_000 + s * 100, 100);
  }
  t.is(RATE_WINDOW_MS, 30_000);
  t.like(progress, { position: 14_000, events_done: 14_000, rate_per_second: 100, eta_seconds: 860 });
  finish();
  t.like(progress, { percent: 100, eta_seconds: 0 });
});

test('the time left is the positions still to read at the rate positions went by, whatever share of them the projection applies', (t) => {
  const clock = manualClock();
  const { progress, advance } = trackProgress(5_000, 25_000, clock);
  // A projection applying one event in four of the log it reads past.
  for (let s = 1; s <= 10; s++) {
    clock.advance(1_000);
    advance(5_000 + s * 1_000, 250);
  }
  t.like(progress, { position: 15_000, percent: 50, rate_per_second: 250, eta_seconds: 10 });
  // New events meanwhile: the head it must reach follows them.
  clock.advance(1_000);
  advance(26_000, 250);
  t.like(progress, { target_position: 26_000, percent: 100, eta_seconds: 0 });
});

const tallies: Projection = {
  name: 'tallies',
  version: 1,
  collections: { tally: [] },
  filter: { streamPrefixes: ['thing-'] },
  prefetch: (e) => [['tally', e.streamId]],
  apply(e, tx) {
    const t = tx.get<Doc & { n: number }>('tally', e.streamId);
    tx.put('tally', { _id: e.streamId, n: (t?.n ?? 0) + 1 });
  },
};

test('a first start shows its progress towards the head while it builds, and none once it has caught up', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 300);
  const head = await store.headPosition();
  const readStore = heldReadStore(openSqliteReadStore(':memory:'));
  readStore.hold('tallies');
  const p = createProjector({ store, readStore, projections: [tallies], batchSize: 100 });
  await p.start();
  t.teardown(() => p.stop());
  await until('the first batch waits', () => readStore.waiting > 0);
  const [building] = await p.status();
  t.is(building.state, 'starting');
  t.like(building.progress, {
    target_position: head,
    position: 0,
    events_done: 0,
    percent: 0,
    eta_seconds: null,
  });
  readStore.release();
  await p.caughtUp;
  const [live] = await p.status();
  t.like(live, { state: 'live', events_applied: 300, progress: null });
});

test('a build whose subscription dropped shows no rate and no time left until it runs again, and a position told again does not move it back', (t) => {
  const clock = manualClock();
  const { progress, advance, stall } = trackProgress(0, 10_000, clock);
  clock.advance(1_000);
  advance(1_000, 1_000);
  t.like(progress, { rate_per_second: 1_000, eta_seconds: 9 });
  stall();
  t.like(progress, { position: 1_000, rate_per_second: 0, eta_seconds: null });
  // Resumed from its stored checkpoint after a pause of a minute: the rate is of what followed it.
  clock.advance(60_000);
  advance(500, 0);
  t.like(progress, { position: 1_000, rate_per_second: 0, eta_seconds: null });
  clock.advance(1_000);
  advance(2_000, 1_000);
  t.like(progress, { position: 2_000, rate_per_second: 0, eta_seconds: null });
  clock.advance(1_000);
  advance(3_000, 1_000);
  t.like(progress, { position: 3_000, rate_per_second: 1_000, eta_seconds: 7 });
});

test('a start whose head cannot be read goes on without progress: the subscription retries the event store, not the projector', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 50);
  // The head is out of reach once, when the projection starts.
  let refusals = 1;
  const unreachableHead = new Proxy(store, {
    get(target, prop) {
      if (prop === 'headPosition' && refusals > 0) {
        refusals -= 1;
        return () => Promise.reject(new Error('the event store is out of reach'));
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const errors: string[] = [];
  const logger = { info() {}, warn() {}, error: (_: unknown, message: string) => errors.push(message) };
  const p = createProjector({
    store: unreachableHead,
    readStore: openSqliteReadStore(':memory:'),
    projections: [tallies],
    logger: logger as never,
  });
  await p.start();
  t.teardown(() => p.stop());
  await p.caughtUp;
  const [live] = await p.status();
  t.like(live, { state: 'live', events_applied: 50, progress: null });
  t.deepEqual(errors, [], 'the projector kept its lease and started once');
});
