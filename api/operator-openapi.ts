/**
 * The OpenAPI 3.1 document of an API operators call with their token, the admin API's
 * (`admin-openapi.ts`) and the platform's (`platform-openapi.ts`), generated from its route tables
 * (`admin-route-table.ts`) as the partner APIs' are (`partner/openapi.ts`, whose schema components it
 * shares). Every operation names the role it needs (`x-required-role`, from `route-roles.ts`), the
 * credentials it takes and its problem answers; the same tables give the same document, key for key.
 */
import type { z } from 'zod';
import type { AdminRoute, PublicAdminRoute } from './admin-route-table.ts';
import { koaPattern } from './admin-route-table.ts';
import { CSRF_HEADER, SESSION_COOKIE } from './console-session.ts';
import { PROBLEM_CONTENT_TYPE } from './http.ts';
import { IDEMPOTENCY_KEY, parametersOf, SchemaComponents } from './partner/openapi.ts';
import { problemRecord } from './partner/schemas.ts';
import { declaredRole, ROUTE_ROLES } from './route-roles.ts';
import { MAX_BODY_BYTES } from './write-support.ts';

type Json = Record<string, unknown>;
export type OperatorApiRoute = AdminRoute | PublicAdminRoute;

/** What a document says of its API besides its operations. */
export interface OperatorApi {
  /** `/admin/v1`, `/platform/v1`. */
  base: string;
  title: string;
  /** The document's description (Markdown). */
  description: string;
  /** Whether the console's session cookie authenticates the API's routes, besides an operator token. */
  session: boolean;
  /** What a 503 means on this API. */
  unavailable: string;
}

const SCHEMA_REF = '#/components/schemas/';
const TOKEN_SCHEME = 'operatorToken';
const COOKIE_SCHEME = 'cookieAuth';

const problemContent = (): Json => ({ [PROBLEM_CONTENT_TYPE]: { schema: { $ref: `${SCHEMA_REF}Problem` } } });

function sharedResponses(api: OperatorApi): Record<number, [string, Json]> {
  const session = api.session
    ? ', or a session that has ended (its cookie is cleared): send `Authorization: Bearer <operator token>`, or sign in again.'
    : ': send `Authorization: Bearer <operator token>`.';
  const csrf = api.session
    ? ` Or a write the console session's cookie authenticates came without the session's CSRF token in \`${CSRF_HEADER}\` (\`csrf_token_invalid\`).`
    : '';
  return {
    401: [
      'Unauthorized',
      {
        description: `No operator token${api.session ? ' or console session' : ''}, or a token that is unknown, expired or revoked or of a disabled account${session}`,
        headers: { 'WWW-Authenticate': { required: true, schema: { type: 'string' } } },
        content: problemContent(),
      },
    ],
    403: [
      'Forbidden',
      {
        description:
          "The caller's role does not cover the route's (`insufficient_role`): `required_role` names the role " +
          `needed, \`role\` the caller’s.${csrf}`,
        content: problemContent(),
      },
    ],
    503: [
      'Unavailable',
      {
        description: `${api.unavailable} Retry after \`Retry-After\` seconds.`,
        headers: { 'Retry-After': { schema: { type: 'integer', minimum: 0 } } },
        content: problemContent(),
      },
    ],
  };
}

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
    'Makes the write conditional on the stream revision (the `ETag` of a read or a write): 412 when it moved on.',
  required: false,
  schema: { type: 'string' },
};

/**
 * The `ETag` of an answer that carries its stream's `revision`: every write's (`answerWrite`) and the
 * reads of one partner, account or subscription send the revision as the tag too.
 */
const ETAG = {
  description: 'The stream revision, quoted (`"3"`): the `If-Match` of a write conditional on it.',
  required: true,
};

/** Whether an answer's body is an object with the stream's `revision` at its top. */
function sendsRevision(schema: z.ZodType | undefined): boolean {
  const shape = (schema as { shape?: Record<string, unknown> } | undefined)?.shape;
  return shape !== undefined && Object.hasOwn(shape, 'revision');
}

function problemDescription(r: OperatorApiRoute, status: number): string {
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

/** Idempotency keys belong to the routers behind an operator's authentication, on a POST. */
const takesIdempotencyKey = (r: OperatorApiRoute, isPublic: boolean) =>
  r.method === 'post' && !isPublic && r.idempotencyKey !== false;

/** Problem statuses the operation documents itself, and those it refers to the shared responses. */
function problemStatuses(r: OperatorApiRoute, isPublic: boolean, shared: number[]) {
  const statuses = new Set(r.problems);
  if (r.query) statuses.add(400);
  if (r.params) statuses.add(404);
  if (r.body) for (const s of [400, 413, 415, 422]) statuses.add(s);
  if (takesIdempotencyKey(r, isPublic)) for (const s of [400, 409, 422]) statuses.add(s);
  if (r.ifMatch) for (const s of [400, 412]) statuses.add(s);
  // Behind the router's authentication every route can answer 401 and 403; any route, 503.
  const refs = shared.filter((s) => s === 503 || !isPublic || statuses.has(s));
  const own = [...statuses].filter((s) => !shared.includes(s)).sort((a, b) => a - b);
  return { own, shared: refs };
}

/** Who may call the operation: the router's credentials, the session's cookie, or anyone. */
function securityOf(r: OperatorApiRoute, isPublic: boolean): Json[] | undefined {
  if (!isPublic) return undefined; // the document's own: a token (or the cookie)
  const session = 'session' in r ? r.session : undefined;
  if (session === 'required') return [{ [COOKIE_SCHEME]: [] }];
  return session === 'optional' ? [{}, { [COOKIE_SCHEME]: [] }] : [];
}

/** The role of every admin and platform route, as a Markdown table. */
export function roleTable(): string {
  const rows = Object.entries(ROUTE_ROLES).map(([route, role]) => `| \`${route}\` | ${role} |`);
  return ['| route | role |', '|---|---|', ...rows].join('\n');
}

function securitySchemes(api: OperatorApi): Json {
  const token = {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'operator token',
    description: 'An operator token (`pds_op_…`) or the bootstrap token, as `Authorization: Bearer <token>`.',
  };
  if (!api.session) return { [TOKEN_SCHEME]: token };
  return {
    [TOKEN_SCHEME]: token,
    [COOKIE_SCHEME]: {
      type: 'apiKey',
      in: 'cookie',
      name: SESSION_COOKIE,
      description:
        "The console's session (`POST /session` signs in), used where a request has no " +
        `\`Authorization\` header. Every write it authenticates needs the session's CSRF token in ` +
        `\`${CSRF_HEADER}\` (403 \`csrf_token_invalid\` without it).`,
    },
  };
}

/** One operation of the document, its schemas converted into `components`. */
function operationOf(
  api: OperatorApi,
  r: OperatorApiRoute,
  components: SchemaComponents,
  response: Json | undefined,
  shared: Record<number, [string, Json]>,
): Json {
  const where = (part: string) => `${api.base} ${r.method.toUpperCase()} ${r.path} (${part})`;
  const role = declaredRole(r.method.toUpperCase(), koaPattern(r, api.base));
  if (role === undefined) throw new Error(`${where('role')}: route-roles.ts declares no role for it`);
  const convertParams = (schema: z.ZodType | undefined, location: 'path' | 'query') =>
    schema
      ? parametersOf(
          components.resolve(components.convert(schema, 'input', where(location))),
          location,
          where(location),
        )
      : [];
  const isPublic = role === 'public';
  const write = r.method !== 'get';
  const parameters: Json[] = [...convertParams(r.params, 'path'), ...convertParams(r.query, 'query')];
  if (takesIdempotencyKey(r, isPublic)) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
  if (r.ifMatch) parameters.push({ $ref: '#/components/parameters/IfMatch' });
  const security = securityOf(r, isPublic);
  if (api.session && write && !isPublic) parameters.push({ $ref: '#/components/parameters/CsrfToken' });
  // A write only the session's cookie authenticates always needs the session's CSRF token.
  if (write && security?.some((s) => COOKIE_SCHEME in s)) parameters.push({ ...CSRF_TOKEN, required: true });
  const bodySchema = r.body ? components.convert(r.body, 'input', where('body')) : undefined;
  const declared = { ...(sendsRevision(r.response.schema) && { ETag: ETAG }), ...r.response.headers };
  const headers = Object.entries(declared).map(([name, h]) => [
    name,
    { description: h.description, required: h.required, schema: { type: 'string' } },
  ]);
  const success = (description: string): Json => ({
    description,
    ...(headers.length ? { headers: Object.fromEntries(headers) } : {}),
    ...(response ? { content: { 'application/json': { schema: response } } } : {}),
  });
  const responses: Record<string, Json> = { [String(r.response.status)]: success(r.response.description) };
  for (const also of r.response.also ?? []) responses[String(also.status)] = success(also.description);
  const problems = problemStatuses(r, isPublic, Object.keys(shared).map(Number));
  for (const status of problems.own) {
    responses[String(status)] = { description: problemDescription(r, status), content: problemContent() };
  }
  for (const status of problems.shared) {
    responses[status] = { $ref: `#/components/responses/${shared[status][0]}` };
  }
  const tag = r.path.split('/').find((s) => s !== '' && !s.startsWith('{')) ?? 'default';
  const needs = isPublic ? 'Public: needs no operator token.' : `Needs the \`${role}\` role.`;
  return {
    operationId: r.operationId,
    summary: r.summary,
    description: `${needs}${r.description ? ` ${r.description}` : ''}`,
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
    responses,
  };
}

/** The OpenAPI 3.1 document of an operator API's route tables. */
export function operatorOpenApiDocument(routes: readonly OperatorApiRoute[], api: OperatorApi): Json {
  const components = new SchemaComponents();
  const where = (r: OperatorApiRoute, part: string) =>
    `${api.base} ${r.method.toUpperCase()} ${r.path} (${part})`;
  // Outputs first: input variants are told apart from the output schemas of the same name.
  components.convert(problemRecord, 'output', `${api.base} Problem`);
  const responses = routes.map((r) =>
    r.response.schema ? components.convert(r.response.schema, 'output', where(r, 'response')) : undefined,
  );
  const shared = sharedResponses(api);
  const paths: Record<string, Record<string, Json>> = {};
  const operationIds = new Set<string>();
  routes.forEach((r, i) => {
    if (operationIds.has(r.operationId)) throw new Error(`${where(r, 'operationId')}: duplicate`);
    operationIds.add(r.operationId);
    paths[r.path] ??= {};
    if (paths[r.path][r.method]) throw new Error(`${where(r, 'path')}: two routes for one method and path`);
    paths[r.path][r.method] = operationOf(api, r, components, responses[i], shared);
  });
  const tagNames = new Set(
    Object.values(paths).flatMap((item) => Object.values(item).flatMap((op) => op.tags as string[])),
  );
  return {
    openapi: '3.1.0',
    info: { title: api.title, version: '1.0', description: api.description },
    servers: [{ url: api.base }],
    security: api.session ? [{ [TOKEN_SCHEME]: [] }, { [COOKIE_SCHEME]: [] }] : [{ [TOKEN_SCHEME]: [] }],
    tags: [...tagNames].map((name) => ({ name })),
    paths,
    components: {
      schemas: components.toJSON(),
      responses: Object.fromEntries(Object.values(shared)),
      parameters: {
        IdempotencyKey: IDEMPOTENCY_KEY,
        IfMatch: IF_MATCH,
        ...(api.session ? { CsrfToken: CSRF_TOKEN } : {}),
      },
      securitySchemes: securitySchemes(api),
    },
  };
}
