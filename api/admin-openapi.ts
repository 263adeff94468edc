/**
 * The admin API's OpenAPI 3.1 document (`GET /admin/v1/openapi.json`;
 * docs/operations.md, "Accounts and roles"), generated from the admin route tables
 * (`operator-openapi.ts`): every admin route, and the console's session (public, with its cookie as
 * the `cookieAuth` scheme the other routes accept besides a bearer token). Every operation names the
 * role it needs (`x-required-role`, from `route-roles.ts`), and the document's description holds the
 * whole table: the role of every admin and platform route.
 */
import { ADMIN_BASE } from './admin-support.ts';
import { CSRF_HEADER, SESSION_COOKIE } from './console-session.ts';
import { type OperatorApiRoute, operatorOpenApiDocument, roleTable } from './operator-openapi.ts';

function documentDescription(): string {
  return [
    'The API of the people who run the service: operators, auditors and admins. Partners and their ' +
      "keys, a cart's audit, webhook subscriptions with their deliveries and health, the webhook " +
      "fan-out, projections (served by the process that runs the projector), customers' data (erase, " +
      "export), accounts and their tokens, and the console's session. How each is used: the service's " +
      'docs/operations.md, docs/webhooks.md and docs/write-side.md.',
    '## Authentication and roles',
    'Send your operator token as `Authorization: Bearer <token>`, or sign in to the console (`POST ' +
      `/session\`), whose session cookie \`${SESSION_COOKIE}\` then authenticates each call; a write the ` +
      `cookie authenticates carries the session's CSRF token in \`${CSRF_HEADER}\`. Each token belongs to an account with a ` +
      'role: `admin` (everything, accounts included) > `operator` (partners and keys, webhooks, projections, ' +
      'the platform write API, redeliveries) > `auditor` (reads only, never a secret). A route needing a role ' +
      "yours does not cover answers 403 `insufficient_role`. The service's bootstrap token is an `admin`.",
    '## The role of every route',
    roleTable(),
  ].join('\n\n');
}

/** The OpenAPI 3.1 document of the admin routes described by tables (the session's public ones too). */
export function adminOpenApiDocument(routes: readonly OperatorApiRoute[]): Record<string, unknown> {
  return operatorOpenApiDocument(routes, {
    base: ADMIN_BASE,
    title: 'Admin API',
    description: documentDescription(),
    session: true,
    unavailable:
      'The read store or the event store cannot be reached, or a read model is behind a write that ' +
      'succeeded (`read_model_lagging`; the write stands).',
  });
}
