/**
 * `restart`: how long `npm start` takes to answer `/readyz` 200 on a data dir with a long history, and
 * the resident memory of the process then (docs/read-side.md).
 *
 * For each history size (`PDS_BENCH_RESTART_EVENTS`, default 100,000 and 1,000,000 events): a catalog,
 * carts through checkout and status moves (`generateEvents`, as `projection.rebuild` writes them), and
 * a settled webhook delivery (scheduled, attempted, delivered) for a fifth of the status changes,
 * written straight into `events.db`. Then `pds serve --role all` runs as a child process:
 *
 * - first start: every read model and follower built from the whole log: its time, per event and over
 *   the raw read (`first_start_ratio`, target 4), its peak resident memory (VmHWM when ready, target
 *   400 MB), its resident memory when ready and a minute later (`PDS_BENCH_RESTART_SETTLE_S`, default 60; a shorter
 *   one only to iterate, since V8 gives back on its own what the start took after about 100 s), and
 *   how long each thread paused to give back the memory of its catch-up;
 * - after a clean stop (SIGTERM) and after `kill -9`: from spawning the process to `/readyz` 200, and
 *   its resident memory (VmRSS) at that moment;
 * - then its peak resident memory under 6 s of partner API load (32 connections: one menu product, and
 *   pages of 20 menu products at different cursors of a store).
 *
 * A second line, `restart.sandbox`, does the same for `npm start`'s own first start: the sandbox of
 * `PDS_BENCH_RESTART_SANDBOX_SIZE` stores (default 50, `npm start`'s), seeded and projected by the
 * process that serves it, then its resident memory a minute after the sandbox is ready, and after a
 * restart, a minute after `/readyz` 200 (docs/read-side.md, "Memory after the first start").
 *
 * The baseline is a raw read of the whole log in this process in the same run (pages of 1,000, JSON
 * parsed, nothing else): the least a replay at start would cost. `ratio` is the restart time over it.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { CATCH_UP_MEMORY_GIVEN_BACK } from '../cli/memory.ts';
import * as cart from '../domain/cart.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import type { EventStore } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { toNewEvent } from './events.ts';
import type { BenchLine } from './eventstore.ts';
import { generateEvents } from './history.ts';
import { rssMbOf, rssPeakMbOf, type Served, serve } from './serve.ts';

const SIZES = (process.env.PDS_BENCH_RESTART_EVENTS ?? '100000,1000000').split(',').map(Number);
const SETTLE_MS = Number(process.env.PDS_BENCH_RESTART_SETTLE_S ?? 60) * 1_000;
const SANDBOX_SIZE = process.env.PDS_BENCH_RESTART_SANDBOX_SIZE ?? '50';
const WEBHOOK_ID = '7e57be9c-0000-4000-8000-000000000001';
const round = (n: number, digits = 0) => Number(n.toFixed(digits));

export async function benchRestart(): Promise<BenchLine[]> {
  const lines: BenchLine[] = [];
  for (const size of SIZES) lines.push(await restartWith(size));
  lines.push(await sandboxFirstStart());
  return lines;
}

async function restartWith(target: number): Promise<BenchLine> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-restart-'));
  try {
    const es = await openSqliteEventStore(path.join(dir, 'events.db'));
    let t0 = performance.now();
    const written = await writeHistory(es, target);
    const generateSeconds = (performance.now() - t0) / 1000;
    t0 = performance.now();
    let read = 0;
    for (let after = 0; ; ) {
      const page = await es.readAll({ after, maxCount: 1_000 });
      if (page.length === 0) break;
      read += page.length;
      after = page[page.length - 1].position;
    }
    const rawMs = performance.now() - t0;
    await es.close();

    // At `info`, for the lines each thread logs once it gave back the memory of the catch-up.
    const first = await serve(dir, { LOG_LEVEL: 'info', PDS_LOG_FORMAT: 'json' });
    // The most the process held while it built everything: its peak so far, read at `/readyz` 200.
    const firstPeakRss = rssPeakMbOf(first.pid);
    const firstSettledRss = await rssAfterSettling(first);
    await first.stop('SIGTERM');
    const clean = await serve(dir);
    await clean.stop('SIGTERM');
    const killed = await serve(dir);
    await killed.stop('SIGKILL');
    const after = await serve(dir);
    const loaded = await underLoad(after, dir).finally(() => after.stop('SIGTERM'));
    return {
      name: 'restart',
      events: written,
      generate_seconds: round(generateSeconds, 1),
      first_start_ms: round(first.readyMs),
      first_start_us_per_event: round((first.readyMs * 1_000) / written, 1),
      first_start_ratio: round(first.readyMs / rawMs, 2),
      first_start_rss_peak_mb: firstPeakRss,
      first_start_rss_mb: first.rssMb,
      first_start_rss_settled_mb: firstSettledRss,
      first_start_gc_pause_ms: memoryGivenBack(first.output()),
      settle_s: SETTLE_MS / 1_000,
      ready_after_clean_stop_ms: round(clean.readyMs),
      rss_after_clean_stop_mb: clean.rssMb,
      ready_after_kill_ms: round(after.readyMs),
      rss_after_kill_mb: after.rssMb,
      rss_peak_under_load_mb: loaded.rssPeakMb,
      load_requests_per_s: loaded.requestsPerS,
      baseline: 'raw read of the whole log',
      baseline_ms: round(rawMs),
      baseline_events: read,
      ratio_clean: round(clean.readyMs / rawMs, 3),
      ratio: round(after.readyMs / rawMs, 3),
      targets: {
        ready_ms_at_1m_events: 2_000,
        ratio: 0.1,
        rss_mb: 300,
        first_start_ratio: 4,
        first_start_rss_peak_mb: 400,
      },
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A history of about `target` events in `es`: the catalog and carts of `generateEvents` and the settled
 * deliveries of `settledDeliveries`. Returns how many events it wrote.
 */
export async function writeHistory(es: EventStore, target: number): Promise<number> {
  return (await generateEvents(es, target)) + (await settledDeliveries(es));
}

/**
 * How long each thread paused for the collection that gave back the memory of its catch-up (its
 * `CATCH_UP_MEMORY_GIVEN_BACK` line; docs/read-side.md, "Memory after the first start").
 */
function memoryGivenBack(output: string): Record<string, number> {
  const pauses: Record<string, number> = {};
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { msg?: string; thread?: string; pause_ms?: number };
    if (entry.msg === CATCH_UP_MEMORY_GIVEN_BACK)
      pauses[entry.thread ?? 'main'] = entry.pause_ms ?? Number.NaN;
  }
  return pauses;
}

/** The process's resident memory once `SETTLE_MS` have passed since now. */
async function rssAfterSettling(served: Served): Promise<number> {
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  return rssMbOf(served.pid);
}

/**
 * `npm start` on an empty data dir with the sandbox on: its resident memory a minute after the sandbox
 * is ready (seeded, and projected: the banner), then that of a restart on the same data a minute
 * after `/readyz` 200.
 */
async function sandboxFirstStart(): Promise<BenchLine> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-restart-sandbox-'));
  const env = { PDS_SANDBOX: '1', PDS_SANDBOX_SIZE: SANDBOX_SIZE };
  try {
    const t0 = performance.now();
    const first = await serve(dir, env);
    try {
      const deadline = Date.now() + 10 * 60_000;
      while (!/^pds: sandbox ready at /m.test(first.output())) {
        if (Date.now() > deadline)
          throw new Error(`the sandbox was not ready in 10 minutes: ${first.output()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    } catch (error) {
      await first.stop('SIGKILL');
      throw error;
    }
    const sandboxReadyMs = performance.now() - t0;
    const rssWhenReady = rssMbOf(first.pid);
    const settled = await rssAfterSettling(first);
    await first.stop('SIGTERM');
    const again = await serve(dir, env);
    const againSettled = await rssAfterSettling(again);
    await again.stop('SIGTERM');
    return {
      name: 'restart.sandbox',
      sandbox_size: Number(SANDBOX_SIZE),
      sandbox_ready_ms: round(sandboxReadyMs),
      rss_when_sandbox_ready_mb: rssWhenReady,
      first_start_rss_settled_mb: settled,
      restart_rss_when_ready_mb: again.rssMb,
      restart_rss_settled_mb: againSettled,
      settle_s: SETTLE_MS / 1_000,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A delivered `cart_status_updated` webhook for every fifth status change: each a queue stream with the
 * events the delivery decider produces for a schedule, an attempt and its success.
 */
async function settledDeliveries(es: EventStore): Promise<number> {
  let written = 0;
  let seen = 0;
  const appends: Promise<unknown>[] = [];
  for (let after = 0; ; ) {
    const page = await es.readAll({ after, maxCount: 1_000, filter: { eventTypes: ['CartStatusChanged'] } });
    if (page.length === 0) break;
    after = page[page.length - 1].position;
    for (const e of page) {
      if (seen++ % 5 !== 0) continue;
      const uuid = e.streamId.slice(cart.streamId('').length);
      const id = delivery.deliveryId(WEBHOOK_ID, e.id);
      const at = e.recordedAt;
      let state = delivery.decider.initialState;
      const events = [];
      for (const command of [
        {
          type: 'ScheduleDelivery',
          delivery_id: id,
          webhook_id: WEBHOOK_ID,
          event_kind: 'cart_status_updated',
          cart_uuid: uuid,
          store_id: (e.data as { store_id?: number }).store_id ?? 1,
          source_event_id: e.id,
          source_revision: e.revision,
          source_position: e.position,
          body: '{"webhook_event":"cart_status_updated"}',
          at,
        },
        { type: 'StartAttempt', delivery_id: id, lease_ms: 30_000, dispatcher_id: 'bench', at },
        {
          type: 'RecordAttempt',
          delivery_id: id,
          attempt: 1,
          outcome: 'delivered',
          status: 200,
          duration_ms: 12,
          response_excerpt: 'ok',
          error_code: null,
          error: null,
          retry_at: null,
          park: null,
          at,
        },
      ] satisfies delivery.WebhookDeliveryCommand[]) {
        for (const event of delivery.decider.decide(command, state)) {
          state = delivery.decider.evolve(state, event);
          events.push(toNewEvent(event, at));
        }
      }
      appends.push(es.append(delivery.streamId(WEBHOOK_ID, uuid), events));
      written += events.length;
      if (appends.length >= 500) await Promise.all(appends.splice(0));
    }
  }
  await Promise.all(appends);
  return written;
}

/**
 * Partner API load on a restarted service: a store operator key for store 1 (issued through the admin
 * API with the highest rate limit), then one menu product and pages of 20 at several cursors, while
 * the serving process's resident memory is sampled every 100 ms.
 */
async function underLoad(served: Served, dir: string): Promise<{ rssPeakMb: number; requestsPerS: number }> {
  const token = readFileSync(path.join(dir, 'operator-token'), 'utf8').trim();
  const created = await fetch(`${served.base}/admin/v1/partners`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'Restart bench',
      kind: 'store_operator',
      store_ids: [1],
      rate_limit_per_minute: 100_000,
    }),
  });
  if (created.status !== 201) throw new Error(`partner: ${created.status} ${await created.text()}`);
  const { api_key: key } = (await created.json()) as { api_key: string };
  const headers = { authorization: `Bearer ${key}` };
  // The key works once the partner_keys projection has it; the pages give the cursors.
  type Page = { menu_products: Array<{ id: number }>; next_cursor: string | null };
  const pageAt = async (cursor: string | null): Promise<Page | undefined> => {
    const query = cursor ? `limit=20&cursor=${encodeURIComponent(cursor)}` : 'limit=20';
    const res = await fetch(`${served.base}/partner/store/v1/menu_products?${query}`, { headers });
    if (res.status === 200) return (await res.json()) as Page;
    await res.body?.cancel();
    return undefined;
  };
  let first = await pageAt(null);
  while (!first) {
    await new Promise((r) => setTimeout(r, 50));
    first = await pageAt(null);
  }
  if (first.menu_products.length === 0) throw new Error('store 1 lists no menu products');
  const paths = [
    `/partner/store/v1/menu_products/${first.menu_products[0].id}`,
    '/partner/store/v1/menu_products?limit=20',
  ];
  let cursor = first.next_cursor;
  while (cursor && paths.length < 20) {
    paths.push(`/partner/store/v1/menu_products?limit=20&cursor=${encodeURIComponent(cursor)}`);
    cursor = (await pageAt(cursor))?.next_cursor ?? null;
  }
  let peak = rssMbOf(served.pid);
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMbOf(served.pid));
  }, 100);
  let n = 0;
  const result = await autocannon({
    url: served.base,
    connections: 32,
    duration: 6,
    headers,
    requests: [{ setupRequest: (req) => ({ ...req, path: paths[n++ % paths.length] }) }],
  });
  clearInterval(sampler);
  if (result.non2xx > 0) throw new Error(`restart load: ${result.non2xx} answers were not 2xx`);
  return { rssPeakMb: peak, requestsPerS: Math.round(result.requests.average) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const line of await benchRestart()) console.log(JSON.stringify(line));
}
