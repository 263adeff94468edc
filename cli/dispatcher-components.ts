/**
 * The dispatcher role's components (docs/webhooks.md, docs/write-side.md): its working state, the
 * abandonment timer and the webhook dispatcher. Role `all` runs them beside the APIs, or on a thread
 * of their own (`role-thread.ts`), which loads this module and not the APIs'.
 */
import { Counter } from 'prom-client';
import { createRetention } from '../application/retention.ts';
import { type AbandonmentTimer, createAbandonmentTimer } from '../dispatcher/abandonment.ts';
import type { DeliveryWorker } from '../dispatcher/delivery-worker.ts';
import { createFanOut, type FanOut } from '../dispatcher/fan-out.ts';
import type { Shard } from '../dispatcher/shards.ts';
import { createSubscriptionTracker, type SubscriptionTracker } from '../dispatcher/subscription-tracker.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import type { Component, ServiceContext } from './compose.ts';
import { ageGauge, deliveryWorkerOf, readGauge } from './delivery-components.ts';
import { createTimers, type DispatcherShared, dispatcherState, type Timers } from './dispatcher-state.ts';

export {
  createTimers,
  type DispatcherShared,
  dispatcherState,
  logOpened,
  type Timers,
  tickTimers,
} from './dispatcher-state.ts';

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
      readGauge(ctx, 'pds_abandonment_timers_pending', 'carts with a pending abandonment deadline', () =>
        t.pending(),
      );
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
  shard?: Shard,
): Component {
  let tracker: SubscriptionTracker | undefined;
  let fanOut: FanOut | undefined;
  let worker: DeliveryWorker | undefined;
  return {
    name: 'webhook-dispatcher',
    roles: ['dispatcher'],
    async start(ctx) {
      const logger = ctx.logger.child({ component: 'webhook-dispatcher' });
      tracker = createSubscriptionTracker({ store: ctx.eventStore, supervisor: ctx.supervisor });
      const w = deliveryWorkerOf(ctx, { shared, clock, timers, tracker, shard });
      worker = w;
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

/**
 * What the fan-out is trying again: it never parks a cart event, so one that keeps failing shows here,
 * by its age (docs/operations.md, "The fan-out's group").
 */
function fanOutGauges(fanOut: FanOut, clock: Clock, ctx: Pick<ServiceContext, 'registry'>): void {
  readGauge(
    ctx,
    'pds_webhook_fan_out_retrying',
    'cart events whose webhook fan-out failed and is being tried again (never parked)',
    () => fanOut.retrying().events,
  );
  ageGauge(
    ctx,
    clock,
    'pds_webhook_fan_out_retrying_oldest_seconds',
    'age of the oldest cart event whose webhook fan-out is being tried again, since it was recorded (0 when none)',
    () => fanOut.retrying().oldestRecordedAt,
  );
}

/**
 * The dispatcher's components: its working state, the abandonment timer and the webhook dispatcher,
 * whose delivery worker sends `shard`'s queues (by default all of them).
 */
export function dispatcherComponents(
  shared: DispatcherShared = {},
  clock: Clock = systemClock,
  timers: Timers = createTimers(),
  shard?: Shard,
): Component[] {
  return [
    dispatcherState(shared),
    abandonmentTimer(shared, clock, timers),
    webhookDispatcher(shared, clock, timers, shard),
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
