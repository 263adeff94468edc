/**
 * Event store figures of the embedded adapter: single-event appends/s, 100-event batch appends/s
 * (events/s), and `$all` read events/s, each with a baseline measured in the same run on the same
 * machine: raw node:sqlite inserts and selects of the same rows without the port around them (with
 * ids made as the store makes them, `newEventId`). Both commit as `PDS_EVENT_STORE_SYNC` says (`full`,
 * the default: a sync of the WAL per commit; or `normal`), and each line names the mode.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseConfig } from '../cli/config.ts';
import { type EventMetadata, type NewEvent, newEventId } from '../eventstore/port.ts';
import { type EventStoreSync, openSqliteEventStore } from '../eventstore/sqlite.ts';

export interface BenchLine {
  name: string;
  [figure: string]: unknown;
}

const metadata: EventMetadata = {
  correlation_id: randomUUID(),
  causation_id: null,
  actor: { type: 'platform', id: 'bench' },
  occurred_at: new Date().toISOString(),
  schema_version: 1,
};
const data = {
  cart_uuid: randomUUID(),
  menu_product_id: 123456,
  price_id: 'eighth_ounce',
  count: 2,
  unit_price: '35.00',
};
const event = (): NewEvent => ({ type: 'CartItemAdded', data, metadata });

function rawBaseline(file: string, singles: number, batches: number, sync: EventStoreSync) {
  const db = new DatabaseSync(file);
  db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = ${sync.toUpperCase()};`);
  db.exec(`CREATE TABLE events (position INTEGER PRIMARY KEY, stream_id TEXT NOT NULL, revision INTEGER NOT NULL,
    event_id TEXT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, metadata TEXT NOT NULL, recorded_at TEXT NOT NULL);
    CREATE UNIQUE INDEX s ON events (stream_id, revision); CREATE UNIQUE INDEX e ON events (event_id);`);
  const insert = db.prepare('INSERT INTO events VALUES (NULL, ?, ?, ?, ?, ?, ?, ?)');
  const d = JSON.stringify(data);
  const m = JSON.stringify(metadata);
  let t0 = performance.now();
  for (let i = 0; i < singles; i++) {
    db.exec('BEGIN IMMEDIATE');
    insert.run(
      `s-${i % 1000}`,
      Math.floor(i / 1000),
      newEventId(),
      'CartItemAdded',
      d,
      m,
      new Date().toISOString(),
    );
    db.exec('COMMIT');
  }
  const single = singles / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  for (let b = 0; b < batches; b++) {
    db.exec('BEGIN IMMEDIATE');
    for (let k = 0; k < 100; k++)
      insert.run(`b-${b}`, k, newEventId(), 'CartItemAdded', d, m, new Date().toISOString());
    db.exec('COMMIT');
  }
  const batch = (batches * 100) / ((performance.now() - t0) / 1000);
  const select = db.prepare('SELECT * FROM events WHERE position > ? ORDER BY position LIMIT 1000');
  select.setReturnArrays(true);
  t0 = performance.now();
  let n = 0;
  let after = 0;
  for (;;) {
    const rows = select.all(after) as unknown as unknown[][];
    if (rows.length === 0) break;
    for (const r of rows) {
      JSON.parse(r[5] as string);
      JSON.parse(r[6] as string);
    }
    n += rows.length;
    after = rows[rows.length - 1][0] as number;
  }
  const read = n / ((performance.now() - t0) / 1000);
  db.close();
  return { single, batch, read, events: n };
}

export async function benchEventStore(
  opts: { singles?: number; batches?: number; sync?: EventStoreSync } = {},
): Promise<BenchLine[]> {
  const sync = opts.sync ?? parseConfig(process.env).eventStoreSync;
  const singles = opts.singles ?? 20_000;
  const batches = opts.batches ?? 2_000;
  const dir = mkdtempSync(join(tmpdir(), 'pds-bench-es-'));
  try {
    const raw = rawBaseline(join(dir, 'raw.db'), singles, batches, sync);
    const store = await openSqliteEventStore(join(dir, 'events.db'), { synchronous: sync });
    let t0 = performance.now();
    for (let i = 0; i < singles; i++) await store.append(`cart-${i % 1000}`, [event()]);
    const single = singles / ((performance.now() - t0) / 1000);
    t0 = performance.now();
    for (let b = 0; b < batches; b++) {
      await store.append(
        `batch-${b}`,
        Array.from({ length: 100 }, () => event()),
        { expectedRevision: 'no_stream' },
      );
    }
    const batch = (batches * 100) / ((performance.now() - t0) / 1000);
    t0 = performance.now();
    let n = 0;
    let after = 0;
    for (;;) {
      const page = await store.readAll({ after, maxCount: 1000 });
      if (page.length === 0) break;
      n += page.length;
      after = page[page.length - 1].position;
    }
    const read = n / ((performance.now() - t0) / 1000);
    await store.close();
    const round = (x: number) => Math.round(x);
    return [
      {
        name: 'eventstore.append_single',
        ours_per_s: round(single),
        baseline_per_s: round(raw.single),
        ratio: +(single / raw.single).toFixed(3),
        events: singles,
        event_store_sync: sync,
      },
      {
        name: 'eventstore.append_batch100',
        ours_events_per_s: round(batch),
        baseline_events_per_s: round(raw.batch),
        ratio: +(batch / raw.batch).toFixed(3),
        batches,
        event_store_sync: sync,
      },
      {
        name: 'eventstore.read_all',
        ours_events_per_s: round(read),
        baseline_events_per_s: round(raw.read),
        ratio: +(read / raw.read).toFixed(3),
        events: n,
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const line of await benchEventStore()) console.log(JSON.stringify(line));
}
