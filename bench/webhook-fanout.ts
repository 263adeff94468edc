/**
 * `webhook.fanout`: many subscriptions covering every store, status changes at a fixed rate
 * (docs/benchmarks.md, "Webhook fan-out").
 *
 * - Each run starts the service as `npm start` does, in a child process (the dispatcher on its thread;
 *   `PDS_BENCH_DISPATCHER_THREAD=0` runs it on the API's thread), on a fresh data dir: `STORES` stores,
 *   carts checked out in them, then `SUBSCRIPTIONS` webhook subscriptions to a receiver on this
 *   process's main thread, each covering every store (created after the checkouts: a subscription gets
 *   only the events after it, docs/webhooks.md, "Events and bodies"). Then `RATE` status changes a
 *   second for `SECONDS` (each cart along its pickup path, round the carts), every change owing one
 *   webhook to each subscription.
 * - Figures of a run: `deliveries_per_s`, distinct webhook ids received over the time from the first to
 *   the last; `drain_s`, from the last change's answer to the last delivery; `behind_at_end`, the
 *   webhooks owed and not yet received when the changes stopped; `service_rss_peak_mb`, the service
 *   process's VmHWM; p50/p99 from a change's answer to each of its deliveries (0 when a webhook came
 *   first). Three runs (`RUNS`), min / median / max of each.
 * - Baseline, after each run's service stopped: the raw signed-POST loop (bench/webhook-baselines.ts),
 *   same receiver and body, `RAW_POSTS` POSTs on fresh connections, with the dispatcher's concurrency:
 *   the most connections the receiver had open at once during the run (`concurrency`; the
 *   dispatcher's own limit is 8 per subscription, 3,200 at once).
 * - `webhook.fanout.receiver_down`: one run as above with a receiver that answers every POST 503 (no
 *   `Retry-After`: every attempt fails and is retried on the schedule). The service's resident memory
 *   when the changes start, when they stop, and once the fan-out has scheduled every change's webhooks,
 *   with the deliveries then pending (`pds_webhook_deliveries_pending`).
 *
 * For profiling: `PDS_BENCH_FANOUT_NODE_OPTIONS` is the service's `NODE_OPTIONS` (e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` or `--heapsnapshot-signal=SIGUSR2`), and
 * `PDS_BENCH_FANOUT_PEAK_SIGNAL` (e.g. `SIGUSR2`) is sent to the service when the changes stop, where
 * the backlog is largest.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BenchLine } from './eventstore.ts';
import { rssMbOf, rssPeakMbOf, serve } from './serve.ts';
import { caller, percentile, round, spread } from './webhook.ts';
import { rawPosts } from './webhook-baselines.ts';
import { type Receiver, startReceiver } from './webhook-receiver.ts';

const P = '/platform/v1';
const env = process.env;
const SUBSCRIPTIONS = Number(env.PDS_BENCH_FANOUT_SUBSCRIPTIONS ?? 400);
/** Status changes a second, and for how long. */
const RATE = Number(env.PDS_BENCH_FANOUT_RATE ?? 4);
const SECONDS = Number(env.PDS_BENCH_FANOUT_SECONDS ?? 60);
const STORES = Number(env.PDS_BENCH_FANOUT_STORES ?? 50);
const RUNS = Number(env.PDS_BENCH_FANOUT_RUNS ?? 3);
/** `0` leaves out the receiver-down run. */
const RECEIVER_DOWN = env.PDS_BENCH_FANOUT_RECEIVER_DOWN !== '0';
const RAW_POSTS = Number(env.PDS_BENCH_FANOUT_RAW_POSTS ?? 20_000);
const NODE_OPTIONS = env.PDS_BENCH_FANOUT_NODE_OPTIONS;
const PEAK_SIGNAL = env.PDS_BENCH_FANOUT_PEAK_SIGNAL as NodeJS.Signals | undefined;
const DISPATCHER_THREAD = env.PDS_BENCH_DISPATCHER_THREAD ?? '1';
/** How long a drain (or the down run's fan-out) may take before the run fails. */
const DRAIN_TIMEOUT_MS = Number(env.PDS_BENCH_FANOUT_DRAIN_TIMEOUT_S ?? 900) * 1000;
const MOVES = ['preparing', 'ready_for_pickup', 'finished'];
const CHANGES = Math.round(RATE * SECONDS);

type Call = ReturnType<typeof caller>['call'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `done` every 100 ms until it holds; throws what `what()` says then after `DRAIN_TIMEOUT_MS`. */
async function until(done: () => boolean | Promise<boolean>, what: () => string): Promise<void> {
  const deadline = performance.now() + DRAIN_TIMEOUT_MS;
  while (!(await done())) {
    if (performance.now() > deadline) throw new Error(`webhook.fanout: ${what()}`);
    await sleep(100);
  }
}

/** `n` calls of `one`, 16 at a time. */
async function inBatches(n: number, one: (i: number) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < n; i += 16) {
    await Promise.all(Array.from({ length: Math.min(16, n - i) }, (_, j) => one(i + j)));
  }
}

/** The catalog, the carts checked out (no subscription yet), then the subscriptions. */
async function setUp(call: Call, receiverUrl: string): Promise<{ carts: string[]; secret: string }> {
  await call('PUT', `${P}/brands/1`, { name: 'Brand One' });
  await call('PUT', `${P}/products/1`, {
    name: 'Blue Dream',
    brand_id: 1,
    kind: 'flower',
    lineage: 'hybrid',
  });
  await inBatches(STORES, async (i) => {
    const id = i + 1;
    await call('PUT', `${P}/stores/${id}`, {
      name: `Store ${id}`,
      address: `${id} Market St`,
      city: 'San Francisco',
      state: 'CA',
      zip: '94103',
      lat: 37.77,
      long: -122.41,
      pickup: true,
      delivery: true,
    });
    await call('PUT', `${P}/stores/${id}/menu_products/${1000 + id}`, {
      product_id: 1,
      prices: { gram: '12.00' },
    });
  });
  const carts = Array.from({ length: Math.ceil(CHANGES / MOVES.length) }, () => randomUUID());
  await inBatches(carts.length, async (i) => {
    const storeId = (i % STORES) + 1;
    await call('POST', `${P}/carts`, {
      uuid: carts[i],
      store_id: storeId,
      source: { channel: 'headless', partner_id: null },
    });
    const item = { menu_product_id: 1000 + storeId, price_id: 'gram', count: 1 };
    // The write side's lookups follow the catalog just written, in the background.
    for (let tries = 0; ; tries++) {
      const added = await call('POST', `${P}/carts/${carts[i]}/items`, item).catch((err: Error) => err);
      if (!(added instanceof Error)) break;
      if (tries >= 100) throw added;
      await sleep(50);
    }
    await call('POST', `${P}/carts/${carts[i]}/checkout`, { reservation_mode: 'pickup' });
  });
  const storeIds = Array.from({ length: STORES }, (_, i) => i + 1);
  let secret = '';
  await inBatches(SUBSCRIPTIONS, async () => {
    const hook = await call('POST', '/admin/v1/webhooks', {
      url: receiverUrl,
      auth_token: 'bench',
      store_ids: storeIds,
    });
    secret = hook.signing_secret;
  });
  return { carts, secret };
}

/**
 * `CHANGES` status changes at `RATE` a second, round the carts (a cart's next move waits for the
 * answer to its previous one): when each was answered, and when the first was sent and the last answered.
 */
async function issueChanges(call: Call, carts: string[]) {
  const answered = new Map<string, number>();
  const previous = new Map<string, Promise<void>>();
  const start = performance.now();
  for (let k = 0; k < CHANGES; k++) {
    const wait = start + (k * 1000) / RATE - performance.now();
    if (wait > 0) await sleep(wait);
    const uuid = carts[k % carts.length];
    const status = MOVES[Math.floor(k / carts.length)];
    const change = (previous.get(uuid) ?? Promise.resolve()).then(async () => {
      await call('POST', `${P}/carts/${uuid}/status`, { status });
      answered.set(`${uuid}:${status}`, performance.now());
    });
    change.catch(() => {}); // awaited below: a failure fails the run
    previous.set(uuid, change);
  }
  await Promise.all(previous.values());
  const end = Math.max(...answered.values());
  return { answered, start, end, perS: CHANGES / ((end - start) / 1000) };
}

/** A metric's value in the service's `/metrics`. */
async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
}

/** Whether the fan-out has handled every cart event written (`GET /admin/v1/webhook-fan-out`). */
async function fanOutCaughtUp(call: Call): Promise<boolean> {
  const { fan_out } = await call('GET', '/admin/v1/webhook-fan-out');
  return fan_out.oldest_pending === null;
}

/** The service on a fresh data dir with a receiver answering `answer`, set up, with `run` in between. */
async function withService<T>(
  answer: number,
  run: (s: {
    pid: number;
    base: string;
    call: Call;
    receiver: Receiver;
    deliveries: Array<{ key: string; at: number; id: string }>;
    carts: string[];
    secret: string;
    stop(): Promise<void>;
  }) => Promise<T>,
): Promise<T> {
  const deliveries: Array<{ key: string; at: number; id: string }> = [];
  const receiver = await startReceiver({
    answer,
    onArrival: (key, at, id) => deliveries.push({ key, at, id }),
  });
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-fanout-'));
  const served = await serve(dir, {
    PDS_DISPATCHER_THREAD: DISPATCHER_THREAD,
    ...(NODE_OPTIONS !== undefined && { NODE_OPTIONS }),
  });
  const { call, close } = caller(served.base, readFileSync(path.join(dir, 'operator-token'), 'utf8').trim());
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await served.stop('SIGTERM');
    close();
  };
  try {
    const { carts, secret } = await setUp(call, receiver.url);
    return await run({ pid: served.pid, base: served.base, call, receiver, deliveries, carts, secret, stop });
  } finally {
    await stop();
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  }
}

interface Run {
  changes_per_s_achieved: number;
  deliveries: number;
  duplicates: number;
  deliveries_per_s: number;
  behind_at_end: number;
  drain_s: number;
  /** The most connections the receiver had open at once: the baseline's concurrency. */
  concurrency: number;
  service_rss_start_mb: number;
  service_rss_peak_mb: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  baseline_per_s: number;
  ratio: number;
}

/** One run with a receiver that answers 200, and its baseline once the service has stopped. */
function fanOutRun(): Promise<Run> {
  return withService(200, async ({ pid, call, receiver, deliveries, carts, secret, stop }) => {
    const rssStart = rssMbOf(pid);
    receiver.resetOpenPeak();
    const changes = await issueChanges(call, carts);
    if (PEAK_SIGNAL) process.kill(pid, PEAK_SIGNAL);
    const owed = CHANGES * SUBSCRIPTIONS;
    const behind = owed - new Set(deliveries.filter((d) => d.at <= changes.end).map((d) => d.id)).size;
    const ids = new Set<string>();
    let seen = 0;
    await until(
      () => {
        for (; seen < deliveries.length; seen++) ids.add(deliveries[seen].id);
        return ids.size >= owed;
      },
      () => `${ids.size} of ${owed} webhooks delivered when the drain's limit ran out`,
    );
    const rssPeak = rssPeakMbOf(pid);
    const concurrency = receiver.openPeak();
    await stop();
    const delivered = deliveries.slice();
    const first = delivered[0].at;
    const last = delivered.at(-1)!.at;
    const latencies = delivered
      .map((d) => Math.max(0, d.at - (changes.answered.get(d.key) ?? Number.NaN)))
      .filter((x) => !Number.isNaN(x))
      .sort((a, b) => a - b);
    const perS = (ids.size - 1) / ((last - first) / 1000);
    const raw = await rawPosts(receiver, {
      secret,
      body: receiver.lastBody(),
      total: RAW_POSTS,
      concurrency,
    });
    return {
      changes_per_s_achieved: round(changes.perS, 2),
      deliveries: ids.size,
      duplicates: delivered.length - ids.size,
      deliveries_per_s: round(perS, 1),
      behind_at_end: behind,
      drain_s: round(Math.max(0, last - changes.end) / 1000, 1),
      concurrency,
      service_rss_start_mb: rssStart,
      service_rss_peak_mb: rssPeak,
      p50_ms: round(percentile(latencies, 50)),
      p99_ms: round(percentile(latencies, 99)),
      max_ms: round(latencies.at(-1) ?? Number.NaN),
      baseline_per_s: round(raw.perS, 1),
      ratio: round(perS / raw.perS, 3),
    };
  });
}

/** The run with a receiver that is down: the service's memory as the undeliverable webhooks pile up. */
function receiverDownRun() {
  return withService(503, async ({ pid, base, call, receiver, carts }) => {
    const rssStart = rssMbOf(pid);
    const changes = await issueChanges(call, carts);
    const rssChangesEnd = rssMbOf(pid);
    const caughtUpFrom = performance.now();
    await until(
      () => fanOutCaughtUp(call),
      () => 'the fan-out did not catch up',
    );
    return {
      changes_per_s_achieved: round(changes.perS, 2),
      owed: CHANGES * SUBSCRIPTIONS,
      fan_out_caught_up_after_s: round((performance.now() - caughtUpFrom) / 1000, 1),
      deliveries_pending: await metric(base, 'pds_webhook_deliveries_pending'),
      attempts_refused: receiver.count(),
      service_rss_start_mb: rssStart,
      service_rss_changes_end_mb: rssChangesEnd,
      service_rss_end_mb: rssMbOf(pid),
      service_rss_peak_mb: rssPeakMbOf(pid),
    };
  });
}

export async function benchWebhookFanOut(): Promise<BenchLine[]> {
  const runs: Run[] = [];
  for (let r = 0; r < RUNS; r++) {
    runs.push(await fanOutRun());
    // A run takes minutes: each is told as it ends, in case a later one fails.
    console.error(`webhook.fanout run ${r + 1} of ${RUNS}: ${JSON.stringify(runs.at(-1))}`);
  }
  const of = (k: keyof Run) => spread(runs.map((run) => run[k]));
  const setup = {
    subscriptions: SUBSCRIPTIONS,
    stores: STORES,
    changes_per_s_target: RATE,
    seconds: SECONDS,
    changes: CHANGES,
    offered_deliveries_per_s: RATE * SUBSCRIPTIONS,
    dispatcher_thread: DISPATCHER_THREAD !== '0',
  };
  const lines: BenchLine[] = [
    {
      name: 'webhook.fanout',
      ...setup,
      repetitions: RUNS,
      deliveries_per_s: of('deliveries_per_s'),
      drain_s: of('drain_s'),
      behind_at_end: of('behind_at_end'),
      service_rss_peak_mb: of('service_rss_peak_mb'),
      p50_ms: of('p50_ms'),
      p99_ms: of('p99_ms'),
      concurrency: of('concurrency'),
      baseline: `raw signed-POST loop, same receiver and body, as many at once as the receiver had connections open during the run, ${RAW_POSTS} POSTs`,
      baseline_per_s: of('baseline_per_s'),
      ratio: of('ratio'),
      runs,
      targets: { service_rss_peak_mb: 400, ratio: 0.5 },
    },
  ];
  if (RECEIVER_DOWN)
    lines.push({ name: 'webhook.fanout.receiver_down', ...setup, ...(await receiverDownRun()) });
  return lines;
}
