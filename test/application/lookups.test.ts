/**
 * The lookups a command reads (application/lookups.ts, docs/write-side.md "Lookups"): a kept state is
 * never older than what the log says once the follower has the change, or at once for this process's
 * writes; a state read while its stream changed is not kept; nothing is kept while the follower is down.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { Lookups } from '../../application/lookups.ts';
import { Supervisor } from '../../application/supervisor.ts';
import * as brand from '../../domain/brand.ts';
import { eventRegistry } from '../../domain/index.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { faultyStore } from '../support/faulty-store.ts';

const AT = '2026-01-01T00:00:00.000Z';
const META = { correlation_id: 'c', causation_id: null, actor: { type: 'platform', id: 'p' } } as const;

async function rename(store: EventStore, name: string, expected: number | 'no_stream'): Promise<number> {
  const result = await store.append(
    brand.streamId(1),
    [
      {
        type: 'BrandUpserted',
        data: { brand_id: 1, name },
        metadata: { ...META, occurred_at: AT, schema_version: eventRegistry.versionOf('BrandUpserted') },
      },
    ],
    { expectedRevision: expected },
  );
  return result.position;
}

async function world(t: import('ava').ExecutionContext) {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-lookups-'));
  const file = path.join(dir, 'events.db');
  const ours = faultyStore(await openSqliteEventStore(file));
  const theirs = await openSqliteEventStore(file);
  const lookups = new Lookups({
    store: ours,
    registry: eventRegistry,
    prefixes: ['brand-'],
    supervisor: new Supervisor({ minDelayMs: 10, maxDelayMs: 20 }),
  });
  t.teardown(async () => {
    await lookups.stop();
    await ours.close();
    await theirs.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { ours, theirs, lookups };
}

const nameOf = async (lookups: Lookups) => {
  const state = await lookups.load(brand.streamId(1), brand.decider);
  return state.exists ? state.name : null;
};

async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

test("a kept state is dropped by another process's write once followed, and by this one's at once", async (t) => {
  const { ours, theirs, lookups } = await world(t);
  await rename(ours, 'One', 'no_stream');
  await lookups.start();
  t.is(await nameOf(lookups), 'One');
  await rename(theirs, 'Two', 0);
  await until(async () => (await nameOf(lookups)) === 'Two');
  const position = await rename(ours, 'Three', 1);
  lookups.written(brand.streamId(1), position);
  t.is(await nameOf(lookups), 'Three');
});

test('a state read while its stream changed is not kept, and nothing is kept while the follower is down', async (t) => {
  const { ours, theirs } = await world(t);
  await rename(ours, 'One', 'no_stream');
  // Reads answer what they read, but only once the test lets them: a change lands in between.
  let gate = Promise.resolve();
  const slow: EventStore = {
    ...ours,
    readStream: async (id, options) => {
      const read = await ours.readStream(id, options);
      await gate;
      return read;
    },
  };
  const lookups = new Lookups({ store: slow, registry: eventRegistry, prefixes: ['brand-'] });
  t.teardown(() => lookups.stop());
  await lookups.start();
  const opened = Promise.withResolvers<void>();
  gate = opened.promise;
  const reading = nameOf(lookups);
  await rename(theirs, 'Two', 0);
  await new Promise((r) => setTimeout(r, 200)); // the follower has the change
  opened.resolve();
  t.is(await reading, 'One', 'the read was of before the change');
  gate = Promise.resolve();
  t.is(await nameOf(lookups), 'Two', 'and it was not kept');

  ours.dropSubscriptions();
  await rename(theirs, 'Three', 1);
  // Down or caught up again: either way the answer is the log's.
  await until(async () => (await nameOf(lookups)) === 'Three');
  t.pass();
});

test("this process's writes of streams never kept (carts) do not cost the kept states their freshness", async (t) => {
  const { ours } = await world(t);
  const position = await rename(ours, 'One', 'no_stream');
  let reads = 0;
  const counted: EventStore = {
    ...ours,
    readStream: (id, options) => {
      reads += 1;
      return ours.readStream(id, options);
    },
  };
  const lookups = new Lookups({
    store: counted,
    registry: eventRegistry,
    prefixes: ['brand-'],
    maxChanges: 3,
  });
  t.teardown(() => lookups.stop());
  await lookups.start();
  // More cart writes than the changes remembered, each later than anything the follower has seen.
  for (let i = 1; i <= 10; i++) lookups.written(`cart-${i}`, position + 1_000 + i);
  t.is(await nameOf(lookups), 'One');
  t.is(await nameOf(lookups), 'One');
  t.is(reads, 1, 'read once, then kept');
});
