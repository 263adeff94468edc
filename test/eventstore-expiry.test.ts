/**
 * Operational streams' expiry on the embedded store (docs/operations.md, "Retention"): an append with
 * `maxAgeMs` marks its stream's events as droppable once that old; `dropExpired` deletes them, and
 * nothing of a stream without a max age, however old.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createRetention } from '../application/retention.ts';
import { manualClock } from '../domain/clock.ts';
import {
  InvalidEventError,
  type NewEvent,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';

const HOUR = 3_600_000;

function event(type: string): NewEvent {
  return {
    type,
    data: { at: randomUUID() },
    metadata: {
      correlation_id: randomUUID(),
      causation_id: null,
      actor: { type: 'system', id: 'test' },
      occurred_at: '2026-01-01T00:00:00.000Z',
      schema_version: 1,
    },
  };
}

async function storeWithClock(t: ExecutionContext) {
  const dir = mkdtempSync(join(tmpdir(), 'pds-expiry-'));
  const clock = manualClock('2026-01-01T00:00:00.000Z');
  const store = await openSqliteEventStore(join(dir, 'events.db'), { now: clock.now });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { store, clock };
}

test('dropExpired deletes the events older than their stream max age, and no business event', async (t) => {
  const { store, clock } = await storeWithClock(t);
  await store.append('cart-1', [event('CartCreated')]);
  await store.append('idempotency-a', [event('IdempotencyKeyClaimed')], {
    expectedRevision: 'no_stream',
    maxAgeMs: 24 * HOUR,
  });
  clock.advance(2 * HOUR);
  await store.append('idempotency-a', [event('IdempotentResponseRecorded')], {
    expectedRevision: 0,
    maxAgeMs: 24 * HOUR,
  });
  await store.append('idempotency-b', [event('IdempotencyKeyClaimed')], { maxAgeMs: 24 * HOUR });
  await store.append('cart-2', [event('CartCreated')]);

  clock.advance(21 * HOUR); // 23 h after the first claim: nothing is old enough
  t.deepEqual(await store.dropExpired(), { events: 0, streams: 0 });

  clock.advance(HOUR); // 24 h after the first claim: that event alone
  t.deepEqual(await store.dropExpired(), { events: 1, streams: 0 });
  t.deepEqual(
    (await store.readStream('idempotency-a')).map((e) => [e.revision, e.type]),
    [[1, 'IdempotentResponseRecorded']],
  );

  clock.advance(365 * 24 * HOUR);
  t.deepEqual(await store.dropExpired(), { events: 2, streams: 2 });
  await t.throwsAsync(store.readStream('idempotency-a'), { instanceOf: StreamNotFoundError });
  await t.throwsAsync(store.readStream('idempotency-b'), { instanceOf: StreamNotFoundError });
  t.deepEqual(
    (await store.readAll()).map((e) => e.streamId),
    ['cart-1', 'cart-2'],
    'a business stream keeps every event, however old',
  );
});

test('the log keeps its last event, so no position is given twice', async (t) => {
  const { store, clock } = await storeWithClock(t);
  await store.append('idempotency-a', [event('IdempotencyKeyClaimed')], { maxAgeMs: HOUR });
  const last = await store.append('idempotency-b', [event('IdempotencyKeyClaimed')], { maxAgeMs: HOUR });
  clock.advance(2 * HOUR);
  t.deepEqual(await store.dropExpired(), { events: 1, streams: 1 });
  t.deepEqual(
    (await store.readAll()).map((e) => e.streamId),
    ['idempotency-b'],
  );
  const next = await store.append('cart-1', [event('CartCreated')]);
  t.true(next.position > last.position);
  t.deepEqual(await store.dropExpired(), { events: 1, streams: 1 }, 'no longer the last: dropped');
});

test('a stream dropped whole starts again at revision 0; one that lost its first events is not absent', async (t) => {
  const { store, clock } = await storeWithClock(t);
  await store.append('idempotency-a', [event('IdempotencyKeyClaimed')], { maxAgeMs: HOUR });
  clock.advance(30 * 60_000);
  await store.append('idempotency-a', [event('IdempotencyKeyReleased')], {
    expectedRevision: 0,
    maxAgeMs: HOUR,
  });
  await store.append('cart-1', [event('CartCreated')]);
  clock.advance(45 * 60_000);
  t.deepEqual(await store.dropExpired(), { events: 1, streams: 0 });
  const refused = await t.throwsAsync(
    store.append('idempotency-a', [event('IdempotencyKeyClaimed')], {
      expectedRevision: 'no_stream',
      maxAgeMs: HOUR,
    }),
    { instanceOf: WrongExpectedVersionError },
  );
  t.is(refused?.actual, 1);

  clock.advance(HOUR);
  t.deepEqual(await store.dropExpired(), { events: 1, streams: 1 });
  const again = await store.append('idempotency-a', [event('IdempotencyKeyClaimed')], {
    expectedRevision: 'no_stream',
    maxAgeMs: HOUR,
  });
  t.is(again.nextExpectedRevision, 0);
});

test('a max age that is not a whole number of milliseconds above zero is refused', async (t) => {
  const { store } = await storeWithClock(t);
  for (const maxAgeMs of [0, -1, 1.5, Number.NaN]) {
    await t.throwsAsync(store.append('idempotency-a', [event('IdempotencyKeyClaimed')], { maxAgeMs }), {
      instanceOf: InvalidEventError,
    });
  }
  await t.throwsAsync(store.readStream('idempotency-a'), { instanceOf: StreamNotFoundError });
});

test('the retention job runs at once, then once an hour on its clock', async (t) => {
  const { store, clock } = await storeWithClock(t);
  const runs: number[] = [];
  const job = createRetention({ store, clock, onRun: (dropped) => runs.push(dropped.events) });
  await store.append('idempotency-a', [event('IdempotencyKeyClaimed')], { maxAgeMs: 30 * 60_000 });
  await store.append('cart-1', [event('CartCreated')]);
  t.is(await job.tick(), 1);
  clock.advance(59 * 60_000);
  t.is(await job.tick(), 0, 'not due yet');
  clock.advance(60_000);
  t.is(await job.tick(), 1);
  t.deepEqual(runs, [0, 1]);
});
