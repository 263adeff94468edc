/**
 * The lag gauges (projections/lag.ts): a lag of 0 means caught up with the log's head now, since
 * start-up's readiness and the tests wait for it (docs/operations.md, "Projections").
 */
import test from 'ava';
import { manualClock } from '../../domain/clock.ts';
import { ProjectionLags } from '../../projections/lag.ts';
import { rawEvent } from '../support/raw-events.ts';
import { eventStoreFor, seedThings } from './support.ts';

const things = { streamPrefixes: ['thing-'] };

test('a projection at the head lags by nothing; events appended since are counted at the next status', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 5);
  const lags = new ProjectionLags(store);
  const checkpoint = await store.headPosition();
  const [at] = await lags.of([{ name: 'tallies', filter: things, checkpoint }]);
  t.deepEqual(at, { events: 0, seconds: 0 });
  // At once, not a second later: a head kept from the last status would still say 0 here.
  await seedThings(store, 3, 5);
  const [behind] = await lags.of([{ name: 'tallies', filter: things, checkpoint }]);
  t.is(behind.events, 3);
  t.true(behind.seconds >= 0);
});

test('one read of the head serves every projection, each measured from its own checkpoint', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 4);
  const middle = await store.headPosition();
  await seedThings(store, 6, 4);
  const head = await store.headPosition();
  let heads = 0;
  const headPosition = store.headPosition.bind(store);
  store.headPosition = () => {
    heads += 1;
    return headPosition();
  };
  const lags = new ProjectionLags(store);
  const measured = await lags.of([
    { name: 'a', filter: things, checkpoint: head },
    { name: 'b', filter: things, checkpoint: middle },
    { name: 'c', filter: things, checkpoint: 0 },
  ]);
  t.deepEqual(
    measured.map((l) => l.events),
    [0, 6, 10],
  );
  t.is(heads, 1);
});

test('a projection stuck behind a quiet log lags more as time goes on, at no further read of the log', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 2);
  const checkpoint = await store.headPosition();
  await seedThings(store, 1, 2);
  const [oldest] = await store.readAll({ after: checkpoint, maxCount: 1, filter: things });
  const clock = manualClock(new Date(Date.parse(oldest.recordedAt) + 5_000));
  const lags = new ProjectionLags(store, { clock });
  const of = async () => (await lags.of([{ name: 'stuck', filter: things, checkpoint }]))[0];
  t.deepEqual(await of(), { events: 1, seconds: 5 });
  let reads = 0;
  const readAll = store.readAll.bind(store);
  store.readAll = (options) => {
    reads += 1;
    return readAll(options);
  };
  clock.advance(90_000);
  t.deepEqual(await of(), { events: 1, seconds: 95 }, 'the same event, older now');
  t.is(reads, 0, 'the measure is kept while neither the checkpoint nor the head moves');
});

test('a measure that read far is kept, however the checkpoint moves, for twenty times what it took', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 6);
  const clock = manualClock();
  // A read of the log that walks far: a second of the clock for each.
  let reads = 0;
  const slow =
    <A extends unknown[], R>(read: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      reads += 1;
      clock.advance(1_000);
      return read(...args);
    };
  store.readAll = slow(store.readAll.bind(store));
  store.countAll = slow(store.countAll.bind(store));
  // Far behind from one position on: what a first start's projection is at a million.
  const lags = new ProjectionLags(store, { clock, farBehind: 1 });
  const building = (checkpoint: number) => lags.of([{ name: 'building', filter: things, checkpoint }]);
  t.is((await building(0))[0].events, 6);
  t.is(reads, 2, 'its oldest event and the count: two seconds');
  clock.advance(37_000);
  t.is((await building(2))[0].events, 6, 'the measure kept: 39 s since it began, the checkpoint moved');
  t.is(reads, 2);
  clock.advance(1_000);
  t.is((await building(2))[0].events, 4, 'measured again 40 s after it began');
  t.is(reads, 4);
  const head = await store.headPosition();
  await store.append('other-1', [rawEvent('Noted', { n: 1 })]);
  t.is((await building(head - 1))[0].events, 4, 'the measure kept: not yet at the head it was measured at');
  t.is((await building(head))[0].events, 0, 'at that head: its events are applied, measured afresh');
  t.is((await building(0))[0].events, 6, 'a checkpoint gone back (a rebuild promoted): measured afresh');
});

test('a measure that took long is taken afresh when the projection is near the head', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 6);
  const clock = manualClock();
  const readAll = store.readAll.bind(store);
  store.readAll = (options) => {
    clock.advance(60_000); // a paused machine, a busy thread
    return readAll(options);
  };
  const lags = new ProjectionLags(store, { clock });
  const at = async (checkpoint: number) => (await lags.of([{ name: 'live', filter: things, checkpoint }]))[0];
  t.is((await at(0)).events, 6);
  t.is((await at(4)).events, 2, 'six positions behind: never kept on time');
});

test('a measure near the head costs nothing on the clock and is taken afresh whenever the checkpoint moves', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 6);
  const lags = new ProjectionLags(store, { clock: manualClock() });
  const at = async (checkpoint: number) =>
    (await lags.of([{ name: 'live', filter: things, checkpoint }]))[0].events;
  t.is(await at(0), 6);
  t.is(await at(3), 3);
  t.is(await at(5), 1);
});

test('a measure that found nothing holds while the head stays; once it moves, only the events after it are read', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 4);
  const head = await store.headPosition();
  await store.append('other-1', [rawEvent('Noted', { n: 1 })]);
  const froms: number[] = [];
  const readAll = store.readAll.bind(store);
  store.readAll = (options) => {
    froms.push(options?.after ?? 0);
    return readAll(options);
  };
  const lags = new ProjectionLags(store, { clock: manualClock() });
  const at = async (checkpoint: number) =>
    (await lags.of([{ name: 'sparse', filter: things, checkpoint }]))[0];
  t.deepEqual(await at(head), { events: 0, seconds: 0 }, 'only another stream after its checkpoint');
  t.deepEqual(await at(head), { events: 0, seconds: 0 });
  t.deepEqual(froms, [head], 'measured once');
  const otherEnd = await store.headPosition();
  await seedThings(store, 2, 4);
  t.is((await at(head)).events, 2, 'counted at once: a lag of 0 means caught up with the head now');
  t.deepEqual(froms, [head, otherEnd], 'read from the head it had measured, not from its checkpoint');
  const [one] = await store.readAll({ maxCount: 1, filter: things });
  t.is((await at(one.position - 1)).events, 6, 'a checkpoint gone back: all of its events, not only the new');
});

test('status reads at once share the measure one of them is taking: the log is read once', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 3);
  // A measure that takes a while (a server walking the log): its reads wait until released.
  const { promise: released, resolve: release } = Promise.withResolvers<void>();
  let reads = 0;
  const readAll = store.readAll.bind(store);
  store.readAll = async (options) => {
    reads += 1;
    await released;
    return readAll(options);
  };
  const lags = new ProjectionLags(store);
  const of = () => lags.of([{ name: 'tallies', filter: things, checkpoint: 0 }]);
  const first = of();
  const second = of();
  await new Promise((resolve) => setImmediate(resolve));
  t.is(reads, 1, "the second call waits for the first one's read");
  release();
  const [[a], [b]] = await Promise.all([first, second]);
  t.is(a.events, 3);
  t.deepEqual(b, a);
  t.is(reads, 1, 'one read of the oldest event for both calls');
});
