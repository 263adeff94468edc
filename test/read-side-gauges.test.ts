/** The projection gauges in `/metrics`: their values, and one projector status per scrape. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { Registry } from 'prom-client';
import { registerGauges } from '../cli/read-side.ts';
import type { EventStore } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { createProjector, type Projection } from '../projections/projector.ts';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';
import { rawEvent } from './support/raw-events.ts';

const counted: Projection = {
  name: 'counted',
  version: 1,
  collections: { counts: [] },
  filter: { streamPrefixes: ['thing-'] },
  prefetch: (e) => [['counts', e.streamId]],
  apply(e, tx) {
    const n = (tx.get<{ _id: string; n: number }>('counts', e.streamId)?.n ?? 0) + 1;
    tx.put('counts', { _id: e.streamId, n });
  },
};

const append = (store: EventStore, i: number) => store.append(`thing-${i % 3}`, [rawEvent('Counted', { i })]);

test('a scrape reads every projection gauge from one projector status', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pds-gauges-'));
  const store = await openSqliteEventStore(join(dir, 'events.db'));
  const readStore = openSqliteReadStore(':memory:');
  t.teardown(async () => {
    await store.close();
    await readStore.close();
    rmSync(dir, { recursive: true, force: true });
  });
  for (let i = 0; i < 5; i++) await append(store, i);
  const projector = createProjector({ store, readStore, projections: [counted] });
  await projector.start();
  await projector.caughtUp;
  await projector.stop();
  const applied = await store.headPosition();
  for (let i = 5; i < 12; i++) await append(store, i); // not applied: the lag

  let statuses = 0;
  const registry = new Registry();
  registerGauges(
    {
      status() {
        statuses += 1;
        return projector.status();
      },
    },
    { registry },
  );
  const scrape = async () =>
    Object.fromEntries(
      (await registry.getMetricsAsJSON()).map((m) => [
        m.name,
        (m as unknown as { values: Array<{ value: number; labels: { projection?: string } }> }).values,
      ]),
    );

  const metrics = await scrape();
  t.is(statuses, 1);
  t.deepEqual(metrics.pds_projection_lag_events, [{ value: 7, labels: { projection: 'counted' } }]);
  t.deepEqual(metrics.pds_projection_checkpoint, [{ value: applied, labels: { projection: 'counted' } }]);
  t.deepEqual(metrics.pds_projection_rebuild_percent, [{ value: 0, labels: { projection: 'counted' } }]);
  t.true(metrics.pds_projection_lag_seconds[0].value >= 0);
  // The next scrape asks again: what it shows is current.
  await append(store, 12);
  t.deepEqual((await scrape()).pds_projection_lag_events, [{ value: 8, labels: { projection: 'counted' } }]);
  t.is(statuses, 2);
});
