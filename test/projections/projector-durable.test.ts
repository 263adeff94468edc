/**
 * The projector on a durable read store (docs/read-side.md): a batch and its checkpoint are one commit,
 * so a process dying at any commit leaves documents that match their checkpoint; a restart reads only
 * the events after it (and past events of other streams it already read through); a projection whose
 * stored version differs is rebuilt at start while its old copy serves, and one whose version is the
 * same is not.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import type { EventStore, NewEvent } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { createProjector, type Projection, type Projector } from '../../projections/projector.ts';
import { definitionOf } from '../../projections/projector-live.ts';
import type { Doc, ReadStore } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

const ev = (type: string, data: Record<string, unknown>): NewEvent => ({
  type,
  data,
  metadata: {
    correlation_id: randomUUID(),
    causation_id: null,
    actor: { type: 'system', id: 'test' },
    occurred_at: '2026-01-01T00:00:00.000Z',
    schema_version: 1,
  },
});

/** Totals per kind, `factor` times each event's n (another version of the projection changes it). */
function totals(version: number, factor: number): Projection {
  return {
    name: 'totals',
    version,
    collections: { kinds: [] },
    filter: { streamPrefixes: ['thing-'] },
    prefetch: (e) => [['kinds', (e.data as { kind: string }).kind]],
    apply(e, tx) {
      const { kind, n } = e.data as { kind: string; n: number };
      const k = tx.get<Doc & { total: number }>('kinds', kind);
      tx.put('kinds', { _id: kind, total: (k?.total ?? 0) + factor * n });
      // Now and then a query the pending writes cannot be laid over (it has a limit): a commit in
      // the middle of a batch.
      if (n % 40 === 39) tx.find('kinds', { _id: kind }, { limit: 1 });
    },
  };
}

async function world(t: ExecutionContext) {
  const dir = mkdtempSync(join(tmpdir(), 'pds-proj-durable-'));
  const store = await openSqliteEventStore(join(dir, 'events.db'));
  const stores: ReadStore[] = [];
  const openRead = () => {
    const s = openSqliteReadStore(join(dir, 'read.db'));
    stores.push(s);
    return s;
  };
  t.teardown(async () => {
    for (const s of stores) await s.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { store, openRead };
}

async function seed(store: EventStore, count: number, offset = 0): Promise<void> {
  for (let i = offset; i < offset + count; i++) {
    await store.append(`thing-${i % 13}`, [ev('Counted', { kind: `k${i % 4}`, n: i })]);
  }
}

async function kinds(readStore: ReadStore): Promise<Record<string, number>> {
  const docs = await (await readStore.collection('kinds')).find({});
  return Object.fromEntries(docs.map((d) => [d._id, d.total as number]));
}

/** What the totals must be after the events up to `position`, summed straight from the log. */
async function expected(
  store: EventStore,
  factor: number,
  position: number,
): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const e of await store.readAll({ filter: { streamPrefixes: ['thing-'] } })) {
    if (e.position > position) break;
    const { kind, n } = e.data as { kind: string; n: number };
    out[kind] = (out[kind] ?? 0) + factor * n;
  }
  return out;
}

async function run(store: EventStore, readStore: ReadStore, projection: Projection, batchSize = 64) {
  const p = createProjector({ store, readStore, projections: [projection], batchSize });
  await p.start();
  await p.caughtUp;
  return p;
}

test('a projector dying at any commit leaves documents that match their checkpoint; a restart completes them', async (t) => {
  const { store, openRead } = await world(t);
  await seed(store, 400);
  const readStore = openRead();
  for (const budget of [1, 4, 9]) {
    // The process dies at its budget-th commit: that commit, atomic, stores nothing.
    let commits = 0;
    const dying: ReadStore = {
      ...readStore,
      commit: async (c) => {
        commits += 1;
        if (commits === budget) throw new Error('killed at a commit');
        await readStore.commit(c);
      },
    };
    const p = createProjector({
      store,
      readStore: dying,
      projections: [totals(1, 1)],
      batchSize: 64,
      onError: () => undefined,
    });
    await p.start();
    for (let i = 0; i < 300 && (await p.status())[0].state !== 'failed'; i++)
      await new Promise((r) => setTimeout(r, 10));
    t.is((await p.status())[0].state, 'failed');
    await p.stop();
    const checkpoint = (await readStore.getCheckpoint('totals'))?.position ?? 0;
    t.deepEqual(await kinds(readStore), await expected(store, 1, checkpoint), `died at commit ${budget}`);
  }
  const restarted = await run(store, readStore, totals(1, 1));
  await restarted.stop();
  t.deepEqual(await kinds(readStore), await expected(store, 1, await store.headPosition()));
});

test('a restarted projector reads only the events after its checkpoint, and moves it past other streams', async (t) => {
  const { store, openRead } = await world(t);
  await seed(store, 300);
  const first = await run(store, openRead(), totals(1, 1));
  await first.stop();
  await seed(store, 20, 300);
  // Events of other streams after them: read through, the checkpoint moves past them.
  for (let i = 0; i < 50; i++) await store.append(`other-${i}`, [ev('Other', { n: i })]);
  let delivered = 0;
  const counting: EventStore = {
    ...store,
    subscribeToAll: (options, handlers) =>
      store.subscribeToAll(options, {
        ...handlers,
        onEvents(events) {
          delivered += events.length;
          return handlers.onEvents(events);
        },
      }),
  };
  const readStore = openRead();
  const again = await run(counting, readStore, totals(1, 1));
  t.is(delivered, 20);
  t.deepEqual(await kinds(readStore), await expected(store, 1, await store.headPosition()));
  // A checkpoint moved past others' events is stored within a second, and at the latest on stop.
  await again.stop();
  t.is((await readStore.getCheckpoint('totals'))?.position, await store.headPosition());
});

/** The store, with the rebuild's copy (the subscription from the start) held until `open()`. */
function gated(store: EventStore) {
  const { promise, resolve } = Promise.withResolvers<void>();
  const wrapped: EventStore = {
    ...store,
    subscribeToAll: (options, handlers) =>
      store.subscribeToAll(options, {
        ...handlers,
        async onEvents(events) {
          if (options.from === 'start') await promise;
          return handlers.onEvents(events);
        },
      }),
  };
  return { store: wrapped, open: resolve };
}

function logged() {
  const lines: Array<{ msg: string; fields: Record<string, unknown> }> = [];
  const at = (fields: Record<string, unknown>, msg: string) => {
    lines.push({ msg, fields });
  };
  return { lines, logger: { info: at, warn: at, error: at } as never };
}

async function untilLive(p: Projector): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if ((await p.status())[0].state === 'live') return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('never live');
}

test('a projection of another version is rebuilt at start while its old copy serves; the same version is not', async (t) => {
  const { store, openRead } = await world(t);
  await seed(store, 300);
  const readStore = openRead();
  const v1 = await run(store, readStore, totals(1, 1));
  await v1.stop();
  const before = await kinds(readStore);
  const v1Checkpoint = await readStore.getCheckpoint('totals');
  t.regex(v1Checkpoint?.version ?? '', /^v1\+/);

  // The same version again: no rebuild, nothing written, the checkpoint as it was.
  const same = logged();
  const p1 = createProjector({ store, readStore, projections: [totals(1, 1)], logger: same.logger });
  await p1.start();
  await p1.caughtUp;
  t.is((await p1.status())[0].state, 'live');
  await p1.stop();
  t.deepEqual(
    same.lines.map((l) => l.msg),
    ['projector lease acquired: projecting'],
    'no rebuild',
  );
  t.deepEqual(await readStore.getCheckpoint('totals'), v1Checkpoint);

  // Version 2 doubles every total. The rebuild is held: the old copy must serve meanwhile.
  const gate = gated(store);
  const v2 = logged();
  const p2 = createProjector({
    store: gate.store,
    readStore,
    projections: [totals(2, 2)],
    logger: v2.logger,
  });
  await p2.start();
  await p2.caughtUp; // ready: the live copy has caught up, the rebuild goes on behind it
  t.is((await p2.status())[0].state, 'rebuilding');
  t.deepEqual(await kinds(readStore), before, 'the old copy serves');
  t.like(v2.lines[1], {
    msg: 'projection stored by another version: rebuilding it while the old copy serves',
  });
  t.like(v2.lines[1].fields, { projection: 'totals', stored: v1Checkpoint?.version });
  gate.open();
  await untilLive(p2);
  t.deepEqual(await kinds(readStore), await expected(store, 2, await store.headPosition()));
  t.regex((await readStore.getCheckpoint('totals'))?.version ?? '', /^v2\+/);
  t.true(v2.lines.some((l) => l.msg === 'projection rebuilt: the new copy is live'));
  await p2.stop();
});

/**
 * Ranks of another shape per version: version 1 keeps a document per stream with its kind (many share
 * one), version 2 one document per kind under a unique index on `kind`, which version 1's documents
 * break.
 */
function ranks(version: 1 | 2): Projection {
  return {
    name: 'ranks',
    version,
    collections: { ranks: version === 1 ? [] : [{ keys: [['kind', 1]], unique: true }] },
    filter: { streamPrefixes: ['thing-'] },
    prefetch: (e) => [['ranks', version === 1 ? e.streamId : (e.data as { kind: string }).kind]],
    apply(e, tx) {
      const { kind, n } = e.data as { kind: string; n: number };
      const id = version === 1 ? e.streamId : kind;
      const doc = tx.get<Doc & { total: number }>('ranks', id);
      tx.put('ranks', { _id: id, kind, total: (doc?.total ?? 0) + n });
    },
  };
}

test('an upgrade whose new unique index the stored documents break starts, serves the old copy with its old indexes, and promotes the rebuilt one with the index', async (t) => {
  const { store, openRead } = await world(t);
  await seed(store, 200);
  const readStore = openRead();
  const v1 = await run(store, readStore, ranks(1));
  await v1.stop();
  const live = await readStore.collection('ranks');
  const old = await live.find({});
  t.is(old.length, 13, 'a document per stream, four kinds among them');

  const gate = gated(store);
  const p = createProjector({ store: gate.store, readStore, projections: [ranks(2)], onError: () => {} });
  await p.start(); // the unique index is not built over the old documents, which break it
  await p.caughtUp;
  t.is((await p.status())[0].state, 'rebuilding');
  t.deepEqual(
    (await live.find({ _id: { $regex: '^thing-' } })).map(({ _id }) => _id),
    old.map(({ _id }) => _id),
    'the old copy serves',
  );
  // Its indexes are the old ones until the promote: two documents of one kind are still taken.
  const ofK1 = await live.count({ kind: 'k1' });
  t.true(ofK1 >= 2);
  await live.bulkWrite([
    { replaceOne: { filter: { _id: 'extra' }, replacement: { _id: 'extra', kind: 'k1' }, upsert: true } },
  ]);
  t.is(await live.count({ kind: 'k1' }), ofK1 + 1);

  gate.open();
  await untilLive(p);
  await p.stop();
  const totals = await expected(store, 1, await store.headPosition());
  t.deepEqual(
    Object.fromEntries((await live.find({})).map((d) => [d._id, d.total])),
    totals,
    'the rebuilt copy is live',
  );
  await t.throwsAsync(
    live.bulkWrite([
      { replaceOne: { filter: { _id: 'dup' }, replacement: { _id: 'dup', kind: 'k1' }, upsert: true } },
    ]),
    { message: /duplicate key/i },
    'the promote brought the unique index',
  );
  t.regex((await readStore.getCheckpoint('ranks'))?.version ?? '', /^v2\+/);
});

test('which indexes a build keeps while applying is no part of a definition: marking one rebuilds nothing', (t) => {
  const v2 = ranks(2);
  const marked: Projection = {
    ...v2,
    collections: { ranks: [{ keys: [['kind', 1]], unique: true, readWhileApplying: true }] },
  };
  t.is(definitionOf(marked), definitionOf(v2));
  t.not(definitionOf({ ...v2, collections: { ranks: [{ keys: [['kind', 1]] }] } }), definitionOf(v2));
});
