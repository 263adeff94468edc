/**
 * Admin routes described by zod schemas, as the partner APIs' are (`partner/routes.ts`): one table
 * registers the Koa routes (validating every input with its schemas) and generates the admin API's
 * OpenAPI document (`admin-openapi.ts`). The role each route needs comes from `route-roles.ts`.
 */
import type Router from '@koa/router';
import type { z } from 'zod';
import type { OperatorPrincipal } from '../application/operator-principal.ts';
import { ADMIN_BASE } from './admin-support.ts';
import type { AppContext, AppState } from './http.ts';
import { operatorOf } from './operator-auth.ts';
import { parseBody, parseParams } from './validation.ts';

export interface AdminRouteInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** The person calling. */
  operator: OperatorPrincipal;
}

export interface AdminRoute<P = unknown, Q = unknown, B = unknown> {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** OpenAPI-style path under `/admin/v1`, e.g. `/operators/{id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** The success answer. */
  response: { status: number; description: string; schema: z.ZodType };
  /** Problem statuses the route can answer besides 401, 403 and 503 (documented for every route). */
  problems: number[];
  /** Whether `If-Match` makes the write conditional (412 when the stream moved on). */
  ifMatch?: boolean;
  handler(ctx: AppContext, input: AdminRouteInput<P, Q, B>): Promise<void>;
}

/** Erases a route's type parameters so routes of different shapes fit in one table. */
export const adminRoute = <P, Q, B>(r: AdminRoute<P, Q, B>) => r as unknown as AdminRoute;

/** The route's pattern as the router (and `route-roles.ts`) names it: `/admin/v1/operators/:id`. */
export const koaPattern = (r: Pick<AdminRoute, 'path'>) =>
  `${ADMIN_BASE}${r.path.replace(/\{(\w+)\}/g, ':$1')}`;

/** Registers the routes on the admin router (mounted under `ADMIN_BASE`). */
export function mountAdminRoutes(router: Router<AppState>, routes: readonly AdminRoute[]): void {
  for (const r of routes) {
    const handle = async (ctx: AppContext) => {
      // A malformed path parameter names nothing that exists: 404, as for an unknown id.
      const params = r.params ? parseParams(ctx.params, r.params, 404) : (undefined as unknown);
      const query = r.query ? parseParams(ctx.query, r.query) : (undefined as unknown);
      const body = r.body ? parseBody(ctx, r.body) : (undefined as unknown);
      await r.handler(ctx, { params, query, body, operator: operatorOf(ctx) });
    };
    router[r.method](r.path.replace(/\{(\w+)\}/g, ':$1'), handle);
  }
}
