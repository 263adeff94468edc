/**
 * `GET /admin/v1/projections` (state, checkpoint, lag, rebuild progress) and
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
import { type AlertThresholds, DEFAULT_ALERT_THRESHOLDS, withProjectionTrouble } from './admin-trouble.ts';
import { type AppState, createRouter, HttpProblem, securityHeaders, useEach } from './http.ts';
import { operatorAuth, operatorOf, requestActor } from './operator-auth.ts';
import { requireRole } from './route-roles.ts';
import { parseParams } from './validation.ts';
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

export function createProjectionAdminRouter(deps: ProjectionAdminDeps): Router<AppState> {
  const { projector, store, clock } = deps;
  const router = createRouter({ prefix: '/admin/v1/projections' });
  useEach(
    router,
    securityHeaders,
    operatorAuth(deps.operators, deps.sessions),
    requireRole(router),
    writeErrors,
  );

  router.get('/', async (ctx) => {
    const thresholds = deps.alerts ?? DEFAULT_ALERT_THRESHOLDS;
    const projections = (await projector.status()).map((p) => withProjectionTrouble(p, thresholds));
    ctx.body = {
      projections,
      lagging: projections.filter((p) => p.status === 'lagging').length,
      thresholds: { projection_lag_seconds: thresholds.projectionLagMs / 1000 },
    };
  });

  router.post('/:name/rebuild', async (ctx) => {
    const { name } = parseParams(ctx.params, z.object({ name: z.string().max(100) }), 404);
    const statuses = await projector.status();
    const status = statuses.find((p) => p.name === name);
    if (!status) {
      throw new HttpProblem(404, {
        code: 'projection_not_found',
        detail: `no projection ${name}; known: ${statuses.map((p) => p.name).join(', ')}`,
      });
    }
    if (status.state === 'standby') {
      throw new HttpProblem(409, {
        code: 'projector_standing_by',
        detail:
          "this projector stands by while another holds the read store's projector lease: " +
          'ask the projector whose projections are live',
      });
    }
    const already = status.state === 'rebuilding';
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
  });

  return router;
}
