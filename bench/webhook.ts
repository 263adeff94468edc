/**
 * `webhook.e2e`: the whole webhook path of a real service (embedded store, every component in one
 * process) to a local receiver in the same process.
 *
 * - Latency: status changes issued at a steady 200/s (each cart moved along its pickup path), from
 *   the moment the status command's HTTP answer arrives to the moment the receiver has the webhook's
 *   body; p50/p99 in milliseconds. (A webhook can arrive before the answer does; that counts as 0.)
 * - Throughput: a backlog of status changes is written by an `api` process (no dispatcher); then a
 *   `dispatcher` process starts on the same data and drains it (fan-out from the persistent
 *   subscription, scheduling, signing, sending, recording): deliveries/s from its first receipt to its
 *   last, against a raw loop that signs and POSTs the same number of bodies to the same receiver with
 *   the same concurrency (the dispatcher's per-subscription limit) and the same connection policy (a
 *   fresh connection per request, as the dispatcher uses).
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import got from 'got';
import { createTimers, defaultComponents } from '../cli/components.ts';
import { createService, type Role } from '../cli/compose.ts';
import { loadConfig } from '../cli/config.ts';
import { createLogger } from '../cli/logger.ts';
import { webhookHeaders } from '../webhooks/signing.ts';
import type { BenchLine } from './eventstore.ts';

const P = '/platform/v1';
const RATE_PER_S = 200;
/** Overridable for profiling one phase (e.g. `PDS_BENCH_BURST_CHANGES=3 node --cpu-prof bench/run.ts webhook`). */
const LATENCY_CHANGES = Number(process.env.PDS_BENCH_LATENCY_CHANGES ?? 2_000);
const BURST_CHANGES = Number(process.env.PDS_BENCH_BURST_CHANGES ?? 1_500);
/** The dispatcher's default per-subscription concurrency (dispatcher/delivery-worker.ts). */
const CONCURRENCY = 8;
const MOVES = ['preparing', 'ready_for_pickup', 'finished'];

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
const round = (n: number, digits = 2) => Number(n.toFixed(digits));

/** A receiver that notes when each (cart, status) body arrived. */
async function startReceiver() {
  const arrivals = new Map<string, number>();
  let count = 0;
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const key = body.cart?.uuid ? `${body.cart.uuid}:${body.cart.status}` : `raw:${count}`;
      if (!arrivals.has(key)) arrivals.set(key, at);
      count += 1;
      for (const w of [...waiters]) if (count >= w.n) w.resolve();
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return {
    url,
    arrivals,
    count: () => count,
    waitFor(n: number, timeoutMs = 120_000): Promise<void> {
      if (count >= n) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver got ${count} of ${n}`)), timeoutMs);
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function startPds(dir: string, role: Role, port = 0) {
  const config = await loadConfig({ PDS_DATA_DIR: dir, PORT: String(port), LOG_LEVEL: 'warn' });
  const service = createService(config, {
    role,
    components: defaultComponents(undefined, createTimers()),
    logger: createLogger('warn'),
  });
  const bound = await service.start();
  const base = `http://127.0.0.1:${bound}`;
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const call = async (method: string, url: string, body?: unknown) => {
    const res = await got(`${base}${url}`, {
      method: method as 'POST',
      json: body,
      headers: { authorization: `Bearer ${config.operatorToken}` },
      agent: { http: agent },
      throwHttpErrors: false,
      retry: { limit: 0 },
    });
    if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return JSON.parse(res.body || '{}');
  };
  return {
    call,
    async stop() {
      await service.stop();
      agent.destroy();
    },
  };
}

export async function benchWebhooks(): Promise<BenchLine[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-webhook-'));
  const receiver = await startReceiver();
  let running = await startPds(dir, 'all');
  try {
    const call = (method: string, url: string, body?: unknown) => running.call(method, url, body);
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
    await call('PUT', `${P}/stores/1/menu_products/100`, { product_id: 1, prices: { gram: '10.00' } });
    const hook = await call('POST', '/admin/v1/webhooks', {
      url: receiver.url,
      auth_token: 'bench',
      store_ids: [1],
    });
    const secret: string = hook.signing_secret;

    /** Carts checked out (their checkout webhooks delivered), ready for `MOVES`. */
    async function checkedOutCarts(n: number): Promise<string[]> {
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

    // ---- latency at 200 changes/s ----
    const latencyCarts = await checkedOutCarts(Math.ceil(LATENCY_CHANGES / MOVES.length));
    const answered = new Map<string, number>();
    const start = performance.now();
    const inFlight: Promise<void>[] = [];
    let issued = 0;
    for (const move of MOVES) {
      for (const uuid of latencyCarts) {
        if (issued >= LATENCY_CHANGES) break;
        const due = start + (issued * 1000) / RATE_PER_S;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        issued += 1;
        inFlight.push(
          call('POST', `${P}/carts/${uuid}/status`, { status: move }).then(() => {
            answered.set(`${uuid}:${move}`, performance.now());
          }),
        );
      }
      // The next move of a cart needs the previous one; a round of carts takes several seconds at 200/s.
      await Promise.all(inFlight);
    }
    await Promise.all(inFlight);
    const achievedRate = issued / ((performance.now() - start) / 1000);
    for (let i = 0; i < 600 && [...answered.keys()].some((k) => !receiver.arrivals.has(k)); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const latencies = [...answered]
      .map(([key, at]) => Math.max(0, (receiver.arrivals.get(key) ?? Number.NaN) - at))
      .filter((x) => !Number.isNaN(x))
      .sort((a, b) => a - b);

    // ---- throughput: a backlog written without a dispatcher, drained by a dispatcher process ----
    const burstCarts = await checkedOutCarts(Math.ceil(BURST_CHANGES / MOVES.length));
    await running.stop();
    running = await startPds(dir, 'api');
    for (const move of MOVES) {
      for (let i = 0; i < burstCarts.length; i += 32) {
        await Promise.all(
          burstCarts
            .slice(i, i + 32)
            .map((uuid) => call('POST', `${P}/carts/${uuid}/status`, { status: move })),
        );
      }
    }
    await running.stop();
    const burstTotal = burstCarts.length * MOVES.length;
    const before = receiver.count();
    running = await startPds(dir, 'dispatcher');
    await receiver.waitFor(before + burstTotal);
    const drained = [...receiver.arrivals.values()].slice(-burstTotal);
    const oursPerS = (burstTotal - 1) / ((Math.max(...drained) - Math.min(...drained)) / 1000);

    // ---- baseline: a raw signed-POST loop, same receiver, same concurrency, fresh connections ----
    const body = JSON.stringify({
      webhook_event: 'cart_status_updated',
      cart: { uuid: 'raw', status: 'raw' },
    });
    const rawAgent = new Agent({ keepAlive: false });
    const rawBefore = receiver.count();
    const rawStart = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < burstTotal) {
          next += 1;
          const headers = webhookHeaders({
            authToken: 'bench',
            secret,
            webhookId: randomUUID(),
            attempt: 1,
            body,
            now: new Date(),
          });
          await got.post(receiver.url, { body, headers, agent: { http: rawAgent }, retry: { limit: 0 } });
        }
      }),
    );
    await receiver.waitFor(rawBefore + burstTotal);
    const rawPerS = burstTotal / ((performance.now() - rawStart) / 1000);

    return [
      {
        name: 'webhook.e2e',
        changes_per_s_target: RATE_PER_S,
        changes_per_s_achieved: round(achievedRate, 1),
        changes: latencies.length,
        p50_ms: round(percentile(latencies, 50)),
        p99_ms: round(percentile(latencies, 99)),
        max_ms: round(latencies.at(-1) ?? Number.NaN),
        backlog: burstTotal,
        deliveries_per_s: round(oursPerS, 1),
        baseline: 'raw signed POST loop, same receiver and concurrency',
        baseline_per_s: round(rawPerS, 1),
        ratio: round(oursPerS / rawPerS, 3),
        targets: { p99_ms: 50, ratio: 0.5 },
      },
    ];
  } finally {
    await running.stop();
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  }
}
