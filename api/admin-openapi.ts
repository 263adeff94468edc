/**
 * The admin API's OpenAPI 3.1 document (`GET /admin/v1/openapi.json`;
 * docs/operations.md, "Accounts and roles"), generated from the admin route tables as the partner APIs'
 * are (`partner/openapi.ts`, whose schema components it shares): accounts and their tokens, `GET /me`,
 * and who viewed a cart. Every operation names the role it needs (`x-required-role`, from
 * `route-roles.ts`), and the document's description holds the whole table: the role of every admin and
 * platform route.
 */
import type { z } from 'zod';
import type { AdminRoute } from './admin-route-table.ts';
import { koaPattern } from './admin-route-table.ts';
import { ADMIN_BASE } from './admin-support.ts';
import { PROBLEM_CONTENT_TYPE } from './http.ts';
import { IDEMPOTENCY_KEY, parametersOf, SchemaComponents } from './partner/openapi.ts';
import { problemRecord } from './partner/schemas.ts';
import { declaredRole, ROUTE_ROLES } from './route-roles.ts';
import { MAX_BODY_BYTES } from './write-support.ts';

type Json = Record<string, unknown>;

const SCHEMA_REF = '#/components/schemas/';
const SECURITY_SCHEME = 'operatorToken';

const problemContent = (): Json => ({ [PROBLEM_CONTENT_TYPE]: { schema: { $ref: `${SCHEMA_REF}Problem` } } });

const SHARED_RESPONSES: Record<number, [string, Json]> = {
  401: [
    'Unauthorized',
    {
      description:
        'No operator token, or one that is unknown, expired or revoked, or of a disabled account: send ' +
        '`Authorization: Bearer <operator token>`.',
      headers: { 'WWW-Authenticate': { required: true, schema: { type: 'string' } } },
      content: problemContent(),
    },
  ],
  403: [
    'InsufficientRole',
    {
      description:
        "The token's role does not cover the route's (`insufficient_role`): `required_role` names the role " +
        'needed, `role` the caller’s.',
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

const IF_MATCH: Json = {
  name: 'If-Match',
  in: 'header',
  description:
    'Makes the write conditional on the stream revision (the `ETag` of a read): 412 when it moved on.',
  required: false,
  schema: { type: 'string' },
};

function problemDescription(r: AdminRoute, status: number): string {
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

function problemStatuses(r: AdminRoute): number[] {
  const statuses = new Set(r.problems);
  if (r.query) statuses.add(400);
  if (r.params) statuses.add(404);
  if (r.body) for (const s of [400, 413, 415, 422]) statuses.add(s);
  if (r.method === 'post') for (const s of [400, 409, 422]) statuses.add(s);
  if (r.ifMatch) for (const s of [400, 412]) statuses.add(s);
  return [...statuses].filter((s) => !(s in SHARED_RESPONSES)).sort((a, b) => a - b);
}

function documentDescription(): string {
  const rows = Object.entries(ROUTE_ROLES).map(([route, role]) => `| \`${route}\` | ${role} |`);
  return [
    'The API of the people who run the service: operators, auditors and admins. Only part of it is ' +
      'described operation by operation here (accounts, tokens, `/me`, who viewed a cart); the rest is in ' +
      "the service's docs (docs/operations.md, docs/webhooks.md, docs/write-side.md).",
    '## Authentication and roles',
    'Send your operator token as `Authorization: Bearer <token>`. Each token belongs to an account with a ' +
      'role: `admin` (everything, accounts included) > `operator` (partners and keys, webhooks, projections, ' +
      'the platform write API, redeliveries) > `auditor` (reads only, never a secret). A route needing a role ' +
      "yours does not cover answers 403 `insufficient_role`. The service's bootstrap token is an `admin`.",
    '## The role of every route',
    ['| route | role |', '|---|---|', ...rows].join('\n'),
  ].join('\n\n');
}

/** The OpenAPI 3.1 document of the admin routes described by tables. */
export function adminOpenApiDocument(routes: readonly AdminRoute[]): Json {
  const components = new SchemaComponents();
  const where = (r: AdminRoute, part: string) =>
    `${ADMIN_BASE} ${r.method.toUpperCase()} ${r.path} (${part})`;
  components.convert(problemRecord, 'output', `${ADMIN_BASE} Problem`);
  const responses = routes.map((r) => components.convert(r.response.schema, 'output', where(r, 'response')));
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
    const parameters: Json[] = [...convertParams(r.params, 'path'), ...convertParams(r.query, 'query')];
    if (r.method === 'post') parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
    if (r.ifMatch) parameters.push({ $ref: '#/components/parameters/IfMatch' });
    const bodySchema = r.body ? components.convert(r.body, 'input', where(r, 'body')) : undefined;
    const tag = r.path.split('/').find((s) => s !== '' && !s.startsWith('{')) ?? 'default';
    if (!tags.includes(tag)) tags.push(tag);
    const operationResponses: Record<string, Json> = {
      [String(r.response.status)]: {
        description: r.response.description,
        content: { 'application/json': { schema: responses[i] } },
      },
    };
    for (const status of problemStatuses(r)) {
      operationResponses[String(status)] = {
        description: problemDescription(r, status),
        content: problemContent(),
      };
    }
    for (const [status, [name]] of Object.entries(SHARED_RESPONSES)) {
      operationResponses[status] = { $ref: `#/components/responses/${name}` };
    }
    paths[r.path] ??= {};
    paths[r.path][r.method] = {
      operationId: r.operationId,
      summary: r.summary,
      description: `Needs the \`${role}\` role.${r.description ? ` ${r.description}` : ''}`,
      'x-required-role': role,
      tags: [tag],
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
    security: [{ [SECURITY_SCHEME]: [] }],
    tags: tags.map((name) => ({ name })),
    paths,
    components: {
      schemas: components.toJSON(),
      responses: Object.fromEntries(Object.values(SHARED_RESPONSES)),
      parameters: { IdempotencyKey: IDEMPOTENCY_KEY, IfMatch: IF_MATCH },
      securitySchemes: {
        [SECURITY_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'operator token',
          description:
            'An operator token (`pds_op_…`) or the bootstrap token, as `Authorization: Bearer <token>`.',
        },
      },
    },
  };
}
