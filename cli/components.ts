/**
 * The components each role runs, in start order. The composition root (`compose.ts`) starts the ones
 * of its role and stops them in reverse. Components share what they build through `Shared`.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, Histogram } from 'prom-client';
import { createAdminRouter } from '../api/admin.ts';
import { createProjectionAdminRouter } from '../api/admin-projections.ts';
import { createDocsRouter } from '../api/docs.ts';
import { createPartnerRouters, partnerApis } from '../api/partner/index.ts';
import { openPartnerCollections } from '../api/partner/routes.ts';
import { createPlatformRouter } from '../api/platform.ts';
import { createCommandHandler } from '../application/command-handler.ts';
import { Lookups } from '../application/lookups.ts';
import { createStoreSpecials, type StoreSpecials } from '../application/store-specials.ts';
import { type AbandonmentTimer, createAbandonmentTimer } from '../dispatcher/abandonment.ts';
import { createDeliveryWorker, type DeliveryWorker } from '../dispatcher/delivery-worker.ts';
import { createFanOut, type FanOut } from '../dispatcher/fan-out.ts';
import { createSubscriptionTracker, type SubscriptionTracker } from '../dispatcher/subscription-tracker.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import { allProjections } from '../projections/all.ts';
import { openReadStore } from '../projections/index.ts';
import { createProjector, type Projector } from '../projections/projector.ts';
import type { ReadStore } from '../projections/read-store.ts';
import type { SqliteReadStore } from '../projections/sqlite/read-store.ts';
import type { Component } from './compose.ts';

/** What components build for each other. */
export interface Shared {
  readStore?: ReadStore;
  projector?: Projector;
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

/**
 * The read store, and the projector where this process owns the read models: role `all` (the embedded
 * `read.db`), every role with `memory` (each process its own copy, built from the events at start), and
 * the `projector` role with MongoDB (one active projector per read model; `api` processes only read).
 */
export function readSide(shared: Shared): Component {
  let projector: Projector | undefined;
  return {
    name: 'read-side',
    // The dispatcher keeps its working state (pending carts, delivery queues) in the read store too.
    roles: ['api', 'projector', 'dispatcher'],
    async start(ctx) {
      const readStore = await openReadStore(ctx.config.readStoreUrl, {
        cacheMiB: ctx.config.readStoreCacheMiB,
      });
      shared.readStore = readStore;
      logOpened(readStore, ctx.logger);
      if (ctx.role === 'dispatcher') return; // the read models are the projector's and the api's
      // A copy of its own (`memory`) is every process's to build; a shared one the projector's.
      const owns = ctx.config.readStoreUrl === 'memory' || ctx.role === 'all' || ctx.role === 'projector';
      if (!owns) return;
      projector = createProjector({
        store: ctx.eventStore,
        readStore,
        projections: allProjections(),
        onError: (name, err) => ctx.logger.error({ err, projection: name }, 'projection failed'),
        logger: ctx.logger,
        supervisor: ctx.supervisor,
      });
      shared.projector = projector;
      let caughtUp = false;
      ctx.readiness.add('projections_caught_up', () => caughtUp);
      const p = projector;
      const gauge = (
        name: string,
        help: string,
        pick: (s: Awaited<ReturnType<Projector['status']>>[number]) => number,
      ) =>
        new Gauge({
          name,
          help,
          labelNames: ['projection'],
          registers: [ctx.registry],
          async collect() {
            for (const s of await p.status()) this.set({ projection: s.name }, pick(s));
          },
        });
      gauge('pds_projection_checkpoint', 'global position of the last event applied', (s) => s.checkpoint);
      gauge('pds_projection_lag_events', 'events after the checkpoint not yet applied', (s) => s.lag_events);
      gauge('pds_projection_lag_seconds', 'age of the oldest event not yet applied', (s) => s.lag_seconds);
      gauge('pds_projection_rebuild_percent', 'progress of a running rebuild (0 when none)', (s) =>
        s.state === 'rebuilding' ? (s.progress?.percent ?? 0) : 0,
      );
      ctx.app.use(createProjectionAdminRouter(projector, ctx.config.operatorToken).routes());
      await projector.start();
      // Not awaited: the process serves /healthz while the read models catch up; /readyz says when.
      const started = Date.now();
      projector.caughtUp.then(() => {
        caughtUp = true;
        ctx.logger.info({ ms: Date.now() - started, projections: p.names() }, 'read models caught up');
      });
    },
    async stop() {
      await projector?.stop();
      await shared.readStore?.close();
    },
  };
}

/** Says when the read models start empty and why (a new or replaced file): they are rebuilt from the events. */
function logOpened(readStore: ReadStore, logger: Logger): void {
  if (!('opened' in readStore)) return;
  const { state, reason } = (readStore as SqliteReadStore).opened;
  if (state === 'replaced')
    logger.warn({ reason }, 'read store replaced: read models are rebuilt from the events');
  else if (state === 'created')
    logger.info({ reason }, 'read store created: read models are built from the events');
}

/** The four partner APIs, reading the read models (and appending curbside arrivals), and their `/docs` page. */
export function partnerApi(shared: Shared, clock: Clock = systemClock): Component {
  return {
    name: 'partner-api',
    roles: ['api'],
    async start(ctx) {
      if (!shared.readStore) throw new Error('the partner APIs need the read side started first');
      const collection = await openPartnerCollections(shared.readStore);
      const commands = createCommandHandler(ctx.eventStore, eventRegistry);
      for (const router of createPartnerRouters({ collection, store: ctx.eventStore, commands, clock })) {
        ctx.app.use(router.routes());
      }
      ctx.app.use(createDocsRouter(partnerApis).routes());
    },
    stop() {},
  };
}

/** The platform and admin APIs, with the write side's own lookup of store specials (for pricing). */
export function writeApi(shared: Shared, clock: Clock = systemClock): Component {
  let specials: StoreSpecials | undefined;
  let lookups: Lookups | undefined;
  return {
    name: 'write-api',
    roles: ['api'],
    async start(ctx) {
      const store = ctx.eventStore;
      const commands = createCommandHandler(store, eventRegistry);
      if (!shared.readStore) throw new Error('the admin API needs the read side started first');
      specials = createStoreSpecials(store, eventRegistry, ctx.supervisor);
      lookups = new Lookups({
        store,
        registry: eventRegistry,
        prefixes: ['menuproduct-', 'product-', 'brand-', 'store-'],
        supervisor: ctx.supervisor,
      });
      let ready = false;
      ctx.readiness.add('write_side_lookups', () => ready);
      const caughtUp = Promise.all([specials.caughtUp, lookups.start()]).then(() => {
        ready = true;
      });
      const operatorToken = ctx.config.operatorToken;
      const readStore = shared.readStore;
      ctx.app.use(
        createPlatformRouter({ store, commands, specials, lookups, clock, operatorToken }).routes(),
      );
      const webhooks = {
        secretKey: ctx.config.secretKey,
        allowPrivateWebhookUrls: ctx.config.allowPrivateWebhookUrls,
        timeoutMs: ctx.config.webhookTimeoutMs,
      };
      ctx.app.use(createAdminRouter({ store, commands, readStore, clock, operatorToken, webhooks }).routes());
      await caughtUp;
    },
    async stop() {
      await lookups?.stop();
      await specials?.stop();
    },
  };
}

/**
 * The abandonment timer (docs/write-side.md): restores the pending carts' deadlines from the read store and the
 * cart events after its checkpoint, then appends `CartAbandoned` when one falls due. Several
 * dispatcher processes may run it: the expected-revision check lets exactly one of them write.
 */
export function abandonmentTimer(
  shared: Shared,
  clock: Clock = systemClock,
  timers: Timers = createTimers(),
): Component {
  let timer: AbandonmentTimer | undefined;
  return {
    name: 'abandonment-timer',
    roles: ['dispatcher'],
    async start(ctx) {
      if (!shared.readStore) throw new Error('the abandonment timer needs the read side started first');
      const t = createAbandonmentTimer({
        store: ctx.eventStore,
        readStore: shared.readStore,
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
  shared: Shared,
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
      if (!shared.readStore) throw new Error('the webhook dispatcher needs the read side started first');
      tracker = createSubscriptionTracker({ store: ctx.eventStore, supervisor: ctx.supervisor });
      const w = createDeliveryWorker({
        store: ctx.eventStore,
        readStore: shared.readStore,
        clock,
        tracker,
        secretKey: ctx.config.secretKey,
        allowPrivate: ctx.config.allowPrivateWebhookUrls,
        timeoutMs: ctx.config.webhookTimeoutMs,
        scheduleMs: ctx.config.webhookRetryScheduleMs,
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
        name: 'pds_webhook_oldest_pending_seconds',
        help: 'age of the oldest webhook delivery neither delivered nor parked (0 when none)',
        registers: [ctx.registry],
        collect() {
          const oldest = w.pending().oldestScheduledAt;
          this.set(oldest === null ? 0 : Math.max(0, (clock.now().getTime() - Date.parse(oldest)) / 1000));
        },
      });
      let restored = false;
      ctx.readiness.add('webhook_deliveries_restored', () => restored);
      const started = Date.now();
      tracker.start();
      w.start();
      await Promise.all([tracker.caughtUp, w.caughtUp]);
      fanOut = createFanOut({ store: ctx.eventStore, clock, tracker, logger, supervisor: ctx.supervisor });
      await fanOut.start();
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

export function defaultComponents(clock: Clock = systemClock, timers: Timers = createTimers()): Component[] {
  const shared: Shared = {};
  return [
    readSide(shared),
    partnerApi(shared, clock),
    writeApi(shared, clock),
    abandonmentTimer(shared, clock, timers),
    webhookDispatcher(shared, clock, timers),
  ];
}
