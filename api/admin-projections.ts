/**
 * `GET /admin/v1/projections` (state, checkpoint, lag, rebuild progress) and
 * `POST /admin/v1/projections/{name}/rebuild` (into fresh copies while the live ones serve).
 * Served by the process that runs the projector (role `all` or `projector`); in role `all` the projector
 * may run on a thread of its own, reached through the same two calls (docs/operations.md, "Threads").
 */
import type Router from '@koa/router';
import { z } from 'zod';
import type { ConsoleSessions } from '../application/console-sessions.ts';
import type { OperatorAuthenticator } from '../application/operator-principal.ts';
import type { Projector } from '../projections/projector.ts';
import { type AppState, createRouter, HttpProblem, securityHeaders, useEach } from './http.ts';
import { operatorAuth } from './operator-auth.ts';
import { parseParams } from './validation.ts';

/** What the routes ask of the projector, wherever it runs. */
export type ProjectorControl = Pick<Projector, 'status' | 'rebuild'>;

export function createProjectionAdminRouter(
  projector: ProjectorControl,
  operators: OperatorAuthenticator,
  /** The console's sessions, where the console is served (docs/operations.md, "The console"). */
  sessions?: ConsoleSessions,
): Router<AppState> {
  const router = createRouter({ prefix: '/admin/v1/projections' });
  useEach(router, securityHeaders, operatorAuth(operators, sessions));

  router.get('/', async (ctx) => {
    ctx.body = { projections: await projector.status() };
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
