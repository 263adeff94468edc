/**
 * The components each role runs, in start order. The composition root (`compose.ts`) starts the ones
 * of its role and stops them in reverse. Components share what they build through `Shared`. The
 * dispatcher's are in `dispatcher-components.ts` and the read side's in `read-side.ts`, which their
 * threads load without the APIs.
 */

import path from 'node:path';
import { adminRouteTables, createAdminDocumentRouter, createAdminRouter } from '../api/admin.ts';
import {
  createProjectionAdminRouter,
  type ProjectorControl,
  projectionRoutes,
} from '../api/admin-projections.ts';
import type { AdminRoute } from '../api/admin-route-table.ts';
import { createSessionRouter, sessionRoutes } from '../api/admin-session.ts';
import { createConsoleRouter } from '../api/console.ts';
import { createDocsRouter, OPERATOR_APIS } from '../api/docs.ts';
import { homeRoutes } from '../api/home.ts';
import { HttpProblem, routesOf } from '../api/http.ts';
import { createOperatorAuthenticator } from '../api/operator-authenticator.ts';
import { createPartnerRouters, partnerApis } from '../api/partner/index.ts';
import { openPartnerCollections } from '../api/partner/routes.ts';
import { createPlatformDocumentRouter, createPlatformRouter, platformRouteTables } from '../api/platform.ts';
import { createCommandHandler } from '../application/command-handler.ts';
import { ConsoleSessions } from '../application/console-sessions.ts';
import type { OperatorAuthenticator } from '../application/operator-principal.ts';
import { buildWriteSideLookups, type WriteSideLookups } from '../application/write-side-lookups.ts';
import { type Clock, systemClock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import type { Projector } from '../projections/projector.ts';
import type { ReadStore } from '../projections/read-store.ts';
import { scheduledBackups } from './backup/component.ts';
import type { Component, ServiceContext } from './compose.ts';
import type { Config } from './config.ts';
import {
  createTimers,
  type DispatcherShared,
  dispatcherComponents,
  type Timers,
} from './dispatcher-components.ts';
import { type ReadSideShared, readSide } from './read-side.ts';
import { type RoleThread, roleThread, ThreadUnavailableError } from './role-thread.ts';
import { subscriptionImpact } from './supervision.ts';

export { createTimers, type Timers, tickTimers } from './dispatcher-components.ts';

/** What components build for each other. */
export interface Shared extends DispatcherShared, ReadSideShared {
  /** Who the bearer of an operator token is: the bootstrap token or an account's (one per process). */
  operators?: OperatorAuthenticator;
  /** The console's sessions, where the admin API is served. */
  sessions?: ConsoleSessions;
  /** The projections' admin routes, where this process serves them: the admin API's document shows them. */
  projectionRoutes?: AdminRoute[];
}

/** The authenticator of the admin and platform APIs and the console's sessions, once the read store is open. */
function operatorsOf(shared: Shared, ctx: ServiceContext, clock: Clock): OperatorAuthenticator {
  if (!shared.readStore) throw new Error('operator authentication needs the read side started first');
  shared.operators ??= createOperatorAuthenticator({
    readStore: shared.readStore,
    clock,
    bootstrapToken: ctx.config.operatorToken,
  });
  return shared.operators;
}

/**
 * The store of the console's sessions (docs/operations.md, "The console"): beside a SQLite read store
 * file, a file of their own (`sessions.db`), so a sign-in never waits for a projector's commit to
 * `read.db`; otherwise (`undefined`) the read store itself: MongoDB, which every `api` replica shares,
 * or this process's `memory`.
 */
export function sessionStoreUrl(readStoreUrl: string): string | undefined {
  if (!readStoreUrl.startsWith('sqlite:') || readStoreUrl === 'sqlite::memory:') return undefined;
  return `sqlite:${path.join(path.dirname(readStoreUrl.slice('sqlite:'.length)), 'sessions.db')}`;
}

/** The console's sessions, opened before the routes that accept them. */
export function consoleSessions(shared: Shared, clock: Clock = systemClock): Component {
  let own: ReadStore | undefined;
  return {
    name: 'console-sessions',
    roles: ['api'],
    async start(ctx) {
      if (!shared.readStore) throw new Error('the console sessions need the read side started first');
      const url = sessionStoreUrl(ctx.config.readStoreUrl);
      if (url !== undefined) own = await ctx.openReadStore(url, { cacheMiB: 2 });
      shared.sessions = await ConsoleSessions.open(
        own ?? shared.readStore,
        operatorsOf(shared, ctx, clock),
        clock,
        {
          absoluteMs: ctx.config.consoleSessionMs,
          idleMs: ctx.config.consoleIdleMs,
        },
      );
    },
    async stop() {
      await own?.close();
    },
  };
}

/**
 * `/admin/v1/projections`, served where the projector runs: in this process, or on the projector's
 * thread (`thread`), whose status and rebuilds it reaches through the thread's calls.
 */
/** When the admin API marks trouble (docs/operations.md, "Health"). */
const alertThresholds = (config: Pick<Config, 'alertOldestQueuedMs' | 'alertProjectionLagMs'>) => ({
  oldestQueuedMs: config.alertOldestQueuedMs,
  projectionLagMs: config.alertProjectionLagMs,
});

export function projectionAdmin(shared: Shared, thread?: RoleThread, clock: Clock = systemClock): Component {
  return {
    name: 'projection-admin',
    roles: ['api', 'projector'],
    start(ctx) {
      const projector = thread ? threadProjector(thread) : shared.projector;
      if (!projector) return;
      const operators = operatorsOf(shared, ctx, clock);
      const { sessions } = shared;
      const alerts = alertThresholds(ctx.config);
      const deps = { projector, operators, sessions, store: ctx.eventStore, clock, alerts };
      shared.projectionRoutes = projectionRoutes(deps);
      ctx.app.use(routesOf(createProjectionAdminRouter(deps, shared.projectionRoutes)));
    },
    stop() {},
  };
}

/** How long the projections' status may take on a busy thread before the route answers 503. */
const STATUS_TIMEOUT_MS = 10_000;

/** The projector on its thread; a thread that is not running (starting, started again) or too slow is a 503. */
function threadProjector(thread: RoleThread): ProjectorControl {
  const unavailable = (error: unknown) => {
    if (!(error instanceof ThreadUnavailableError)) throw error;
    throw new HttpProblem(503, {
      code: 'projector_unavailable',
      detail: `${error.message}; retry shortly`,
      headers: { 'Retry-After': '1' },
    });
  };
  return {
    status: () =>
      (thread.call('status', [], { timeoutMs: STATUS_TIMEOUT_MS }) as ReturnType<Projector['status']>).catch(
        unavailable,
      ),
    // A rebuild takes as long as the log is long: its end is only logged (the route does not wait).
    rebuild: (name) => (thread.call('rebuild', [name]) as Promise<void>).catch(unavailable),
  };
}

/**
 * The four partner APIs, reading the read models (and appending curbside arrivals), and the `/docs`
 * page of every API.
 */
export function partnerApi(shared: Shared, clock: Clock = systemClock): Component {
  return {
    name: 'partner-api',
    roles: ['api'],
    async start(ctx) {
      if (!shared.readStore) throw new Error('the partner APIs need the read side started first');
      const collection = await openPartnerCollections(shared.readStore);
      const commands = createCommandHandler(ctx.eventStore, eventRegistry);
      const idempotencyTtlMs = ctx.config.idempotencyTtlMs;
      const deps = { collection, store: ctx.eventStore, commands, clock, idempotencyTtlMs };
      for (const router of createPartnerRouters(deps)) {
        ctx.app.use(routesOf(router));
      }
      ctx.app.use(routesOf(createDocsRouter([...partnerApis, ...OPERATOR_APIS])));
    },
    stop() {},
  };
}

/**
 * The platform and admin APIs and the operator console, with the write side's lookups and its own
 * lookup of store specials (for pricing). Its start waits for those while the event store answers; at
 * the first setback it goes on, and they are built in the background: an `api` replica is only degraded
 * meanwhile (partner reads are served) and its platform writes answer 503, while role `all` requires
 * them (docs/operations.md, "Health").
 */
export function writeApi(shared: Shared, clock: Clock = systemClock): Component {
  let writeSide: WriteSideLookups | undefined;
  return {
    name: 'write-api',
    roles: ['api'],
    async start(ctx) {
      const store = ctx.eventStore;
      const commands = createCommandHandler(store, eventRegistry);
      if (!shared.readStore) throw new Error('the admin API needs the read side started first');
      const built = buildWriteSideLookups({
        store,
        registry: eventRegistry,
        prefixes: ['menuproduct-', 'product-', 'brand-', 'store-'],
        supervisor: ctx.supervisor,
      });
      writeSide = built;
      ctx.readiness.add('write_side_lookups', () => built.built(), { impact: subscriptionImpact(ctx.role) });
      const { specials, lookups } = built;
      const operators = operatorsOf(shared, ctx, clock);
      const readStore = shared.readStore;
      const platformDeps = {
        store,
        commands,
        specials,
        lookups,
        clock,
        operators,
        writeSideBuilt: built.built,
        idempotencyTtlMs: ctx.config.idempotencyTtlMs,
      };
      const platformTables = platformRouteTables(platformDeps);
      ctx.app.use(routesOf(createPlatformDocumentRouter(platformTables)));
      ctx.app.use(routesOf(createPlatformRouter(platformDeps, platformTables)));
      const webhooks = {
        secretKey: ctx.config.secretKey,
        allowPrivateWebhookUrls: ctx.config.allowPrivateWebhookUrls,
        timeoutMs: ctx.config.webhookTimeoutMs,
        deliveryLogRetentionMs: ctx.config.deliveryLogRetentionMs,
        alerts: alertThresholds(ctx.config),
      };
      const { sessions } = shared;
      const sessionTable = sessions ? sessionRoutes({ operators, sessions, clock }) : [];
      if (sessions) ctx.app.use(routesOf(createSessionRouter({ operators, sessions, clock }, sessionTable)));
      const idempotencyTtlMs = ctx.config.idempotencyTtlMs;
      const customerData = ctx.customerData;
      const adminDeps = {
        store,
        commands,
        readStore,
        clock,
        operators,
        sessions,
        webhooks,
        idempotencyTtlMs,
        customerData,
      };
      const tables = adminRouteTables(adminDeps);
      const described = [...sessionTable, ...tables, ...(shared.projectionRoutes ?? [])];
      ctx.app.use(routesOf(createAdminDocumentRouter(described)));
      ctx.app.use(routesOf(createAdminRouter(adminDeps, tables)));
      // The console works through the admin API, so it is served where that API is, with the page at
      // `/` that links it and the docs.
      ctx.app.use(routesOf(createConsoleRouter()));
      ctx.app.use(homeRoutes());
      if ((await built.settled) === 'built') return;
      ctx.logger.warn(
        'the event store does not answer: the write side lookups are built once it does, and platform writes answer 503 until then',
      );
      built.whenBuilt.then(
        () => ctx.logger.info('the write side lookups are built: platform writes are served'),
        () => {},
      );
    },
    async stop() {
      await writeSide?.stop();
    },
  };
}

/**
 * Every component in this process and thread; tests inject a clock and run the timers with
 * `tickTimers`, and may give the operator authenticator (people with other roles than the bootstrap
 * token's).
 */
export function defaultComponents(
  clock: Clock = systemClock,
  timers: Timers = createTimers(),
  operators?: OperatorAuthenticator,
): Component[] {
  const shared: Shared = { operators };
  return [
    readSide(shared, { clock }),
    consoleSessions(shared, clock),
    projectionAdmin(shared, undefined, clock),
    partnerApi(shared, clock),
    writeApi(shared, clock),
    ...dispatcherComponents(shared, clock, timers),
    scheduledBackups(clock, timers),
  ];
}

/**
 * The threads role `all` runs its dispatcher and projector on (`PDS_DISPATCHER_THREAD`,
 * `PDS_PROJECTOR_THREAD`), and the dispatcher's delivery threads (`PDS_WEBHOOK_DELIVERY_THREADS`,
 * `role-thread.ts`, `dispatcherThreads`).
 */
export interface Threads {
  dispatcher?: RoleThread;
  deliveries?: RoleThread[];
  projector?: RoleThread;
}

/**
 * Role `all` with the dispatcher, the projector, or both on threads of their own (`role-thread.ts`):
 * the threads start first, so they restore their state on the other core while this one loads the
 * rest; the read store is opened here once the projector's thread has opened (or created) it.
 */
export function threadedComponents(
  threads: Threads = { dispatcher: roleThread('dispatcher'), projector: roleThread('projector') },
  clock: Clock = systemClock,
  timers: Timers = createTimers(),
): Component[] {
  const shared: Shared = {};
  const { dispatcher, projector } = threads;
  return [
    ...(dispatcher ? [dispatcher, ...(threads.deliveries ?? [])] : []),
    ...(projector ? [projector] : []),
    readSide(shared, projector ? { project: false, openAfter: projector.firstStart } : {}),
    consoleSessions(shared, clock),
    projectionAdmin(shared, projector, clock),
    partnerApi(shared, clock),
    writeApi(shared, clock),
    ...(dispatcher ? [] : dispatcherComponents(shared, clock, timers)),
    scheduledBackups(clock, timers),
  ];
}
