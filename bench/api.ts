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
 * (`PDS_BENCH_DISPATCHER_THREAD=0`, `PDS_BENCH_PROJECTOR_THREAD=0`: on the API's thread). Each HTTP
 * figure comes from one autocannon run after a warm-up of a second (`WARM_UP_S`, excluded), in the
 * process that serves, as the baseline does: both share the same two cores with the load generator.
 * `rss_peak_mb` is that process's peak resident memory during the run (it also seeded the sandbox, so
 * it is an upper bound).
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import Koa from 'koa';
import { createTimers, defaultComponents, threadedComponents } from '../cli/components.ts';
import { createService } from '../cli/compose.ts';
import { loadConfig, type ResolvedConfig } from '../cli/config.ts';
import { createLogger } from '../cli/logger.ts';
import { roleThread } from '../cli/role-thread.ts';
import { seedSandbox } from '../cli/sandbox/seed.ts';
import { eventStoreOptionsOf } from '../cli/store-options.ts';
import * as menuProduct from '../domain/menu-product.ts';
import * as store from '../domain/store.ts';
import { type EventStoreOptions, openEventStore } from '../eventstore/index.ts';
import type { EventStore } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { toNewEvent } from './events.ts';
import type { BenchLine } from './eventstore.ts';
import { type Load, type LoadOptions, load as loadFor } from './load.ts';

const BIG_STORE = 9_001;
/** Overridable (with `PDS_BENCH_SANDBOX_SIZE`) to profile the HTTP path on less data. */
const BIG_STORE_MENU = Number(process.env.PDS_BENCH_BIG_MENU ?? 100_000);
const DURATION_S = Number(process.env.PDS_BENCH_HTTP_SECONDS ?? 6);
const CONNECTIONS = 32;

const round = (n: number, digits = 1) => Number(n.toFixed(digits));

/** Seconds of the same requests before each measured run: the JIT and the caches warm up first. */
const WARM_UP_S = 1;

/** A measured run and the requests of its warm-up (`warm_up_requests`, not in the figures). */
type WarmLoad = Load & { warm_up_requests: number };

/**
 * One autocannon run with this bench's connections and duration, after a warm-up of the same
 * requests; the run goes on in `paths` and `bodies` where the warm-up stopped.
 */
async function load(
  url: string,
  options: Omit<LoadOptions, 'connections' | 'durationS'> = {},
): Promise<WarmLoad> {
  const warmUp = await loadFor(url, { ...options, connections: CONNECTIONS, durationS: WARM_UP_S });
  const run = await loadFor(url, {
    ...options,
    connections: CONNECTIONS,
    durationS: DURATION_S,
    firstRequest: warmUp.requests,
  });
  return { ...run, warm_up_requests: warmUp.requests };
}

/** Listen on a free local port; the base URL and a close. */
async function listen(app: Koa): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => server.close(() => r(undefined))),
  };
}

/** The baseline: a bare Koa app answering constant JSON, in this process. */
function bareKoa(): Promise<{ url: string; close(): Promise<void> }> {
  const app = new Koa();
  const body = { menu_product: { id: 1, name: 'constant', prices: { gram: '10.00' } } };
  app.use((ctx) => {
    ctx.body = body;
  });
  return listen(app);
}

/** The raw `CartItemAdded` both `command.append` baselines append (no line snapshot, no decider). */
const rawItemAdded = (data: unknown, at: string) => toNewEvent({ type: 'CartItemAdded', data }, at);

/**
 * The bare route's store, connected as the service's API thread is (`cli/store-options.ts`): the same
 * group commit, and when the service's projector thread checkpoints `events.db`, a thread of the bench
 * checkpoints this file.
 */
async function bareStore(file: string, options: EventStoreOptions) {
  const es = await openSqliteEventStore(file, options);
  if (options.checkpoints !== 'elsewhere') return { es, close: () => es.close() };
  const checkpointer = new Worker(new URL('./checkpointer-thread.ts', import.meta.url), {
    workerData: { file },
  });
  await once(checkpointer, 'message');
  return {
    es,
    async close() {
      await es.close();
      checkpointer.postMessage('stop');
      await once(checkpointer, 'exit');
    },
  };
}

/**
 * `command.append`'s baseline: a bare Koa app with the platform route's path that parses the JSON body
 * and appends it as one raw `CartItemAdded` to `es` (no lookups, no decider, no expected revision),
 * in a stream named by `streamOf` from the path's cart uuid, answering 200 with the append's revision.
 */
async function bareAppendKoa(
  es: EventStore,
  streamOf: (cart: string) => string,
): Promise<{ url: string; close(): Promise<void> }> {
  const { default: bodyParser } = await import('@koa/bodyparser');
  const app = new Koa();
  const parse = bodyParser({ enableTypes: ['json'] });
  const route = /^\/platform\/v1\/carts\/([^/]+)\/items$/;
  app.use(async (ctx, next) => {
    const match = ctx.method === 'POST' ? route.exec(ctx.path) : null;
    if (!match) return next();
    await parse(ctx, async () => {});
    const { menu_product_id, price_id, count } = ctx.request.body as Record<string, unknown>;
    const at = new Date().toISOString();
    const written = await es.append(streamOf(match[1]), [
      rawItemAdded({ menu_product_id, price_id, count }, at),
    ]);
    ctx.body = { revision: written.nextExpectedRevision, position: written.position };
  });
  return listen(app);
}

/** `bareAppendKoa` over the load, closed after it. */
async function loadBareAppend(
  es: EventStore,
  streamOf: (cart: string) => string,
  request: Omit<LoadOptions, 'connections' | 'durationS'>,
): Promise<WarmLoad> {
  const bare = await bareAppendKoa(es, streamOf);
  try {
    return await load(bare.url, request);
  } finally {
    await bare.close();
  }
}

/** The sandbox (through the deciders), then a store with `BIG_STORE_MENU` menu products, straight into `events.db`. */
async function seed(dir: string, config: ResolvedConfig) {
  const es = await openSqliteEventStore(path.join(dir, 'events.db'));
  const seeded = await seedSandbox({
    store: es,
    secretKey: config.secretKey,
    abandonAfterMs: config.abandonAfterMs,
  });
  const at = new Date().toISOString();
  await es.append(store.streamId(BIG_STORE), [
    toNewEvent(
      store.events.StoreUpserted({
        store_id: BIG_STORE,
        name: 'Big Menu Store',
        display_name: null,
        store_url: null,
        address: '1 Broadway',
        city: 'Denver',
        state: 'CO',
        zip: '80203',
        lat: 39.72,
        long: -104.98,
        phone: null,
        time_zone: 'America/Denver',
        recreational: true,
        medical: false,
        pickup: true,
        delivery: false,
        curbside: false,
        working_hours: [],
        upserted_at: at,
      }),
      at,
    ),
  ]);
  const productIds = seeded.counts.products;
  for (let i = 1; i <= BIG_STORE_MENU; i++) {
    const productId = 1 + (i % productIds);
    const id = 5_000_000 + i;
    await es.append(menuProduct.streamId(id), [
      toNewEvent(
        menuProduct.events.MenuProductListed({
          menu_product_id: id,
          store_id: BIG_STORE,
          product_id: productId,
          brand_id: 1,
          prices: { gram: `${10 + (i % 50)}.00` },
          in_stock: true,
          listed_at: at,
        }),
        at,
      ),
    ]);
  }
  await es.close();
  return { seeded, at };
}

/** The service on the seeded data, caught up, with a key for the big store and the sandbox brand key. */
async function serve(config: ResolvedConfig, seeded: Awaited<ReturnType<typeof seed>>['seeded']) {
  const seededAt = performance.now();
  const storeOptions = eventStoreOptionsOf({ role: 'all' }, config.projectorThread);
  let eventStore: EventStore | undefined;
  const service = createService(config, {
    components:
      config.dispatcherThread || config.projectorThread
        ? threadedComponents({
            dispatcher: config.dispatcherThread
              ? roleThread('dispatcher', { projectorThread: config.projectorThread })
              : undefined,
            projector: config.projectorThread ? roleThread('projector') : undefined,
          })
        : defaultComponents(undefined, createTimers()),
    eventStoreOptions: storeOptions,
    // The service's own store, kept for `command.append`'s baseline route.
    openEventStore: async (url, options) => {
      eventStore = await openEventStore(url, options);
      return eventStore;
    },
    logger: createLogger('warn'),
  });
  const port = await service.start();
  const base = `http://127.0.0.1:${port}`;
  const operator = { authorization: `Bearer ${config.operatorToken}`, 'content-type': 'application/json' };
  const admin = async (method: string, url: string, body?: unknown) => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: operator,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text}`);
    return JSON.parse(text);
  };
  try {
    for (;;) {
      const { projections } = await admin('GET', '/admin/v1/projections');
      if (projections.every((p: { lag_events: number }) => p.lag_events === 0)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const caughtUpMs = performance.now() - seededAt;
    // The highest rate limit a partner can have (100,000/min): the runs stay under it.
    const storeKey = (
      await admin('POST', '/admin/v1/partners', {
        name: 'Bench store',
        kind: 'store_operator',
        store_ids: [BIG_STORE],
        rate_limit_per_minute: 100_000,
      })
    ).api_key as string;
    const brandPartner = seeded.partners.find((p) => p.kind === 'brand');
    if (!brandPartner?.api_key) throw new Error('the sandbox has no brand key');
    await admin('PATCH', `/admin/v1/partners/${brandPartner.partner_id}`, { rate_limit_per_minute: 100_000 });
    for (;;) {
      const res = await fetch(`${base}/partner/store/v1/menu_products?limit=1`, {
        headers: { authorization: `Bearer ${storeKey}` },
      });
      if (res.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return {
      base,
      operator,
      admin,
      caughtUpMs,
      storeKey,
      brandKey: brandPartner.api_key,
      /** How the API thread connects to its store: the fresh-file append route's store connects the same way. */
      storeOptions,
      /** The API thread's own store (the one its platform routes append to). */
      eventStore: eventStore as EventStore,
      stop: () => service.stop(),
    };
  } catch (e) {
    await service.stop();
    throw e;
  }
}

type Served = Awaited<ReturnType<typeof serve>>;

/** `api.menu_product`, `api.menu_products_page` and `api.products_radius` against `bare`. */
async function readBenches(
  served: Served,
  seeded: Awaited<ReturnType<typeof seed>>['seeded'],
  bare: Load,
): Promise<BenchLine[]> {
  const { base, storeKey, brandKey } = served;
  const lines: BenchLine[] = [];
  const one = await load(`${base}/partner/store/v1/menu_products/${5_000_000 + 4_242}`, {
    headers: { authorization: `Bearer ${storeKey}` },
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
  const page = await load(base, { headers: { authorization: `Bearer ${storeKey}` }, paths: pagePaths });
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
    headers: { authorization: `Bearer ${brandKey}` },
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

/** Menu products of the big store the additions take in turn (`5_000_001` on). */
const ADDED_MENU_PRODUCTS = 97;
/**
 * Carts of the main `command.append` run: each takes the next of the 97 menu products in turn, so at
 * the rates measured here a cart ends the run with fewer than ten lines (`lines_per_cart`), a
 * shopper's cart.
 */
const CARTS = 4_096;
/** Carts of the `growing_carts` run: about a hundred additions each, so most reach all 97 lines. */
const GROWING_CARTS = 256;

/** `count` empty carts at the big store, made through the platform API. */
async function newCarts(served: Served, count: number): Promise<string[]> {
  const carts: string[] = [];
  for (let i = 0; i < count; i++) {
    const uuid = randomUUID();
    await served.admin('POST', '/platform/v1/carts', {
      uuid,
      store_id: BIG_STORE,
      source: { channel: 'headless', partner_id: null },
    });
    carts.push(uuid);
  }
  return carts;
}

/** Item additions to `carts` in turn, each the next menu product in turn. */
const additionsTo = (served: Served, carts: string[]) => ({
  method: 'POST',
  headers: served.operator,
  paths: carts.map((c) => `/platform/v1/carts/${c}/items`),
  bodies: Array.from({ length: ADDED_MENU_PRODUCTS }, (_, i) =>
    JSON.stringify({ menu_product_id: 5_000_000 + 1 + i, price_id: 'gram', count: 1 }),
  ),
});

/**
 * `command.append`: item additions over HTTP to carts of a shopper's size, against a bare Koa route
 * appending the raw event to the service's store (same paths, bodies, connections and duration), and
 * raw appends in a loop. `growing_carts` repeats the additions on fewer carts that grow to 97 lines:
 * every answer is the whole cart (docs/write-side.md), so its cost grows with the cart.
 */
async function commandAppend(served: Served, dir: string, at: string): Promise<BenchLine> {
  const request = additionsTo(served, await newCarts(served, CARTS));
  const additions = await load(served.base, request);
  // The floor: the same HTTP, and one raw append to the service's own store (streams no projection
  // follows); and, for reference, the same route on a fresh file of its own.
  const bare = await loadBareAppend(served.eventStore, (cart) => `benchappend-${cart}`, request);
  const fresh = await bareStore(path.join(dir, 'bare-appends.db'), served.storeOptions);
  let freshFile: WarmLoad;
  try {
    freshFile = await loadBareAppend(fresh.es, (cart) => `cart-${cart}`, request);
  } finally {
    await fresh.close();
  }
  const growing = await load(served.base, additionsTo(served, await newCarts(served, GROWING_CARTS)));

  const rawStore = await openSqliteEventStore(path.join(dir, 'raw-appends.db'));
  const event = rawItemAdded({ menu_product_id: 1, price_id: 'gram', count: 1 }, at);
  const rawStart = performance.now();
  let raw = 0;
  while (performance.now() - rawStart < 2_000) {
    await rawStore.append(`cart-${raw % 256}`, [event]);
    raw += 1;
  }
  const rawPerS = raw / ((performance.now() - rawStart) / 1000);
  await rawStore.close();
  /** Lines a cart holds at the end of a run: one per addition, at most one per menu product. */
  const linesPerCart = (run: WarmLoad, carts: number) =>
    Math.min(ADDED_MENU_PRODUCTS, round((run.warm_up_requests + run.requests) / carts));
  return {
    name: 'command.append',
    ...additions,
    connections: CONNECTIONS,
    lines_per_cart: linesPerCart(additions, CARTS),
    baseline:
      "bare Koa POST route appending one raw CartItemAdded to the service's own event store, same process",
    baseline_requests_per_s: bare.requests_per_s,
    baseline_p50_ms: bare.p50_ms,
    baseline_p99_ms: bare.p99_ms,
    baseline_errors: bare.errors,
    baseline_non_2xx: bare.non_2xx,
    fresh_file_requests_per_s: freshFile.requests_per_s,
    fresh_file_p99_ms: freshFile.p99_ms,
    fresh_file_ratio: round(additions.requests_per_s / freshFile.requests_per_s, 3),
    growing_carts: {
      carts: GROWING_CARTS,
      lines_per_cart: linesPerCart(growing, GROWING_CARTS),
      requests_per_s: growing.requests_per_s,
      p50_ms: growing.p50_ms,
      p99_ms: growing.p99_ms,
      errors: growing.errors,
      non_2xx: growing.non_2xx,
      ratio: round(growing.requests_per_s / bare.requests_per_s, 3),
    },
    raw_appends_per_s: round(rawPerS),
    ratio: round(additions.requests_per_s / bare.requests_per_s, 3),
    targets: { ratio: 0.5 },
  };
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
