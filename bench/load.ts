/**
 * HTTP load with autocannon, in the process that serves (the benches' service and their baselines
 * share the cores with the load generator), or in a process of its own (`startLoadElsewhere`). `load` runs for a fixed duration; `startLoad` runs until
 * stopped, for load held while something else is measured.
 */
import { fork } from 'node:child_process';
import { setPriority } from 'node:os';
import autocannon from 'autocannon';

export interface Load {
  rss_peak_mb: number;
  /** Requests answered in the run. */
  requests: number;
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
  errors: number;
  non_2xx: number;
}

export interface LoadOptions {
  connections: number;
  /** Seconds; a running load (`startLoad`) is stopped earlier by `stop()`. */
  durationS: number;
  headers?: Record<string, string>;
  /**
   * `Authorization` values taken in turn, request by request: the keys of several partners, so that no
   * partner's rate limit (100,000 requests a minute at most) caps a run.
   */
  authorizations?: string[];
  /** Request paths taken in turn (each request the next one), with `bodies` likewise. */
  paths?: string[];
  method?: string;
  bodies?: string[];
  /** Index in `paths` and `bodies` of the first request (0): a run can go on where another stopped. */
  firstRequest?: number;
}

const round = (n: number, digits = 1) => Number(n.toFixed(digits));

/** Request `n` of a run: its path, body and `Authorization`, each taken in turn from its list when given. */
function nth(
  req: autocannon.Request,
  n: number,
  { paths, bodies, authorizations }: LoadOptions,
): autocannon.Request {
  const headers = authorizations
    ? { ...req.headers, authorization: authorizations[n % authorizations.length] }
    : req.headers;
  return {
    ...req,
    ...(paths ? { path: paths[n % paths.length] } : {}),
    ...(bodies ? { body: bodies[n % bodies.length] } : {}),
    headers,
  };
}

/**
 * How long a held load runs before what it is held for is measured: the connections are open and the
 * server's code is warm (as the api bench's warm-up second), and the generator's own start-up is over.
 */
export const LOAD_WARM_UP_MS = 1_000;

/**
 * A load running until `stop()` or the end of its duration; both resolve with its figures. `running`
 * resolves `LOAD_WARM_UP_MS` after its first answer.
 */
export function startLoad(
  url: string,
  options: LoadOptions,
): { running: Promise<void>; done: Promise<Load>; stop(): Promise<Load> } {
  let i = options.firstRequest ?? 0;
  const next = () => i++;
  // Peak resident memory of this process (the service and the load generator) while the load runs.
  let rssPeak = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
  }, 100);
  const { paths, bodies, authorizations } = options;
  let settle: (r: autocannon.Result) => void = () => {};
  let fail: (e: unknown) => void = () => {};
  const finished = new Promise<autocannon.Result>((resolve, reject) => {
    settle = resolve;
    fail = reject;
  });
  const instance = autocannon(
    {
      url,
      connections: options.connections,
      duration: options.durationS,
      headers: options.headers,
      method: (options.method ?? 'GET') as 'GET',
      requests:
        paths || bodies || authorizations
          ? [{ setupRequest: (req) => nth(req, next(), options) }]
          : undefined,
    },
    (err, result) => (err ? fail(err) : settle(result)),
  );
  const running = Promise.race([
    new Promise<void>((resolve) => {
      instance.once('response', () => setTimeout(resolve, LOAD_WARM_UP_MS));
    }),
    finished.then(() => Promise.reject(new Error('the load ended before its warm-up did'))),
  ]);
  running.catch(() => {});
  const figures = finished
    .then(
      (result): Load => ({
        rss_peak_mb: Math.round(rssPeak / 2 ** 20),
        requests: result.requests.total,
        requests_per_s: round(result.requests.average),
        p50_ms: result.latency.p50,
        p99_ms: result.latency.p99,
        errors: result.errors + result.timeouts,
        non_2xx: result.non2xx,
      }),
    )
    .finally(() => clearInterval(sampler));
  return {
    running,
    done: figures,
    stop() {
      instance.stop();
      return figures;
    },
  };
}

/** One autocannon run for `options.durationS` seconds. */
export async function load(url: string, options: LoadOptions): Promise<Load> {
  return startLoad(url, options).done;
}

/** What `load-process.ts` tells its parent: that its load runs (warmed up), then the load's figures. */
export type LoadProcessMessage = { running: true } | { figures: Load };

/**
 * `startLoad` in a child process of its own (`load-process.ts`), so that the load generator does not
 * share an event loop, or a core's time slice, with what this process measures (a webhook receiver).
 */
export function startLoadElsewhere(
  url: string,
  options: LoadOptions,
  nice = 0,
): { running: Promise<void>; stop(): Promise<Load> } {
  const child = fork(new URL('./load-process.ts', import.meta.url), { stdio: 'inherit' });
  // A nice value above 0 runs the load generator below the service's priority, as a client on
  // another machine would not take the service's cores at all.
  if (nice !== 0 && child.pid !== undefined) setPriority(child.pid, nice);
  const exited = new Promise<never>((_, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the load process exited with code ${code}`)));
  });
  exited.catch(() => {});
  const message = (kind: 'running' | 'figures') =>
    Promise.race([
      new Promise<LoadProcessMessage>((resolve) => {
        const take = (m: LoadProcessMessage) => {
          if (kind in m) {
            child.off('message', take);
            resolve(m);
          }
        };
        child.on('message', take);
      }),
      exited,
    ]);
  const running = message('running').then(() => {});
  const figures = message('figures').then((m) => (m as { figures: Load }).figures);
  child.send({ start: { url, options } });
  return {
    running,
    stop() {
      child.send({ stop: true });
      return figures;
    },
  };
}
