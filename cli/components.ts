/**
 * The components each role runs, in start order. The composition root (`compose.ts`) starts the ones
 * of its role and stops them in reverse. Components share what they build through `Shared`; the
 * dispatcher's are in `dispatcher-components.ts`, which its thread loads without the APIs.
 */

import { Gauge } from 'prom-client';
import { createAdminRouter } from '../api/admin.ts';
import { createProjectionAdminRouter } from '../api/admin-projections.ts';
import { createDocsRouter } from '../api/docs.ts';
import { createPartnerRouters, partnerApis } from '../api/partner/index.ts';
import { openPartnerCollections } from '../api/partner/routes.ts';
import { createPlatformRouter } from '../api/platform.ts';
import { createCommandHandler } from '../application/command-handler.ts';
import { Lookups } from '../application/lookups.ts';
import { createStoreSpecials, type StoreSpecials } from '../application/store-specials.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import { allProjections } from '../projections/all.ts';
import { openReadStore } from '../projections/index.ts';
import { createProjector, type Projector } from '../projections/projector.ts';
import type { Component } from './compose.ts';
import {
  createTimers,
  type DispatcherShared,
  dispatcherComponents,
  logOpened,
  type Timers,
} from './dispatcher-components.ts';
import { dispatcherThread } from './dispatcher-thread.ts';

export { createTimers, type Timers, tickTimers } from './dispatcher-components.ts';

/** What components build for each other. */
export interface Shared extends DispatcherShared {
  projector?: Projector;
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
    roles: ['api', 'projector'],
    async start(ctx) {
      const readStore = await openReadStore(ctx.config.readStoreUrl, {
        cacheMiB: ctx.config.readStoreCacheMiB,
      });
      shared.readStore = readStore;
      logOpened(readStore, ctx.logger, { store: 'read store', holds: 'read models are' });
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

/** Every component in this process and thread; tests inject a clock and run the timers with `tickTimers`. */
export function defaultComponents(clock: Clock = systemClock, timers: Timers = createTimers()): Component[] {
  const shared: Shared = {};
  return [
    readSide(shared),
    partnerApi(shared, clock),
    writeApi(shared, clock),
    ...dispatcherComponents(shared, clock, timers),
  ];
}

/**
 * Role `all` with the dispatcher on a thread of its own (`PDS_DISPATCHER_THREAD`, `dispatcher-thread.ts`):
 * the thread starts first, so it restores its state on the second core while this one loads the rest.
 */
export function threadedComponents(thread: Component = dispatcherThread()): Component[] {
  const shared: Shared = {};
  return [thread, readSide(shared), partnerApi(shared), writeApi(shared)];
}
