/**
 * A batch too large for one transaction (docs/read-side.md, "Oversized batches"), on a behaviour
 * double of MongoDB's transaction limits around the embedded read store (test/support/transaction-limits.ts):
 * a refused batch is applied in halves down to one event, every document as an unlimited store has
 * it; an event too large even alone fails its projection, naming the event, in readiness, metrics and
 * the status the console shows, retried once per supervisor pause until the store takes it.
 */
import test, { type ExecutionContext } from 'ava';
import { Registry } from 'prom-client';
import { createReadiness } from '../../api/http.ts';
import { createLogger } from '../../cli/logger.ts';
import { registerGauges } from '../../cli/read-side.ts';
import { createSupervisor } from '../../cli/supervision.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { createProjector, type Projection, type Projector } from '../../projections/projector.ts';
import type { Doc, ReadStore } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { until } from '../support/probes.ts';
import { rawEvent } from '../support/raw-events.ts';
import { withTransactionLimits } from '../support/transaction-limits.ts';
import { eventStoreFor, seedThings } from './support.ts';

/**
 * Tallies per stream and totals per kind; a `Spread` event writes `n` documents of its own, and
 * every 50th event renames (an `updateMany`, a commit of its own mid-batch).
 */
const tallies: Projection = {
  name: 'tallies',
  version: 1,
  // `Renamed` updates a kind's tallies while applying: a rebuild keeps this index from the start.
  collections: { tally: [{ keys: [['kind', 1]], readWhileApplying: true }], kinds: [], spread: [] },
  filter: { streamPrefixes: ['thing-'] },
  prefetch: (e) => [
    ['tally', e.streamId],
    ['kinds', (e.data as { kind: string }).kind],
  ],
  apply(e, tx) {
    const { kind, n } = e.data as { kind: string; n: number };
    if (e.type === 'Spread') {
      for (let i = 0; i < n; i++) tx.put('spread', { _id: `${e.streamId}-${i}`, kind });
      return;
    }
    const t = tx.get<Doc & { total: number }>('tally', e.streamId);
    tx.put('tally', { _id: e.streamId, kind, total: (t?.total ?? 0) + n });
    const k = tx.get<Doc & { total: number }>('kinds', kind);
    tx.put('kinds', { _id: kind, total: (k?.total ?? 0) + n });
    if (e.type === 'Renamed') tx.updateMany('tally', { kind }, { $set: { renamed: true } });
  },
};

async function dump(readStore: ReadStore): Promise<unknown> {
  const strip = (docs: Doc[]) => docs.map(({ _position, ...d }) => d);
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(tallies.collections)) {
    out[name] = strip(await (await readStore.collection(name)).find({}));
  }
  return out;
}

/** What a projector builds from the log on a store without limits. */
async function unlimitedBuild(store: EventStore, projection = tallies): Promise<unknown> {
  const readStore = openSqliteReadStore(':memory:');
  const p = createProjector({ store, readStore, projections: [projection], batchSize: 64 });
  await p.start();
  await p.caughtUp;
  await p.stop();
  const built = await dump(readStore);
  await readStore.close();
  return built;
}

/** Fails the test, instead of hanging it, when the projector never catches up. */
function caughtUpWithin(t: ExecutionContext, p: Projector, ms = 10_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the projector never caught up')), ms);
  });
  t.teardown(() => clearTimeout(timer));
  return Promise.race([p.caughtUp, late]).finally(() => clearTimeout(timer));
}

test('a batch over the transaction limit is applied in halves, every document as an unlimited store builds it', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 500);
  const inner = openSqliteReadStore(':memory:');
  t.teardown(() => inner.close());
  const { readStore, commits } = withTransactionLimits(inner, { maxOperations: 12, maxBytes: 1_000_000 });
  const p = createProjector({ store, readStore, projections: [tallies], batchSize: 64 });
  t.teardown(() => p.stop());
  await p.start();
  await caughtUpWithin(t, p);

  t.true(commits.refused > 0, 'batches of 64 events were refused');
  t.true(
    commits.taken.every((operations) => operations <= 12),
    'every commit taken is within the limit',
  );
  t.deepEqual(await dump(readStore), await unlimitedBuild(store));
  const checkpoint = await readStore.getCheckpoint('tallies');
  t.is(checkpoint?.position, await store.headPosition());
  t.is(checkpoint?.events, 500, 'every event counted once, however often its batch was refused');
  t.like((await p.status())[0], { state: 'live', events_applied: 500, error: null });
  // A commit refused and split costs its halves, not a loop: at most a refusal per part taken.
  t.true(
    commits.refused <= commits.taken.length,
    `${commits.refused} refused, ${commits.taken.length} taken`,
  );
});

test('an event too large to commit alone fails its projection, naming it in status, readiness and metrics; it is tried again once per pause until the store takes it', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 100);
  const huge = await store.append('thing-spread', [rawEvent('Spread', { kind: 'k9', n: 40 })]);
  await seedThings(store, 20, 100);
  const log = await store.readAll({});
  const at = log.findIndex((e) => e.position === huge.position);
  const [before, spread] = [log[at - 1], log[at]];

  const inner = openSqliteReadStore(':memory:');
  t.teardown(() => inner.close());
  const { readStore, commits, limits } = withTransactionLimits(inner, {
    maxOperations: 30,
    maxBytes: 1_000_000,
  });
  const readiness = createReadiness();
  const registry = new Registry();
  const drops: Array<{ attempts: number; delayMs: number }> = [];
  const supervisor = createSupervisor(createLogger('silent'), readiness, registry, 'projector', {
    minDelayMs: 20,
    maxDelayMs: 80,
    onDrop: (_name, _err, delayMs) => drops.push({ attempts: commits.attempts, delayMs }),
  });
  const p = createProjector({ store, readStore, projections: [tallies], batchSize: 64, supervisor });
  registerGauges(p, { registry });
  t.teardown(() => p.stop());
  await p.start();
  await until('the projection is failed and was tried again three times', () => drops.length >= 4);

  const [status] = await p.status();
  t.is(status.state, 'failed');
  t.regex(
    status.error ?? '',
    new RegExp(
      `event ${spread.id} \\(Spread at position ${spread.position}\\) cannot be committed even alone`,
    ),
  );
  t.is(status.checkpoint, before.position, 'every event before it is stored');
  t.is((await readStore.getCheckpoint('tallies'))?.position, before.position);
  const report = await readiness.check();
  t.false(report.ready);
  t.true(report.failing.includes('subscription:projection_tallies'));
  const text = await registry.metrics();
  t.regex(text, /pds_projection_failed\{projection="tallies"\} 1/);
  t.regex(text, /pds_subscription_up\{subscription="projection_tallies"\} 0/);
  // Each try after a pause is one commit of the event alone, never a loop at full size.
  for (let i = 1; i < drops.length; i++) {
    t.is(drops[i].attempts - drops[i - 1].attempts, 1, `try ${i + 1}`);
    t.true(drops[i].delayMs >= 10, 'paced by the supervisor');
  }

  // The limit passes (the storage cache was under pressure): the projection recovers by itself.
  limits.maxOperations = 100;
  await until('the projection is live again', async () => (await p.status())[0].state === 'live');
  await caughtUpWithin(t, p);
  t.deepEqual(await dump(readStore), await unlimitedBuild(store));
  t.is((await readStore.getCheckpoint('tallies'))?.events, 121);
  t.regex(await registry.metrics(), /pds_projection_failed\{projection="tallies"\} 0/);
  t.true((await readiness.check()).ready);
});

/** Version 2 of the tallies: every document it writes says so. */
const talliesV2: Projection = { ...tallies, version: 2, finalize: (_collection, doc) => ({ ...doc, v: 2 }) };

test('an upgrade whose rebuild meets an event too large to commit alone shows the failure in status, metrics and readiness, keeps the old copy serving, and is tried again after each pause until the store takes it', async (t) => {
  const store = await eventStoreFor(t);
  await seedThings(store, 100);
  const huge = await store.append('thing-spread', [rawEvent('Spread', { kind: 'k9', n: 50 })]);
  await seedThings(store, 20, 100);
  const spread = (await store.readAll({})).find((e) => e.position === huge.position);
  if (!spread) return t.fail('the Spread event is not in the log');

  // Version 1 was built before the limit bit (say, before the storage cache came under pressure).
  const inner = openSqliteReadStore(':memory:');
  t.teardown(() => inner.close());
  const v1 = createProjector({ store, readStore: inner, projections: [tallies], batchSize: 64 });
  await v1.start();
  await v1.caughtUp;
  await v1.stop();
  const served = await dump(inner);

  const { readStore, limits } = withTransactionLimits(inner, { maxOperations: 20, maxBytes: 1_000_000 });
  const readiness = createReadiness();
  const registry = new Registry();
  const retries: number[] = [];
  const supervisor = createSupervisor(createLogger('silent'), readiness, registry, 'projector', {
    minDelayMs: 20,
    maxDelayMs: 80,
    onDrop: (name, _err, delayMs) => {
      if (name === 'projection tallies rebuild') retries.push(delayMs);
    },
  });
  const p = createProjector({ store, readStore, projections: [talliesV2], batchSize: 64, supervisor });
  registerGauges(p, { registry });
  t.teardown(() => p.stop());
  await p.start();
  await caughtUpWithin(t, p);
  await until('the rebuild failed and was tried again twice', () => retries.length >= 3);

  const [status] = await p.status();
  t.is(status.state, 'live', 'the old copy serves');
  t.is(status.progress, null, 'no rebuild progress frozen where it stopped');
  t.regex(
    status.rebuild_failure?.error ?? '',
    new RegExp(
      `event ${spread.id} \\(Spread at position ${spread.position}\\) cannot be committed even alone`,
    ),
  );
  t.false(Number.isNaN(Date.parse(status.rebuild_failure?.at ?? '')));
  t.regex((await readStore.getCheckpoint('tallies'))?.version ?? '', /^v1\+/);
  t.deepEqual(await dump(readStore), served);
  const report = await readiness.check();
  t.false(report.ready);
  t.deepEqual(report.failing, ['subscription:projection_tallies_rebuild']);
  t.regex(await registry.metrics(), /pds_projection_rebuild_failed\{projection="tallies"\} 1/);
  t.regex(await registry.metrics(), /pds_projection_failed\{projection="tallies"\} 0/);
  t.true(
    retries.every((delayMs) => delayMs >= 10 && delayMs <= 80),
    `paced by the supervisor: ${retries.join(', ')} ms`,
  );

  // The limit passes: the next try rebuilds it, and version 2 is live.
  limits.maxOperations = 100;
  await until('version 2 is live', async () =>
    /^v2\+/.test((await readStore.getCheckpoint('tallies'))?.version ?? ''),
  );
  await until('the failure is cleared', async () => (await p.status())[0].rebuild_failure === null);
  t.deepEqual(await dump(readStore), await unlimitedBuild(store, talliesV2));
  t.regex(await registry.metrics(), /pds_projection_rebuild_failed\{projection="tallies"\} 0/);
  t.true((await readiness.check()).ready);

  // A rebuild an operator asks for fails the same way in sight, and is not tried again by itself.
  limits.maxOperations = 20;
  await t.throwsAsync(p.rebuild('tallies'), { message: /cannot be committed even alone/ });
  const [after] = await p.status();
  t.like(after, { state: 'live', progress: null });
  t.regex(after.rebuild_failure?.error ?? '', new RegExp(`event ${spread.id} `));
  t.regex(await registry.metrics(), /pds_projection_rebuild_failed\{projection="tallies"\} 1/);
  t.true((await readiness.check()).ready, 'version 2 is live: nothing to try again');
});
