/**
 * Role `all` with the dispatcher (webhook fan-out and deliveries, abandonment timers) on a worker
 * thread of its own: on the machine's second core, with its own event loop, heap and connections to
 * the embedded files, so partner API load or a projection rebuild does not hold up a webhook
 * (docs/operations.md, "The dispatcher thread"). The thread runs the `dispatcher` role's components
 * (`dispatcher-thread-main.ts`); this component starts it, starts it again when it dies, and shows its
 * readiness (`/readyz` checks `dispatcher:<check>`) and metrics (merged into `/metrics`).
 */
import { Worker } from 'node:worker_threads';
import type { Counter } from 'prom-client';
import type { MetricsSnapshot } from '../api/metrics-sources.ts';
import type { Component, ServiceContext } from './compose.ts';
import type { ResolvedConfig } from './config.ts';

/** What the thread tells its parent. */
export type FromThread =
  | { type: 'started' }
  | { type: 'readiness'; checks: Record<string, boolean> }
  | { type: 'metrics'; id: number; metrics: MetricsSnapshot };

/** What the parent asks of the thread. */
export type ToThread = { type: 'metrics'; id: number } | { type: 'stop' };

/** Pauses before starting a thread that died again: doubling from 200 ms up to 30 s. */
const RESTART_BASE_MS = 200;
const RESTART_MAX_MS = 30_000;
/** How long a stop waits for the thread to stop its components before it is terminated. */
const STOP_TIMEOUT_MS = 15_000;
/** How long a scrape waits for the thread's metrics. */
const METRICS_TIMEOUT_MS = 2_000;

const ENTRY = new URL('./dispatcher-thread-main.ts', import.meta.url);

export interface DispatcherThread extends Component {
  /** The running thread (tests end it to check that it is started again). */
  readonly worker: Worker | undefined;
  /** How many times the thread was started again after it died. */
  readonly restarts: number;
}

/**
 * `spawnNow`: starts the thread at once, before the service (and the modules of the main thread's
 * components) is even loaded, so that both load on their own core (`pds serve`); otherwise the thread
 * starts with the component.
 */
export function dispatcherThread(options: { spawnNow?: ResolvedConfig } = {}): DispatcherThread {
  let ctx: ServiceContext | undefined;
  let worker: Worker | undefined;
  let started = false;
  let checks: Record<string, boolean> = {};
  let stopping = false;
  let failures = 0;
  let restarts = 0;
  let restartTimer: NodeJS.Timeout | undefined;
  let restartCounter: Counter | undefined;
  const pendingMetrics = new Map<number, (metrics: MetricsSnapshot) => void>();
  let nextId = 0;
  /** What happened before the component started (and had a logger): logged, and acted on, then. */
  const early: { errors: unknown[]; exitCode?: number } = { errors: [] };

  /** Starts the thread; resolves once its components started, rejects if it ended first. */
  function spawn(config: ResolvedConfig): Promise<void> {
    const w = new Worker(ENTRY, { workerData: { config }, name: 'pds-dispatcher' });
    worker = w;
    return new Promise((resolve, reject) => {
      w.on('message', (message: FromThread) => {
        if (message.type === 'started') {
          started = true;
          failures = 0;
          resolve();
        } else if (message.type === 'readiness') checks = message.checks;
        else if (message.type === 'metrics') pendingMetrics.get(message.id)?.(message.metrics);
      });
      w.on('error', (error) => {
        if (ctx) ctx.logger.error({ err: error }, 'dispatcher thread failed');
        else early.errors.push(error);
      });
      w.on('exit', (code) => {
        const wasStarted = started;
        worker = undefined;
        started = false;
        checks = {};
        for (const answer of pendingMetrics.values()) answer([]);
        pendingMetrics.clear();
        if (stopping) return;
        if (!wasStarted)
          reject(new Error(`the dispatcher thread exited with code ${code} before it started`));
        if (ctx) restartLater(ctx, code);
        else early.exitCode = code;
      });
    });
  }

  /** A thread that ended (after its start, or during it) is started again after a pause; its state is durable. */
  function restartLater(c: ServiceContext, code: number): void {
    const delayMs = Math.min(RESTART_MAX_MS, RESTART_BASE_MS * 2 ** failures);
    failures += 1;
    c.logger.error(
      { exit_code: code, restart_in_ms: delayMs },
      'dispatcher thread exited: starting it again',
    );
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      if (stopping) return;
      restarts += 1;
      restartCounter?.inc();
      logStartFailure(c, spawn(c.config));
    }, delayMs);
  }

  function logStartFailure(c: ServiceContext, starting: Promise<void>): void {
    starting.catch((error: unknown) => c.logger.error({ err: error }, 'dispatcher thread failed to start'));
  }

  const firstStart = options.spawnNow ? spawn(options.spawnNow) : undefined;
  firstStart?.catch(() => {}); // logged once the component starts

  function metrics(): Promise<MetricsSnapshot> {
    const w = worker;
    if (!w || !started) return Promise.resolve([]);
    const id = nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => answer([]), METRICS_TIMEOUT_MS);
      const answer = (snapshot: MetricsSnapshot) => {
        clearTimeout(timer);
        pendingMetrics.delete(id);
        resolve(snapshot);
      };
      pendingMetrics.set(id, answer);
      w.postMessage({ type: 'metrics', id } satisfies ToThread);
    });
  }

  return {
    name: 'dispatcher-thread',
    roles: ['dispatcher'],
    get worker() {
      return worker;
    },
    get restarts() {
      return restarts;
    },
    async start(c) {
      ctx = c;
      // Loaded here, not at the top: `pds serve` starts the thread before loading the service's modules.
      const { Counter } = await import('prom-client');
      restartCounter = new Counter({
        name: 'pds_dispatcher_thread_restarts_total',
        help: 'times the dispatcher thread was started again after it exited',
        registers: [c.registry],
      });
      c.readiness.add('dispatcher_thread', () => started);
      c.readiness.addEach('dispatcher', () => checks);
      c.metricsSources.add(metrics);
      // Not awaited: the thread restores its state on the other core while this one starts the rest;
      // `/readyz` waits for it. One that fails to start is started again, as one that dies.
      logStartFailure(c, firstStart ?? spawn(c.config));
      for (const error of early.errors.splice(0)) c.logger.error({ err: error }, 'dispatcher thread failed');
      if (early.exitCode !== undefined) restartLater(c, early.exitCode);
    },
    async stop() {
      stopping = true;
      clearTimeout(restartTimer);
      const w = worker;
      if (!w) return;
      const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
      w.postMessage({ type: 'stop' } satisfies ToThread);
      const deadline = setTimeout(() => {
        ctx?.logger.warn('dispatcher thread did not stop in time: terminating it');
        void w.terminate();
      }, STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(deadline);
    },
  };
}
