/**
 * `timers.abandon`: 100,000 carts each holding an item, none checked out, and a history of 100,000
 * carts checked out (`PDS_BENCH_TIMER_SETTLED`), written straight into the store. Then the abandonment
 * timer runs on the system clock with the embedded default read store (`sqlite:`), as in production:
 *
 * - first start: from `start()` to every deadline restored from the events alone (no checkpoint yet:
 *   a new read store), the working set committed as it goes;
 * - restore: the timer stopped and started again on the same read store: the pending carts read back
 *   and the events after the checkpoint (none here), with the heap it takes;
 * - detection: the deadlines fall due over 10 s of real time; for each cart, the delay from its deadline
 *   to the `recordedAt` of its `CartAbandoned`; p50/p99/max.
 *
 * The baseline is a raw read of the cart events from the store in the same run (what a restore from
 * the events alone must at least do).
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createAbandonmentTimer } from '../dispatcher/abandonment.ts';
import * as cart from '../domain/cart.ts';
import { systemClock } from '../domain/clock.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';
import { toNewEvent } from './events.ts';
import type { BenchLine } from './eventstore.ts';

const CARTS = Number(process.env.PDS_BENCH_TIMER_CARTS ?? 100_000);
/** Carts of the history: created, given an item and checked out (none of the working set). */
const SETTLED = Number(process.env.PDS_BENCH_TIMER_SETTLED ?? 100_000);
const ABANDON_AFTER_MS = 60_000;
/** The deadlines are spread over this much real time, starting this long after the restore begins. */
const SPREAD_MS = Number(process.env.PDS_BENCH_TIMER_SPREAD_MS ?? 10_000);
const LEAD_MS = 40_000;

const round = (n: number, digits = 1) => Number(n.toFixed(digits));
function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export async function benchTimers(): Promise<BenchLine[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-timers-'));
  try {
    const store = await openSqliteEventStore(path.join(dir, 'events.db'));
    // Deadlines: first item placed ABANDON_AFTER_MS before "now + lead + spread·i/N".
    const settledAt = new Date(Date.now() - 2 * ABANDON_AFTER_MS).toISOString();
    const appends: Promise<unknown>[] = [];
    for (let i = 0; i < SETTLED; i++) {
      const uuid = randomUUID();
      appends.push(
        store.append(cart.streamId(uuid), [
          toNewEvent(createdEvent(uuid, settledAt), settledAt),
          toNewEvent(itemEvent(i, settledAt), settledAt),
          toNewEvent(
            cart.events.CartCheckedOut({
              reservation_mode: 'pickup',
              reservation_start_window: '',
              promo_code: null,
              checked_out_at: settledAt,
              amount: 10,
            }),
            settledAt,
          ),
        ]),
      );
      if (appends.length >= 1_000) await Promise.all(appends.splice(0));
    }
    await Promise.all(appends);
    const base = Date.now() + LEAD_MS - ABANDON_AFTER_MS;
    const deadlines = new Map<string, number>();
    for (let i = 0; i < CARTS; i++) {
      const uuid = randomUUID();
      const placed = new Date(base + Math.floor((SPREAD_MS * i) / CARTS)).toISOString();
      deadlines.set(cart.streamId(uuid), Date.parse(placed) + ABANDON_AFTER_MS);
      appends.push(
        store.append(cart.streamId(uuid), [
          toNewEvent(createdEvent(uuid, placed), placed),
          toNewEvent(itemEvent(i, placed), placed),
        ]),
      );
      if (appends.length >= 1_000) await Promise.all(appends.splice(0));
    }
    await Promise.all(appends);

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

    // First start: no checkpoint, the working set built from every cart event.
    const readStoreFile = path.join(dir, 'read.db');
    const firstReadStore = openSqliteReadStore(readStoreFile);
    const options = { store, clock: systemClock, abandonAfterMs: ABANDON_AFTER_MS };
    const first = createAbandonmentTimer({ ...options, readStore: firstReadStore });
    const firstStart = performance.now();
    first.start();
    await first.caughtUp;
    const firstMs = performance.now() - firstStart;
    await first.stop();
    await firstReadStore.close();

    // Restart: the pending carts read back from the read store, then the events after the checkpoint.
    global.gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    const readStore = openSqliteReadStore(readStoreFile);
    const timer = createAbandonmentTimer({ ...options, readStore });
    const restoreStart = performance.now();
    timer.start();
    await timer.caughtUp;
    const restoreMs = performance.now() - restoreStart;
    global.gc?.();
    const heapMb = (process.memoryUsage().heapUsed - heapBefore) / 1024 / 1024;
    const pending = timer.pending();
    const resumed = timer.resumed();
    if (Date.now() >= base + ABANDON_AFTER_MS) {
      throw new Error('timers.abandon: the restart ended after the first deadline; raise LEAD_MS');
    }

    // Detection: wait until every cart is abandoned (or a generous bound), then read when each was.
    const lastDeadline = Math.max(...deadlines.values());
    while (timer.stats().abandoned + timer.stats().refused < CARTS && Date.now() < lastDeadline + 60_000) {
      await new Promise((r) => setTimeout(r, 250));
    }
    await timer.stop();
    await readStore.close();
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
        settled_carts: SETTLED,
        first_start_ms: round(firstMs),
        restore_ms: round(restoreMs),
        restored_pending: pending,
        restored_documents: resumed.documents,
        heap_mb: round(heapMb),
        abandoned: delays.length,
        detection_p50_ms: percentile(delays, 50),
        detection_p99_ms: percentile(delays, 99),
        detection_max_ms: delays.at(-1),
        deadlines_spread_ms: SPREAD_MS,
        baseline: 'raw read of every cart event',
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

function createdEvent(uuid: string, at: string) {
  return cart.events.CartCreated({
    cart_uuid: uuid,
    store_id: 1,
    source: { channel: 'embedded', partner_id: null },
    user_id: null,
    created_at: at,
  });
}

function itemEvent(i: number, at: string) {
  return cart.events.CartItemAdded({
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
    added_at: at,
  });
}
