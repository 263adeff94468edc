/**
 * The projector's lease in one process (docs/read-side.md, "One projector at a time"), two projectors
 * on one `read.db`, each with its own connection: one projects while the other stands by; a clean
 * stop lets the lease go; a holder that does not know it lost the lease has its next write refused
 * by the fence and stops at once, and the read models end as one projector builds them. The same with
 * real processes and `kill -9`: test/projector-lease.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { projectionsReadiness } from '../../cli/read-side.ts';
import type { EventStore, NewEvent } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import {
  createProjector,
  type Projection,
  type Projector,
  ProjectorStandingByError,
} from '../../projections/projector.ts';
import { ProjectorLease } from '../../projections/projector-lease.ts';
import { type Doc, type Fence, LeaseLostError, type ReadStore } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { until } from '../support/probes.ts';
import { rawEvent } from '../support/raw-events.ts';

const ev = (n: number): NewEvent => rawEvent('Counted', { kind: `k${n % 3}`, n });

/** Totals per kind: a read-modify-write of one document per kind, which two writers would garble. */
const totals: Projection = {
  name: 'totals',
  version: 1,
  collections: { kinds: [] },
  filter: { streamPrefixes: ['thing-'] },
  prefetch: (e) => [['kinds', (e.data as { kind: string }).kind]],
  apply(e, tx) {
    const { kind, n } = e.data as { kind: string; n: number };
    const k = tx.get<Doc & { total: number; count: number }>('kinds', kind);
    tx.put('kinds', { _id: kind, total: (k?.total ?? 0) + n, count: (k?.count ?? 0) + 1 });
  },
};

async function world(t: ExecutionContext) {
  const dir = mkdtempSync(join(tmpdir(), 'pds-lease-'));
  const store = await openSqliteEventStore(join(dir, 'events.db'));
  const opened: ReadStore[] = [];
  const projectors: Projector[] = [];
  t.teardown(async () => {
    for (const p of projectors) await p.stop();
    for (const s of opened) await s.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    store,
    /** A connection of its own to the one `read.db`, as another process has. */
    openRead() {
      const s = openSqliteReadStore(join(dir, 'read.db'));
      opened.push(s);
      return s;
    },
    projector(readStore: ReadStore, owner: string, ttlMs: number) {
      const p = createProjector({
        store,
        readStore,
        projections: [totals],
        batchSize: 16,
        lease: { owner, ttlMs },
      });
      projectors.push(p);
      return p;
    },
  };
}

async function seed(store: EventStore, from: number, count: number): Promise<void> {
  for (let n = from; n < from + count; n++) await store.append(`thing-${n % 7}`, [ev(n)]);
}

/** What the totals must be after the first `count` events. */
function expected(count: number): Doc[] {
  const out = new Map<string, Doc & { total: number; count: number }>();
  for (let n = 0; n < count; n++) {
    const kind = `k${n % 3}`;
    const k = out.get(kind) ?? { _id: kind, total: 0, count: 0 };
    out.set(kind, { ...k, total: k.total + n, count: k.count + 1 });
  }
  return [...out.values()].sort((a, b) => String(a._id).localeCompare(String(b._id)));
}

async function kinds(readStore: ReadStore): Promise<Doc[]> {
  return (await (await readStore.collection('kinds')).find({}, { sort: [['_id', 1]] })).map(
    ({ _position, ...d }) => d as Doc,
  );
}

test('one projector holds the lease while another stands by; a clean stop lets it go, and the other takes over without waiting for it to run out', async (t) => {
  const { store, openRead, projector } = await world(t);
  await seed(store, 0, 60);
  const first = projector(openRead(), 'first', 60_000);
  await first.start();
  await first.caughtUp;
  const second = projector(openRead(), 'second', 300);
  await second.start();

  t.like(first.lease(), { holding: true, holder: null });
  t.like(second.lease(), { holding: false, token: null, holder: 'first' });
  const standing = await second.status();
  t.like(standing[0], { name: 'totals', state: 'standby', events_applied: 60, error: null });
  await t.throwsAsync(second.rebuild('totals'), { instanceOf: ProjectorStandingByError, message: /first/ });

  const token = first.lease().token ?? 0;
  await first.stop(); // 60 s left on its lease: let go, not run out
  await until('the second holds the lease', () => second.lease().holding);
  t.true((second.lease().token ?? 0) > token);
  await seed(store, 60, 20);
  await until('the second projects', async () => (await second.status())[0].events_applied === 80);
  await second.caughtUp;
  t.deepEqual(await kinds(openRead()), expected(80));
  t.like((await first.status())[0], { state: 'standby', events_applied: 80 });
});

test('a holder that does not know it lost the lease has its next write refused by the fence and stops at once; the read models end as one projector builds them', async (t) => {
  const { store, openRead, projector } = await world(t);
  await seed(store, 0, 50);
  // Its renewals never reach the store, yet answer yes (an answer from before a partition, say).
  const inner = openRead();
  let refused = 0;
  const unaware: ReadStore = {
    ...inner,
    renewLease: async () => true,
    async commit(commit) {
      try {
        await inner.commit(commit);
      } catch (err) {
        if (err instanceof LeaseLostError) refused += 1;
        throw err;
      }
    },
  };
  const stale = projector(unaware, 'stale', 300);
  await stale.start();
  await stale.caughtUp;
  const next = projector(openRead(), 'next', 300);
  await next.start();
  t.false(next.lease().holding);

  // Its lease runs out in the store: the other takes it over; the stale one still believes it holds.
  await until('the other holds the lease', () => next.lease().holding);
  t.true(stale.lease().holding, 'not told');
  await seed(store, 50, 40);
  await until('the stale holder stands by', () => !stale.lease().holding);
  t.true(refused >= 1, 'its write was refused under the old token');
  await until(
    'the new holder has applied every event',
    async () => (await next.status())[0].events_applied === 90,
  );
  t.deepEqual(await kinds(openRead()), expected(90), 'nothing lost, nothing applied twice');
  t.is((await openRead().getCheckpoint('totals'))?.events, 90);
  t.like((await stale.status())[0], { state: 'standby' });
});

test('a holder known to have ended (a process of this machine that is gone) is taken over at once; one not known to have ended, only once its lease runs out', async (t) => {
  const { store, openRead, projector } = await world(t);
  await seed(store, 0, 30);
  const readStore = openRead();
  // What a `kill -9` leaves: the lease held, 60 s to go, by a process that no longer runs.
  t.true((await readStore.acquireLease('projector', 'crashed', 60_000)).acquired);
  const waiting = projector(openRead(), 'waiting', 60_000);
  await waiting.start();
  t.like(waiting.lease(), { holding: false, holder: 'crashed' }, 'not known to have ended: it waits');
  await waiting.stop();

  const next = createProjector({
    store,
    readStore: openRead(),
    projections: [totals],
    lease: { owner: 'next', ttlMs: 60_000, holderGone: (holder) => holder === 'crashed' },
  });
  t.teardown(() => next.stop());
  await next.start();
  t.true(next.lease().holding, 'taken over at its first try');
  await next.caughtUp;
  t.deepEqual(await kinds(openRead()), expected(30));
});

test('a projector whose store does not answer holds no lease and stands by for no one, until the store answers', async (t) => {
  const { store, openRead } = await world(t);
  await seed(store, 0, 10);
  const inner = openRead();
  let down = true;
  const flaky: ReadStore = {
    ...inner,
    acquireLease: (...args) =>
      down ? Promise.reject(new Error('the read store is unreachable')) : inner.acquireLease(...args),
  };
  const p = createProjector({
    store,
    readStore: flaky,
    projections: [totals],
    lease: { owner: 'p', ttlMs: 300 },
  });
  t.teardown(() => p.stop());
  await p.start(); // no throw: it tries again
  t.deepEqual(
    p.lease(),
    { holding: false, token: null, holder: null },
    'not standing by for anyone: not ready',
  );
  down = false;
  await until('it holds the lease', () => p.lease().holding);
  await p.caughtUp;
  t.deepEqual(await kinds(openRead()), expected(10));
});

/** A lease on its own store whose transitions are told in `log`; `lost` waits for `stopping` to end. */
function transitions(t: ExecutionContext, ttlMs: number) {
  const readStore = openSqliteReadStore(':memory:');
  const log: string[] = [];
  const stopping = Promise.withResolvers<void>();
  let fence: Fence | undefined;
  const lease = new ProjectorLease(
    readStore,
    { owner: 'p', ttlMs },
    {
      async acquired(f) {
        log.push(`acquired ${f.token}`);
        fence = f;
      },
      async lost() {
        log.push('stopping');
        await stopping.promise;
        log.push('stopped');
      },
    },
  );
  t.teardown(async () => {
    stopping.resolve();
    await lease.stop();
    await readStore.close();
  });
  return {
    lease,
    log,
    /** The projections stopping end. */
    stopped: () => stopping.resolve(),
    fence(): Fence {
      if (!fence) throw new Error('not acquired');
      return fence;
    },
  };
}

test('a refused write forgets the lease at once, and its projections stop in turn: no try of the lease starts them again before they have stopped', async (t) => {
  const { lease, log, stopped, fence } = transitions(t, 15);
  await lease.start();
  t.deepEqual(log, ['acquired 1']);
  lease.refused(fence());
  t.false(lease.state().holding, 'forgotten at once');
  // Its tries come every 5 ms: the lease is its own owner's, so a try would take it back at once.
  await new Promise((r) => setTimeout(r, 60));
  t.deepEqual(log, ['acquired 1', 'stopping'], 'nothing starts while the projections stop');
  stopped();
  await until('the lease is held again', () => lease.state().holding);
  t.deepEqual(log, ['acquired 1', 'stopping', 'stopped', 'acquired 2']);
});

test('a stop after a refused write ends once the projections have stopped', async (t) => {
  const { lease, log, stopped, fence } = transitions(t, 60_000);
  await lease.start();
  lease.refused(fence());
  let ended = false;
  const stop = lease.stop().then(() => {
    ended = true;
  });
  await new Promise((r) => setImmediate(r));
  t.false(ended, 'still stopping');
  stopped();
  await stop;
  t.deepEqual(log, ['acquired 1', 'stopping', 'stopped']);
});

test('a projector stopped while the store answers its acquisition starts nothing, and lets the lease go', async (t) => {
  const inner = openSqliteReadStore(':memory:');
  t.teardown(() => inner.close());
  const asked = Promise.withResolvers<void>();
  const answer = Promise.withResolvers<void>();
  const slow: ReadStore = {
    ...inner,
    async acquireLease(...args) {
      const attempt = await inner.acquireLease(...args);
      asked.resolve();
      await answer.promise;
      return attempt;
    },
  };
  const started: number[] = [];
  const lease = new ProjectorLease(
    slow,
    { owner: 'p', ttlMs: 60_000 },
    {
      async acquired(fence) {
        started.push(fence.token);
      },
      async lost() {},
    },
  );
  const starting = lease.start();
  await asked.promise;
  const stopping = lease.stop();
  answer.resolve();
  await starting;
  await stopping;
  t.deepEqual(started, [], 'no projection started');
  t.like(lease.state(), { holding: false });
  t.true((await inner.acquireLease('projector', 'other', 60_000)).acquired, 'the lease was let go');
});

test('a projector that lost the lease and took it back is ready again only once its projections have caught up again', async (t) => {
  const { store, openRead } = await world(t);
  await seed(store, 0, 20);
  // Delivers the events it is given only once let through: how long a catch-up takes is the test's.
  let held: PromiseWithResolvers<void> | undefined;
  const slow: EventStore = {
    ...store,
    subscribeToAll: (options, handlers) =>
      store.subscribeToAll(options, {
        ...handlers,
        async onEvents(events) {
          await held?.promise;
          return handlers.onEvents(events);
        },
      }),
  };
  const p = createProjector({
    store: slow,
    readStore: openRead(),
    projections: [totals],
    lease: { owner: 'p', ttlMs: 300 },
  });
  t.teardown(async () => {
    held?.resolve();
    await p.stop();
  });
  const ready = projectionsReadiness(p);
  await p.start();
  await p.caughtUp;
  t.true(ready());

  // Another takes the lease over from it, by name (as from a process that is gone): it stands by.
  const other = openRead();
  const taken = await other.acquireLease('projector', 'other', 60_000, 'p');
  if (!taken.acquired) return t.fail('not taken over');
  await until('it stands by', () => !p.lease().holding);
  t.is(ready(), 'standby');
  // Meanwhile the log grows; the other lets the lease go, and it takes the lease back.
  held = Promise.withResolvers<void>();
  await seed(store, 20, 10);
  await other.releaseLease(taken.fence);
  await until('it holds the lease again', () => p.lease().holding);
  t.false(ready(), 'not ready while its projections catch up again');
  held.resolve();
  await until('ready once caught up', () => ready() === true);
  await until('every event applied', async () => (await p.status())[0].events_applied === 30);
  t.deepEqual(await kinds(openRead()), expected(30));
});
