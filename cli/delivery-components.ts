/**
 * The delivery worker of a dispatcher (docs/webhooks.md), with its metrics, and the component of a
 * delivery thread of role `all` (`role-thread.ts`): one shard of the delivery queues, its own view of
 * the subscriptions, and no fan-out (docs/webhooks.md, "Scale"). Each thread reports its own gauges;
 * the parent's `/metrics` sums them (the oldest delivery's age: the largest).
 */
import { randomUUID } from 'node:crypto';
import { isMainThread } from 'node:worker_threads';
import { Counter, Gauge, Histogram } from 'prom-client';
import { createDeliveryWorker, type DeliveryWorker } from '../dispatcher/delivery-worker.ts';
import { createLeasedDeliveries } from '../dispatcher/leased-deliveries.ts';
import { type Shard, shardWindow } from '../dispatcher/shards.ts';
import type { InFlightBudget } from '../dispatcher/slots.ts';
import { createSubscriptionTracker, type SubscriptionTracker } from '../dispatcher/subscription-tracker.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import type { ReadStore } from '../projections/read-store.ts';
import type { Component, ServiceContext } from './compose.ts';
import { type DispatcherShared, dispatcherState, type Timers } from './dispatcher-state.ts';
import { newLeaseOwner } from './lease-owner.ts';

/** A gauge read from `read` at each scrape. */
export function readGauge(
  ctx: Pick<ServiceContext, 'registry'>,
  name: string,
  help: string,
  read: () => number,
): void {
  new Gauge({
    name,
    help,
    registers: [ctx.registry],
    collect() {
      this.set(read());
    },
  });
}

/** A gauge of the age, on the clock, of what `oldest` names (an ISO time), in seconds; 0 when nothing. */
export function ageGauge(
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
    // Several threads' ages: the oldest is the largest.
    aggregator: 'max',
    collect() {
      const at = oldest();
      this.set(at === null ? 0 : Math.max(0, (clock.now().getTime() - Date.parse(at)) / 1000));
    },
  });
}

/**
 * How long a dispatcher's lease on a delivery shard holds unrenewed (split deployment): a dead
 * dispatcher's shards are taken this long after its last renewal, renewed every third of it.
 */
const SHARD_LEASE_MS = 15_000;

interface WorkerParts {
  shared: DispatcherShared;
  clock: Clock;
  timers: Timers;
  tracker: SubscriptionTracker;
  shard?: Shard;
}

/** Makes the process's delivery workers, each counting its attempts in the process's metrics. */
function workerFactory(ctx: ServiceContext, parts: WorkerParts) {
  const { shared, clock, tracker } = parts;
  const dispatcherStore = shared.dispatcherStore;
  if (!dispatcherStore) throw new Error('the webhook dispatcher needs its state opened first');
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
  const dispatcherId = `dispatcher-${randomUUID()}`;
  return (shard: Shard | undefined, maxInFlight: number | InFlightBudget) =>
    createDeliveryWorker({
      store: ctx.eventStore,
      readStore: dispatcherStore,
      clock,
      tracker,
      secretKey: ctx.config.secretKey,
      openBody: ctx.customerData.openBody,
      allowPrivate: ctx.config.allowPrivateWebhookUrls,
      timeoutMs: ctx.config.webhookTimeoutMs,
      scheduleMs: ctx.config.webhookRetryScheduleMs,
      maxInFlight,
      // PDS_WEBHOOK_QUEUE_WINDOW is the process's: each of the layout's shard workers holds its part.
      queueWindow: shardWindow(ctx.config.webhookQueueWindow, shard?.count ?? 1),
      shard,
      dispatcherId,
      logger: ctx.logger.child({
        component: 'webhook-dispatcher',
        ...(shard && shard.count > 1 && { shard: `${shard.index + 1}-of-${shard.count}` }),
      }),
      supervisor: ctx.supervisor,
      onAttempt({ outcome, durationMs }) {
        attempts.inc({ outcome });
        latency.observe({ outcome }, durationMs / 1000);
      },
    });
}

/**
 * Whether this process leases delivery shards: a dispatcher process of the split deployment (role
 * `dispatcher` on EventStoreDB). Role `all`'s dispatcher and delivery threads run as role `dispatcher`
 * too, on worker threads: they keep their own shard, whatever the event store.
 */
export function leasesShards(
  ctx: Pick<ServiceContext, 'role' | 'config'>,
  onMainThread: boolean = isMainThread,
): boolean {
  return ctx.role === 'dispatcher' && !ctx.config.embedded && onMainThread;
}

/**
 * The dispatcher's deliveries, with their metrics; not started yet. A dispatcher process of the
 * split deployment (role `dispatcher` on EventStoreDB) leases its share of `PDS_WEBHOOK_DELIVERY_SHARDS`
 * and runs a worker for each shard it holds (one budget of `PDS_WEBHOOK_MAX_IN_FLIGHT` for them all); otherwise
 * one worker sends `shard`'s queues (all of them by default).
 */
export function deliveryWorkerOf(ctx: ServiceContext, parts: WorkerParts): DeliveryWorker {
  const { clock, timers } = parts;
  const make = workerFactory(ctx, parts);
  const maxInFlight = ctx.config.webhookMaxInFlight;
  const w = leasesShards(ctx)
    ? createLeasedDeliveries({
        store: ctx.eventStore,
        registry: eventRegistry,
        readStore: parts.shared.dispatcherStore as ReadStore,
        owner: newLeaseOwner(),
        shards: ctx.config.webhookDeliveryShards,
        ttlMs: SHARD_LEASE_MS,
        clock,
        logger: ctx.logger.child({ component: 'webhook-dispatcher' }),
        maxInFlight,
        worker: make,
      })
    : make(parts.shard, maxInFlight);
  timers.ticks.push(() => w.tick());
  readGauge(
    ctx,
    'pds_webhook_deliveries_pending',
    'webhook deliveries neither delivered nor parked (queue depth)',
    () => w.pending().depth,
  );
  readGauge(
    ctx,
    'pds_webhook_requests_in_flight',
    'webhook requests open (at most PDS_WEBHOOK_MAX_IN_FLIGHT per delivery worker, per process on the split deployment)',
    () => w.slots().inFlight,
  );
  readGauge(
    ctx,
    'pds_webhook_queues_waiting_for_slot',
    'delivery queues due and waiting for a free request slot of their subscription or of the dispatcher',
    () => w.slots().waiting,
  );
  ageGauge(
    ctx,
    clock,
    'pds_webhook_oldest_pending_seconds',
    'age of the oldest webhook delivery neither delivered nor parked (0 when none)',
    () => w.pending().oldestQueuedSince,
  );
  return w;
}

/**
 * A delivery thread's worker (role `all`, `PDS_WEBHOOK_DELIVERY_THREADS` above 1): restores its shard's
 * queues and sends them; the dispatcher thread's fan-out schedules on them through the log.
 */
export function deliveryShard(
  shared: DispatcherShared,
  shard: Shard,
  clock: Clock = systemClock,
  timers: Timers = { ticks: [] },
): Component {
  let tracker: SubscriptionTracker | undefined;
  let worker: DeliveryWorker | undefined;
  return {
    name: 'webhook-delivery-shard',
    roles: ['dispatcher'],
    async start(ctx) {
      tracker = createSubscriptionTracker({ store: ctx.eventStore, supervisor: ctx.supervisor });
      const w = deliveryWorkerOf(ctx, { shared, clock, timers, tracker, shard });
      worker = w;
      let restored = false;
      ctx.readiness.add('webhook_deliveries_restored', () => restored);
      const started = Date.now();
      tracker.start();
      w.start();
      await Promise.all([tracker.caughtUp, w.caughtUp]);
      restored = true;
      ctx.logger.info(
        {
          ms: Date.now() - started,
          shard: `${shard.index + 1}-of-${shard.count}`,
          pending: w.pending().depth,
          resumed_after: w.resumed().position,
        },
        'webhook deliveries restored',
      );
    },
    async stop() {
      await worker?.stop();
      await tracker?.stop();
    },
  };
}

/**
 * `dispatcher.db`'s page cache on a delivery thread, in MiB: its worker reads the documents once at
 * start and then writes its queues' (docs/operations.md, "Threads"), so the dispatcher thread's 32 MiB
 * would only multiply by the threads.
 */
export const DELIVERY_THREAD_CACHE_MIB = 4;

/** A delivery thread's components (role `all`): the dispatcher state and the delivery worker of `shard`. */
export function deliveryComponents(shard: Shard, shared: DispatcherShared = {}): Component[] {
  return [dispatcherState(shared, { cacheMiB: DELIVERY_THREAD_CACHE_MIB }), deliveryShard(shared, shard)];
}
