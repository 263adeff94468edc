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
 *   lookup and the decider), against raw event-store appends/s of the same event in the same run.
 *
 * Each HTTP figure comes from one autocannon run (warm-up excluded) in the process that serves, as the
 * baseline does: both share the same two cores with the load generator. `rss_peak_mb` is that process's
 * peak resident memory during the run (it also seeded the sandbox, so it is an upper bound).
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import Koa from 'koa';
import { createTimers, defaultComponents } from '../cli/components.ts';
import { createService } from '../cli/compose.ts';
import { loadConfig } from '../cli/config.ts';
import { createLogger } from '../cli/logger.ts';
import { seedSandbox } from '../cli/sandbox/seed.ts';
import * as menuProduct from '../domain/menu-product.ts';
import * as store from '../domain/store.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { toNewEvent } from './events.ts';
import type { BenchLine } from './eventstore.ts';

const BIG_STORE = 9_001;
/** Overridable (with `PDS_BENCH_SANDBOX_SIZE`) to profile the HTTP path on less data. */
const BIG_STORE_MENU = Number(process.env.PDS_BENCH_BIG_MENU ?? 100_000);
const DURATION_S = Number(process.env.PDS_BENCH_HTTP_SECONDS ?? 6);
const CONNECTIONS = 32;

const round = (n: number, digits = 1) => Number(n.toFixed(digits));

interface Load {
  rss_peak_mb: number;
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
  errors: number;
  non_2xx: number;
}

async function load(
  url: string,
  options: { headers?: Record<string, string>; paths?: string[]; method?: string; bodies?: string[] } = {},
): Promise<Load> {
  let i = 0;
  const next = () => i++;
  // Peak resident memory of this process (the service and the load generator) while the load runs.
  let rssPeak = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
  }, 100);
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: DURATION_S,
    headers: options.headers,
    method: (options.method ?? 'GET') as 'GET',
    requests: options.paths
      ? [
          {
            setupRequest(req) {
              const n = next();
              const pathOf = options.paths as string[];
              return {
                ...req,
                path: pathOf[n % pathOf.length],
                ...(options.bodies ? { body: options.bodies[n % options.bodies.length] } : {}),
              };
            },
          },
        ]
      : undefined,
  });
  clearInterval(sampler);
  return {
    rss_peak_mb: Math.round(rssPeak / 2 ** 20),
    requests_per_s: round(result.requests.average),
    p50_ms: result.latency.p50,
    p99_ms: result.latency.p99,
    errors: result.errors + result.timeouts,
    non_2xx: result.non2xx,
  };
}

/** The baseline: a bare Koa app answering constant JSON, in this process. */
async function bareKoa(): Promise<{ url: string; close(): Promise<void> }> {
  const app = new Koa();
  const body = { menu_product: { id: 1, name: 'constant', prices: { gram: '10.00' } } };
  app.use((ctx) => {
    ctx.body = body;
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => server.close(() => r(undefined))),
  };
}

export async function benchApi(): Promise<BenchLine[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-api-'));
  const config = await loadConfig({ PDS_DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'warn', PDS_SANDBOX: '0' });
  const lines: BenchLine[] = [];
  try {
    // ---- data: the sandbox, then a store with 100,000 menu products of sandbox products ----
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

    const seededAt = performance.now();
    // ---- the service, caught up ----
    const service = createService(config, {
      components: defaultComponents(undefined, createTimers()),
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
    const brandKey = brandPartner.api_key;
    for (;;) {
      const res = await fetch(`${base}/partner/store/v1/menu_products?limit=1`, {
        headers: { authorization: `Bearer ${storeKey}` },
      });
      if (res.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const baseline = await bareKoa();
    try {
      const bare = await load(baseline.url);
      const one = await load(`${base}/partner/store/v1/menu_products/${5_000_000 + 4_242}`, {
        headers: { authorization: `Bearer ${storeKey}` },
      });
      lines.push({
        name: 'api.menu_product',
        ...one,
        events: seeded.events_written + BIG_STORE_MENU + 1,
        start_and_catch_up_ms: Math.round(caughtUpMs),
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

      // ---- command.append: item additions over HTTP vs raw appends ----
      const carts: string[] = [];
      for (let i = 0; i < 256; i++) {
        const uuid = randomUUID();
        await admin('POST', '/platform/v1/carts', {
          uuid,
          store_id: BIG_STORE,
          source: { channel: 'headless', partner_id: null },
        });
        carts.push(uuid);
      }
      const additions = await load(base, {
        method: 'POST',
        headers: operator,
        paths: carts.map((c) => `/platform/v1/carts/${c}/items`),
        bodies: Array.from({ length: 97 }, (_, i) =>
          JSON.stringify({ menu_product_id: 5_000_000 + 1 + i, price_id: 'gram', count: 1 }),
        ),
      });
      const rawStore = await openSqliteEventStore(path.join(dir, 'raw-appends.db'));
      const event = toNewEvent(
        { type: 'CartItemAdded', data: { menu_product_id: 1, price_id: 'gram', count: 1 } },
        at,
      );
      const rawStart = performance.now();
      let raw = 0;
      while (performance.now() - rawStart < 2_000) {
        await rawStore.append(`cart-${raw % 256}`, [event]);
        raw += 1;
      }
      const rawPerS = raw / ((performance.now() - rawStart) / 1000);
      await rawStore.close();
      lines.push({
        name: 'command.append',
        ...additions,
        connections: CONNECTIONS,
        baseline: 'raw event store appends of one CartItemAdded, same run',
        baseline_appends_per_s: round(rawPerS),
        ratio: round(additions.requests_per_s / rawPerS, 3),
        targets: { ratio: 0.5 },
      });
    } finally {
      await baseline.close();
      await service.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return lines;
}
