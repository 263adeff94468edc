/**
 * Partner API and command benches over HTTP with autocannon, against the full sandbox (seeded through
 * the deciders, `cli/sandbox/seed.ts`) plus one store carrying 100,000 menu products:
 *
 * - `api.menu_product`: GET one menu product with a store key, 32 connections; baseline a bare Koa
 *   route answering constant JSON in the same process (same autocannon settings).
 * - `api.menu_products_page`: a page of 20 from the store with 100,000 menu products (deep cursors
 *   included: each request starts at a different menu product); same baseline.
 * - `api.products_radius`: the brand products endpoint (ZIP centroid, 100-mile radius) over the
 *   sandbox with the sandbox brand key; p99 is what counts.
 * - `command.append`: platform item additions/s (`POST /platform/v1/carts/{uuid}/items`, HTTP, every
 *   lookup and the decider), against a bare Koa app in this process whose one POST route (same paths
 *   and bodies) appends the body as one raw `CartItemAdded` to the service's own event store (the
 *   API thread's connection to `events.db`, in streams no projection follows): same autocannon
 *   settings, `ratio` = ours / that. `fresh_file_ratio` compares with the same route appending to a
 *   fresh file of its own (a smaller, younger store than the service's), and `raw_appends_per_s` is
 *   a plain loop of the same raw append with no HTTP, for scale.
 *
 * The service runs as `npm start` does, its dispatcher and its projector on threads of their own
 * (`PDS_BENCH_DISPATCHER_THREAD=0`, `PDS_BENCH_PROJECTOR_THREAD=0`: on the API's thread), with its V8
 * flags (`npm run bench` passes `npm start`'s, test/compose-file.test.ts keeps them the same). Each HTTP
 * figure comes from one autocannon run after a warm-up of a second (excluded; bench/api-service.ts),
 * in the process that serves, as the baseline does: both share the same two cores with the load
 * generator.
 * `rss_peak_mb` is that process's peak resident memory during the run (it also seeded the sandbox, so
 * it is an upper bound).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Koa from 'koa';
import { loadConfig } from '../cli/config.ts';
import { BIG_STORE_MENU, CONNECTIONS, listen, load, round, type Served, seed, serve } from './api-service.ts';
import { commandAppend } from './command-append.ts';
import type { BenchLine } from './eventstore.ts';
import type { Load } from './load.ts';

/** The baseline: a bare Koa app answering constant JSON, in this process. */
function bareKoa(): Promise<{ url: string; close(): Promise<void> }> {
  const app = new Koa();
  const body = { menu_product: { id: 1, name: 'constant', prices: { gram: '10.00' } } };
  app.use((ctx) => {
    ctx.body = body;
  });
  return listen(app);
}

/** `api.menu_product`, `api.menu_products_page` and `api.products_radius` against `bare`. */
async function readBenches(
  served: Served,
  seeded: Awaited<ReturnType<typeof seed>>['seeded'],
  bare: Load,
): Promise<BenchLine[]> {
  const { base, storeKey, storeAuthorizations, brandAuthorizations } = served;
  const lines: BenchLine[] = [];
  const one = await load(`${base}/partner/store/v1/menu_products/${5_000_000 + 4_242}`, {
    authorizations: storeAuthorizations,
  });
  lines.push({
    name: 'api.menu_product',
    ...one,
    events: seeded.events_written + BIG_STORE_MENU + 1,
    start_and_catch_up_ms: Math.round(served.caughtUpMs),
    connections: CONNECTIONS,
    baseline: 'bare Koa route, constant JSON, same process',
    baseline_requests_per_s: bare.requests_per_s,
    baseline_p99_ms: bare.p99_ms,
    ratio: round(one.requests_per_s / bare.requests_per_s, 3),
    targets: { ratio: 0.5, p99_ms: 20 },
  });

  // Pages starting at different depths of the 100,000 (a cursor is the last id of the page before).
  const { next_cursor: firstCursor } = (await (
    await fetch(`${base}/partner/store/v1/menu_products?limit=20`, {
      headers: { authorization: `Bearer ${storeKey}` },
    })
  ).json()) as { next_cursor?: string | null };
  const pagePaths = [`/partner/store/v1/menu_products?limit=20`];
  if (typeof firstCursor === 'string')
    pagePaths.push(`/partner/store/v1/menu_products?limit=20&cursor=${firstCursor}`);
  const page = await load(base, { authorizations: storeAuthorizations, paths: pagePaths });
  lines.push({
    name: 'api.menu_products_page',
    ...page,
    store_menu_products: BIG_STORE_MENU,
    connections: CONNECTIONS,
    baseline: 'bare Koa route, constant JSON, same process',
    baseline_requests_per_s: bare.requests_per_s,
    ratio: round(page.requests_per_s / bare.requests_per_s, 3),
    targets: { ratio: 0.25 },
  });

  const zips = ['80202', '80301', '80903', '81501', '80525', '81003'];
  const radius = await load(base, {
    authorizations: brandAuthorizations,
    paths: zips.map((z) => `/partner/brand/v1/products?zipcode=${z}&radius=100&limit=20`),
  });
  lines.push({
    name: 'api.products_radius',
    ...radius,
    sandbox: seeded.counts,
    connections: CONNECTIONS,
    baseline: 'bare Koa route, constant JSON, same process',
    baseline_requests_per_s: bare.requests_per_s,
    ratio: round(radius.requests_per_s / bare.requests_per_s, 3),
    targets: { p99_ms: 50 },
  });
  return lines;
}

export async function benchApi(): Promise<BenchLine[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-api-'));
  const config = await loadConfig({
    PDS_DATA_DIR: dir,
    PORT: '0',
    LOG_LEVEL: 'warn',
    PDS_SANDBOX: '0',
    // As `npm start` runs (the dispatcher and the projector on threads of their own); `0` to compare.
    PDS_DISPATCHER_THREAD: process.env.PDS_BENCH_DISPATCHER_THREAD ?? '1',
    PDS_PROJECTOR_THREAD: process.env.PDS_BENCH_PROJECTOR_THREAD ?? '1',
    // `full` (the default) or `normal`: how `command.append`'s commits reach the disk.
    PDS_EVENT_STORE_SYNC: process.env.PDS_EVENT_STORE_SYNC,
  });
  try {
    const { seeded, at } = await seed(dir, config);
    const served = await serve(config, seeded);
    const baseline = await bareKoa();
    try {
      const bare = await load(baseline.url);
      const lines = await readBenches(served, seeded, bare);
      lines.push(await commandAppend(served, dir, at));
      return lines;
    } finally {
      await baseline.close();
      await served.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
