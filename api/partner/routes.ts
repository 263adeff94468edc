/**
 * A partner API is a table of routes, each described by zod schemas (path parameters, query, body,
 * success response). The same table registers the Koa routes (validating every input with those
 * schemas) and generates the API's OpenAPI 3.1 document: one source for behaviour and documentation.
 */
import type Router from '@koa/router';
import type { z } from 'zod';
import type { CommandHandler } from '../../application/command-handler.ts';
import type { Clock } from '../../domain/clock.ts';
import type { PartnerKind } from '../../domain/partner.ts';
import type { EventStore } from '../../eventstore/port.ts';
import type { PartnerKeyDoc } from '../../projections/read-models/partner-keys.ts';
import type { Collection, Doc, ReadStore } from '../../projections/read-store.ts';
import { type AppContext, type AppState, createRouter } from '../http.ts';
import { idempotency } from '../idempotency.ts';
import { parseBody, parseParams } from '../validation.ts';
import { jsonBody, writeErrors } from '../write-support.ts';
import { type PartnerPrincipal, partnerAuth, principal, rateLimit, securityHeaders } from './common.ts';

/** What partner handlers may use. */
export interface PartnerDeps {
  /** A read-model collection by name (handles stay valid across rebuilds). */
  collection<T extends Doc = Doc>(name: string): Collection<T>;
  store: EventStore;
  commands: CommandHandler;
  clock: Clock;
  /** How long an `Idempotency-Key` binds its request and answer (`PDS_IDEMPOTENCY_TTL`; 24 hours when left out). */
  idempotencyTtlMs?: number;
}

/** The read models partner APIs query. */
export const PARTNER_COLLECTIONS = [
  'partner_keys',
  'carts',
  'stores',
  'products',
  'menu_products',
  'reviews',
  'specials',
  'curbside_pickup_settings',
] as const;

/** Opens the collections partner APIs read, once, before the routers serve. */
export async function openPartnerCollections(readStore: ReadStore): Promise<PartnerDeps['collection']> {
  const opened = new Map<string, Collection>();
  for (const name of PARTNER_COLLECTIONS) opened.set(name, await readStore.collection(name));
  return <T extends Doc>(name: string) => {
    const c = opened.get(name);
    if (!c) throw new Error(`collection ${name} is not one the partner APIs read`);
    return c as unknown as Collection<T>;
  };
}

export interface RouteInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  partner: PartnerPrincipal;
  /**
   * Runs a write's effect under the request's `Idempotency-Key` (a replay answers instead). A write
   * calls it once the request is validated and the resource found visible to the partner, so a
   * refusal before it stores nothing (docs/write-side.md, "Idempotency"). A read's runs it as it is.
   */
  execute(effect: () => Promise<void>): Promise<void>;
}

export interface PartnerRoute<P = unknown, Q = unknown, B = unknown> {
  method: 'get' | 'post';
  /** OpenAPI-style path relative to the base, e.g. `/stores/{store_id}/menu_products`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** The success answer. */
  response: { status: number; description: string; schema: z.ZodType };
  /** Problem statuses this route can answer besides 401, 403, 429 (documented for every route). */
  problems: number[];
  handler(ctx: AppContext, input: RouteInput<P, Q, B>, deps: PartnerDeps): Promise<void>;
}

/** Erases a route's type parameters so routes of different shapes fit in one table. */
export const route = <P, Q, B>(r: PartnerRoute<P, Q, B>) => r as unknown as PartnerRoute;

export interface PartnerApi {
  /** Base path, e.g. `/partner/brand/v1`. */
  base: string;
  title: string;
  description: string;
  /** The partner kinds whose keys this API accepts. */
  kinds: readonly PartnerKind[];
  routes: readonly PartnerRoute[];
}

/** The Koa router of a partner API: its routes plus `GET <base>/openapi.json` (public). */
export function createPartnerRouter(
  api: PartnerApi,
  deps: PartnerDeps,
  openapi: () => unknown,
): Router<AppState> {
  const router = createRouter({ prefix: api.base });
  router.get('/openapi.json', (ctx) => {
    ctx.body = openapi();
  });
  const authenticated = [
    securityHeaders,
    partnerAuth(() => deps.collection<PartnerKeyDoc>('partner_keys'), api.kinds),
    rateLimit(() => deps.clock.now().getTime()),
  ];
  const idempotent = idempotency({
    store: deps.store,
    clock: deps.clock,
    ttlMs: deps.idempotencyTtlMs,
    scopeOf: (ctx) => `partner:${principal(ctx).partner_id}`,
    actorOf: (ctx) => ({ type: 'partner', id: principal(ctx).partner_id }),
  });
  for (const r of api.routes) {
    const koaPath = r.path.replace(/\{(\w+)\}/g, ':$1');
    const handle = async (ctx: AppContext) => {
      // A malformed path parameter names nothing that exists: 404, as for an unknown id.
      const params = r.params ? parseParams(ctx.params, r.params, 404) : (undefined as unknown);
      const query = r.query ? parseParams(ctx.query, r.query) : (undefined as unknown);
      const body = r.body ? parseBody(ctx, r.body) : (undefined as unknown);
      let executed = false;
      const execute = (effect: () => Promise<void>) => {
        executed = true;
        return r.method === 'post' ? idempotent(ctx, effect) : effect();
      };
      await r.handler(ctx, { params, query, body, partner: principal(ctx), execute }, deps);
      // A write that answered without `execute` would have run outside its Idempotency-Key.
      if (r.method === 'post' && !executed) throw new Error(`${r.operationId} answered without execute`);
    };
    if (r.method === 'get') router.get(koaPath, ...authenticated, handle);
    else router.post(koaPath, ...authenticated, writeErrors, jsonBody(), handle);
  }
  return router;
}
