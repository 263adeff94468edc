/**
 * `command.append` (bench/api.ts has the whole list): item additions over HTTP against a bare Koa route
 * appending the raw event to the service's own store, and raw appends in a loop.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import Koa from 'koa';
import type { EventStoreOptions } from '../eventstore/index.ts';
import type { EventStore } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { BIG_STORE, CONNECTIONS, listen, load, round, type Served, type WarmLoad } from './api-service.ts';
import { startCheckpointer } from './checkpointer.ts';
import { toNewEvent } from './events.ts';
import type { BenchLine } from './eventstore.ts';
import type { LoadOptions } from './load.ts';

/** The raw `CartItemAdded` both `command.append` baselines append (no line snapshot, no decider). */
const rawItemAdded = (data: unknown, at: string) => toNewEvent({ type: 'CartItemAdded', data }, at);

/**
 * The bare route's store, connected as the service's API thread is (`cli/store-options.ts`): the same
 * group commit, and when the service's projector thread checkpoints `events.db`, a thread of the bench
 * checkpoints this file.
 */
async function bareStore(file: string, options: EventStoreOptions) {
  const es = await openSqliteEventStore(file, options);
  const checkpointer = options.checkpoints === 'elsewhere' ? await startCheckpointer(file) : undefined;
  return {
    es,
    async close() {
      await es.close();
      await checkpointer?.stop();
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
export async function commandAppend(served: Served, dir: string, at: string): Promise<BenchLine> {
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

  const rawStore = await openSqliteEventStore(path.join(dir, 'raw-appends.db'), {
    synchronous: served.storeOptions.synchronous,
  });
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
    event_store_sync: served.storeOptions.synchronous,
    ratio: round(additions.requests_per_s / bare.requests_per_s, 3),
    targets: { ratio: 0.5 },
  };
}
