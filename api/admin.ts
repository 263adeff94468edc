/**
 * Admin API (`/admin/v1`, operator token): partners and their API keys. A cart's audit, webhook
 * subscriptions and their deliveries, the webhook fan-out's progress, and operator accounts join this
 * router from their own modules; projections have a router of their own. Every route needs the role
 * `route-roles.ts` declares for it, checked right after authentication.
 */
import { randomUUID } from 'node:crypto';
import type Router from '@koa/router';
import { z } from 'zod';
import type { CommandHandler } from '../application/command-handler.ts';
import type { ConsoleSessions } from '../application/console-sessions.ts';
import { generateApiKey } from '../application/credentials.ts';
import type { CustomerData } from '../application/customer-data.ts';
import type { OperatorAuthenticator } from '../application/operator-principal.ts';
import type { Clock } from '../domain/clock.ts';
import * as partner from '../domain/partner.ts';
import type { EventStore } from '../eventstore/port.ts';
import { PARTNERS, type PartnerDoc, toPartnerRecord } from '../projections/read-models/partner-keys.ts';
import type { Collection, ReadStore } from '../projections/read-store.ts';
import { auditRoutes } from './admin-audit.ts';
import { cartViewRoutes } from './admin-cart-views.ts';
import { customerExportRoutes, EXPORT_FIELD, EXPORT_UNKEPT } from './admin-customer-export.ts';
import { customerRoutes } from './admin-customers.ts';
import { adminOpenApiDocument } from './admin-openapi.ts';
import { operatorRoutes } from './admin-operators.ts';
import { type AdminRoute, mountAdminRoutes, type PublicAdminRoute } from './admin-route-table.ts';
import { ADMIN_BASE, missingIds, waitForProjection } from './admin-support.ts';
import { webhookDeliveryRoutes } from './admin-webhook-deliveries.ts';
import { webhookFanOutRoutes } from './admin-webhook-fan-out.ts';
import { type WebhookSettings, webhookRoutes } from './admin-webhooks.ts';
import { type AppState, createRouter, HttpProblem, securityHeaders, useEach } from './http.ts';
import { idempotency } from './idempotency.ts';
import { operatorAuth, personalKeySpace, requestActor } from './operator-auth.ts';
import { requireRole } from './route-roles.ts';
import { ifMatch, parseBody, parseParams, pathUuid } from './validation.ts';
import { answerWrite, commandMetadata, jsonBody, writeErrors } from './write-support.ts';

export interface AdminDeps {
  store: EventStore;
  commands: CommandHandler;
  /** Where partners are read from (the `partners` read model) and read-your-writes waits. */
  readStore: ReadStore;
  clock: Clock;
  /** Who the bearer of an operator token is (docs/operations.md, "Accounts and roles"). */
  operators: OperatorAuthenticator;
  /** The console's sessions, which authenticate a request without a bearer token (docs/operations.md, "The console"). */
  sessions?: ConsoleSessions;
  /** Webhook subscriptions: the secret key that seals their secrets, the URL policy, the request timeout. */
  webhooks: WebhookSettings;
  /** Customers' personal data and its erasure (docs/operations.md, "Customer data"). */
  customerData: CustomerData;
  /** How long an `Idempotency-Key` binds its request and answer (`PDS_IDEMPOTENCY_TTL`; 24 hours when left out). */
  idempotencyTtlMs?: number;
}

const keyParams = z.object({ id: pathUuid, key_id: partner.keyId });
const rateLimitBody = z.strictObject({ rate_limit_per_minute: partner.rateLimitPerMinute });

/** Adds the admin routes for partners and keys to `router` (mounted under ADMIN_BASE). */
export function adminRoutes(router: Router<AppState>, deps: AdminDeps): void {
  const shared = adminShared(deps);
  partnerRoutes(router, shared);
  keyRoutes(router, shared);
}

type AdminShared = ReturnType<typeof adminShared>;

/** What the routes below share. */
function adminShared(deps: AdminDeps) {
  const { store, commands, clock, readStore } = deps;
  let partners: Collection<PartnerDoc> | undefined;
  const partnersCollection = async () => {
    partners ??= await readStore.collection<PartnerDoc>(PARTNERS);
    return partners;
  };
  /** A key works as soon as the answer that shows it arrives: wait until authentication can see it. */
  const seen = (position: number) => waitForProjection(readStore, 'partner_keys', position);
  const meta = (ctx: Parameters<typeof commandMetadata>[0]) => commandMetadata(ctx, requestActor(ctx), clock);

  async function loadPartner(id: string) {
    const loaded = await commands.load(partner.streamId(id), partner.decider);
    if (!loaded.state.exists) {
      throw new HttpProblem(404, { code: 'partner_not_found', detail: `no partner ${id}` });
    }
    return { ...loaded, state: loaded.state };
  }
  return { partnersCollection, seen, meta, loadPartner, store, commands, clock, readStore };
}

/** Partners: register, list, show, change the rate limit. */
function partnerRoutes(router: Router<AppState>, shared: AdminShared): void {
  const { partnersCollection, seen, meta, loadPartner, store, commands, clock } = shared;
  router.post('/partners', async (ctx) => {
    const body = parseBody(ctx, partner.partnerFields);
    const partnerId = randomUUID();
    const key = generateApiKey();
    const result = await commands.handle(
      partner.streamId(partnerId),
      partner.decider,
      {
        type: 'RegisterPartner',
        partner_id: partnerId,
        ...body,
        key: { key_id: key.key_id, key_hash: key.key_hash, key_prefix: key.key_prefix },
        unknown_brand_ids: await missingIds(store, 'brand-', body.brand_ids),
        unknown_store_ids: await missingIds(store, 'store-', body.store_ids),
        at: clock.now().toISOString(),
      },
      meta(ctx),
    );
    // The key works as soon as this answer arrives: wait until authentication can see it.
    await seen(result.position);
    if (!result.state.exists) throw new Error('partner registration appended no partner');
    ctx.set('Location', `${ADMIN_BASE}/partners/${partnerId}`);
    answerWrite(ctx, 201, { partner: partner.toPartnerRecord(result.state), api_key: key.api_key }, result);
  });

  router.get('/partners', async (ctx) => {
    // Strict, as the partner APIs' lists are: a misspelt filter is a 400, not a silently unfiltered list.
    const query = parseParams(
      ctx.query,
      z.strictObject({
        limit: z.coerce.number().int().min(1).max(500).default(100),
        cursor: z.string().max(200).optional(),
        kind: partner.partnerKind.optional(),
      }),
    );
    let after = '';
    if (query.cursor) {
      after = Buffer.from(query.cursor, 'base64url').toString('utf8');
      if (!pathUuid.safeParse(after).success) {
        throw new HttpProblem(400, {
          code: 'invalid_cursor',
          detail: 'the cursor is not one this API gave out',
        });
      }
    }
    const found = await (await partnersCollection()).find(
      { ...(query.kind ? { kind: query.kind } : {}), ...(after ? { _id: { $gt: after } } : {}) },
      { sort: [['_id', 1]], limit: query.limit + 1 },
    );
    const page = found.slice(0, query.limit).map(toPartnerRecord);
    const next =
      found.length > query.limit ? Buffer.from(page[page.length - 1].partner_id).toString('base64url') : null;
    // The next page keeps the filter: without `kind` it would list partners of every kind.
    const kind = query.kind ? `&kind=${query.kind}` : '';
    if (next)
      ctx.set('Link', `<${ADMIN_BASE}/partners?limit=${query.limit}&cursor=${next}${kind}>; rel="next"`);
    ctx.body = { partners: page, next_cursor: next };
  });

  router.get('/partners/:id', async (ctx) => {
    const { id } = parseParams(ctx.params, z.object({ id: pathUuid }), 404);
    const loaded = await loadPartner(id);
    ctx.set('ETag', `"${loaded.revision}"`);
    ctx.body = { partner: partner.toPartnerRecord(loaded.state), revision: loaded.revision };
  });

  router.patch('/partners/:id', async (ctx) => {
    const { id } = parseParams(ctx.params, z.object({ id: pathUuid }), 404);
    const body = parseBody(ctx, rateLimitBody);
    await loadPartner(id);
    const result = await commands.handle(
      partner.streamId(id),
      partner.decider,
      {
        type: 'ChangePartnerRateLimit',
        rate_limit_per_minute: body.rate_limit_per_minute,
        at: clock.now().toISOString(),
      },
      meta(ctx),
      { ifMatch: ifMatch(ctx) },
    );
    await seen(result.position);
    if (!result.state.exists) throw new Error('partner vanished');
    answerWrite(ctx, 200, { partner: partner.toPartnerRecord(result.state) }, result);
  });
}

/** A partner's API keys: issue, rotate, revoke. */
function keyRoutes(router: Router<AppState>, shared: AdminShared): void {
  const { seen, meta, loadPartner, commands, clock } = shared;
  router.post('/partners/:id/keys', async (ctx) => {
    const { id } = parseParams(ctx.params, z.object({ id: pathUuid }), 404);
    parseBody(ctx, z.strictObject({}));
    await loadPartner(id);
    const key = generateApiKey();
    const result = await commands.handle(
      partner.streamId(id),
      partner.decider,
      {
        type: 'IssuePartnerKey',
        key: { key_id: key.key_id, key_hash: key.key_hash, key_prefix: key.key_prefix },
        at: clock.now().toISOString(),
      },
      meta(ctx),
    );
    await seen(result.position);
    answerWrite(ctx, 201, { key: keyRecord(result.state, key.key_id), api_key: key.api_key }, result);
  });

  router.post('/partners/:id/keys/:key_id/rotate', async (ctx) => {
    const { id, key_id } = parseParams(ctx.params, keyParams, 404);
    parseBody(ctx, z.strictObject({}));
    await loadPartner(id);
    const key = generateApiKey();
    const result = await commands.handle(
      partner.streamId(id),
      partner.decider,
      {
        type: 'RotatePartnerKey',
        key_id,
        key: { key_id: key.key_id, key_hash: key.key_hash, key_prefix: key.key_prefix },
        at: clock.now().toISOString(),
      },
      meta(ctx),
    );
    await seen(result.position);
    answerWrite(
      ctx,
      201,
      { key: keyRecord(result.state, key.key_id), revoked_key_id: key_id, api_key: key.api_key },
      result,
    );
  });

  router.delete('/partners/:id/keys/:key_id', async (ctx) => {
    const { id, key_id } = parseParams(ctx.params, keyParams, 404);
    await loadPartner(id);
    const result = await commands.handle(
      partner.streamId(id),
      partner.decider,
      { type: 'RevokePartnerKey', key_id, at: clock.now().toISOString() },
      meta(ctx),
    );
    await seen(result.position);
    answerWrite(ctx, 200, { key: keyRecord(result.state, key_id) }, result);
  });
}

function keyRecord(state: partner.PartnerState, keyId: string) {
  if (!state.exists) throw new Error('partner vanished');
  const k = state.keys.find((x) => x.key_id === keyId);
  if (!k) throw new Error(`key ${keyId} missing after the command`);
  return {
    key_id: k.key_id,
    key_prefix: k.key_prefix,
    status: k.status,
    issued_at: k.issued_at,
    revoked_at: k.revoked_at,
  };
}

/** The admin routes described by tables (zod schemas): what the admin API's OpenAPI document shows. */
export function adminRouteTables(deps: AdminDeps): AdminRoute[] {
  return [
    ...operatorRoutes(deps),
    ...cartViewRoutes(deps),
    ...customerRoutes(deps),
    ...customerExportRoutes(deps),
  ];
}

/** `GET /admin/v1/openapi.json`, public as the partner APIs' documents are; built at its first request. */
export function createAdminDocumentRouter(
  tables: readonly (AdminRoute | PublicAdminRoute)[],
): Router<AppState> {
  const router = createRouter({ prefix: `${ADMIN_BASE}/openapi.json` });
  let document: unknown;
  useEach(router, securityHeaders);
  router.get('/', (ctx) => {
    document ??= adminOpenApiDocument(tables);
    ctx.body = document;
  });
  return router;
}

/**
 * The admin router: security headers (`no-store`: answers show secrets once and customers' data),
 * operator token or console session, its role, JSON bodies, idempotent POSTs, problem answers.
 */
export function createAdminRouter(
  deps: AdminDeps,
  tables: readonly AdminRoute[] = adminRouteTables(deps),
): Router<AppState> {
  const router = createRouter({ prefix: ADMIN_BASE });
  useEach(
    router,
    securityHeaders,
    operatorAuth(deps.operators, deps.sessions),
    requireRole(router),
    writeErrors,
    jsonBody(),
    idempotency({
      store: deps.store,
      clock: deps.clock,
      ttlMs: deps.idempotencyTtlMs,
      scopeOf: personalKeySpace('operator'),
      actorOf: requestActor,
      // Keys and tokens are stored hashed and signing secrets encrypted: an idempotent replay cannot
      // show one again.
      oneTimeSecrets: ['api_key', 'signing_secret', 'operator_token', EXPORT_FIELD],
      // A customer's export is never kept: it is personal data (docs/operations.md, "Customer data").
      unkept: { [`${ADMIN_BASE}/customers/export`]: EXPORT_UNKEPT },
    }),
  );
  adminRoutes(router, deps);
  auditRoutes(router, deps);
  mountAdminRoutes(router, tables);
  webhookRoutes(router, deps);
  webhookDeliveryRoutes(router, deps);
  webhookFanOutRoutes(router, deps);
  return router;
}
