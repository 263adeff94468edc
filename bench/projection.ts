/**
 * `projection.rebuild`: rebuilding every read model from N events (default 1,000,000: a catalog and
 * carts with ~20 events each), in events/s, against the raw `$all` read rate of the same store in the
 * same run (pages of 1,000, JSON parsed, nothing else). The read models go to the embedded default, a
 * SQLite file beside the events.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { allProjections } from '../projections/all.ts';
import { createProjector } from '../projections/projector.ts';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';
import { generateEvents } from './history.ts';

export async function benchProjectionRebuild(
  events = Number(process.env.PDS_BENCH_REBUILD_EVENTS ?? 1_000_000),
) {
  const dir = mkdtempSync(join(tmpdir(), 'pds-bench-rebuild-'));
  try {
    const es = await openSqliteEventStore(join(dir, 'events.db'));
    let t0 = performance.now();
    const written = await generateEvents(es, events);
    const generateSeconds = (performance.now() - t0) / 1000;

    t0 = performance.now();
    let read = 0;
    let after = 0;
    for (;;) {
      const page = await es.readAll({ after, maxCount: 1_000 });
      if (page.length === 0) break;
      read += page.length;
      after = page[page.length - 1].position;
    }
    const rawRate = read / ((performance.now() - t0) / 1000);

    // The embedded default: durable read models in their own SQLite file.
    const readStore = openSqliteReadStore(join(dir, 'read.db'));
    const projector = createProjector({
      store: es,
      readStore,
      projections: allProjections(),
    });
    t0 = performance.now();
    await projector.start();
    await projector.caughtUp;
    const rebuildSeconds = (performance.now() - t0) / 1000;
    // Every projection reads the whole log it filters on; the rate counts log events per second.
    const rebuildRate = written / rebuildSeconds;
    const applied = (await projector.status()).reduce((n, s) => n + s.events_applied, 0);
    await projector.stop();
    await readStore.close();
    await es.close();
    return [
      {
        name: 'projection.rebuild',
        events: written,
        events_applied: applied,
        projections: allProjections().length,
        ours_events_per_s: Math.round(rebuildRate),
        baseline_events_per_s: Math.round(rawRate),
        ratio: +(rebuildRate / rawRate).toFixed(3),
        rebuild_seconds: +rebuildSeconds.toFixed(2),
        generate_seconds: +generateSeconds.toFixed(1),
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const line of await benchProjectionRebuild()) console.log(JSON.stringify(line));
}
