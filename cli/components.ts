/**
 * The components each role runs, in start order. The composition root (`compose.ts`) starts the ones
 * of its role and stops them in reverse. Components share what they build through `Shared`.
 */
import { Gauge } from 'prom-client';
import { createAdminRouter } from '../api/admin.ts';
import { createProjectionAdminRouter } from '../api/admin-projections.ts';
import { createCommandHandler } from '../api/command-handler.ts';
import { createDocsRouter } from '../api/docs.ts';
import { createPartnerRouters, partnerApis } from '../api/partner/index.ts';
import { openPartnerCollections } from '../api/partner/routes.ts';
import { createPlatformRouter } from '../api/platform.ts';
import { type AbandonmentTimer, createAbandonmentTimer } from '../dispatcher/abandonment.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import { allProjections } from '../projections/all.ts';
import { openReadStore } from '../projections/index.ts';
import { createProjector, type Projector } from '../projections/projector.ts';
import type { ReadStore } from '../projections/read-store.ts';
import { createStoreSpecials, type StoreSpecials } from '../projections/store-specials.ts';
import type { Component } from './compose.ts';

/** What components build for each other. */
export interface Shared {
  readStore?: ReadStore;
  projector?: Projector;
}

/**
 * The read store, and the projector where this process owns the read models: always with the
 * in-memory store (each process holds its own copy, rebuilt from the events at start), and in the
 * `projector` role with MongoDB (one active projector per read model; `api` processes only read).
 */
export function readSide(shared: Shared): Component {
  let projector: Projector | undefined;
  return {
    name: 'read-side',
    roles: ['api', 'projector', 'dispatcher'],
    async start(ctx) {
      const readStore = await openReadStore(ctx.config.readStoreUrl);
      shared.readStore = readStore;
      const owns = readStore.kind === 'memory' || ctx.role === 'all' || ctx.role === 'projector';
      if (!owns) return;
      projector = createProjector({
        store: ctx.eventStore,
        readStore,
        projections: allProjections(),
        onError: (name, err) => ctx.logger.error({ err, projection: name }, 'projection failed'),
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
  return {
    name: 'write-api',
    roles: ['api'],
    async start(ctx) {
      const store = ctx.eventStore;
      const commands = createCommandHandler(store, eventRegistry);
      if (!shared.readStore) throw new Error('the admin API needs the read side started first');
      specials = createStoreSpecials(store, eventRegistry);
      let ready = false;
      ctx.readiness.add('write_side_lookups', () => ready);
      const lookups = specials.caughtUp.then(() => {
        ready = true;
      });
      const operatorToken = ctx.config.operatorToken;
      const readStore = shared.readStore;
      ctx.app.use(createPlatformRouter({ store, commands, specials, clock, operatorToken }).routes());
      const webhooks = {
        secretKey: ctx.config.secretKey,
        allowPrivateWebhookUrls: ctx.config.allowPrivateWebhookUrls,
      };
      ctx.app.use(createAdminRouter({ store, commands, readStore, clock, operatorToken, webhooks }).routes());
      await lookups;
    },
    async stop() {
      await specials?.stop();
    },
  };
}

/**
 * The abandonment timer (DESIGN §3): restores every open cart's deadline from the events at start,
 * then appends `CartAbandoned` when one falls due. Several dispatcher processes may run it: the
 * expected-revision check lets exactly one of them write.
 */
export function abandonmentTimer(clock: Clock = systemClock): Component {
  let timer: AbandonmentTimer | undefined;
  return {
    name: 'abandonment-timer',
    roles: ['dispatcher'],
    async start(ctx) {
      const t = createAbandonmentTimer({
        store: ctx.eventStore,
        clock,
        abandonAfterMs: ctx.config.abandonAfterMs,
        logger: ctx.logger.child({ component: 'abandonment-timer' }),
      });
      timer = t;
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
      ctx.logger.info({ ms: Date.now() - started, pending: t.pending() }, 'abandonment timers restored');
    },
    async stop() {
      await timer?.stop();
    },
  };
}

export function defaultComponents(clock: Clock = systemClock): Component[] {
  const shared: Shared = {};
  return [readSide(shared), partnerApi(shared, clock), writeApi(shared, clock), abandonmentTimer(clock)];
}
