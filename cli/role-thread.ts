/**
 * Role `all` with a role's components on a worker thread of their own: the dispatcher (webhook fan-out
 * and deliveries, abandonment timers) and the projector, each with its own event loop, heap and
 * connections to the embedded files, so partner API load, a projection rebuild and a webhook do not
 * wait for each other, and the work spreads over the machine's cores (docs/operations.md, "Threads").
 * The thread runs the role's components (`thread-run.ts`); this component starts it, starts it again
 * when it dies, shows its readiness (`/readyz` checks `<role>:<check>`) and the metrics it sends every
 * second (merged into `/metrics`), and forwards calls to it (`call`: the projector's status and
 * rebuilds).
 */
import { Worker } from 'node:worker_threads';
import type { Counter } from 'prom-client';
import type { MetricsSnapshot } from '../api/metrics-sources.ts';
import type { GroupCheck } from '../api/readiness.ts';
import type { Shard } from '../dispatcher/shards.ts';
import type { EventStoreOptions } from '../eventstore/index.ts';
import type { Component, ServiceContext } from './compose.ts';
import type { ResolvedConfig } from './config.ts';
import { newLeaseOwner } from './lease-owner.ts';
import { eventStoreOptionsOf } from './store-options.ts';

/**
 * The roles that can run on a thread of their own: a delivery thread runs a shard of the webhook
 * deliveries beside the dispatcher thread (docs/webhooks.md, "Scale").
 */
export type ThreadRole = 'dispatcher' | 'projector' | 'delivery';

/** The answer to a call. */
export type CallResult = { type: 'result'; id: number } & (
  | { ok: true; value: unknown }
  | { ok: false; message: string }
);

/** What the thread tells its parent. */
export type FromThread =
  | { type: 'started' }
  | { type: 'readiness'; checks: Record<string, GroupCheck> }
  | { type: 'metrics'; metrics: MetricsSnapshot }
  | CallResult;

/** What the parent asks of the thread: a call of a method its role offers, and to stop. */
export type ToThread = { type: 'call'; id: number; method: string; args: unknown[] } | { type: 'stop' };

/** What the parent hands the thread. */
export interface ThreadData {
  role: ThreadRole;
  config: ResolvedConfig;
  /** How the thread connects to the embedded store (`store-options.ts`). */
  eventStore: EventStoreOptions;
  /** Who the projector is in the read store's lease: the same for every thread this component starts. */
  leaseOwner: string;
  /** The dispatcher's and delivery threads' shard of the delivery queues (`dispatcher/shards.ts`). */
  shard: Shard;
}

/** A call the thread cannot answer: it is not running (starting, or started again after it died). */
export class ThreadUnavailableError extends Error {
  constructor(role: ThreadRole, why: string) {
    super(`the ${role} thread ${why}`);
    this.name = 'ThreadUnavailableError';
  }
}

/** Pauses before starting a thread that died again: doubling from 200 ms up to 30 s. */
const RESTART_BASE_MS = 200;
const RESTART_MAX_MS = 30_000;
/** How long a stop waits for the thread to stop its components before it is terminated. */
const STOP_TIMEOUT_MS = 15_000;
/**
 * Each thread's young generation, MB: two semi-spaces and their share of large objects
 * (docs/read-side.md, "Memory"). It takes effect because the process passes a default
 * (`--scavenger-max-new-space-capacity-mb`), not `--max-semi-space-size`, which would override it.
 * - projector: 1 MB semi-spaces. Once caught up it allocates little, but its catch-up at start grew
 *   them to 8 MB, which then stayed resident.
 * - dispatcher: 4 MB semi-spaces. Each webhook's request, answer and appends live a few
 *   milliseconds; with 1 MB semi-spaces, at 200 webhooks/s a scavenge came every few milliseconds and
 *   promoted the deliveries in flight, so the thread ran a full mark-compact every 1-3 s, and
 *   deliveries waited for it (docs/benchmarks.md, "The dispatcher thread's garbage collection").
 */
const THREAD_YOUNG_GENERATION_MB: Record<ThreadRole, number> = { dispatcher: 12, delivery: 12, projector: 3 };

const ENTRY = new URL('./thread-main.ts', import.meta.url);

export interface RoleThread extends Component {
  readonly role: ThreadRole;
  /** The running thread (tests end it to check that it is started again). */
  readonly worker: Worker | undefined;
  /** How many times the thread was started again after it died. */
  readonly restarts: number;
  /** Settles once the first thread started, or failed to (what it opens first is then there). */
  readonly firstStart: Promise<void>;
  /**
   * Calls a method the thread's components offer (`thread-run.ts`); rejects with
   * `ThreadUnavailableError` when the thread is not running, ends first, or (`timeoutMs`) is too slow.
   */
  call(method: string, args?: unknown[], options?: { timeoutMs?: number }): Promise<unknown>;
}

/**
 * `spawnNow`: starts the thread at once, before the service (and the modules of the main thread's
 * components) is even loaded, so that both load on their own core (`pds serve`); otherwise the thread
 * starts with the component. `projectorThread`: whether role `all` runs a projector thread too, which
 * checkpoints `events.db` for the others (`store-options.ts`); by default only a projector thread does.
 */
export function roleThread(
  role: ThreadRole,
  options: { spawnNow?: ResolvedConfig; projectorThread?: boolean; shard?: Shard } = {},
): RoleThread {
  const shard = options.shard ?? { index: 0, count: 1 };
  const label = threadLabel(role, shard);
  const eventStore = eventStoreOptionsOf(
    { role: 'all', thread: role },
    options.projectorThread ?? role === 'projector',
  );
  let ctx: ServiceContext | undefined;
  let worker: Worker | undefined;
  let started = false;
  let checks: Record<string, GroupCheck> = {};
  // A thread started again after its last one ended takes the lease back at once (lease-owner.ts).
  const leaseOwner = newLeaseOwner();
  /** The thread's `pds_*` metrics as it last sent them: a scrape never waits for a busy thread. */
  let latestMetrics: MetricsSnapshot = [];
  let stopping = false;
  let failures = 0;
  let restarts = 0;
  let restartTimer: NodeJS.Timeout | undefined;
  let restartCounter: Counter | undefined;
  const calls = new PendingCalls();
  const { promise: firstSettled, resolve: settleFirst } = Promise.withResolvers<void>();
  /** What happened before the component started (and had a logger): logged, and acted on, then. */
  const early: { errors: unknown[]; exitCode?: number } = { errors: [] };

  /** Starts the thread; resolves once its components started, rejects if it ended first. */
  function spawn(config: ResolvedConfig): Promise<void> {
    const w = new Worker(ENTRY, {
      workerData: { role, config, eventStore, leaseOwner, shard } satisfies ThreadData,
      name: `pds-${label}`,
      resourceLimits: { maxYoungGenerationSizeMb: THREAD_YOUNG_GENERATION_MB[role] },
    });
    worker = w;
    return new Promise((resolve, reject) => {
      w.on('message', (message: FromThread) => {
        if (message.type === 'started') {
          started = true;
          failures = 0;
          settleFirst();
          resolve();
        } else if (message.type === 'readiness') checks = message.checks;
        else if (message.type === 'metrics') latestMetrics = message.metrics;
        else if (message.type === 'result') calls.settle(message);
      });
      w.on('error', (error) => {
        if (ctx) ctx.logger.error({ err: error, thread: label }, `${label} thread failed`);
        else early.errors.push(error);
      });
      w.on('exit', (code) => {
        const wasStarted = started;
        worker = undefined;
        started = false;
        checks = {};
        latestMetrics = [];
        calls.failAll(new ThreadUnavailableError(role, `exited (code ${code}) before it answered`));
        settleFirst();
        if (stopping) return;
        if (!wasStarted) reject(new Error(`the ${label} thread exited with code ${code} before it started`));
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
      { thread: label, exit_code: code, restart_in_ms: delayMs },
      `${label} thread exited: starting it again`,
    );
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      if (stopping) return;
      restarts += 1;
      restartCounter?.inc({ thread: label });
      logStartFailure(c, spawn(c.config));
    }, delayMs);
  }

  function logStartFailure(c: ServiceContext, starting: Promise<void>): void {
    starting.catch((error: unknown) =>
      c.logger.error({ err: error, thread: label }, `${label} thread failed to start`),
    );
  }

  const firstStart = options.spawnNow ? spawn(options.spawnNow) : undefined;
  firstStart?.catch(() => {}); // logged once the component starts

  function call(method: string, args: unknown[] = [], { timeoutMs }: { timeoutMs?: number } = {}) {
    const w = worker;
    if (!w || !started) return Promise.reject(new ThreadUnavailableError(role, 'is not running'));
    const { id, answered } = calls.add();
    w.postMessage({ type: 'call', id, method, args } satisfies ToThread);
    if (timeoutMs === undefined) return answered;
    const timer = setTimeout(
      () =>
        calls.fail(id, new ThreadUnavailableError(role, `did not answer ${method} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    return answered.finally(() => clearTimeout(timer));
  }

  return {
    name: `${label}-thread`,
    roles: [role === 'delivery' ? 'dispatcher' : role],
    role,
    get worker() {
      return worker;
    },
    get restarts() {
      return restarts;
    },
    firstStart: firstSettled,
    call,
    async start(c) {
      ctx = c;
      restartCounter = await threadRestarts(c);
      restartCounter.inc({ thread: label }, 0);
      c.readiness.add(`${label.replace('-', '_')}_thread`, () => started);
      c.readiness.addEach(label, () => checks);
      c.metricsSources.add(async () => latestMetrics);
      // Not awaited: the thread restores its state on the other core while this one starts the rest;
      // `/readyz` waits for it. One that fails to start is started again, as one that dies.
      logStartFailure(c, firstStart ?? spawn(c.config));
      for (const error of early.errors.splice(0))
        c.logger.error({ err: error, thread: label }, `${label} thread failed`);
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
        ctx?.logger.warn({ thread: label }, `${label} thread did not stop in time: terminating it`);
        void w.terminate();
      }, STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(deadline);
    },
  };
}

/** The thread's name in checks, metrics and logs: a delivery thread's names its shard. */
export const threadLabel = (role: ThreadRole, shard: Shard): string =>
  role === 'delivery' ? `delivery-${shard.index + 1}` : role;

/**
 * The dispatcher thread and its delivery threads (docs/webhooks.md, "Scale"): with `count` delivery
 * workers, shard 1 is the dispatcher thread's, beside the fan-out, and shards 2 to `count` each have a
 * delivery thread. One is the dispatcher thread alone, as it always was.
 */
export function dispatcherThreads(
  count: number,
  options: { spawnNow?: ResolvedConfig; projectorThread?: boolean } = {},
): { dispatcher: RoleThread; deliveries: RoleThread[] } {
  return {
    dispatcher: roleThread('dispatcher', { ...options, shard: { index: 0, count } }),
    deliveries: Array.from({ length: count - 1 }, (_, i) =>
      roleThread('delivery', { ...options, shard: { index: i + 1, count } }),
    ),
  };
}

/** The calls to a thread waiting for its answer, by id. */
class PendingCalls {
  #nextId = 0;
  readonly #waiting = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();

  add(): { id: number; answered: Promise<unknown> } {
    const id = this.#nextId++;
    const answered = new Promise<unknown>((resolve, reject) => this.#waiting.set(id, { resolve, reject }));
    return { id, answered };
  }

  settle(result: CallResult): void {
    const waiting = this.#waiting.get(result.id);
    this.#waiting.delete(result.id);
    if (result.ok) waiting?.resolve(result.value);
    else waiting?.reject(new Error(result.message));
  }

  /** Gives up on one call (its answer, if it comes, is dropped). */
  fail(id: number, error: Error): void {
    this.#waiting.get(id)?.reject(error);
    this.#waiting.delete(id);
  }

  /** The thread ended: nothing more will be answered. */
  failAll(error: Error): void {
    for (const waiting of this.#waiting.values()) waiting.reject(error);
    this.#waiting.clear();
  }
}

/** The one restart counter of the process's threads (each thread component asks for it). */
async function threadRestarts(c: ServiceContext): Promise<Counter> {
  // Loaded here, not at the top: `pds serve` starts the threads before loading the service's modules.
  const { Counter } = await import('prom-client');
  const name = 'pds_thread_restarts_total';
  return (
    (c.registry.getSingleMetric(name) as Counter | undefined) ??
    new Counter({
      name,
      help: 'times a thread (dispatcher, projector) was started again after it exited',
      labelNames: ['thread'],
      registers: [c.registry],
    })
  );
}
