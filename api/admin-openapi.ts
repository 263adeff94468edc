/**
 * The admin API's OpenAPI 3.1 document (`GET /admin/v1/openapi.json`;
 * docs/operations.md, "Accounts and roles"), generated from the admin route tables as the partner APIs'
 * are (`partner/openapi.ts`, whose schema components it shares): accounts and their tokens, `GET /me`,
 * who viewed a cart, and the console's session (public, with its cookie as the `cookieAuth` scheme the
 * other routes accept besides a bearer token). Every operation names the role it needs (`x-required-role`, from
 * `route-roles.ts`), and the document's description holds the whole table: the role of every admin and
 * platform route.
 */
import type { z } from 'zod';
import type { AdminRoute, PublicAdminRoute } from './admin-route-table.ts';
import { koaPattern } from './admin-route-table.ts';
import { ADMIN_BASE } from './admin-support.ts';
import { CSRF_HEADER, SESSION_COOKIE } from './console-session.ts';
import { PROBLEM_CONTENT_TYPE } from './http.ts';
import { IDEMPOTENCY_KEY, parametersOf, SchemaComponents } from './partner/openapi.ts';
import { problemRecord } from './partner/schemas.ts';
import { declaredRole, ROUTE_ROLES } from './route-roles.ts';
import { MAX_BODY_BYTES } from './write-support.ts';

type Json = Record<string, unknown>;
type Route = AdminRoute | PublicAdminRoute;

const SCHEMA_REF = '#/components/schemas/';
const TOKEN_SCHEME = 'operatorToken';
const COOKIE_SCHEME = 'cookieAuth';
/** The admin router's routes: an operator token, or the console's session cookie. */
const TOKEN_OR_SESSION = [{ [TOKEN_SCHEME]: [] }, { [COOKIE_SCHEME]: [] }];

const problemContent = (): Json => ({ [PROBLEM_CONTENT_TYPE]: { schema: { $ref: `${SCHEMA_REF}Problem` } } });

const SHARED_RESPONSES: Record<number, [string, Json]> = {
  401: [
    'Unauthorized',
    {
      description:
        'No operator token or console session, or a token that is unknown, expired or revoked or of a ' +
        'disabled account, or a session that has ended (its cookie is cleared): send ' +
        '`Authorization: Bearer <operator token>`, or sign in again.',
      headers: { 'WWW-Authenticate': { required: true, schema: { type: 'string' } } },
      content: problemContent(),
    },
  ],
  403: [
    'Forbidden',
    {
      description:
        "The caller's role does not cover the route's (`insufficient_role`): `required_role` names the role " +
        `needed, \`role\` the caller’s. Or a write the console session's cookie authenticates came without ` +
        `the session's CSRF token in \`${CSRF_HEADER}\` (\`csrf_token_invalid\`).`,
      content: problemContent(),
    },
  ],
  503: [
    'Unavailable',
    {
      description:
        'The read store or the event store cannot be reached, or a read model is behind a write that ' +
        'succeeded (`read_model_lagging`): retry after `Retry-After` seconds.',
      headers: { 'Retry-After': { schema: { type: 'integer', minimum: 0 } } },
      content: problemContent(),
    },
  ],
};

const CSRF_TOKEN: Json = {
  name: CSRF_HEADER,
  in: 'header',
  description:
    "The console session's CSRF token (from `POST /session` or `GET /session`): needed on every write " +
    'the session cookie authenticates (403 `csrf_token_invalid` without it), not with a bearer token.',
  required: false,
  schema: { type: 'string' },
};

const IF_MATCH: Json = {
  name: 'If-Match',
  in: 'header',
  description:
    'Makes the write conditional on the stream revision (the `ETag` of a read): 412 when it moved on.',
  required: false,
  schema: { type: 'string' },
};

function problemDescription(r: Route, status: number): string {
  switch (status) {
    case 400:
      return 'Bad request: a query parameter is invalid or unknown, the body is not JSON, or a header is malformed. `errors` names each offending field.';
    case 404:
      return 'Not found (see `code`).';
    case 409:
      return r.method === 'post'
        ? 'Conflict with the current state (see `code`), or a request with the same `Idempotency-Key` is still running.'
        : 'Conflict with the current state (see `code`).';
    case 412:
      return '`If-Match` names a revision the stream has moved past (`revision_mismatch`).';
    case 413:
      return `The body is larger than ${MAX_BODY_BYTES} bytes.`;
    case 415:
      return 'The body is not `application/json`.';
    case 422:
      return 'The body is invalid (`errors` names each offending field), or the `Idempotency-Key` was used for another request.';
    default:
      return 'See `code` and `detail`.';
  }
}

/** Problem statuses the operation documents itself, and those it refers to the shared responses. */
function problemStatuses(r: Route, isPublic: boolean): { own: number[]; shared: number[] } {
  const statuses = new Set(r.problems);
  if (r.query) statuses.add(400);
  if (r.params) statuses.add(404);
  if (r.body) for (const s of [400, 413, 415, 422]) statuses.add(s);
  // Idempotency keys belong to the admin router.
  if (r.method === 'post' && !isPublic) for (const s of [400, 409, 422]) statuses.add(s);
  if (r.ifMatch) for (const s of [400, 412]) statuses.add(s);
  // Behind the admin router's authentication every route can answer 401 and 403; any route, 503.
  const shared = Object.keys(SHARED_RESPONSES)
    .map(Number)
    .filter((s) => s === 503 || !isPublic || statuses.has(s));
  const own = [...statuses].filter((s) => !(s in SHARED_RESPONSES)).sort((a, b) => a - b);
  return { own, shared };
}

/** Who may call the operation: the admin router's credentials, the session's cookie, or anyone. */
function securityOf(r: Route, isPublic: boolean): Json[] | undefined {
  if (!isPublic) return undefined; // the document's own: a token or the cookie
  const session = 'session' in r ? r.session : undefined;
  if (session === 'required') return [{ [COOKIE_SCHEME]: [] }];
  return session === 'optional' ? [{}, { [COOKIE_SCHEME]: [] }] : [];
}

function documentDescription(): string {
  const rows = Object.entries(ROUTE_ROLES).map(([route, role]) => `| \`${route}\` | ${role} |`);
  return [
    'The API of the people who run the service: operators, auditors and admins. Only part of it is ' +
      "described operation by operation here (accounts, tokens, `/me`, who viewed a cart, the console's " +
      'session); the rest is in ' +
      "the service's docs (docs/operations.md, docs/webhooks.md, docs/write-side.md).",
    '## Authentication and roles',
    'Send your operator token as `Authorization: Bearer <token>`, or sign in to the console (`POST ' +
      `/session\`), whose session cookie \`${SESSION_COOKIE}\` then authenticates each call; a write the ` +
      `cookie authenticates carries the session's CSRF token in \`${CSRF_HEADER}\`. Each token belongs to an account with a ` +
      'role: `admin` (everything, accounts included) > `operator` (partners and keys, webhooks, projections, ' +
      'the platform write API, redeliveries) > `auditor` (reads only, never a secret). A route needing a role ' +
      "yours does not cover answers 403 `insufficient_role`. The service's bootstrap token is an `admin`.",
    '## The role of every route',
    ['| route | role |', '|---|---|', ...rows].join('\n'),
  ].join('\n\n');
}

/** The OpenAPI 3.1 document of the admin routes described by tables (the session's public ones too). */
export function adminOpenApiDocument(routes: readonly Route[]): Json {
  const components = new SchemaComponents();
  const where = (r: Route, part: string) => `${ADMIN_BASE} ${r.method.toUpperCase()} ${r.path} (${part})`;
  components.convert(problemRecord, 'output', `${ADMIN_BASE} Problem`);
  const responses = routes.map((r) =>
    r.response.schema ? components.convert(r.response.schema, 'output', where(r, 'response')) : undefined,
  );
  const paths: Record<string, Json> = {};
  const tags: string[] = [];
  routes.forEach((r, i) => {
    const role = declaredRole(r.method.toUpperCase(), koaPattern(r));
    if (role === undefined) throw new Error(`${where(r, 'role')}: route-roles.ts declares no role for it`);
    const convertParams = (schema: z.ZodType | undefined, location: 'path' | 'query') =>
      schema
        ? parametersOf(
            components.resolve(components.convert(schema, 'input', where(r, location))),
            location,
            where(r, location),
          )
        : [];
    const isPublic = role === 'public';
    const write = r.method !== 'get';
    const parameters: Json[] = [...convertParams(r.params, 'path'), ...convertParams(r.query, 'query')];
    if (r.method === 'post' && !isPublic) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
    if (r.ifMatch) parameters.push({ $ref: '#/components/parameters/IfMatch' });
    const security = securityOf(r, isPublic);
    if (write && !isPublic) parameters.push({ $ref: '#/components/parameters/CsrfToken' });
    // A write only the session's cookie authenticates always needs the session's CSRF token.
    if (write && security?.some((s) => COOKIE_SCHEME in s))
      parameters.push({ ...CSRF_TOKEN, required: true });
    const bodySchema = r.body ? components.convert(r.body, 'input', where(r, 'body')) : undefined;
    const tag = r.path.split('/').find((s) => s !== '' && !s.startsWith('{')) ?? 'default';
    if (!tags.includes(tag)) tags.push(tag);
    const schema = responses[i];
    const headers = Object.entries(r.response.headers ?? {}).map(([name, h]) => [
      name,
      { description: h.description, required: h.required, schema: { type: 'string' } },
    ]);
    const operationResponses: Record<string, Json> = {
      [String(r.response.status)]: {
        description: r.response.description,
        ...(headers.length ? { headers: Object.fromEntries(headers) } : {}),
        ...(schema ? { content: { 'application/json': { schema } } } : {}),
      },
    };
    const { own, shared } = problemStatuses(r, isPublic);
    for (const status of own) {
      operationResponses[String(status)] = {
        description: problemDescription(r, status),
        content: problemContent(),
      };
    }
    for (const status of shared) {
      operationResponses[status] = { $ref: `#/components/responses/${SHARED_RESPONSES[status][0]}` };
    }
    paths[r.path] ??= {};
    paths[r.path][r.method] = {
      operationId: r.operationId,
      summary: r.summary,
      description: `${isPublic ? 'Public: needs no operator token.' : `Needs the \`${role}\` role.`}${r.description ? ` ${r.description}` : ''}`,
      'x-required-role': role,
      tags: [tag],
      ...(security ? { security } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(bodySchema
        ? {
            requestBody: {
              required: !r.body!.safeParse({}).success,
              content: { 'application/json': { schema: bodySchema } },
            },
          }
        : {}),
      responses: operationResponses,
    };
  });
  return {
    openapi: '3.1.0',
    info: { title: 'Admin API', version: '1.0', description: documentDescription() },
    servers: [{ url: ADMIN_BASE }],
    security: TOKEN_OR_SESSION,
    tags: tags.map((name) => ({ name })),
    paths,
    components: {
      schemas: components.toJSON(),
      responses: Object.fromEntries(Object.values(SHARED_RESPONSES)),
      parameters: { IdempotencyKey: IDEMPOTENCY_KEY, IfMatch: IF_MATCH, CsrfToken: CSRF_TOKEN },
      securitySchemes: {
        [TOKEN_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'operator token',
          description:
            'An operator token (`pds_op_…`) or the bootstrap token, as `Authorization: Bearer <token>`.',
        },
        [COOKIE_SCHEME]: {
          type: 'apiKey',
          in: 'cookie',
          name: SESSION_COOKIE,
          description:
            "The console's session (`POST /session` signs in), used where a request has no " +
            `\`Authorization\` header. Every write it authenticates needs the session's CSRF token in ` +
            `\`${CSRF_HEADER}\` (403 \`csrf_token_invalid\` without it).`,
        },
      },
    },
  };
}
