/**
 * Platform write side (`/platform/v1`, operator token): the retail platform's own commands —
 * catalog upserts (`platform-catalog.ts`) and the cart lifecycle (`platform-carts.ts`). Every route
 * is described by zod schemas in a route table (`admin-route-table.ts`), which validates its body
 * with the aggregate's schema (unknown fields refused) and generates the API's OpenAPI document
 * (`platform-openapi.ts`); a route looks up the facts the decider needs in other streams, and answers
 * with the resource, the stream's new revision (also as ETag) and the global position.
 */
import type Router from '@koa/router';
import type { Next } from 'koa';
import { type AdminRoute, mountAdminRoutes } from './admin-route-table.ts';
import {
  type AppContext,
  type AppState,
  createRouter,
  HttpProblem,
  securityHeaders,
  useEach,
} from './http.ts';
import { idempotency } from './idempotency.ts';
import { operatorAuth, personalKeySpace } from './operator-auth.ts';
import { cartRoutes } from './platform-carts.ts';
import { catalogRoutes } from './platform-catalog.ts';
import { platformOpenApiDocument } from './platform-openapi.ts';
import { PLATFORM_BASE, type PlatformDeps, platformActor, platformWrites } from './platform-writes.ts';
import { requireRole } from './route-roles.ts';
import { jsonBody, writeErrors } from './write-support.ts';

export { PLATFORM_BASE, type PlatformDeps } from './platform-writes.ts';

/** Seconds a client waits before it writes again to a replica whose write side is not built yet. */
const WRITE_SIDE_RETRY_AFTER_SECONDS = 5;

/**
 * Refuses every write until the lookups and the store specials are built: a line priced before the
 * specials are would be priced without them, and until then the event store has not answered this
 * replica (docs/operations.md, "Health").
 */
function writeSideBuilt(built: () => boolean) {
  return async function whenBuilt(_ctx: AppContext, next: Next): Promise<void> {
    if (!built()) {
      throw new HttpProblem(503, {
        code: 'write_side_starting',
        detail:
          'this replica has not built its lookups and store specials yet (the event store has not answered ' +
          'since it started); retry after Retry-After seconds',
        headers: { 'Retry-After': String(WRITE_SIDE_RETRY_AFTER_SECONDS) },
      });
    }
    await next();
  };
}

/** The platform's routes: what the router mounts and its OpenAPI document shows. */
export function platformRouteTables(deps: PlatformDeps): AdminRoute[] {
  const writes = platformWrites(deps);
  return [...catalogRoutes(writes), ...cartRoutes(writes)];
}

export function createPlatformRouter(
  deps: PlatformDeps,
  tables: readonly AdminRoute[] = platformRouteTables(deps),
): Router<AppState> {
  const router = createRouter({ prefix: PLATFORM_BASE });
  useEach(
    router,
    securityHeaders,
    operatorAuth(deps.operators),
    requireRole(router),
    writeErrors,
    writeSideBuilt(deps.writeSideBuilt ?? (() => true)),
    jsonBody(),
    idempotency({
      store: deps.store,
      clock: deps.clock,
      ttlMs: deps.idempotencyTtlMs,
      scopeOf: personalKeySpace('platform'),
      actorOf: platformActor,
    }),
  );
  mountAdminRoutes(router, tables, PLATFORM_BASE);
  return router;
}

/** `GET /platform/v1/openapi.json`, public as the other documents are; built at its first request. */
export function createPlatformDocumentRouter(tables: readonly AdminRoute[]): Router<AppState> {
  const router = createRouter({ prefix: `${PLATFORM_BASE}/openapi.json` });
  let document: unknown;
  useEach(router, securityHeaders);
  router.get('/', (ctx) => {
    document ??= platformOpenApiDocument(tables);
    ctx.body = document;
  });
  return router;
}
