/**
 * `api.during_rebuild`: partner reads at a fixed rate while an operator rebuilds the catalog
 * (docs/operations.md, "Projections": the rebuilt copies fill while the live ones serve).
 *
 * The data is the `api` bench's (the sandbox seeded through the deciders plus one store carrying
 * `PDS_BENCH_REBUILD_MENU` menu products, default 150,000, so that the catalog's rebuild lasts well
 * over ten seconds), served as `npm start` serves it, in a child process (bench/serve.ts: the
 * projector and the dispatcher on threads of their own). From this process, autocannon sends
 * `RATE` requests a second (`overallRate`) of what partners ask most: one menu product of the big
 * store, pages of 20 of its menu products at different cursors, and the brand products endpoint
 * (ZIP centroid, 100-mile radius), in turn. Its latencies are taken idle for `IDLE_S` seconds, then
 * from `POST /admin/v1/projections/catalog/rebuild` until the catalog is live again, while
 * `GET /admin/v1/projections` is read every second. `ratio` is the p99 during the rebuild over the
 * p99 idle (target 1.25); `progress_seen` how many of those reads showed the rebuild's progress with
 * a time left (`eta_seconds`) of those answered, `eta_first_s` the first time left, and `status_polls`
 * how many were answered, how many were 503 (the projector thread did not answer within 10 s) and
 * the slowest. The same reads are taken idle again once the rebuilt catalog is live (`idle_after`),
 * with the machine's load average at each: a machine whose other work changed meanwhile shows there.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { loadConfig, OPERATOR_TOKEN_FILE } from '../cli/config.ts';
import { BIG_STORE, round, seed } from './api-service.ts';
import type { BenchLine } from './eventstore.ts';
import { rssPeakMbOf, type Served, serve } from './serve.ts';

const MENU = Number(process.env.PDS_BENCH_REBUILD_MENU ?? 150_000);
/** Partner reads a second, and the connections carrying them (a slow answer holds one back). */
const RATE = 200;
const CONNECTIONS = 16;
const IDLE_S = Number(process.env.PDS_BENCH_REBUILD_IDLE_S ?? 20);
/** The warm-up before the idle run: the JIT and the caches warm up first. */
const WARM_UP_S = 3;

interface Request {
  path: string;
  authorization: string;
}

interface Latencies {
  requests: number;
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

interface ProjectionView {
  name: string;
  state: string;
  lag_events: number;
  error: string | null;
  progress: { percent: number; eta_seconds: number | null } | null;
}

/** The requests of the run, taken in turn, each with the key of the partner that may ask it. */
async function partnerRequests(served: Served, admin: Admin, brandIds: number[]): Promise<Request[]> {
  const key = async (body: object): Promise<string> =>
    (
      await admin<{ api_key: string }>('POST', '/admin/v1/partners', {
        rate_limit_per_minute: 100_000,
        ...body,
      })
    ).api_key;
  const store = `Bearer ${await key({ name: 'Rebuild bench store', kind: 'store_operator', store_ids: [BIG_STORE] })}`;
  const brand = `Bearer ${await key({ name: 'Rebuild bench brand', kind: 'brand', brand_ids: brandIds })}`;
  // The keys work once the partner_keys projection has them; the pages give the cursors.
  const page = async (cursor: string | null) => {
    const query = cursor ? `limit=20&cursor=${encodeURIComponent(cursor)}` : 'limit=20';
    for (const until = Date.now() + 60_000; ; ) {
      const res = await fetch(`${served.base}/partner/store/v1/menu_products?${query}`, {
        headers: { authorization: store },
      });
      if (res.status === 200) return (await res.json()) as { next_cursor: string | null };
      const text = await res.text();
      if (Date.now() > until)
        throw new Error(`the bench's key still refused after a minute: ${res.status} ${text}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const requests: Request[] = [];
  let cursor = (await page(null)).next_cursor;
  const zips = ['80202', '80301', '80903', '81501', '80525', '81003'];
  for (let i = 0; i < 30; i++) {
    requests.push({
      path: `/partner/store/v1/menu_products/${5_000_000 + 1 + ((i * 9_973) % MENU)}`,
      authorization: store,
    });
    if (cursor) {
      requests.push({
        path: `/partner/store/v1/menu_products?limit=20&cursor=${encodeURIComponent(cursor)}`,
        authorization: store,
      });
      // Deeper cursors: skip a few pages between two kept.
      for (let skip = 0; skip < 5 && cursor; skip++) cursor = (await page(cursor)).next_cursor;
    }
    requests.push({
      path: `/partner/brand/v1/products?zipcode=${zips[i % zips.length]}&radius=100&limit=20`,
      authorization: brand,
    });
  }
  return requests;
}

/** Partner reads at `RATE` a second until `stop()` (or `durationS`); their latencies. */
function paced(base: string, requests: Request[], durationS: number) {
  let n = 0;
  let settle: (result: autocannon.Result) => void = () => {};
  let fail: (error: unknown) => void = () => {};
  const finished = new Promise<autocannon.Result>((resolve, reject) => {
    settle = resolve;
    fail = reject;
  });
  const instance = autocannon(
    {
      url: base,
      connections: CONNECTIONS,
      overallRate: RATE,
      duration: durationS,
      requests: [
        {
          setupRequest: (req) => {
            const r = requests[n++ % requests.length];
            return { ...req, path: r.path, headers: { ...req.headers, authorization: r.authorization } };
          },
        },
      ],
    },
    (error, result) => (error ? fail(error) : settle(result)),
  );
  const done = finished.then((result): Latencies => {
    if (result.non2xx > 0 || result.errors > 0)
      throw new Error(`partner reads: ${result.non2xx} not 2xx, ${result.errors} errors`);
    return {
      requests: result.requests.total,
      requests_per_s: round(result.requests.average),
      p50_ms: result.latency.p50,
      p99_ms: result.latency.p99,
      max_ms: result.latency.max,
    };
  });
  return {
    done,
    stop: () => {
      instance.stop();
      return done;
    },
  };
}

/** The machine's load average over the last minute: what else ran beside the bench. */
const loadAverage = () => round(loadavg()[0], 2);

type Admin = (<T = unknown>(method: string, url: string, body?: unknown) => Promise<T>) & {
  raw(method: string, url: string, body?: unknown): Promise<Response>;
};

function adminOf(base: string, token: string): Admin {
  const raw = (method: string, url: string, body?: unknown) =>
    fetch(`${base}${url}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const admin = async (method: string, url: string, body?: unknown) => {
    const res = await raw(method, url, body);
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text}`);
    return JSON.parse(text);
  };
  return Object.assign(admin, { raw });
}

async function caughtUp(admin: Admin): Promise<void> {
  for (const until = Date.now() + 600_000; ; ) {
    const { projections } = await admin<{ projections: ProjectionView[] }>('GET', '/admin/v1/projections');
    if (projections.every((p) => p.lag_events === 0 && p.state === 'live')) return;
    const failed = projections.find((p) => p.state === 'failed');
    if (failed) throw new Error(`projection ${failed.name} failed: ${failed.error}`);
    if (Date.now() > until) throw new Error('the projections did not catch up within 10 minutes');
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * The catalog's rebuild, from the request until it is live again, with what `GET /admin/v1/projections`
 * showed each second: how many answers showed its progress with a time left, how many were 503 (the
 * projector thread did not answer in time), and the slowest answer.
 */
async function rebuildCatalog(base: string, admin: Admin) {
  const began = performance.now();
  await admin('POST', '/admin/v1/projections/catalog/rebuild');
  const etas: number[] = [];
  const polls = { answered: 0, unanswered: 0, slowest_ms: 0 };
  for (;;) {
    await new Promise((r) => setTimeout(r, 1_000));
    const asked = performance.now();
    const res = await admin.raw('GET', '/admin/v1/projections');
    polls.slowest_ms = Math.max(polls.slowest_ms, Math.round(performance.now() - asked));
    if (res.status === 503) {
      await res.body?.cancel();
      polls.unanswered++;
      continue;
    }
    if (res.status !== 200) throw new Error(`GET /admin/v1/projections: ${res.status} ${await res.text()}`);
    const { projections } = (await res.json()) as { projections: ProjectionView[] };
    const catalog = projections.find((p) => p.name === 'catalog');
    if (!catalog) throw new Error(`no catalog projection at ${base}`);
    if (catalog.state === 'failed') throw new Error('the catalog failed during its rebuild');
    if (catalog.state === 'live') break;
    polls.answered++;
    const eta = catalog.progress?.eta_seconds;
    if (typeof eta === 'number') etas.push(eta);
  }
  return { seconds: (performance.now() - began) / 1_000, polls, etas };
}

export async function benchApiDuringRebuild(): Promise<BenchLine[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-bench-api-rebuild-'));
  try {
    const config = await loadConfig({ PDS_DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'warn', PDS_SANDBOX: '0' });
    const { seeded } = await seed(dir, config, MENU);
    const served = await serve(dir);
    try {
      const admin = adminOf(served.base, readFileSync(path.join(dir, OPERATOR_TOKEN_FILE), 'utf8').trim());
      await caughtUp(admin);
      const brandIds = seeded.partners.find((p) => p.kind === 'brand')?.brand_ids;
      if (!brandIds) throw new Error('the sandbox has no brand partner');
      const requests = await partnerRequests(served, admin, brandIds);
      await paced(served.base, requests, WARM_UP_S).done;
      const loadBefore = loadAverage();
      const idle = await paced(served.base, requests, IDLE_S).done;
      const during = paced(served.base, requests, 3_600);
      const rebuild = await rebuildCatalog(served.base, admin).catch(async (error) => {
        await during.stop().catch(() => {});
        throw error;
      });
      const busy = await during.stop();
      const loadDuring = loadAverage();
      // The same again once the rebuilt catalog is live: a machine whose other work changed meanwhile
      // shows here, which the ratio alone would put on the rebuild.
      const after = await paced(served.base, requests, IDLE_S).done;
      return [
        {
          name: 'api.during_rebuild',
          store_menu_products: MENU,
          rate_per_s: RATE,
          connections: CONNECTIONS,
          idle: { ...idle, seconds: IDLE_S, load_average: loadBefore },
          during_rebuild: { ...busy, load_average: loadDuring },
          idle_after: { ...after, seconds: IDLE_S, load_average: loadAverage() },
          rebuild_seconds: round(rebuild.seconds),
          progress_seen: `${rebuild.etas.length} of ${rebuild.polls.answered}`,
          status_polls: rebuild.polls,
          eta_first_s: rebuild.etas[0] ?? null,
          rss_peak_mb: rssPeakMbOf(served.pid),
          baseline: 'the same reads at the same rate, idle, just before',
          baseline_p99_ms: idle.p99_ms,
          ratio: round(busy.p99_ms / idle.p99_ms, 2),
          ratio_to_idle_after: round(busy.p99_ms / after.p99_ms, 2),
          targets: { ratio: 1.25, rebuild_seconds_at_least: 10 },
        },
      ];
    } finally {
      await served.stop('SIGTERM');
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const line of await benchApiDuringRebuild()) console.log(JSON.stringify(line));
}
