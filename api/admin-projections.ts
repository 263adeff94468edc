/**
 * `GET /admin/v1/projections` (state, checkpoint, lag, rebuild progress) and
 * `POST /admin/v1/projections/{name}/rebuild` (into fresh copies while the live ones serve).
 * Served by the process that runs the projector (role `all` or `projector`).
 */
import type Router from '@koa/router';
import { z } from 'zod';
import type { Projector } from '../projections/projector.ts';
import { type AppState, createRouter, HttpProblem } from './http.ts';
import { operatorAuth } from './operator-auth.ts';
import { parseParams } from './validation.ts';

export function createProjectionAdminRouter(projector: Projector, operatorToken: string): Router<AppState> {
  const router = createRouter({ prefix: '/admin/v1/projections' });
  router.use(operatorAuth(operatorToken));

  router.get('/', async (ctx) => {
    ctx.body = { projections: await projector.status() };
  });

  router.post('/:name/rebuild', async (ctx) => {
    const { name } = parseParams(ctx.params, z.object({ name: z.string().max(100) }), 404);
    if (!projector.names().includes(name)) {
      throw new HttpProblem(404, {
        code: 'projection_not_found',
        detail: `no projection ${name}; known: ${projector.names().join(', ')}`,
      });
    }
    const status = (await projector.status()).find((p) => p.name === name);
    const already = status?.state === 'rebuilding';
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
