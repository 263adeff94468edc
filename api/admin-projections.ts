/**
 * `GET /admin/v1/projections` (state, checkpoint, lag, a build's progress) and
 * `POST /admin/v1/projections/{name}/rebuild` (into fresh copies while the live ones serve). Each
 * projection carries `status` (`ok` or `lagging`) and `trouble`, the reasons (`admin-trouble.ts`), and
 * the answer how many lag.
 * Served by the process that runs the projector (role `all` or `projector`); in role `all` the projector
 * may run on a thread of its own, reached through the same two calls (docs/operations.md, "Threads").
 * Who asked for a rebuild is on record: a `ProjectionRebuildRequested` event in
 * `projectionrebuilds-<name>`, its actor the person, appended before the rebuild starts, and a log line.
 */
import type Router from '@koa/router';
import { z } from 'zod';
import { appendRetrying, toNewEvents } from '../application/command-handler.ts';
import type { ConsoleSessions } from '../application/console-sessions.ts';
import type { OperatorAuthenticator } from '../application/operator-principal.ts';
import type { Clock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import { projectionRebuildRequested, projectionRebuildsStreamId } from '../domain/operator-activity.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Projector } from '../projections/projector.ts';
import { projections, rebuildStarted } from './admin-records.ts';
import { type AdminRoute, adminRoute, mountAdminRoutes } from './admin-route-table.ts';
import { type AlertThresholds, DEFAULT_ALERT_THRESHOLDS, withProjectionTrouble } from './admin-trouble.ts';
import { type AppState, createRouter, HttpProblem, securityHeaders, useEach } from './http.ts';
import { operatorAuth, operatorOf, requestActor } from './operator-auth.ts';
import { requireRole } from './route-roles.ts';
import { commandMetadata, writeErrors } from './write-support.ts';

/** What the routes ask of the projector, wherever it runs. */
export type ProjectorControl = Pick<Projector, 'status' | 'rebuild'>;

export interface ProjectionAdminDeps {
  projector: ProjectorControl;
  /** Who the bearer of an operator token is (docs/operations.md, "Accounts and roles"). */
  operators: OperatorAuthenticator;
  /** The console's sessions, where the console is served (docs/operations.md, "The console"). */
  sessions?: ConsoleSessions;
  /** Where rebuild requests are recorded. */
  store: EventStore;
  clock: Clock;
  /** `PDS_ALERT_PROJECTION_LAG` and the rest: when a projection is marked lagging (`admin-trouble.ts`). */
  alerts?: AlertThresholds;
}

/** Projections' status and rebuilds: the routes of their router, and of the admin API's document. */
export function projectionRoutes(
  deps: Pick<ProjectionAdminDeps, 'projector' | 'store' | 'clock' | 'alerts'>,
): AdminRoute[] {
  const { projector, store, clock } = deps;
  const status = adminRoute({
    method: 'get',
    path: '/projections',
    operationId: 'listProjections',
    summary: 'Every projection: state, checkpoint, lag, build progress',
    description:
      'Served by the process that runs the projector. `standby`: another projector holds the read ' +
      "store's lease and writes the read models. A projection is `lagging` while its lag passes " +
      '`PDS_ALERT_PROJECTION_LAG`, with why (`trouble`); the answer counts them. `progress`: a ' +
      'rebuild, or a projection catching up at a start, with the rate of the last 30 s and the time ' +
      'left at it (`eta_seconds`).',
    response: { status: 200, description: 'The projections.', schema: projections },
    problems: [],
    async handler(ctx) {
      const thresholds = deps.alerts ?? DEFAULT_ALERT_THRESHOLDS;
      const projections = (await projector.status()).map((p) => withProjectionTrouble(p, thresholds));
      ctx.body = {
        projections,
        lagging: projections.filter((p) => p.status === 'lagging').length,
        thresholds: { projection_lag_seconds: thresholds.projectionLagMs / 1000 },
      };
    },
  });

  const rebuild = adminRoute({
    method: 'post',
    path: '/projections/{name}/rebuild',
    operationId: 'rebuildProjection',
    summary: 'Rebuild a projection from the log',
    description:
      'Into fresh copies while the live ones serve; they go live when the rebuild has caught up. Its ' +
      'progress is in `GET /projections`. Who asked is on record. 409 `projector_standing_by` on a ' +
      'projector that stands by.',
    params: z.object({ name: z.string().max(100) }),
    response: {
      status: 202,
      description: 'The rebuild runs (or already ran) in the background.',
      schema: rebuildStarted,
      headers: { Location: { description: '`/admin/v1/projections`.', required: true } },
    },
    // A second request while a rebuild runs joins it (`already_running`): no key needed.
    idempotencyKey: false,
    problems: [404, 409],
    async handler(ctx, { params }) {
      const { name } = params;
      const statuses = await projector.status();
      const found = statuses.find((p) => p.name === name);
      if (!found) {
        throw new HttpProblem(404, {
          code: 'projection_not_found',
          detail: `no projection ${name}; known: ${statuses.map((p) => p.name).join(', ')}`,
        });
      }
      if (found.state === 'standby') {
        throw new HttpProblem(409, {
          code: 'projector_standing_by',
          detail:
            "this projector stands by while another holds the read store's projector lease: " +
            'ask the projector whose projections are live',
        });
      }
      const already = found.state === 'rebuilding';
      const metadata = commandMetadata(ctx, requestActor(ctx), clock);
      const record = toNewEvents(
        eventRegistry,
        [projectionRebuildRequested(name, already, metadata.at)],
        metadata,
      );
      await appendRetrying(store, projectionRebuildsStreamId(name), record, { expectedRevision: 'any' });
      ctx.state.log.info(
        { projection: name, operator_id: operatorOf(ctx).operator_id, already_running: already },
        'projection rebuild requested',
      );
      // The rebuild runs in the background; its progress is in GET /admin/v1/projections.
      projector
        .rebuild(name)
        .catch((err: Error) => ctx.state.log.error({ err, projection: name }, 'rebuild failed'));
      ctx.status = 202;
      ctx.set('Location', '/admin/v1/projections');
      ctx.body = { projection: name, state: 'rebuilding', already_running: already };
    },
  });
  return [status, rebuild];
}

export function createProjectionAdminRouter(
  deps: ProjectionAdminDeps,
  routes: readonly AdminRoute[] = projectionRoutes(deps),
): Router<AppState> {
  const router = createRouter({ prefix: '/admin/v1/projections' });
  useEach(
    router,
    securityHeaders,
    operatorAuth(deps.operators, deps.sessions),
    requireRole(router),
    writeErrors,
  );
  mountAdminRoutes(router, routes);
  return router;
}
