/**
 * The embedded store looks for a repeated append (EventStoreDB's idempotency on event ids) only when
 * an append fails, on its expected revision or on a taken event id (eventstore/sqlite/appends.ts,
 * docs/operations.md "Threads"). What the contract suite does not cover: ids taken elsewhere, and
 * repeats inside one group commit.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { InvalidEventError, type NewEvent, WrongExpectedVersionError } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { rawEvent } from './support/raw-events.ts';

const withId = (type: string, id = randomUUID()): NewEvent => ({ ...rawEvent(type), id });

async function openStore(t: ExecutionContext) {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-idempotency-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(() => store.close());
  return store;
}

test('a batch whose later id is already stored is refused whole, the new events with it', async (t) => {
  const store = await openStore(t);
  const taken = withId('Taken');
  await store.append('s-a', [taken]);
  const error = await t.throwsAsync(store.append('s-a', [withId('New'), taken]));
  t.true(error instanceof InvalidEventError, String(error));
  t.deepEqual(
    (await store.readStream('s-a')).map((e) => e.type),
    ['Taken'],
  );
});

test('an id stored in another stream is refused, whatever the expected revision', async (t) => {
  const store = await openStore(t);
  const event = withId('Once');
  await store.append('s-a', [event]);
  for (const expectedRevision of ['any', 'no_stream'] as const) {
    const error = await t.throwsAsync(store.append('s-b', [event], { expectedRevision }));
    t.true(error instanceof InvalidEventError, `${expectedRevision}: ${String(error)}`);
    t.regex(String(error?.message), /another stream/);
  }
  t.false(
    await store.readStream('s-b').then(
      () => true,
      () => false,
    ),
  );
});

test('a repeat and a new append in one group commit: the repeat answers the first result, the new one is written', async (t) => {
  const store = await openStore(t);
  const first = withId('First');
  const written = await store.append('s-a', [first], { expectedRevision: 'no_stream' });
  // Asked in the same callback: one transaction, each append in its own savepoint.
  const [again, next, stale] = await Promise.allSettled([
    store.append('s-a', [first], { expectedRevision: 'no_stream' }),
    store.append('s-a', [withId('Second')], { expectedRevision: 0 }),
    store.append('s-a', [withId('Stale')], { expectedRevision: 'no_stream' }),
  ]);
  t.deepEqual(again, { status: 'fulfilled', value: written });
  t.like(next, { status: 'fulfilled', value: { nextExpectedRevision: 1 } });
  t.is(stale.status, 'rejected');
  t.true((stale as PromiseRejectedResult).reason instanceof WrongExpectedVersionError);
  t.deepEqual(
    (await store.readStream('s-a')).map((e) => e.type),
    ['First', 'Second'],
  );
});
