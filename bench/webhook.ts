/**
 * `webhook.e2e`: the whole webhook path of a real service to a local receiver.
 *
 * - The latency phases run the service as `npm start` does, in a child process (the dispatcher on a
 *   thread of its own; `PDS_BENCH_DISPATCHER_THREAD=0` runs it on the API's thread instead, to compare).
 *   The receiver runs on this process's main thread and the partner load in another child process, so
 *   neither shares an event loop with the service or with each other (`PDS_BENCH_LOAD_NICE=10` runs
 *   the load generator below the service's priority, as a client elsewhere would not use its cores).
 *
 * - Latency: status changes issued at a steady 200/s (each cart moved along its pickup path), from
 *   the moment the status command's HTTP answer arrives to the moment the receiver has the webhook's
 *   body; p50/p99 in milliseconds. (A webhook can arrive before the answer does; that counts as 0.)
 *   Three repetitions, each on fresh carts of the same service: `p50_ms`/`p99_ms` are the medians of
 *   the three, with their `_min`/`_max` and every repetition in `runs`. A fourth repetition runs with
 *   the partner API under load at the same time (autocannon, 16 connections, a store operator key
 *   paging the store's 400 menu products 100 at a time, in a child process), its changes starting
 *   once the load has run for a second (`LOAD_WARM_UP_MS`): its figures are the `loaded_*` ones, the
 *   partner API's the `partner_*` ones.
 * - Throughput: a backlog of status changes is written by an `api` service (no dispatcher); then a
 *   `dispatcher` service starts on the same data, in this process, connected as `npm start`'s
 *   dispatcher thread is (`startPds`), and drains it (fan-out from the persistent subscription,
 *   scheduling, signing, sending, recording): deliveries/s from its first receipt to its last, against
 *   a raw loop that signs and POSTs the same number of bodies (one the dispatcher delivered, so of the
 *   same size) to the same receiver with the same concurrency (the dispatcher's per-subscription limit)
 *   and the same connection policy (a fresh connection per request, as the dispatcher uses). The raw
 *   loop's clock starts before its first request; `ratio_from_ready` times the dispatcher the same way,
 *   from the moment it is ready to its last receipt, where `ratio` leaves out the time to its first
 *   receipt. Throughput on a shared machine swings with its load; CPU time does much less, so the
 *   same phases also count this thread's CPU time (it runs the dispatcher, or the loop, and the
 *   receiver): `cpu_ratio` is the raw loop's per POST over the dispatcher's per delivery. The same
 *   loop through the dispatcher's own send path (`send_only_*`) tells the sending apart from the
 *   durable bookkeeping around it.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import got from 'got';
import { createTimers, defaultComponents } from '../cli/components.ts';
import { createService } from '../cli/compose.ts';
import { loadConfig } from '../cli/config.ts';
import { createLogger } from '../cli/logger.ts';
import { eventStoreOptionsOf } from '../cli/store-options.ts';
import { startCheckpointer } from './checkpointer.ts';
import type { BenchLine } from './eventstore.ts';
import { type Load, startLoadElsewhere } from './load.ts';
import { rssPeakMbOf, serve } from './serve.ts';
import { cpuSince, rawPosts, sendOnly } from './webhook-baselines.ts';
import { type Receiver, startReceiver } from './webhook-receiver.ts';

const P = '/platform/v1';
const RATE_PER_S = 200;
/** Overridable for profiling one phase (e.g. `PDS_BENCH_BURST_CHANGES=3 node --cpu-prof bench/run.ts webhook`). */
const LATENCY_CHANGES = Number(process.env.PDS_BENCH_LATENCY_CHANGES ?? 2_000);
const BURST_CHANGES = Number(process.env.PDS_BENCH_BURST_CHANGES ?? 1_500);
const MOVES = ['preparing', 'ready_for_pickup', 'finished'];
const REPETITIONS = 3;
/** The partner API load of the fourth repetition: a page of the store's menu, this many connections. */
const PARTNER_CONNECTIONS = 16;
const STORE_MENU = Number(process.env.PDS_BENCH_WEBHOOK_MENU ?? 400);
const PAGE_LIMIT = 100;
/** Whether the latency phases' service runs its dispatcher on a thread of its own (`PDS_DISPATCHER_THREAD`). */
const DISPATCHER_THREAD = process.env.PDS_BENCH_DISPATCHER_THREAD ?? '1';
/** The partner load generator's nice value (0: the service's priority; e.g. 10 to run it below). */
const LOAD_NICE = Number(process.env.PDS_BENCH_LOAD_NICE ?? 0);

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
export const round = (n: number, digits = 2) => Number(n.toFixed(digits));

/** A `call` of the platform and admin APIs at `base` with the operator token; throws on a non-2xx. */
export function caller(base: string, token: string) {
  // Idle sockets are closed before the service closes them (its keep-alive timeout, 5 s, cli/compose.ts):
  // a request sent on a socket the service was closing failed a run with ECONNRESET, once in about 50.
  // With a timeout set, Node's agent also keeps a second's margin under the service's Keep-Alive hint.
  const agent = new Agent({ keepAlive: true, maxSockets: 32, timeout: 4_000 });
  const call = async (method: string, url: string, body?: unknown) => {
    const res = await got(`${base}${url}`, {
      method: method as 'POST',
      json: body,
      headers: { authorization: `Bearer ${token}` },
      agent: { http: agent },
      throwHttpErrors: false,
      retry: { limit: 0 },
    });
    if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return JSON.parse(res.body || '{}');
  };
  return { call, close: () => agent.destroy() };
}

/** Role `all` as `npm start` runs it, in a child process. */
async function startServed(dir: string) {
  const served = await serve(dir, { PDS_DISPATCHER_THREAD: DISPATCHER_THREAD });
  const { call, close } = caller(served.base, readFileSync(path.join(dir, 'operator-token'), 'utf8').trim());
  return {
    base: served.base,
    pid: served.pid,
    call,
    async stop() {
      await served.stop('SIGTERM');
      close();
    },
  };
}

/**
 * One role in this process (the throughput phase's `api` writer and `dispatcher` drainer). The
 * dispatcher connects to `events.db` as role `all`'s dispatcher thread does under `npm start`, which is
 * how the embedded store is run (docs/operations.md, "Production deployment and scaling"): it leaves checkpoints
 * to another thread (there the projector's, here `startCheckpointer`'s) instead of copying the WAL
 * into the file in its own commits, about one in 230 of them, for about 5.5 ms each.
 */
async function startPds(dir: string, role: 'api' | 'dispatcher') {
  const config = await loadConfig({ PDS_DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'warn' });
  const asThread = role === 'dispatcher';
  const checkpointer = asThread
    ? await startCheckpointer(config.eventStoreUrl.slice('sqlite:'.length))
    : undefined;
  const service = createService(config, {
    role,
    components: defaultComponents(undefined, createTimers()),
    eventStoreOptions: asThread
      ? eventStoreOptionsOf({ role: 'all', thread: 'dispatcher' }, true)
      : eventStoreOptionsOf({ role }, false),
    logger: createLogger('warn'),
  });
  const bound = await service.start();
  const base = `http://127.0.0.1:${bound}`;
  const { call, close } = caller(base, config.operatorToken);
  return {
    base,
    call,
    async stop() {
      await service.stop();
      await checkpointer?.stop();
      close();
    },
  };
}

type Pds = Awaited<ReturnType<typeof startPds>>;
type Call = Pds['call'];

/** The partner API's menu pages as paths, once all `STORE_MENU` menu products can be read with `key`. */
async function menuPages(base: string, key: string): Promise<string[]> {
  const first = `/partner/store/v1/menu_products?store_id=1&limit=${PAGE_LIMIT}`;
  for (let attempt = 0; attempt < 300; attempt++) {
    const paths = [first];
    let seen = 0;
    for (;;) {
      const res = await fetch(`${base}${paths.at(-1)}`, { headers: { authorization: `Bearer ${key}` } });
      if (res.status !== 200) break;
      const page = (await res.json()) as { menu_products: unknown[]; next_cursor?: string | null };
      seen += page.menu_products.length;
      if (typeof page.next_cursor !== 'string') break;
      paths.push(`${first}&cursor=${encodeURIComponent(page.next_cursor)}`);
    }
    if (seen >= STORE_MENU) return paths.slice(0, Math.ceil(STORE_MENU / PAGE_LIMIT));
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the partner API did not list the store's ${STORE_MENU} menu products`);
}

/**
 * The catalog (one store with `STORE_MENU` menu products), a webhook subscription to the receiver for
 * that store, and a store operator partner whose key pages through its menu.
 */
async function setUp(pds: Pds, receiver: Receiver) {
  const { call } = pds;
  await call('PUT', `${P}/brands/1`, { name: 'Brand One' });
  await call('PUT', `${P}/products/1`, {
    name: 'Blue Dream',
    brand_id: 1,
    kind: 'flower',
    lineage: 'hybrid',
  });
  await call('PUT', `${P}/stores/1`, {
    name: 'Store 1',
    address: '1 Market St',
    city: 'San Francisco',
    state: 'CA',
    zip: '94103',
    lat: 37.77,
    long: -122.41,
    pickup: true,
    delivery: true,
  });
  // Menu product 100 is the one carts take; the rest make a page of the menu real work.
  for (let i = 0; i < STORE_MENU; i += 16) {
    const ids = Array.from({ length: Math.min(16, STORE_MENU - i) }, (_, j) => 100 + i + j);
    await Promise.all(
      ids.map((id) =>
        call('PUT', `${P}/stores/1/menu_products/${id}`, {
          product_id: 1,
          prices: { gram: `${10 + (id % 50)}.00` },
        }),
      ),
    );
  }
  const hook = await call('POST', '/admin/v1/webhooks', {
    url: receiver.url,
    auth_token: 'bench',
    store_ids: [1],
  });
  // The highest rate limit a partner can have (100,000/min, a full bucket to start): the load stays under it.
  const partner = await call('POST', '/admin/v1/partners', {
    name: 'Bench store operator',
    kind: 'store_operator',
    store_ids: [1],
    rate_limit_per_minute: 100_000,
  });
  const partnerKey: string = partner.api_key;
  return { secret: hook.signing_secret as string, partnerKey, pages: await menuPages(pds.base, partnerKey) };
}

/** Carts checked out (their checkout webhooks delivered), ready for `MOVES`. */
async function checkedOutCarts(call: Call, receiver: Receiver, n: number): Promise<string[]> {
  const before = receiver.count();
  const uuids = Array.from({ length: n }, () => randomUUID());
  for (let i = 0; i < n; i += 16) {
    await Promise.all(
      uuids.slice(i, i + 16).map(async (uuid) => {
        await call('POST', `${P}/carts`, {
          uuid,
          store_id: 1,
          source: { channel: 'headless', partner_id: null },
        });
        await call('POST', `${P}/carts/${uuid}/items`, {
          menu_product_id: 100,
          price_id: 'gram',
          count: 1,
        });
        await call('POST', `${P}/carts/${uuid}/checkout`, { reservation_mode: 'pickup' });
      }),
    );
  }
  await receiver.waitFor(before + n);
  return uuids;
}

interface Repetition {
  changes_per_s_achieved: number;
  changes: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

/**
 * One latency repetition on fresh carts: `LATENCY_CHANGES` status changes at `RATE_PER_S`. `during`
 * starts a load once the carts are ready; the changes start once it runs warmed up (so they measure
 * the service under the load, not the load generator's own start-up on the same cores), and it is
 * stopped when every measured webhook has arrived.
 */
async function latencyRun(
  call: Call,
  receiver: Receiver,
  during?: () => { running: Promise<void>; stop(): Promise<Load> },
): Promise<{ figures: Repetition; load?: Load }> {
  const carts = await checkedOutCarts(call, receiver, Math.ceil(LATENCY_CHANGES / MOVES.length));
  const answered = new Map<string, number>();
  const held = during?.();
  let load: Load | undefined;
  let achievedRate: number;
  try {
    await held?.running;
    const start = performance.now();
    const inFlight: Promise<void>[] = [];
    let issued = 0;
    for (const move of MOVES) {
      for (const uuid of carts) {
        if (issued >= LATENCY_CHANGES) break;
        const due = start + (issued * 1000) / RATE_PER_S;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        issued += 1;
        const change = call('POST', `${P}/carts/${uuid}/status`, { status: move }).then(() => {
          answered.set(`${uuid}:${move}`, performance.now());
        });
        // Awaited below (a failure fails the run); handled now, so that a failure while this loop
        // waits is not an unhandled rejection ending the bench before its `finally` stops the load.
        change.catch(() => {});
        inFlight.push(change);
      }
      // The next move of a cart needs the previous one; a round of carts takes several seconds at 200/s.
      await Promise.all(inFlight);
    }
    await Promise.all(inFlight);
    achievedRate = issued / ((performance.now() - start) / 1000);
    for (let i = 0; i < 600 && [...answered.keys()].some((k) => !receiver.arrivals.has(k)); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    load = await held?.stop();
  }
  const latencies = [...answered]
    .map(([key, at]) => Math.max(0, (receiver.arrivals.get(key) ?? Number.NaN) - at))
    .filter((x) => !Number.isNaN(x))
    .sort((a, b) => a - b);
  const figures = {
    changes_per_s_achieved: round(achievedRate, 1),
    changes: latencies.length,
    p50_ms: round(percentile(latencies, 50)),
    p99_ms: round(percentile(latencies, 99)),
    max_ms: round(latencies.at(-1) ?? Number.NaN),
  };
  return { figures, load };
}

/**
 * A backlog of status changes written by an `api` process, drained by a `dispatcher` process on the
 * same data: deliveries/s from the first receipt to the last, and from the dispatcher's readiness to
 * the last receipt, with this thread's CPU time per delivery over the latter (the dispatcher's work and
 * the receiver's). Leaves the dispatcher in `pds.running`.
 */
async function drainBacklog(dir: string, receiver: Receiver, pds: { running: Pds }) {
  const call: Call = (method, url, body) => pds.running.call(method, url, body);
  const burstCarts = await checkedOutCarts(call, receiver, Math.ceil(BURST_CHANGES / MOVES.length));
  await pds.running.stop();
  pds.running = await startPds(dir, 'api');
  for (const move of MOVES) {
    for (let i = 0; i < burstCarts.length; i += 32) {
      await Promise.all(
        burstCarts
          .slice(i, i + 32)
          .map((uuid) => call('POST', `${P}/carts/${uuid}/status`, { status: move })),
      );
    }
  }
  await pds.running.stop();
  const total = burstCarts.length * MOVES.length;
  const before = receiver.count();
  pds.running = await startPds(dir, 'dispatcher');
  const ready = performance.now();
  const cpu = process.threadCpuUsage();
  await receiver.waitFor(before + total);
  const cpuUs = cpuSince(cpu);
  const drained = [...receiver.arrivals.values()].slice(-total);
  const last = Math.max(...drained);
  return {
    total,
    perS: (total - 1) / ((last - Math.min(...drained)) / 1000),
    perSFromReady: total / ((last - ready) / 1000),
    cpuUsPerDelivery: cpuUs / total,
  };
}

/** Min, median and max. */
export function spread(values: number[]): { min: number; median: number; max: number } {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  const median = s.length % 2 === 1 ? s[mid] : round((s[mid - 1] + s[mid]) / 2);
  return { min: s[0], median, max: s[s.length - 1] };
}

export async function benchWebhooks(): Promise<BenchLine[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-webhook-'));
  const receiver = await startReceiver();
  const served = await startServed(dir);
  const pds: { running: Pds } = { running: served };
  try {
    const call: Call = (method, url, body) => pds.running.call(method, url, body);
    const { secret, partnerKey, pages } = await setUp(pds.running, receiver);

    // ---- latency at 200 changes/s: three repetitions, then one with the partner API under load ----
    const runs: Repetition[] = [];
    for (let r = 0; r < REPETITIONS; r++) runs.push((await latencyRun(call, receiver)).figures);
    const base = pds.running.base;
    const loaded = await latencyRun(call, receiver, () =>
      startLoadElsewhere(
        base,
        {
          connections: PARTNER_CONNECTIONS,
          durationS: 600,
          headers: { authorization: `Bearer ${partnerKey}` },
          paths: pages,
        },
        LOAD_NICE,
      ),
    );
    const partner = loaded.load!;
    // The service process's peak resident memory over the latency phases (it is stopped next).
    const serviceRssPeakMb = rssPeakMbOf(served.pid);

    // ---- throughput: a backlog drained by a dispatcher process, against raw signed POSTs ----
    const burst = await drainBacklog(dir, receiver, pds);
    // The baselines post a body the dispatcher delivered (a cart's, as rendered for partners).
    const body = receiver.lastBody();
    const raw = await rawPosts(receiver, { secret, body, total: burst.total });
    const send = await sendOnly(receiver, { secret, body, total: burst.total });

    const p50 = spread(runs.map((r) => r.p50_ms));
    const p99 = spread(runs.map((r) => r.p99_ms));
    return [
      {
        name: 'webhook.e2e',
        changes_per_s_target: RATE_PER_S,
        repetitions: REPETITIONS,
        changes_per_s_achieved: Math.min(...runs.map((r) => r.changes_per_s_achieved)),
        changes: runs.reduce((n, r) => n + r.changes, 0),
        p50_ms: p50.median,
        p50_ms_min: p50.min,
        p50_ms_max: p50.max,
        p99_ms: p99.median,
        p99_ms_min: p99.min,
        p99_ms_max: p99.max,
        max_ms: Math.max(...runs.map((r) => r.max_ms)),
        runs,
        loaded_changes_per_s_achieved: loaded.figures.changes_per_s_achieved,
        loaded_changes: loaded.figures.changes,
        loaded_p50_ms: loaded.figures.p50_ms,
        loaded_p99_ms: loaded.figures.p99_ms,
        loaded_max_ms: loaded.figures.max_ms,
        partner_load: `GET /partner/store/v1/menu_products?store_id=1&limit=${PAGE_LIMIT} (${pages.length} pages of ${STORE_MENU} menu products), store operator key, autocannon in a child process of the bench`,
        partner_load_nice: LOAD_NICE,
        dispatcher_thread: DISPATCHER_THREAD !== '0',
        partner_connections: PARTNER_CONNECTIONS,
        partner_requests_per_s: partner.requests_per_s,
        partner_p50_ms: partner.p50_ms,
        partner_p99_ms: partner.p99_ms,
        partner_errors: partner.errors,
        partner_non_2xx: partner.non_2xx,
        service_rss_peak_mb: serviceRssPeakMb,
        backlog: burst.total,
        deliveries_per_s: round(burst.perS, 1),
        baseline: 'raw signed POST loop, same receiver, concurrency and body',
        body_bytes: Buffer.byteLength(body),
        baseline_per_s: round(raw.perS, 1),
        ratio: round(burst.perS / raw.perS, 3),
        deliveries_per_s_from_ready: round(burst.perSFromReady, 1),
        ratio_from_ready: round(burst.perSFromReady / raw.perS, 3),
        cpu_us_per_delivery: round(burst.cpuUsPerDelivery, 0),
        baseline_cpu_us_per_post: round(raw.cpuUsPerPost, 0),
        cpu_ratio: round(raw.cpuUsPerPost / burst.cpuUsPerDelivery, 3),
        send_only_per_s: round(send.perS, 1),
        send_only_cpu_us_per_post: round(send.cpuUsPerPost, 0),
        targets: { p99_ms: 50, ratio: 0.5 },
      },
    ];
  } finally {
    await pds.running.stop();
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  }
}
