/**
 * A rebuild's copy paced by the serving thread's event-loop delay (`projections/build-pacing.ts`;
 * docs/read-side.md, "Serving during a rebuild"): full speed while serving is on time, a share of the
 * time as the delay grows, never less than a quarter, and full speed again once the reports stop.
 */
import test from 'ava';
import { servingDelayOf } from '../../cli/serving-delay.ts';
import {
  buildDuty,
  createBuildPacer,
  LEAST_DUTY,
  type PacerTiming,
  restAfter,
  SERVING_DELAY_STALE_MS,
  SERVING_DELAY_TARGET_MS,
} from '../../projections/build-pacing.ts';
import { createProjector, type Projection } from '../../projections/projector.ts';
import type { Doc } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { eventStoreFor, seedThings } from './support.ts';

test('a build works all the time while serving is on time, and the target over the delay beyond it, down to a quarter', (t) => {
  t.is(buildDuty(undefined), 1);
  t.is(buildDuty(0), 1);
  t.is(buildDuty(SERVING_DELAY_TARGET_MS), 1);
  t.is(buildDuty(2 * SERVING_DELAY_TARGET_MS), 0.5);
  t.is(buildDuty(4 * SERVING_DELAY_TARGET_MS), LEAST_DUTY);
  t.is(buildDuty(100 * SERVING_DELAY_TARGET_MS), LEAST_DUTY);
  t.is(buildDuty(Number.NaN), 1);
  t.is(LEAST_DUTY, 0.25);
});

test('after a batch, a build rests for what its duty leaves of the time', (t) => {
  t.is(restAfter(200, 1), 0);
  t.is(restAfter(200, 0.5), 200);
  t.is(restAfter(200, 0.25), 600);
  t.is(restAfter(-5, 0.5), 0);
});

test("the delay the main thread tells is the 99th percentile of its sampling timer's intervals beyond the timer's own", (t) => {
  t.is(servingDelayOf({ count: 0, percentile: () => 0 }), undefined, 'no sample: nothing to tell');
  t.is(servingDelayOf({ count: 100, percentile: (p) => (p === 99 ? 45e6 : 10e6) }, 10), 35);
  t.is(servingDelayOf({ count: 100, percentile: () => 9.5e6 }, 10), 0);
});

/** A clock moved by hand: a batch takes what the test says, a rest is recorded and passes at once. */
function timing(): PacerTiming & { advance(ms: number): void; rests: number[] } {
  let now = 0;
  const rests: number[] = [];
  return {
    now: () => now,
    advance: (ms) => {
      now += ms;
    },
    rests,
    async sleep(ms) {
      rests.push(ms);
      now += ms;
    },
  };
}

test('the pacer rests after each batch by the last reported delay, and not once the reports are stale', async (t) => {
  const clock = timing();
  const pacer = createBuildPacer(clock);
  const batch = (ms: number) => pacer.paced(async () => clock.advance(ms));
  await batch(100);
  t.deepEqual(clock.rests, [], 'no report: full speed');
  t.deepEqual(pacer.state(), { delayMs: undefined, duty: 1 });

  pacer.servingDelay(2 * SERVING_DELAY_TARGET_MS);
  await batch(100);
  t.deepEqual(clock.rests, [100], 'half the time');
  t.deepEqual(pacer.state(), { delayMs: 2 * SERVING_DELAY_TARGET_MS, duty: 0.5 });
  pacer.servingDelay(SERVING_DELAY_TARGET_MS);
  await batch(100);
  t.deepEqual(clock.rests, [100], 'on time again: no rest');

  pacer.servingDelay(10 * SERVING_DELAY_TARGET_MS);
  await batch(50);
  t.deepEqual(clock.rests, [100, 150], 'a quarter of the time at most slowed');
  clock.advance(SERVING_DELAY_STALE_MS);
  await batch(50);
  t.deepEqual(clock.rests, [100, 150], 'a report older than 3 s holds nothing back');
  t.deepEqual(pacer.state(), { delayMs: undefined, duty: 1 });
  t.is(await pacer.paced(async () => 'applied'), 'applied');
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

test("a rebuild's copy goes through the pacer batch by batch; a start's catch-up and the live projection do not", async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 300);
  const paced: number[] = [];
  const buildPacer = {
    servingDelay() {},
    state: () => ({ delayMs: undefined, duty: 1 }),
    async paced<T>(batch: () => Promise<T>): Promise<T> {
      paced.push(paced.length + 1);
      return batch();
    },
  };
  const p = createProjector({
    store,
    readStore: openSqliteReadStore(':memory:'),
    projections: [tallies],
    batchSize: 100,
    buildPacer,
  });
  await p.start();
  t.teardown(() => p.stop());
  await p.caughtUp;
  t.deepEqual(paced, [], 'the first start builds at full speed');
  await p.rebuild('tallies');
  t.deepEqual(paced, [1, 2, 3], 'three batches of 100');
  const [live] = await p.status();
  t.like(live, { state: 'live', events_applied: 300 });
});
