/**
 * The platform API's lookups and store specials built in the background
 * (application/write-side-lookups.ts, docs/operations.md "Health"): settled as built on a store that
 * answers; at the first setback (the log's head not read, a follower's subscription dropped) settled
 * as such, and built by themselves once the store answers again.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { Supervisor } from '../../application/supervisor.ts';
import { buildWriteSideLookups } from '../../application/write-side-lookups.ts';
import { eventRegistry } from '../../domain/index.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { type FaultyStore, faultyStore } from '../support/faulty-store.ts';
import { rawEvent } from '../support/raw-events.ts';

async function openStore(t: ExecutionContext): Promise<FaultyStore> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-write-side-'));
  const inner = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(async () => {
    await inner.close();
    await rm(dir, { recursive: true, force: true });
  });
  await inner.append('store-1', [rawEvent('Unrelated')]);
  return faultyStore(inner);
}

function build(t: ExecutionContext, store: FaultyStore) {
  const setbacks: string[] = [];
  const built = buildWriteSideLookups({
    store,
    registry: eventRegistry,
    prefixes: ['store-'],
    supervisor: new Supervisor({ minDelayMs: 10, maxDelayMs: 20 }),
    onSetback: (err) => setbacks.push((err as Error).message),
  });
  t.teardown(() => built.stop());
  return { built, setbacks };
}

test('on a store that answers they are built before the start goes on', async (t) => {
  const { built, setbacks } = build(t, await openStore(t));
  t.is(await built.settled, 'built');
  t.true(built.built());
  t.deepEqual(setbacks, []);
});

test('the log’s head not read: a setback at once; built by themselves once the store answers', async (t) => {
  const store = await openStore(t);
  store.refuseReads(true);
  store.refuseSubscriptions(true);
  const { built, setbacks } = build(t, store);
  t.is(await built.settled, 'setback');
  t.false(built.built());
  t.true(setbacks.length > 0);
  store.refuseReads(false);
  store.refuseSubscriptions(false);
  await built.whenBuilt;
  t.true(built.built());
});

test('the head read but the followers refused: their drop is the setback', async (t) => {
  const store = await openStore(t);
  store.refuseSubscriptions(true);
  const { built, setbacks } = build(t, store);
  t.is(await built.settled, 'setback');
  t.false(built.built());
  t.true(
    setbacks.every((m) => /subscription refused/.test(m)),
    setbacks.join('\n'),
  );
  store.refuseSubscriptions(false);
  await built.whenBuilt;
  t.true(built.built());
});
