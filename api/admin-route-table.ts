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
import { declaredRole } from './route-roles.ts';
import { parseBody, parseParams } from './validation.ts';

/** A request's inputs, each validated by its route's schema. */
export interface ParsedAdminInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
}

export interface AdminRouteInput<P, Q, B> extends ParsedAdminInput<P, Q, B> {
  /** The person calling. */
  operator: OperatorPrincipal;
}

/** What the admin API's OpenAPI document says of a route: its inputs, its answer, its problems. */
export interface AdminOperation<P = unknown, Q = unknown, B = unknown> {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** OpenAPI-style path under `/admin/v1`, e.g. `/operators/{id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** The success answer: no schema for one without a body (204); headers it sends besides the usual. */
  response: {
    status: number;
    description: string;
    schema?: z.ZodType;
    headers?: Record<string, { description: string; required: boolean }>;
  };
  /**
   * Problem statuses the route can answer besides 503 (documented for every route), and besides 401
   * and 403, which every route behind the admin router's authentication can answer.
   */
  problems: number[];
  /** Whether `If-Match` makes the write conditional (412 when the stream moved on). */
  ifMatch?: boolean;
}

/** A route of the admin router: behind its authentication (an operator token or the console's session) and roles. */
export interface AdminRoute<P = unknown, Q = unknown, B = unknown> extends AdminOperation<P, Q, B> {
  handler(ctx: AppContext, input: AdminRouteInput<P, Q, B>): Promise<void>;
}

/**
 * A route anyone may call (`public` in `route-roles.ts`), on a router of its own without the admin
 * router's authentication: the console's session (`admin-session.ts`), which answers for its cookie.
 */
export interface PublicAdminRoute<P = unknown, Q = unknown, B = unknown> extends AdminOperation<P, Q, B> {
  /** The console's session cookie the route reads: `optional` (nobody signed in is an answer), `required`. */
  session?: 'optional' | 'required';
  handler(ctx: AppContext, input: ParsedAdminInput<P, Q, B>): Promise<void>;
}

/** Erases a route's type parameters so routes of different shapes fit in one table. */
export const adminRoute = <P, Q, B>(r: AdminRoute<P, Q, B>) => r as unknown as AdminRoute;
export const publicAdminRoute = <P, Q, B>(r: PublicAdminRoute<P, Q, B>) => r as unknown as PublicAdminRoute;

/** The route's pattern as the router (and `route-roles.ts`) names it: `/admin/v1/operators/:id`. */
export const koaPattern = (r: Pick<AdminOperation, 'path'>) =>
  `${ADMIN_BASE}${r.path.replace(/\{(\w+)\}/g, ':$1')}`;

function parsedInput(ctx: AppContext, r: AdminOperation): ParsedAdminInput<unknown, unknown, unknown> {
  // A malformed path parameter names nothing that exists: 404, as for an unknown id.
  const params = r.params ? parseParams(ctx.params, r.params, 404) : undefined;
  const query = r.query ? parseParams(ctx.query, r.query) : undefined;
  const body = r.body ? parseBody(ctx, r.body) : undefined;
  return { params, query, body };
}

/** Registers `handle` for the route on `router`, whose prefix is `ADMIN_BASE` or a path under it. */
function mount(router: Router<AppState>, r: AdminOperation, handle: (ctx: AppContext) => Promise<void>) {
  const prefix = router.opts.prefix ?? '';
  const pattern = koaPattern(r);
  if (!pattern.startsWith(prefix)) throw new Error(`${pattern} is not under the router's ${prefix}`);
  router[r.method](pattern.slice(prefix.length) || '/', handle);
}

/** Registers the routes on the admin router (mounted under `ADMIN_BASE`), behind its authentication. */
export function mountAdminRoutes(router: Router<AppState>, routes: readonly AdminRoute[]): void {
  for (const r of routes) {
    mount(router, r, (ctx) => r.handler(ctx, { ...parsedInput(ctx, r), operator: operatorOf(ctx) }));
  }
}

/** Registers public routes on a router of their own; each must be declared `public` in `route-roles.ts`. */
export function mountPublicAdminRoutes(router: Router<AppState>, routes: readonly PublicAdminRoute[]): void {
  for (const r of routes) {
    const role = declaredRole(r.method.toUpperCase(), koaPattern(r));
    if (role !== 'public') throw new Error(`${koaPattern(r)}: route-roles.ts declares ${role}, not public`);
    mount(router, r, (ctx) => r.handler(ctx, parsedInput(ctx, r)));
  }
}
