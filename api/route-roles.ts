/**
 * Every route of the admin and platform APIs declares the role it needs, here and only here
 * (docs/operations.md, "Accounts and roles"). Roles are ordered, `admin` > `operator` > `auditor`:
 * a route an auditor may call, everyone may. `public` routes need no token.
 *
 * `requireRole(router)` enforces the table after authentication, before anything else runs (the
 * body is not parsed, no idempotency key is claimed): a person without the role gets 403
 * `insufficient_role` naming the role needed and theirs. A route the table does not name is for
 * `admin` only; `test/api/route-roles.test.ts` fails on one, walking every route the app mounts.
 */
import type Router from '@koa/router';
import type { Next } from 'koa';
import { type OperatorRole, roleCovers } from '../domain/operator-account.ts';
import { type AppContext, type AppState, HttpProblem, loggablePath } from './http.ts';
import { operatorOf } from './operator-auth.ts';

export type RouteRole = OperatorRole | 'public';

/** `METHOD /pattern` (the router's pattern, HEAD as GET) → the role it needs. */
export const ROUTE_ROLES: Readonly<Record<string, RouteRole>> = {
  // Who am I, and the admin API's contract.
  'GET /admin/v1/me': 'auditor',
  'GET /admin/v1/openapi.json': 'public',
  // The console's sign-in, who is signed in, sign-out: each answers for its own cookie (and a CSRF
  // token on sign-out), never through a bearer token (docs/operations.md, "The console").
  'POST /admin/v1/session': 'public',
  'GET /admin/v1/session': 'public',
  'DELETE /admin/v1/session': 'public',

  // Accounts and their tokens: admins only.
  'POST /admin/v1/operators': 'admin',
  'GET /admin/v1/operators': 'admin',
  'GET /admin/v1/operators/:id': 'admin',
  'PATCH /admin/v1/operators/:id': 'admin',
  'GET /admin/v1/operators/:id/tokens': 'admin',
  'POST /admin/v1/operators/:id/tokens': 'admin',
  'POST /admin/v1/operators/:id/tokens/:token_id/rotate': 'admin',
  'DELETE /admin/v1/operators/:id/tokens/:token_id': 'admin',

  // Partners and their keys: records show key prefixes only, never a key.
  'POST /admin/v1/partners': 'operator',
  'GET /admin/v1/partners': 'auditor',
  'GET /admin/v1/partners/:id': 'auditor',
  'PATCH /admin/v1/partners/:id': 'operator',
  'POST /admin/v1/partners/:id/keys': 'operator',
  'POST /admin/v1/partners/:id/keys/:key_id/rotate': 'operator',
  'DELETE /admin/v1/partners/:id/keys/:key_id': 'operator',

  // A cart's audit; reading its history is recorded, and who did is listed.
  'GET /admin/v1/carts/:uuid/history': 'auditor',
  'GET /admin/v1/carts/:uuid/webhooks': 'auditor',
  'GET /admin/v1/carts/:uuid/views': 'auditor',

  // Webhook subscriptions (records never show the auth token or the signing secret), deliveries, health.
  'POST /admin/v1/webhooks': 'operator',
  'GET /admin/v1/webhooks': 'auditor',
  'GET /admin/v1/webhooks/:id': 'auditor',
  'PATCH /admin/v1/webhooks/:id': 'operator',
  'POST /admin/v1/webhooks/:id/rotate-secret': 'operator',
  'DELETE /admin/v1/webhooks/:id': 'operator',
  'GET /admin/v1/webhooks/:id/deliveries': 'auditor',
  'GET /admin/v1/webhooks/deliveries/:delivery_id': 'auditor',
  'GET /admin/v1/webhooks/:id/health': 'auditor',
  'POST /admin/v1/webhooks/deliveries/:delivery_id/redeliver': 'operator',
  'POST /admin/v1/webhooks/:id/recover': 'operator',
  // Sends a signed request to the receiver and shows its answer: a write, and operators' only.
  'POST /admin/v1/webhooks/:id/test': 'operator',
  'GET /admin/v1/webhook-fan-out': 'auditor',

  // Erasing a customer's personal data (docs/operations.md, "Customer data").
  'POST /admin/v1/customers/erase': 'operator',
  // What the service holds about a customer: personal data, read as a cart's history is.
  'POST /admin/v1/customers/export': 'operator',

  // Projections: status for anyone, rebuilds for operators.
  'GET /admin/v1/projections': 'auditor',
  'POST /admin/v1/projections/:name/rebuild': 'operator',

  // The platform write API.
  'PUT /platform/v1/stores/:id': 'operator',
  'PUT /platform/v1/stores/:id/curbside_pickup_setting': 'operator',
  'PUT /platform/v1/brands/:id': 'operator',
  'PUT /platform/v1/products/:id': 'operator',
  'PUT /platform/v1/stores/:store_id/menu_products/:id': 'operator',
  'DELETE /platform/v1/stores/:store_id/menu_products/:id': 'operator',
  'PUT /platform/v1/reviews/:id': 'operator',
  'PUT /platform/v1/specials/:id': 'operator',
  'POST /platform/v1/carts': 'operator',
  'POST /platform/v1/carts/:uuid/items': 'operator',
  'PATCH /platform/v1/carts/:uuid/items/:menu_product_id': 'operator',
  'DELETE /platform/v1/carts/:uuid/items/:menu_product_id': 'operator',
  'PUT /platform/v1/carts/:uuid/customer': 'operator',
  'POST /platform/v1/carts/:uuid/checkout': 'operator',
  'POST /platform/v1/carts/:uuid/status': 'operator',
};

/** The role a route declares, or undefined when the table does not name it. */
export function declaredRole(method: string, pattern: string): RouteRole | undefined {
  return ROUTE_ROLES[`${method === 'HEAD' ? 'GET' : method} ${pattern}`];
}

/** What a route that declares none needs: the most, so a forgotten declaration fails closed. */
const UNDECLARED: OperatorRole = 'admin';

type Layer = Router<AppState>['stack'][number];

/** The strictest of two needs (`public` is the least). */
export const stricter = (a: RouteRole, b: RouteRole): RouteRole =>
  a === 'public' ? b : b === 'public' ? a : roleCovers(a, b) ? a : b;

/**
 * Refuses a person whose role does not cover the matched route's. Put it right after the router's
 * authentication (`useEach`): the router's route layers are known once it serves, so routes other
 * modules add to the router after this middleware is made are covered too.
 */
export function requireRole(router: Router<AppState>) {
  let roles = new Map<Layer, Map<string, RouteRole>>();
  let built = -1;
  /** Each route layer of the router, with its role per method; built again when routes were added. */
  const rolesOf = () => {
    if (built !== router.stack.length) {
      roles = new Map(
        router.stack
          .filter((layer) => layer.methods.length > 0)
          .map((layer) => [
            layer,
            new Map(layer.methods.map((m) => [m, declaredRole(m, String(layer.path)) ?? UNDECLARED])),
          ]),
      );
      built = router.stack.length;
    }
    return roles;
  };
  return async function checkRole(ctx: AppContext, next: Next): Promise<void> {
    const byLayer = rolesOf();
    const matched = (ctx as unknown as { matched?: Layer[] }).matched ?? [];
    // Routes of one router whose patterns both match run in order: the strictest of them applies.
    let needed: RouteRole | undefined;
    let pattern = '';
    for (const layer of matched) {
      const role = byLayer.get(layer)?.get(ctx.method);
      if (role === undefined) continue;
      if (needed === undefined || stricter(needed, role) !== needed) pattern = String(layer.path);
      needed = needed === undefined ? role : stricter(needed, role);
    }
    // The router runs this only for a request one of its routes matched: none found is a surprise,
    // and is for admins only, as an undeclared route is.
    needed ??= UNDECLARED;
    const person = operatorOf(ctx);
    if (needed !== 'public' && !roleCovers(person.role, needed)) {
      throw new HttpProblem(403, {
        code: 'insufficient_role',
        detail: `${ctx.method} ${pattern || loggablePath(ctx.path)} needs the ${needed} role; this token is an ${person.role}'s`,
        extensions: { required_role: needed, role: person.role },
      });
    }
    await next();
  };
}
