/**
 * Streams' states as of a position (`createStatesAsOf`, application/read-state.ts): the same answer as
 * folding the stream up to that position, reading only what was appended since the fold it keeps; an
 * earlier position reads the stream from its start and leaves the kept fold as it was.
 */
import test from 'ava';
import { createStatesAsOf, readState } from '../../application/read-state.ts';
import * as brand from '../../domain/brand.ts';
import { eventRegistry } from '../../domain/index.ts';
import type { EventStore, ReadStreamOptions } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';

const AT = '2026-01-01T00:00:00.000Z';
const META = { correlation_id: 'c', causation_id: null, actor: { type: 'platform', id: 'p' } } as const;

async function rename(store: EventStore, id: number, name: string): Promise<number> {
  const result = await store.append(brand.streamId(id), [
    {
      type: 'BrandUpserted',
      data: { brand_id: id, name },
      metadata: { ...META, occurred_at: AT, schema_version: eventRegistry.versionOf('BrandUpserted') },
    },
  ]);
  return result.position;
}

/** The store, with each `readStream` call's stream and first revision noted. */
async function notedStore(t: import('ava').ExecutionContext) {
  const store = await openSqliteEventStore(':memory:');
  t.teardown(() => store.close());
  const reads: Array<{ streamId: string; from: number }> = [];
  const noted: EventStore = Object.create(store);
  noted.readStream = (streamId: string, options?: ReadStreamOptions) => {
    reads.push({ streamId, from: options?.fromRevision ?? 0 });
    return store.readStream(streamId, options);
  };
  return { store, noted, reads };
}

const nameOf = (state: brand.BrandState) => (state.exists ? state.name : null);

test('a later position reads only the events appended since the kept fold', async (t) => {
  const { store, noted, reads } = await notedStore(t);
  const states = createStatesAsOf(noted, eventRegistry, brand.decider);
  const first = await rename(store, 1, 'One');
  await rename(store, 2, 'Other brand');
  const second = await rename(store, 1, 'One Two');

  t.is(nameOf(await states.asOf(brand.streamId(1), first)), 'One');
  t.is(nameOf(await states.asOf(brand.streamId(1), second)), 'One Two');
  t.is(nameOf(await states.asOf(brand.streamId(1), second + 10)), 'One Two');
  t.deepEqual(
    reads.map((r) => r.from),
    [0, 1, 2],
    'the whole stream once, then from the revision after the kept fold',
  );
});

test('an earlier position folds the stream from its start and keeps the later fold', async (t) => {
  const { store, noted, reads } = await notedStore(t);
  const states = createStatesAsOf(noted, eventRegistry, brand.decider);
  const first = await rename(store, 1, 'One');
  const second = await rename(store, 1, 'One Two');
  const third = await rename(store, 1, 'One Two Three');

  t.is(nameOf(await states.asOf(brand.streamId(1), third)), 'One Two Three');
  t.is(nameOf(await states.asOf(brand.streamId(1), first)), 'One');
  t.is(nameOf(await states.asOf(brand.streamId(1), second)), 'One Two');
  t.is(nameOf(await states.asOf(brand.streamId(1), third)), 'One Two Three');
  t.deepEqual(
    reads.map((r) => r.from),
    [0, 0, 0, 3],
    'earlier positions read from the start; the fold up to the third is still the one kept',
  );
  const folded = await readState(store, eventRegistry, brand.streamId(1), brand.decider, {
    upTo: { position: second },
  });
  t.deepEqual(await states.asOf(brand.streamId(1), second), folded.state, 'as readState folds it');
});

test('a stream not written yet is the initial state, and its first events are read once written', async (t) => {
  const { store, noted } = await notedStore(t);
  const states = createStatesAsOf(noted, eventRegistry, brand.decider);
  t.deepEqual(await states.asOf(brand.streamId(7), 100), brand.decider.initialState);
  const at = await rename(store, 7, 'Seven');
  t.is(nameOf(await states.asOf(brand.streamId(7), at)), 'Seven');
  t.deepEqual(
    await states.asOf(brand.streamId(7), at - 1),
    brand.decider.initialState,
    'before its first event',
  );
});
