/**
 * The dispatcher role's components (docs/webhooks.md, docs/write-side.md): its working state, the
 * abandonment timer and the webhook dispatcher. Role `all` runs them beside the APIs, or on a thread
 * of their own (`role-thread.ts`), which loads this module and not the APIs'.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, Histogram } from 'prom-client';
import { createRetention } from '../application/retention.ts';
import { type AbandonmentTimer, createAbandonmentTimer } from '../dispatcher/abandonment.ts';
import { createDeliveryWorker, type DeliveryWorker } from '../dispatcher/delivery-worker.ts';
import { createFanOut, type FanOut } from '../dispatcher/fan-out.ts';
import { createSubscriptionTracker, type SubscriptionTracker } from '../dispatcher/subscription-tracker.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import type { ReadStore } from '../projections/read-store.ts';
import type { SqliteReadStore } from '../projections/sqlite/read-store.ts';
import type { Component, ServiceContext } from './compose.ts';

/** What the dispatcher's components build for each other (and find of the read side's, in role `all`). */
export interface DispatcherShared {
  readStore?: ReadStore;
  /** The dispatcher's working state (`PDS_DISPATCHER_STORE`): the read store itself, or a file of its own. */
  dispatcherStore?: ReadStore;
}

/**
 * The timer queues of the running components (abandonment, webhook retries). Tests that move an
 * injected clock call `tick()` to run what fell due, instead of waiting for real timers.
 */
export interface Timers {
  ticks: Array<() => Promise<number>>;
}

export const createTimers = (): Timers => ({ ticks: [] });

/** Runs every component's due timers; resolves with how many ran. */
export async function tickTimers(timers: Timers): Promise<number> {
  let ran = 0;
  for (const tick of timers.ticks) ran += await tick();
  return ran;
}

/** Says when a store starts empty and why (a new or replaced file): what it holds is rebuilt from the events. */
export function logOpened(
  readStore: ReadStore,
  logger: Logger,
  what: { store: 'read store' | 'dispatcher store'; holds: 'read models are' | 'its working state is' },
): void {
  if (!('opened' in readStore)) return;
  const { state, reason } = (readStore as SqliteReadStore).opened;
  if (state === 'replaced')
    logger.warn({ reason }, `${what.store} replaced: ${what.holds} rebuilt from the events`);
  else if (state === 'created')
    logger.info({ reason }, `${what.store} created: ${what.holds} built from the events`);
}

/**
 * The dispatcher's working state (pending carts, delivery queues): the read store when
 * `PDS_DISPATCHER_STORE` names it and this process has it open, else a store of its own (by default
 * `dispatcher.db` beside a SQLite read store, docs/operations.md, "Threads").
 */
export function dispatcherState(shared: DispatcherShared): Component {
  let own: ReadStore | undefined;
  return {
    name: 'dispatcher-state',
    roles: ['dispatcher'],
    async start(ctx) {
      const url = ctx.config.dispatcherStoreUrl;
      if (url === ctx.config.readStoreUrl && shared.readStore) {
        shared.dispatcherStore = shared.readStore;
        return;
      }
      const store = await ctx.openReadStore(url, { cacheMiB: ctx.config.readStoreCacheMiB });
      own = store;
      shared.dispatcherStore = store;
      // On a server (MongoDB), the dispatcher needs it reachable (docs/operations.md, "Health").
      if (store.ping) {
        ctx.readiness.add('dispatcher_store', async () => {
          await store.ping?.();
          return true;
        });
      }
      logOpened(own, ctx.logger, { store: 'dispatcher store', holds: 'its working state is' });
    },
    async stop() {
      await own?.close();
    },
  };
}

/**
 * The abandonment timer (docs/write-side.md): restores the pending carts' deadlines from the read store and the
 * cart events after its checkpoint, then appends `CartAbandoned` when one falls due. Several
 * dispatcher processes may run it: the expected-revision check lets exactly one of them write.
 */
export function abandonmentTimer(
  shared: DispatcherShared,
  clock: Clock = systemClock,
  timers: Timers = createTimers(),
): Component {
  let timer: AbandonmentTimer | undefined;
  return {
    name: 'abandonment-timer',
    roles: ['dispatcher'],
    async start(ctx) {
      if (!shared.dispatcherStore) throw new Error('the abandonment timer needs its state opened first');
      const t = createAbandonmentTimer({
        store: ctx.eventStore,
        readStore: shared.dispatcherStore,
        clock,
        abandonAfterMs: ctx.config.abandonAfterMs,
        logger: ctx.logger.child({ component: 'abandonment-timer' }),
        supervisor: ctx.supervisor,
      });
      timer = t;
      timers.ticks.push(() => t.tick());
      let restored = false;
      ctx.readiness.add('abandonment_timers_restored', () => restored);
      new Gauge({
        name: 'pds_abandonment_timers_pending',
        help: 'carts with a pending abandonment deadline',
        registers: [ctx.registry],
        collect() {
          this.set(t.pending());
        },
      });
      const started = Date.now();
      t.start();
      await t.caughtUp;
      restored = true;
      ctx.logger.info(
        { ms: Date.now() - started, pending: t.pending(), resumed_after: t.resumed().position },
        'abandonment timers restored',
      );
    },
    async stop() {
      await timer?.stop();
    },
  };
}

/**
 * The webhook dispatcher (docs/webhooks.md): its own view of the subscriptions, the fan-out consumer of the
 * persistent subscription group (several dispatcher processes compete on it), and the delivery worker,
 * which restores the queues with pending deliveries and retries from the read store and the delivery
 * events after its checkpoint.
 */
export function webhookDispatcher(
  shared: DispatcherShared,
  clock: Clock = systemClock,
  timers: Timers = createTimers(),
): Component {
  let tracker: SubscriptionTracker | undefined;
  let fanOut: FanOut | undefined;
  let worker: DeliveryWorker | undefined;
  return {
    name: 'webhook-dispatcher',
    roles: ['dispatcher'],
    async start(ctx) {
      const logger = ctx.logger.child({ component: 'webhook-dispatcher' });
      const attempts = new Counter({
        name: 'pds_webhook_attempts_total',
        help: 'webhook delivery attempts by outcome (delivered, gone, retry_after, failed, interrupted)',
        labelNames: ['outcome'],
        registers: [ctx.registry],
      });
      const latency = new Histogram({
        name: 'pds_webhook_attempt_duration_seconds',
        help: 'duration of webhook delivery attempts, from the URL check to the answer',
        labelNames: ['outcome'],
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30],
        registers: [ctx.registry],
      });
      if (!shared.dispatcherStore) throw new Error('the webhook dispatcher needs its state opened first');
      tracker = createSubscriptionTracker({ store: ctx.eventStore, supervisor: ctx.supervisor });
      const w = createDeliveryWorker({
        store: ctx.eventStore,
        readStore: shared.dispatcherStore,
        clock,
        tracker,
        secretKey: ctx.config.secretKey,
        openBody: ctx.customerData.openBody,
        allowPrivate: ctx.config.allowPrivateWebhookUrls,
        timeoutMs: ctx.config.webhookTimeoutMs,
        scheduleMs: ctx.config.webhookRetryScheduleMs,
        maxInFlight: ctx.config.webhookMaxInFlight,
        queueWindow: ctx.config.webhookQueueWindow,
        logger,
        supervisor: ctx.supervisor,
        onAttempt({ outcome, durationMs }) {
          attempts.inc({ outcome });
          latency.observe({ outcome }, durationMs / 1000);
        },
      });
      worker = w;
      timers.ticks.push(() => w.tick());
      new Gauge({
        name: 'pds_webhook_deliveries_pending',
        help: 'webhook deliveries neither delivered nor parked (queue depth)',
        registers: [ctx.registry],
        collect() {
          this.set(w.pending().depth);
        },
      });
      new Gauge({
        name: 'pds_webhook_requests_in_flight',
        help: 'webhook requests open (at most PDS_WEBHOOK_MAX_IN_FLIGHT)',
        registers: [ctx.registry],
        collect() {
          this.set(w.slots().inFlight);
        },
      });
      new Gauge({
        name: 'pds_webhook_queues_waiting_for_slot',
        help: 'delivery queues due and waiting for a free request slot of their subscription or of the dispatcher',
        registers: [ctx.registry],
        collect() {
          this.set(w.slots().waiting);
        },
      });
      ageGauge(
        ctx,
        clock,
        'pds_webhook_oldest_pending_seconds',
        'age of the oldest webhook delivery neither delivered nor parked (0 when none)',
        () => w.pending().oldestQueuedSince,
      );
      const skipped = new Counter({
        name: 'pds_webhook_fan_out_skipped_total',
        help: 'cart events the webhook fan-out acknowledged unsent, older than PDS_DELIVERY_LOG_RETENTION',
        registers: [ctx.registry],
      });
      const f = createFanOut({
        store: ctx.eventStore,
        clock,
        tracker,
        deliveries: w,
        logger,
        supervisor: ctx.supervisor,
        sealBody: ctx.customerData.sealBody,
        deliveryLogRetentionMs: ctx.config.deliveryLogRetentionMs,
        onSkipped: () => skipped.inc(),
      });
      fanOut = f;
      timers.ticks.push(() => f.tick());
      fanOutGauges(f, clock, ctx);
      let restored = false;
      ctx.readiness.add('webhook_deliveries_restored', () => restored);
      const started = Date.now();
      tracker.start();
      w.start();
      await Promise.all([tracker.caughtUp, w.caughtUp]);
      await f.start();
      restored = true;
      logger.info(
        { ms: Date.now() - started, pending: w.pending().depth, resumed_after: w.resumed().position },
        'webhook deliveries restored',
      );
    },
    async stop() {
      await fanOut?.stop();
      await worker?.stop();
      await tracker?.stop();
    },
  };
}

/** A gauge of the age, on the clock, of what `oldest` names (an ISO time), in seconds; 0 when nothing. */
function ageGauge(
  ctx: Pick<ServiceContext, 'registry'>,
  clock: Clock,
  name: string,
  help: string,
  oldest: () => string | null,
): void {
  new Gauge({
    name,
    help,
    registers: [ctx.registry],
    collect() {
      const at = oldest();
      this.set(at === null ? 0 : Math.max(0, (clock.now().getTime() - Date.parse(at)) / 1000));
    },
  });
}

/**
 * What the fan-out is trying again: it never parks a cart event, so one that keeps failing shows here,
 * by its age (docs/operations.md, "The fan-out's group").
 */
function fanOutGauges(fanOut: FanOut, clock: Clock, ctx: Pick<ServiceContext, 'registry'>): void {
  new Gauge({
    name: 'pds_webhook_fan_out_retrying',
    help: 'cart events whose webhook fan-out failed and is being tried again (never parked)',
    registers: [ctx.registry],
    collect() {
      this.set(fanOut.retrying().events);
    },
  });
  ageGauge(
    ctx,
    clock,
    'pds_webhook_fan_out_retrying_oldest_seconds',
    'age of the oldest cart event whose webhook fan-out is being tried again, since it was recorded (0 when none)',
    () => fanOut.retrying().oldestRecordedAt,
  );
}

/** The dispatcher's components: its working state, the abandonment timer and the webhook dispatcher. */
export function dispatcherComponents(
  shared: DispatcherShared = {},
  clock: Clock = systemClock,
  timers: Timers = createTimers(),
): Component[] {
  return [
    dispatcherState(shared),
    abandonmentTimer(shared, clock, timers),
    webhookDispatcher(shared, clock, timers),
    retentionJob(shared, clock, timers),
  ];
}

/** How often the retention job looks whether a run is due (it runs every `RETENTION_EVERY_MS`). */
const RETENTION_CHECK_MS = 60_000;

/**
 * The retention job (docs/operations.md, "Retention"), where the dispatcher runs: one process of a
 * split deployment, or role `all`'s dispatcher thread. It keeps its cursor over the finished
 * deliveries in the dispatcher store. A test on a manual clock runs it through `timers`.
 */
export function retentionJob(
  shared: DispatcherShared,
  clock: Clock = systemClock,
  timers: Timers = createTimers(),
): Component {
  let interval: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  return {
    name: 'retention',
    roles: ['dispatcher'],
    start(ctx) {
      if (!shared.dispatcherStore)
        throw new Error('the retention job needs the dispatcher state opened first');
      const dropped = new Counter({
        name: 'pds_retention_dropped_events_total',
        help: 'operational events the retention job deleted from the event store (expired idempotency records, finished webhook deliveries)',
        registers: [ctx.registry],
      });
      const pruned = new Counter({
        name: 'pds_retention_pruned_deliveries_total',
        help: 'finished webhook deliveries the retention job deleted from the event store, past PDS_DELIVERY_LOG_RETENTION',
        registers: [ctx.registry],
      });
      const job = createRetention({
        store: ctx.eventStore,
        clock,
        deliveries: {
          state: shared.dispatcherStore,
          registry: eventRegistry,
          retentionMs: ctx.config.deliveryLogRetentionMs,
        },
        onRun(run) {
          dropped.inc(run.events + run.deliveries.events);
          pruned.inc(run.deliveries.deliveries);
          if (run.events > 0 || run.deliveries.events > 0)
            ctx.logger.info(run, 'retention: dropped operational events');
        },
      });
      const tick = () => {
        running = job
          .tick()
          .catch((error: unknown) => ctx.logger.warn({ err: error }, 'retention run failed'));
        return running;
      };
      // The first run at start, in the background: a start never waits for it.
      void tick();
      interval = setInterval(tick, RETENTION_CHECK_MS).unref();
      timers.ticks.push(async () => {
        await running;
        return job.tick();
      });
    },
    async stop() {
      clearInterval(interval);
      await running; // the store closes after the components stop
    },
  };
}
