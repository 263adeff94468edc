/**
 * The OpenAPI 3.1 document of a partner API (docs/partner-api.md), generated from its route table: zod 4's
 * `z.toJSONSchema` gives draft 2020-12 schemas, which OpenAPI 3.1 uses as they are. Responses are
 * described by the output type of their schemas, parameters and bodies by the input type (what a client
 * sends: a default makes a field optional, a transform shows what it accepts).
 *
 * A schema named with `.meta({ id })` becomes `components.schemas.<id>` and is referenced as
 * `#/components/schemas/<id>`; when its input type differs from its output type (a default, a
 * transform), the input variant is published as `<id>Input`. Two different schemas with one name in
 * one document are an error, as is a route whose path template and `params` schema disagree.
 *
 * Every operation documents its parameters, body, success answer (with the rate-limit headers, and
 * `Link` on lists) and its problem answers (`application/problem+json`): 401, 403 and 429 for every
 * route, 400 for a query, 404 for a path parameter, the write statuses of a POST (malformed JSON,
 * Idempotency-Key, size and media type limits, 422) and the route's own `problems`. Output is
 * deterministic: same table, same document, key for key.
 */
import { z } from 'zod';
import { PROBLEM_CONTENT_TYPE } from '../http.ts';
import { MAX_BODY_BYTES } from '../write-support.ts';
import { DEFAULT_LIMIT, MAX_LIMIT } from './common.ts';
import type { PartnerApi, PartnerRoute } from './routes.ts';
import { problemRecord } from './schemas.ts';

// Not `import … from 'node:http'`: as an ES module it loads undici for its WebSocket export, 38 ms of
// every start (docs/read-side.md, "Start-up and restart").
const { STATUS_CODES } = process.getBuiltinModule('node:http');

type Json = Record<string, unknown>;
type Io = 'input' | 'output';

const JSON_CONTENT_TYPE = 'application/json';
const SCHEMA_REF = '#/components/schemas/';
const DEFS_REF = '#/$defs/';
const SECURITY_SCHEME = 'apiKey';
const PROBLEM = 'Problem';

// ---- schemas -----------------------------------------------------------------------------------------

const decodePointer = (s: string) => s.replace(/~1/g, '/').replace(/~0/g, '~');
const encodePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** A copy of `value` with every `#/$defs/<name>` reference pointing at `components.schemas.<names(name)>`. */
function rewriteRefs(value: unknown, names: ReadonlyMap<string, string>, where: string): unknown {
  if (Array.isArray(value)) return value.map((v) => rewriteRefs(v, names, where));
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === '$ref' && typeof v === 'string') {
      if (!v.startsWith(DEFS_REF)) {
        throw new Error(
          `${where}: a recursive schema needs a name: give it .meta({ id: '…' }) (found $ref ${v})`,
        );
      }
      const name = decodePointer(v.slice(DEFS_REF.length));
      out[key] = SCHEMA_REF + encodePointer(names.get(name) ?? name);
    } else {
      out[key] = rewriteRefs(v, names, where);
    }
  }
  return out;
}

/** The named schemas of one document, gathered as its operations are converted. */
export class SchemaComponents {
  readonly #schemas = new Map<string, { json: Json; text: string }>();

  /**
   * The JSON Schema of `schema` for `io`; named sub-schemas (and a named root) are moved to the
   * components and referenced. Convert every output schema before any input one: an input variant is
   * only told apart from the output one already registered under its name.
   */
  convert(schema: z.ZodType, io: Io, where: string): Json {
    let generated: Json;
    try {
      generated = z.toJSONSchema(schema, {
        target: 'draft-2020-12',
        io,
        unrepresentable: 'throw',
        cycles: 'ref',
        reused: 'inline',
      }) as Json;
    } catch (err) {
      throw new Error(`${where}: ${(err as Error).message}`, { cause: err });
    }
    const { $schema: _dialect, $defs, ...root } = generated;
    const defs = ($defs ?? {}) as Record<string, Json>;
    const names = new Map<string, string>();
    for (const name of Object.keys(defs)) {
      if (/^__schema\d+$/.test(name)) {
        throw new Error(`${where}: a recursive schema needs a name: give it .meta({ id: '…' })`);
      }
      names.set(name, name);
    }
    const textOf = (name: string) => JSON.stringify(rewriteRefs(defs[name], names, where));
    if (io === 'input') {
      // Renaming one variant changes the references (and so the text) of the schemas that use it.
      for (let renamed = true; renamed; ) {
        renamed = false;
        for (const name of names.keys()) {
          const existing = this.#schemas.get(name);
          if (names.get(name) === name && existing && existing.text !== textOf(name)) {
            names.set(name, `${name}Input`);
            renamed = true;
          }
        }
      }
    }
    for (const [name, target] of names) {
      const json = rewriteRefs(defs[name], names, where) as Json;
      const text = JSON.stringify(json);
      const existing = this.#schemas.get(target);
      if (!existing) this.#schemas.set(target, { json, text });
      else if (existing.text !== text) {
        throw new Error(
          `${where}: two different schemas are named ${target} in one document; give each its own .meta({ id })`,
        );
      }
    }
    return rewriteRefs(root, names, where) as Json;
  }

  /** A schema with its top-level `$ref` (to a component) followed. */
  resolve(schema: Json): Json {
    const ref = schema['$ref'];
    if (typeof ref !== 'string' || !ref.startsWith(SCHEMA_REF)) return schema;
    const target = this.#schemas.get(decodePointer(ref.slice(SCHEMA_REF.length)));
    if (!target) throw new Error(`unresolved schema reference ${ref}`);
    return this.resolve(target.json);
  }

  /** The components, sorted by name. */
  toJSON(): Json {
    const out: Json = {};
    for (const name of [...this.#schemas.keys()].sort()) out[name] = this.#schemas.get(name)!.json;
    return out;
  }
}

// ---- shared headers and responses -------------------------------------------------------------------

const integerHeader = (description: string): Json => ({
  description,
  required: true,
  schema: { type: 'integer', minimum: 0 },
});

const HEADERS: Record<string, Json> = {
  'RateLimit-Limit': integerHeader("Requests per minute the key's rate limit allows."),
  'RateLimit-Remaining': integerHeader('Requests left before the limit is reached.'),
  'RateLimit-Reset': integerHeader('Seconds until the key has its full allowance again.'),
  'RateLimit-Policy': {
    description: 'The limit as a policy: `<requests>;w=60` (requests per 60-second window).',
    required: true,
    schema: { type: 'string', examples: ['600;w=60'] },
  },
  'Retry-After': integerHeader('Seconds to wait before retrying.'),
  Link: {
    description:
      'The next page, as `<…?cursor=…>; rel="next"`: present when `next_cursor` is not null. The URL keeps ' +
      "the request's other query parameters.",
    schema: { type: 'string' },
  },
  'WWW-Authenticate': {
    description: 'The authentication scheme to use: `Bearer realm="pds-partner"`.',
    required: true,
    schema: { type: 'string' },
  },
};

/** On a 409, only when the conflict is an Idempotency-Key still in progress. */
const IN_PROGRESS_RETRY: Json = {
  description:
    'Seconds to wait before retrying, when a request with the same `Idempotency-Key` is in progress.',
  schema: { type: 'integer', minimum: 0 },
};

const headerRef = (name: string): Json => ({ $ref: `#/components/headers/${name}` });
const headerRefs = (...names: string[]): Json => Object.fromEntries(names.map((n) => [n, headerRef(n)]));
const RATE_LIMIT_HEADERS = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy'];

const problemContent = (): Json => ({
  [PROBLEM_CONTENT_TYPE]: { schema: { $ref: SCHEMA_REF + PROBLEM } },
});

/** The problem answers every route shares, as `components.responses`. */
function sharedResponses(api: PartnerApi): Record<number, [string, Json]> {
  return {
    401: [
      'Unauthorized',
      {
        description:
          'No API key, or one that is malformed, unknown or revoked: send `Authorization: Bearer <api key>`.',
        headers: headerRefs('WWW-Authenticate'),
        content: problemContent(),
      },
    ],
    403: [
      'Forbidden',
      {
        description: `The key belongs to another kind of partner: this API serves ${api.kinds.join(' and ')} partners.`,
        content: problemContent(),
      },
    ],
    429: [
      'RateLimited',
      {
        description: "The key's rate limit is exhausted: retry after `Retry-After` seconds.",
        headers: headerRefs('Retry-After', ...RATE_LIMIT_HEADERS),
        content: problemContent(),
      },
    ],
  };
}

export const IDEMPOTENCY_KEY: Json = {
  name: 'Idempotency-Key',
  in: 'header',
  description:
    'Makes the request safe to retry: a retry with the same key and body gets the first answer again ' +
    '(with `Idempotent-Replayed: true`); the same key with another body is refused with 422. A ' +
    'request refused before it runs (an invalid body, a resource outside the key) leaves the key ' +
    'unused. 1 to 255 printable ASCII characters, unique per request.',
  required: false,
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
};

// ---- operations -------------------------------------------------------------------------------------

/** What a route's problem answer of `status` means, from what the route takes. */
function problemDescription(route: PartnerRoute, status: number): string {
  const post = route.method === 'post';
  const parts: string[] = [];
  switch (status) {
    case 400:
      if (route.query) parts.push('a query parameter is invalid, missing or unknown');
      if (post) parts.push('the body is not valid JSON, or the `Idempotency-Key` header is malformed');
      return `Bad request: ${parts.length ? parts.join('; ') : 'the request is invalid'}. \`errors\` names each offending field.`;
    case 404:
      return 'Not found: no such record, or one outside the scope of the key (the answer is the same either way).';
    case 409:
      if (post)
        parts.push('a request with the same `Idempotency-Key` is still being processed (retry shortly)');
      parts.push("the request conflicts with the resource's current state (see `code`)");
      return `Conflict: ${parts.join('; or ')}.`;
    case 413:
      return `The body is larger than ${MAX_BODY_BYTES} bytes.`;
    case 415:
      return 'The body is not `application/json`.';
    case 422:
      if (route.body) parts.push('the body is invalid (`errors` names each offending field)');
      if (post) parts.push('the `Idempotency-Key` was already used for a different request');
      return `Unprocessable: ${parts.length ? parts.join('; or ') : 'the request cannot be processed'}.`;
    case 503:
      return post
        ? 'Temporarily unavailable: the read store or the event store cannot be reached (`read_store_unavailable`, `event_store_unavailable`), or the write met contention (`contention`). Retry after `Retry-After` seconds.'
        : 'Temporarily unavailable: the read store cannot be reached (`read_store_unavailable`). Retry after `Retry-After` seconds.';
    default:
      return `${STATUS_CODES[status] ?? 'Error'} (see \`code\` and \`detail\`).`;
  }
}

/**
 * The problem statuses of a route, besides the shared 401, 403 and 429. Every route reads the read
 * store, if only the key, so every route may answer 503 while it is out of reach.
 */
function problemStatuses(route: PartnerRoute): number[] {
  const statuses = new Set([...route.problems, 503]);
  if (route.query) statuses.add(400);
  if (route.params) statuses.add(404);
  if (route.body) statuses.add(422);
  if (route.method === 'post') for (const s of [400, 409, 413, 415, 422, 503]) statuses.add(s);
  for (const s of statuses) {
    if (!Number.isInteger(s) || s < 400 || s > 599) {
      throw new Error(`${route.operationId}: problem status ${s} is not a 4xx or 5xx status`);
    }
  }
  return [...statuses].filter((s) => s !== 401 && s !== 403 && s !== 429).sort((a, b) => a - b);
}

/** Path or query parameters from the (input) JSON Schema of a zod object. */
export function parametersOf(schema: Json, location: 'path' | 'query', where: string): Json[] {
  const properties = schema['properties'] as Record<string, Json> | undefined;
  if (schema['type'] !== 'object' || !properties) {
    throw new Error(`${where}: ${location === 'path' ? 'params' : 'query'} must be a zod object`);
  }
  const required = new Set((schema['required'] as string[] | undefined) ?? []);
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: location,
      ...(typeof description === 'string' ? { description } : {}),
      required: location === 'path' || required.has(name),
      schema: rest,
    };
  });
}

const tagOf = (path: string) => path.split('/').find((s) => s !== '' && !s.startsWith('{')) ?? 'default';

function documentDescription(api: PartnerApi): string {
  return [
    api.description,
    '## Authentication',
    `Send your API key as \`Authorization: Bearer <api key>\`. This API serves ${api.kinds.join(' and ')} ` +
      'partners; a key sees only its own scope, and a record outside it answers 404.',
    '## Lists',
    `Lists take \`limit\` (1–${MAX_LIMIT}, default ${DEFAULT_LIMIT}) and \`cursor\`, and answer ` +
      '`{"<records>": [...], "next_cursor": …}` with a `Link: <…>; rel="next"` header while there is a ' +
      'next page. Pass `next_cursor` back as `cursor` to continue: the order is stable, so paging skips and ' +
      'repeats nothing.',
    '## Errors and limits',
    'Refusals are RFC 9457 problem documents (`application/problem+json`) with a machine-readable ' +
      '`code`; invalid input names each field in `errors`. Each key has a rate limit, reported on every ' +
      'answer by the `RateLimit-*` headers; past it, requests answer 429 with `Retry-After`.',
  ].join('\n\n');
}

/** The OpenAPI 3.1 document of a partner API. */
export function openApiDocument(api: PartnerApi): Json {
  const components = new SchemaComponents();
  const where = (r: PartnerRoute, part: string) =>
    `${api.base} ${r.method.toUpperCase()} ${r.path} (${part})`;

  // Outputs first: input variants are told apart from the output schemas of the same name.
  components.convert(problemRecord, 'output', `${api.base} Problem`);
  const responses = api.routes.map((r) =>
    components.convert(r.response.schema, 'output', where(r, 'response')),
  );

  const shared = sharedResponses(api);
  const paths: Record<string, Json> = {};
  const operationIds = new Set<string>();
  const tags: string[] = [];
  api.routes.forEach((r, i) => {
    if (operationIds.has(r.operationId))
      throw new Error(`${where(r, 'operationId')}: duplicate ${r.operationId}`);
    operationIds.add(r.operationId);
    paths[r.path] ??= {};
    const item = paths[r.path];
    if (item[r.method]) throw new Error(`${where(r, 'path')}: two routes for one method and path`);

    const templated = [...r.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    const pathParams = r.params
      ? parametersOf(
          components.resolve(components.convert(r.params, 'input', where(r, 'params'))),
          'path',
          where(r, 'params'),
        )
      : [];
    const declared = pathParams.map((p) => String(p['name']));
    if ([...templated].sort().join() !== [...declared].sort().join()) {
      throw new Error(
        `${where(r, 'params')}: the path names {${templated.join('}, {')}} but params declares ${declared.join(', ') || 'nothing'}`,
      );
    }
    const queryParams = r.query
      ? parametersOf(
          components.resolve(components.convert(r.query, 'input', where(r, 'query'))),
          'query',
          where(r, 'query'),
        )
      : [];
    const parameters: Json[] = [...pathParams, ...queryParams];
    if (r.method === 'post') parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });

    // An absent body is parsed as `{}`: the body is required only when `{}` is not a valid one.
    const bodySchema = r.body ? components.convert(r.body, 'input', where(r, 'body')) : undefined;
    const body = bodySchema && {
      required: !r.body!.safeParse({}).success,
      content: { [JSON_CONTENT_TYPE]: { schema: bodySchema } },
    };

    const tag = tagOf(r.path);
    if (!tags.includes(tag)) tags.push(tag);

    const response = responses[i];
    const isList = Object.hasOwn(
      (components.resolve(response)['properties'] as Json | undefined) ?? {},
      'next_cursor',
    );
    const operationResponses: Record<string, Json> = {
      [String(r.response.status)]: {
        description: r.response.description,
        headers: headerRefs(...RATE_LIMIT_HEADERS, ...(isList ? ['Link'] : [])),
        ...(r.response.status === 204 ? {} : { content: { [JSON_CONTENT_TYPE]: { schema: response } } }),
      },
    };
    for (const status of problemStatuses(r)) {
      operationResponses[String(status)] = {
        description: problemDescription(r, status),
        ...(status === 503 ? { headers: headerRefs('Retry-After') } : {}),
        ...(status === 409 && r.method === 'post' ? { headers: { 'Retry-After': IN_PROGRESS_RETRY } } : {}),
        content: problemContent(),
      };
    }
    for (const [status, [name]] of Object.entries(shared)) {
      operationResponses[status] = { $ref: `#/components/responses/${name}` };
    }

    item[r.method] = {
      operationId: r.operationId,
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      tags: [tag],
      ...(parameters.length ? { parameters } : {}),
      ...(body ? { requestBody: body } : {}),
      responses: operationResponses,
    };
  });

  const usesPost = api.routes.some((r) => r.method === 'post');
  return {
    openapi: '3.1.0',
    info: { title: api.title, version: '1.0', description: documentDescription(api) },
    servers: [{ url: api.base }],
    security: [{ [SECURITY_SCHEME]: [] }],
    tags: tags.map((name) => ({ name })),
    paths,
    components: {
      schemas: components.toJSON(),
      responses: Object.fromEntries(Object.values(shared)),
      ...(usesPost ? { parameters: { IdempotencyKey: IDEMPOTENCY_KEY } } : {}),
      headers: HEADERS,
      securitySchemes: {
        [SECURITY_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'API key',
          description: 'Your partner API key, sent as `Authorization: Bearer <api key>`.',
        },
      },
    },
  };
}
