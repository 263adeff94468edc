/**
 * The projector's guarantees, with a small projection (per-stream tallies and a per-kind summary):
 * batches, idempotent replay, rebuild while serving. A process dying at a commit, resuming after the
 * checkpoint and versions: projector-durable.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import type { EventStore, NewEvent } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { createProjector, type Projection } from '../../projections/projector.ts';
import type { Doc, ReadStore } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { seedThings } from './support.ts';

const meta = () => ({
  correlation_id: randomUUID(),
  causation_id: null,
  actor: { type: 'system' as const, id: 'test' },
  occurred_at: '2026-01-01T00:00:00.000Z',
  schema_version: 1,
});
const _ev = (type: string, data: Record<string, unknown>): NewEvent => ({ type, data, metadata: meta() });

/** Tallies per stream (`tally` docs) and the total per kind (`kinds` docs, updated by many streams). */
const tallies: Projection = {
  name: 'tallies',
  version: 1,
  collections: {
    tally: [
      {
        keys: [
          ['kind', 1],
          ['_id', 1],
        ],
        // `Renamed` updates a kind's tallies while applying: a rebuild keeps this index from the start.
        readWhileApplying: true,
      },
    ],
    kinds: [],
  },
  filter: { streamPrefixes: ['thing-'] },
  prefetch: (e) => [
    ['tally', e.streamId],
    ['kinds', (e.data as { kind: string }).kind],
  ],
  apply(e, tx) {
    const { kind, n } = e.data as { kind: string; n: number };
    const t = tx.get<Doc & { total: number }>('tally', e.streamId);
    tx.put('tally', { _id: e.streamId, kind, total: (t?.total ?? 0) + n, last: e.type });
    const k = tx.get<Doc & { total: number; streams: string[] }>('kinds', kind);
    const streams = k?.streams.includes(e.streamId) ? k.streams : [...(k?.streams ?? []), e.streamId];
    tx.put('kinds', { _id: kind, total: (k?.total ?? 0) + n, streams });
    if (e.type === 'Renamed') tx.updateMany('tally', { kind }, { $set: { renamed: true } });
  },
};

async function setup(t: ExecutionContext): Promise<EventStore> {
  const dir = mkdtempSync(join(tmpdir(), 'pds-proj-'));
  const store = await openSqliteEventStore(join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

async function dump(readStore: ReadStore): Promise<unknown> {
  const strip = (docs: Doc[]) => docs.map(({ _position, ...d }) => d);
  return {
    tally: strip(await (await readStore.collection('tally')).find({})),
    kinds: strip(await (await readStore.collection('kinds')).find({})),
  };
}

async function cleanBuild(store: EventStore): Promise<unknown> {
  const readStore = openSqliteReadStore(':memory:');
  const p = createProjector({ store, readStore, projections: [tallies], batchSize: 64 });
  await p.start();
  await p.caughtUp;
  await p.stop();
  return dump(readStore);
}

test('a projection applies every event in batches and checkpoints after them', async (t) => {
  const store = await setup(t);
  await seedThings(store, 500);
  const readStore = openSqliteReadStore(':memory:');
  const p = createProjector({ store, readStore, projections: [tallies], batchSize: 64 });
  await p.start();
  await p.caughtUp;
  const kinds = await (await readStore.collection('kinds')).find({});
  t.is(kinds.length, 5);
  t.is(
    kinds.reduce((s, k) => s + (k.total as number), 0),
    (499 * 500) / 2,
  );
  const checkpoint = await readStore.getCheckpoint('tallies');
  t.is(checkpoint?.position, await store.headPosition());
  t.is(checkpoint?.events, 500);
  const [status] = await p.status();
  t.like(status, { name: 'tallies', state: 'live', lag_events: 0, events_applied: 500 });
  // Live: new events arrive without a restart.
  await seedThings(store, 10, 500);
  for (let i = 0; i < 100 && (await readStore.getCheckpoint('tallies'))?.events !== 510; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  t.is((await readStore.getCheckpoint('tallies'))?.events, 510);
  await p.stop();
});

test('replaying events a read model already reflects changes nothing', async (t) => {
  const store = await setup(t);
  await seedThings(store, 300);
  const readStore = openSqliteReadStore(':memory:');
  const first = createProjector({ store, readStore, projections: [tallies], batchSize: 50 });
  await first.start();
  await first.caughtUp;
  await first.stop();
  const before = await dump(readStore);
  // As if the checkpoint had been lost: the same events again, over the same documents.
  await readStore.setCheckpoint('tallies', { position: 0, events: 0, updated_at: new Date().toISOString() });
  const again = createProjector({ store, readStore, projections: [tallies], batchSize: 50 });
  await again.start();
  await again.caughtUp;
  await again.stop();
  t.deepEqual(await dump(readStore), before);
  t.deepEqual(before, await cleanBuild(store));
});

test('rebuild while queries run: every answer identical, no failed read, progress reported', async (t) => {
  const store = await setup(t);
  await seedThings(store, 3_000);
  const readStore = openSqliteReadStore(':memory:');
  const p = createProjector({ store, readStore, projections: [tallies], batchSize: 200 });
  await p.start();
  await p.caughtUp;
  const tally = await readStore.collection('tally');
  const query = () => tally.find({ kind: 'k3' }, { sort: [['_id', 1]], limit: 50 });
  const expected = JSON.stringify((await query()).map(({ _position, ...d }) => d));
  let reads = 0;
  let failures = 0;
  let differing = 0;
  let rebuilding = true;
  const readers = Array.from({ length: 4 }, async () => {
    while (rebuilding) {
      try {
        const got = JSON.stringify((await query()).map(({ _position, ...d }) => d));
        if (got !== expected) differing += 1;
        reads += 1;
      } catch {
        failures += 1;
      }
      await new Promise((r) => setImmediate(r));
    }
  });
  await p.rebuild('tallies');
  rebuilding = false;
  await Promise.all(readers);
  t.true(reads > 0);
  t.is(failures, 0);
  t.is(differing, 0);
  const [after] = await p.status();
  t.like(after, { state: 'live', lag_events: 0 });
  t.like(after.progress, { percent: 100, events_done: 3_000, eta_seconds: 0 });
  t.true((after.progress?.rate_per_second ?? 0) > 0);
  t.deepEqual(await dump(readStore), await cleanBuild(store));
  // Still live after the switch-over.
  await seedThings(store, 5, 3_000);
  for (
    let i = 0;
    i < 100 && (await readStore.getCheckpoint('tallies'))?.position !== (await store.headPosition());
    i++
  ) {
    await new Promise((r) => setTimeout(r, 20));
  }
  t.is((await readStore.getCheckpoint('tallies'))?.position, await store.headPosition());
  await p.stop();
});

test('a rebuild whose projection queries an index it did not mark read while applying fails, and the live copy keeps serving', async (t) => {
  const store = await setup(t);
  await seedThings(store, 120);
  const readStore = openSqliteReadStore(':memory:');
  const unmarked: Projection = {
    ...tallies,
    collections: { ...tallies.collections, tally: [{ keys: [['kind', 1]] }] },
  };
  const p = createProjector({ store, readStore, projections: [unmarked], batchSize: 50 });
  await p.start();
  await p.caughtUp;
  const before = await dump(readStore);
  await t.throwsAsync(p.rebuild('tallies'), {
    message: /needs the index \[\["kind",1\]\].*readWhileApplying/,
  });
  const [status] = await p.status();
  t.like(status, { state: 'live' });
  t.regex(status.rebuild_failure?.error ?? '', /readWhileApplying/);
  t.deepEqual(await dump(readStore), before);
  await p.stop();
});
