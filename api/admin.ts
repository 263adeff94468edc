/**
 * Admin API (`/admin/v1`, operator token or the console's session): partners and their API keys, a
 * cart's audit, webhook subscriptions and their deliveries, the webhook fan-out's progress, customers'
 * data (erase, export) and operator accounts, each a route table of its own module
 * (`admin-route-table.ts`), which the router mounts and the admin API's OpenAPI document describes;
 * projections have a router of their own (`admin-projections.ts`). Every route needs the role
 * `route-roles.ts` declares for it, checked right after authentication.
 */
import type Router from '@koa/router';
import type { CommandHandler } from '../application/command-handler.ts';
import type { ConsoleSessions } from '../application/console-sessions.ts';
import type { CustomerData } from '../application/customer-data.ts';
import type { OperatorAuthenticator } from '../application/operator-principal.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { ReadStore } from '../projections/read-store.ts';
import { auditRoutes } from './admin-audit.ts';
import { cartSearchRoutes } from './admin-cart-search.ts';
import { cartViewRoutes } from './admin-cart-views.ts';
import { customerExportRoutes, EXPORT_FIELD, EXPORT_UNKEPT } from './admin-customer-export.ts';
import { customerRoutes } from './admin-customers.ts';
import { adminOpenApiDocument } from './admin-openapi.ts';
import { operatorRoutes } from './admin-operators.ts';
import { partnerRoutes } from './admin-partners.ts';
import { type AdminRoute, mountAdminRoutes, type PublicAdminRoute } from './admin-route-table.ts';
import { ADMIN_BASE } from './admin-support.ts';
import { webhookDeliveryRoutes } from './admin-webhook-deliveries.ts';
import { webhookFanOutRoutes } from './admin-webhook-fan-out.ts';
import { type WebhookSettings, webhookRoutes } from './admin-webhooks.ts';
import { type AppState, createRouter, securityHeaders, useEach } from './http.ts';
import { idempotency } from './idempotency.ts';
import { operatorAuth, personalKeySpace, requestActor } from './operator-auth.ts';
import { requireRole } from './route-roles.ts';
import { jsonBody, writeErrors } from './write-support.ts';

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

/** The admin routes, described by tables (zod schemas): what the router mounts and the document shows. */
export function adminRouteTables(deps: AdminDeps): AdminRoute[] {
  return [
    ...partnerRoutes(deps),
    ...auditRoutes(deps),
    ...cartViewRoutes(deps),
    ...operatorRoutes(deps),
    ...customerRoutes(deps),
    ...customerExportRoutes(deps),
    ...webhookRoutes(deps),
    ...webhookDeliveryRoutes(deps),
    ...webhookFanOutRoutes(deps),
    ...cartSearchRoutes(deps),
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
  mountAdminRoutes(router, tables);
  return router;
}
