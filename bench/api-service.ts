/**
 * The service the `api` bench measures (bench/api.ts, bench/command-append.ts): the sandbox seeded
 * through the deciders plus one store with `BIG_STORE_MENU` menu products, served as `npm start` serves
 * it, and the autocannon runs (after a warm-up) both benches take against it and their baselines.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type Koa from 'koa';
import { createTimers, defaultComponents, threadedComponents } from '../cli/components.ts';
import { createService } from '../cli/compose.ts';
import type { ResolvedConfig } from '../cli/config.ts';
import { createLogger } from '../cli/logger.ts';
import { roleThread } from '../cli/role-thread.ts';
import { seedSandbox } from '../cli/sandbox/seed.ts';
import { eventStoreOptionsOf } from '../cli/store-options.ts';
import * as menuProduct from '../domain/menu-product.ts';
import * as store from '../domain/store.ts';
import { openEventStore } from '../eventstore/index.ts';
import type { EventStore } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { benchStore, toNewEvent } from './events.ts';
import { type Load, type LoadOptions, load as loadFor } from './load.ts';

export const BIG_STORE = 9_001;
/** Overridable (with `PDS_BENCH_BIG_MENU`) to profile the HTTP path on less data. */
export const BIG_STORE_MENU = Number(process.env.PDS_BENCH_BIG_MENU ?? 100_000);
export const DURATION_S = Number(process.env.PDS_BENCH_HTTP_SECONDS ?? 6);
export const CONNECTIONS = 32;

export const round = (n: number, digits = 1) => Number(n.toFixed(digits));

/** Seconds of the same requests before each measured run: the JIT and the caches warm up first. */
const WARM_UP_S = 1;

/** A measured run and the requests of its warm-up (`warm_up_requests`, not in the figures). */
export type WarmLoad = Load & { warm_up_requests: number };

/**
 * Partners of each kind the partner benches spread their requests over (`authorizations`): at most
 * 100,000 requests a minute each, and `api.menu_product` alone answered about 113,000 in its 7 s on a
 * fast machine, the last of them 429.
 */
export const PARTNER_KEYS = 8;

/**
 * One autocannon run with this bench's connections and duration, after a warm-up of the same
 * requests; the run goes on in `paths` and `bodies` where the warm-up stopped. Every answer must be a
 * 2xx: a run counting refusals (a rate limit, a bad request) measures the refusals.
 */
export async function load(
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
  const refused = warmUp.non_2xx + run.non_2xx;
  if (refused > 0) throw new Error(`${url}: ${refused} answers were not 2xx; the figures would be theirs`);
  return { ...run, warm_up_requests: warmUp.requests };
}

/** Listen on a free local port; the base URL and a close. */
export async function listen(app: Koa): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => server.close(() => r(undefined))),
  };
}

/** The sandbox (through the deciders), then a store with `menu` menu products, straight into `events.db`. */
export async function seed(dir: string, config: ResolvedConfig, menu = BIG_STORE_MENU) {
  // The fixture, not a measurement: written without a sync per commit (its 100,000 single appends
  // would otherwise take minutes under `synchronous=FULL`); the service then opens it as configured.
  const es = await openSqliteEventStore(path.join(dir, 'events.db'), { synchronous: 'normal' });
  const seeded = await seedSandbox({
    store: es,
    secretKey: config.secretKey,
    abandonAfterMs: config.abandonAfterMs,
  });
  const at = new Date().toISOString();
  await es.append(store.streamId(BIG_STORE), [toNewEvent(benchStore(BIG_STORE, 'Big Menu Store', at), at)]);
  const productIds = seeded.counts.products;
  for (let i = 1; i <= menu; i++) {
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
export async function serve(config: ResolvedConfig, seeded: Awaited<ReturnType<typeof seed>>['seeded']) {
  const seededAt = performance.now();
  const storeOptions = {
    ...eventStoreOptionsOf({ role: 'all' }, config.projectorThread),
    synchronous: config.eventStoreSync,
  };
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
    // Partners at the highest rate limit there is (100,000/min), PARTNER_KEYS of each kind: the runs
    // take their keys in turn and stay under it.
    const brandPartner = seeded.partners.find((p) => p.kind === 'brand');
    if (!brandPartner?.api_key) throw new Error('the sandbox has no brand key');
    await admin('PATCH', `/admin/v1/partners/${brandPartner.partner_id}`, { rate_limit_per_minute: 100_000 });
    const newKey = async (name: string, scope: object): Promise<string> =>
      (await admin('POST', '/admin/v1/partners', { name, ...scope, rate_limit_per_minute: 100_000 })).api_key;
    const storeKeys: string[] = [];
    const brandKeys = [brandPartner.api_key];
    for (let i = 1; i <= PARTNER_KEYS; i++) {
      storeKeys.push(await newKey(`Bench store ${i}`, { kind: 'store_operator', store_ids: [BIG_STORE] }));
      if (i < PARTNER_KEYS) {
        brandKeys.push(
          await newKey(`Bench brand ${i}`, { kind: 'brand', brand_ids: brandPartner.brand_ids }),
        );
      }
    }
    const storeKey = storeKeys[0];
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
      /** `Authorization` values of the store partners, and of the brand partners, to take in turn. */
      storeAuthorizations: storeKeys.map((key) => `Bearer ${key}`),
      brandAuthorizations: brandKeys.map((key) => `Bearer ${key}`),
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

export type Served = Awaited<ReturnType<typeof serve>>;
