/**
 * `timers.abandon`: 100,000 carts each holding an item, none checked out, written straight into the
 * store (a cart's `CartCreated` and `CartItemAdded`). Then the abandonment timer starts on the system
 * clock, as in production:
 *
 * - restore: from `start()` to every deadline restored (read from the events), and the heap it takes;
 * - detection: the deadlines fall due over 10 s of real time; for each cart, the delay from its deadline
 *   to the `recordedAt` of its `CartAbandoned`; p50/p99/max.
 *
 * The baseline is a raw read of the same events from the store in the same run (what any restore must
 * at least do).
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createAbandonmentTimer } from '../dispatcher/abandonment.ts';
import * as cart from '../domain/cart.ts';
import { systemClock } from '../domain/clock.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { toNewEvent } from './events.ts';
import type { BenchLine } from './eventstore.ts';

const CARTS = Number(process.env.PDS_BENCH_TIMER_CARTS ?? 100_000);
const ABANDON_AFTER_MS = 60_000;
/** The deadlines are spread over this much real time, starting this long after the restore begins. */
const SPREAD_MS = Number(process.env.PDS_BENCH_TIMER_SPREAD_MS ?? 10_000);
const LEAD_MS = 25_000;

const round = (n: number, digits = 1) => Number(n.toFixed(digits));
function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export async function benchTimers(): Promise<BenchLine[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-timers-'));
  try {
    const store = await openSqliteEventStore(path.join(dir, 'events.db'));
    // Deadlines: first item placed ABANDON_AFTER_MS before "now + lead + spread·i/N".
    const base = Date.now() + LEAD_MS - ABANDON_AFTER_MS;
    const deadlines = new Map<string, number>();
    for (let i = 0; i < CARTS; i++) {
      const uuid = randomUUID();
      const placed = new Date(base + Math.floor((SPREAD_MS * i) / CARTS)).toISOString();
      deadlines.set(cart.streamId(uuid), Date.parse(placed) + ABANDON_AFTER_MS);
      await store.append(cart.streamId(uuid), [
        toNewEvent(
          cart.events.CartCreated({
            cart_uuid: uuid,
            store_id: 1,
            source: { channel: 'embedded', partner_id: null },
            user_id: null,
            created_at: placed,
          }),
          placed,
        ),
        toNewEvent(
          cart.events.CartItemAdded({
            menu_product_id: 1 + (i % 500),
            price_id: 'gram',
            count: 1,
            product_id: 1,
            store_id: 1,
            name: 'Blue Dream',
            brand: 'Brand One',
            brand_id: 1,
            kind: 'flower',
            kind_subtype: null,
            lineage: 'hybrid',
            image_urls: [],
            unit_price: '10.00',
            discounted_unit_price: '10.00',
            special_id: null,
            special_title: null,
            added_at: placed,
          }),
          placed,
        ),
      ]);
    }

    // Baseline: the raw read a restore cannot avoid.
    const rawStart = performance.now();
    let raw = 0;
    for (let after = 0; ; ) {
      const page = await store.readAll({ after, maxCount: 1_000, filter: { streamPrefixes: ['cart-'] } });
      if (page.length === 0) break;
      raw += page.length;
      after = page[page.length - 1].position;
    }
    const rawMs = performance.now() - rawStart;

    global.gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    const timer = createAbandonmentTimer({ store, clock: systemClock, abandonAfterMs: ABANDON_AFTER_MS });
    const restoreStart = performance.now();
    timer.start();
    await timer.caughtUp;
    const restoreMs = performance.now() - restoreStart;
    global.gc?.();
    const heapMb = (process.memoryUsage().heapUsed - heapBefore) / 1024 / 1024;
    const pending = timer.pending();

    // Detection: wait until every cart is abandoned (or a generous bound), then read when each was.
    const lastDeadline = Math.max(...deadlines.values());
    while (timer.stats().abandoned + timer.stats().refused < CARTS && Date.now() < lastDeadline + 60_000) {
      await new Promise((r) => setTimeout(r, 250));
    }
    await timer.stop();
    const delays: number[] = [];
    for (let after = 0; ; ) {
      const page = await store.readAll({ after, maxCount: 5_000, filter: { eventTypes: ['CartAbandoned'] } });
      if (page.length === 0) break;
      for (const e of page) {
        const due = deadlines.get(e.streamId);
        if (due !== undefined) delays.push(Math.max(0, Date.parse(e.recordedAt) - due));
      }
      after = page[page.length - 1].position;
    }
    await store.close();
    delays.sort((a, b) => a - b);
    return [
      {
        name: 'timers.abandon',
        carts: CARTS,
        restore_ms: round(restoreMs),
        restored_pending: pending,
        heap_mb: round(heapMb),
        abandoned: delays.length,
        detection_p50_ms: percentile(delays, 50),
        detection_p99_ms: percentile(delays, 99),
        detection_max_ms: delays.at(-1),
        deadlines_spread_ms: SPREAD_MS,
        baseline: 'raw read of the same cart events',
        baseline_ms: round(rawMs),
        baseline_events: raw,
        ratio: round(rawMs / restoreMs, 3),
        targets: { restore_ms: 2_000, detection_p99_ms: 1_000 },
      },
    ];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
