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
  type RecordedEvent,
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

test('dropExpired deletes a stream once its last event is past the max age, and no business event', async (t) => {
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

  clock.advance(24 * HOUR - 1); // its first event expired, its last not yet: the stream stays whole
  t.deepEqual(await store.dropExpired(), { events: 0, streams: 0 });
  t.deepEqual(
    (await store.readStream('idempotency-a')).map((e) => [e.revision, e.type]),
    [
      [0, 'IdempotencyKeyClaimed'],
      [1, 'IdempotentResponseRecorded'],
    ],
  );

  clock.advance(1);
  t.deepEqual(await store.dropExpired(), { events: 3, streams: 2 });
  await t.throwsAsync(store.readStream('idempotency-a'), { instanceOf: StreamNotFoundError });
  await t.throwsAsync(store.readStream('idempotency-b'), { instanceOf: StreamNotFoundError });
  clock.advance(365 * 24 * HOUR);
  t.deepEqual(await store.dropExpired(), { events: 0, streams: 0 });
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

test('a stream dropped whole starts again at revision 0; until then no_stream is refused', async (t) => {
  const { store, clock } = await storeWithClock(t);
  await store.append('idempotency-a', [event('IdempotencyKeyClaimed')], { maxAgeMs: HOUR });
  await store.append('idempotency-a', [event('IdempotencyKeyReleased')], {
    expectedRevision: 0,
    maxAgeMs: HOUR,
  });
  await store.append('cart-1', [event('CartCreated')]);
  clock.advance(HOUR);
  const refused = await t.throwsAsync(
    store.append('idempotency-a', [event('IdempotencyKeyClaimed')], {
      expectedRevision: 'no_stream',
      maxAgeMs: HOUR,
    }),
    { instanceOf: WrongExpectedVersionError },
  );
  t.is(refused?.actual, 1, 'expired but not dropped yet');

  t.deepEqual(await store.dropExpired(), { events: 2, streams: 1 });
  const again = await store.append('idempotency-a', [event('IdempotencyKeyClaimed')], {
    expectedRevision: 'no_stream',
    maxAgeMs: HOUR,
  });
  t.is(again.nextExpectedRevision, 0);
  clock.advance(HOUR - 1);
  await store.append('cart-2', [event('CartCreated')]);
  t.deepEqual(await store.dropExpired(), { events: 0, streams: 0 }, 'its new life has its own time');
});

test('a run deletes a backlog in batches, in the order the streams expire', async (t) => {
  const { store, clock } = await storeWithClock(t);
  for (let i = 0; i < 1_200; i++) {
    await store.append(`idempotency-${i}`, [event('IdempotencyKeyClaimed')], { maxAgeMs: HOUR });
    clock.advance(1_000);
  }
  await store.append('cart-1', [event('CartCreated')]);
  clock.advance(HOUR - 1_200 * 1_000 + 600 * 1_000 - 1); // the first 600 have expired
  t.deepEqual(await store.dropExpired(), { events: 600, streams: 600 });
  await t.throwsAsync(store.readStream('idempotency-599'), { instanceOf: StreamNotFoundError });
  t.is((await store.readStream('idempotency-600')).length, 1);
  clock.advance(HOUR);
  t.deepEqual(await store.dropExpired(), { events: 600, streams: 600 });
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

test('deleteStream keeps the stream of the log’s last event until another follows it', async (t) => {
  const { store } = await storeWithClock(t);
  await store.append('cart-1', [event('CartCreated')]);
  await store.append('webhookdelivery-a', [
    event('WebhookDeliveryScheduled'),
    event('WebhookDeliveryAttempted'),
  ]);
  const [, last] = await store.readStream('webhookdelivery-a');
  const expected = { revision: 1, position: last.position };
  t.false(
    await store.deleteStream('webhookdelivery-a', expected),
    'the last event’s position would be given again',
  );
  t.is((await store.readStream('webhookdelivery-a')).length, 2);
  await store.append('cart-2', [event('CartCreated')]);
  t.true(await store.deleteStream('webhookdelivery-a', expected));
  await t.throwsAsync(store.readStream('webhookdelivery-a'), { instanceOf: StreamNotFoundError });
  const again = await store.append('webhookdelivery-a', [event('WebhookDeliveryScheduled')], {
    expectedRevision: 'no_stream',
  });
  t.is(again.nextExpectedRevision, 0);
  t.true(again.position > (await store.readStream('cart-2'))[0].position, 'positions are never given twice');
});

test('a delivery queue deleted and started again through one connection is never taken at its old revisions by another', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pds-delete-stale-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'events.db');
  const a = await openSqliteEventStore(file);
  const b = await openSqliteEventStore(file);
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  const queue = 'webhookdelivery-x';
  const six = ['A', 'B', 'C', 'D', 'E', 'F'].map((type) => event(type));
  await a.append(queue, six, { expectedRevision: 'no_stream' });
  await a.append('cart-1', [event('CartCreated')]);
  const last = (await b.readStream(queue)).at(-1) as RecordedEvent;
  t.true(await b.deleteStream(queue, { revision: 5, position: last.position }));
  await b.append(queue, [event('A2')], { expectedRevision: 'no_stream' });
  // `a` wrote revision 5 itself: a stale expectation must not pass for a revision it remembers.
  await t.throwsAsync(a.append(queue, [event('stale')], { expectedRevision: 3 }), {
    instanceOf: WrongExpectedVersionError,
  });
  t.deepEqual(
    (await a.readStream(queue)).map((e) => [e.revision, e.type]),
    [[0, 'A2']],
  );
  // Deleted and started again up to the same revision: another last event, refused (no ABA).
  const [first] = await a.readStream(queue);
  await a.append('cart-2', [event('CartCreated')]);
  t.true(await a.deleteStream(queue, { revision: 0, position: first.position }));
  await b.append(queue, [event('A3')], { expectedRevision: 'no_stream' });
  await a.append('cart-3', [event('CartCreated')]);
  await t.throwsAsync(a.deleteStream(queue, { revision: 0, position: first.position }), {
    instanceOf: WrongExpectedVersionError,
  });
  t.is((await a.readStream(queue))[0].type, 'A3', 'the queue started again stays');
});
