/**
 * The partner APIs' OpenAPI 3.1 documents (docs/partner-api.md): each of the four is a valid OpenAPI 3.1 document
 * (the OAS 3.1 schema, and every Schema Object a valid draft 2020-12 schema), documents every route of
 * its table, resolves every `$ref`, and is generated deterministically; the service serves it at
 * `<base>/openapi.json`; and the response validator the API tests use accepts real answers and refuses
 * ones that stray from the document.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import test from 'ava';
import { z } from 'zod';
import { partnerApis } from '../api/partner/index.ts';
import { openApiDocument } from '../api/partner/openapi.ts';
import type { PartnerApi, PartnerRoute } from '../api/partner/routes.ts';
import { reviewRecord } from '../api/partner/schemas.ts';
import { matchPath, resolvePointer, responseErrors, validateResponse } from './support/openapi-validate.ts';
import { startService } from './support/service.ts';

// biome-ignore lint/suspicious/noExplicitAny: documents are walked as plain JSON
type Json = Record<string, any>;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Every value in `value` with its JSON pointer. */
function* walk(value: unknown, pointer = '#'): Generator<[string, unknown]> {
  yield [pointer, value];
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      yield* walk(v, `${pointer}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
    }
  }
}

/** Every Schema Object of a document, with where it is. */
function schemaObjects(doc: Json): [string, Json][] {
  const out: [string, Json][] = Object.entries(doc.components?.schemas ?? {}).map(([name, s]) => [
    `components.schemas.${name}`,
    s as Json,
  ]);
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const method of METHODS.filter((m) => item[m])) {
      const op = item[method];
      for (const p of op.parameters ?? []) if (p.schema) out.push([`${method} ${path} ${p.name}`, p.schema]);
      for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) {
        out.push([`${method} ${path} body ${type}`, (media as Json).schema]);
      }
      for (const [status, response] of Object.entries(op.responses as Json)) {
        for (const [type, media] of Object.entries((response as Json).content ?? {})) {
          out.push([`${method} ${path} ${status} ${type}`, (media as Json).schema]);
        }
      }
    }
  }
  return out;
}

const documents = partnerApis.map((api) => ({ api, doc: openApiDocument(api) as Json }));

test('there are four partner APIs, each under its own base path', (t) => {
  t.deepEqual(
    partnerApis.map((a) => a.base),
    ['/partner/brand/v1', '/partner/brand-feed/v1', '/partner/store/v1', '/partner/store-menu-feed/v1'],
  );
});

for (const { api, doc } of documents) {
  test(`${api.base}: the document is valid OpenAPI 3.1`, async (t) => {
    t.is(doc.openapi, '3.1.0');
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    t.true(result.valid, JSON.stringify(result.errors, null, 2));
    t.is(validator.version, '3.1');
  });

  test(`${api.base}: every Schema Object is a valid draft 2020-12 JSON Schema`, (t) => {
    const ajv = new Ajv2020({ strict: true, strictTypes: false, strictTuples: false });
    formats.default(ajv);
    for (const [where, schema] of schemaObjects(doc)) {
      const valid = ajv.validateSchema(schema);
      t.true(valid, `${where}: ${ajv.errorsText(ajv.errors)}`);
    }
  });

  test(`${api.base}: info, server, security and every route of the table`, (t) => {
    t.is(doc.info.title, api.title);
    t.is(doc.info.version, '1.0');
    t.true(doc.info.description.startsWith(api.description));
    t.deepEqual(doc.servers, [{ url: api.base }]);
    t.deepEqual(doc.security, [{ apiKey: [] }]);
    t.like(doc.components.securitySchemes.apiKey, { type: 'http', scheme: 'bearer' });

    const documented = Object.entries(doc.paths as Json).flatMap(([path, item]) =>
      METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`),
    );
    t.deepEqual(
      documented.sort(),
      api.routes.map((r) => `${r.method.toUpperCase()} ${r.path}`).sort(),
      'exactly the routes of the table',
    );
    for (const r of api.routes) {
      const op = doc.paths[r.path][r.method];
      t.is(op.operationId, r.operationId);
      t.is(op.summary, r.summary);
      const responses = op.responses as Json;
      const success = responses[String(r.response.status)];
      t.is(success.description, r.response.description);
      t.truthy(success.content['application/json'].schema, `${r.operationId}: success schema`);
      for (const status of [401, 403, 429, ...r.problems]) {
        t.truthy(responses[String(status)], `${r.operationId}: ${status} documented`);
      }
      for (const [status, response] of Object.entries(responses)) {
        if (Number(status) < 400) continue;
        const resolved = response.$ref ? resolvePointer(doc, response.$ref) : response;
        t.deepEqual(
          (resolved as Json).content,
          { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
          `${r.operationId} ${status} is a problem document`,
        );
      }
      if (r.query) t.truthy(responses['400'], `${r.operationId}: a query can be refused with 400`);
      if (r.body) t.truthy(responses['422'], `${r.operationId}: a body can be refused with 422`);
      const rateLimited = resolvePointer(doc, responses['429'].$ref) as Json;
      t.deepEqual(Object.keys(rateLimited.headers).sort(), [
        'RateLimit-Limit',
        'RateLimit-Policy',
        'RateLimit-Remaining',
        'RateLimit-Reset',
        'Retry-After',
      ]);

      const params = (op.parameters ?? []) as Json[];
      const pathNames = [...r.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      t.deepEqual(
        params
          .filter((p) => p.in === 'path')
          .map((p) => p.name)
          .sort(),
        [...pathNames].sort(),
        `${r.operationId}: path parameters`,
      );
      for (const p of params.filter((p) => p.in === 'path')) t.true(p.required);
      if (r.query) {
        const shape = Object.keys((r.query as unknown as { shape?: object }).shape ?? {});
        const query = params.filter((p) => p.in === 'query').map((p) => p.name);
        if (shape.length) t.deepEqual(query.sort(), shape.sort(), `${r.operationId}: query parameters`);
      }
    }
  });

  test(`${api.base}: every $ref resolves`, (t) => {
    let refs = 0;
    for (const [pointer, value] of walk(doc)) {
      if (!pointer.endsWith('/$ref')) continue;
      refs++;
      t.is(typeof value, 'string', pointer);
      t.not(resolvePointer(doc, value as string), undefined, `${pointer}: ${value} does not resolve`);
    }
    t.true(refs > 0);
  });

  test(`${api.base}: record schemas refuse undocumented fields (additionalProperties: false)`, (t) => {
    const schemas = doc.components.schemas as Json;
    for (const [name, schema] of Object.entries(schemas)) {
      if (schema.type === 'object' && schema.properties && name !== 'Problem') {
        t.is(schema.additionalProperties, false, `${name}`);
      }
    }
  });

  test(`${api.base}: the document is deterministic`, (t) => {
    t.is(JSON.stringify(openApiDocument(api)), JSON.stringify(doc));
    t.deepEqual(Object.keys(doc.components.schemas), Object.keys(doc.components.schemas).sort());
  });
}

test('the service serves each document at <base>/openapi.json, without a key', async (t) => {
  const svc = await startService(t);
  for (const { api, doc } of documents) {
    const res = await fetch(`${svc.base}${api.base}/openapi.json`);
    t.is(res.status, 200);
    t.regex(res.headers.get('content-type') ?? '', /^application\/json/);
    t.deepEqual(await res.json(), doc);
  }
});

test('partnerCall checks answers against the document: problems and a page of reviews', async (t) => {
  const svc = await startService(t);
  const feed = '/partner/brand-feed/v1';
  // Without a key: 401, documented for every route.
  const anonymous = await svc.partnerCall(feed, 'GET', '/reviews', undefined);
  t.is(anonymous.status, 401);
  t.truthy(anonymous.headers.get('www-authenticate'));

  const created = await svc.call('POST', '/admin/v1/partners', {
    name: 'Feed',
    kind: 'brand_feed',
    all_brands: true,
  });
  t.is(created.status, 201, await created.clone().text());
  const { api_key: key } = (await created.json()) as { api_key: string };
  // The key reaches the partner_keys read model asynchronously.
  let reply = await svc.partnerCall<Json>(feed, 'GET', '/reviews?limit=5', key);
  for (let i = 0; reply.status === 401 && i < 100; i++) {
    await new Promise((r) => setTimeout(r, 20));
    reply = await svc.partnerCall<Json>(feed, 'GET', '/reviews?limit=5', key);
  }
  t.is(reply.status, 200);
  t.deepEqual(reply.body, { reviews: [], next_cursor: null });
  t.truthy(reply.headers.get('ratelimit-limit'));

  t.is((await svc.partnerCall(feed, 'GET', '/reviews?limit=0', key)).status, 400);
  t.is((await svc.partnerCall(feed, 'GET', `${feed}/products/abc/reviews`, key)).status, 404);
  t.is((await svc.partnerCall('/partner/brand/v1', 'GET', '/stores', key)).status, 403);

  // An undocumented path is an error, not a pass.
  await t.throwsAsync(svc.partnerCall(feed, 'GET', '/nothing-here', key), { message: /no path/ });
});

// ---- the validator and the generator on their own -------------------------------------------------------

const brandFeed = documents.find((d) => d.api.base === '/partner/brand-feed/v1')!.doc;
test('the OpenAPI validator notices a broken document and a dangling $ref', async (t) => {
  const broken = structuredClone(brandFeed);
  delete broken.paths['/reviews'].get.responses['200'].description;
  t.false((await new Validator().validate(broken)).valid);
  const dangling = structuredClone(brandFeed);
  dangling.paths['/reviews'].get.responses['200'].content['application/json'].schema = {
    $ref: '#/components/schemas/Nowhere',
  };
  t.false((await new Validator().validate(dangling)).valid);
});

const review = {
  id: 1,
  product_id: 2,
  store_id: 3,
  brand_id: 4,
  rating: 5,
  comment: null,
  feelings: [],
  activities: [],
  verified: true,
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
};

test('validateResponse: paths by template or URL; extra, missing and mistyped fields fail', (t) => {
  t.is(
    matchPath(brandFeed, '/partner/brand-feed/v1/products/12/reviews?limit=1'),
    '/products/{product_id}/reviews',
  );
  t.is(matchPath(brandFeed, '/products/{product_id}/reviews'), '/products/{product_id}/reviews');
  t.is(matchPath(brandFeed, '/reviews'), '/reviews');
  t.is(matchPath(brandFeed, '/partner/brand-feed/v1/carts'), undefined);

  t.notThrows(() =>
    validateResponse(brandFeed, 'GET', '/reviews', 200, { reviews: [review], next_cursor: 'x' }),
  );
  const extra = responseErrors(brandFeed, 'GET', '/reviews', 200, {
    reviews: [{ ...review, secret: 1 }],
    next_cursor: null,
  });
  t.true(
    extra.some((e) => /must NOT have additional properties \(secret\)/.test(e)),
    extra.join('\n'),
  );
  const { rating: _, ...missing } = review;
  t.true(
    responseErrors(brandFeed, 'GET', '/reviews', 200, { reviews: [missing], next_cursor: null }).some((e) =>
      /rating/.test(e),
    ),
  );
  t.true(
    responseErrors(brandFeed, 'GET', '/reviews', 200, {
      reviews: [{ ...review, id: '1' }],
      next_cursor: null,
    }).length > 0,
  );
  t.throws(() => validateResponse(brandFeed, 'GET', '/reviews', 418, {}), {
    message: /status not documented/,
  });
  t.throws(() => validateResponse(brandFeed, 'POST', '/reviews', 200, {}), { message: /not documented/ });

  const problem = {
    type: 'about:blank',
    title: 'Unauthorized',
    status: 401,
    detail: 'no key',
    code: 'unauthorized',
  };
  t.notThrows(() =>
    validateResponse(brandFeed, 'GET', '/reviews', 401, problem, { contentType: 'application/problem+json' }),
  );
  t.throws(
    () => validateResponse(brandFeed, 'GET', '/reviews', 401, problem, { contentType: 'application/json' }),
    {
      message: /content type/,
    },
  );
  t.throws(
    () =>
      validateResponse(brandFeed, 'GET', '/reviews', 429, problem, {
        contentType: 'application/problem+json',
        headers: new Headers(),
      }),
    { message: /required header Retry-After/ },
  );
});

/** A minimal API around one route, for the generator's own rules. */
function apiOf(...routes: Partial<PartnerRoute>[]): PartnerApi {
  return {
    base: '/t/v1',
    title: 'T',
    description: 'test',
    kinds: ['brand'],
    routes: routes.map((r, i) => ({
      method: 'get',
      path: `/r${i}`,
      operationId: `op${i}`,
      summary: 's',
      response: { status: 200, description: 'ok', schema: z.object({ ok: z.boolean() }) },
      problems: [],
      handler: async () => undefined,
      ...r,
    })) as PartnerRoute[],
  };
}

test('the generator: input variants, query descriptions and defaults, POST statuses', (t) => {
  const Thing = z.object({ n: z.number().default(1) }).meta({ id: 'OpenApiTestThing' });
  const doc = openApiDocument(
    apiOf(
      {
        query: z.strictObject({
          limit: z.coerce.number().int().default(10).describe('how many'),
          q: z.string(),
        }),
        response: { status: 200, description: 'ok', schema: Thing },
      },
      { method: 'post', path: '/things/{id}', params: z.object({ id: z.string() }), body: Thing },
    ),
  ) as Json;
  const schemas = doc.components.schemas;
  t.deepEqual(schemas.OpenApiTestThing.required, ['n'], 'output: a defaulted field is always present');
  t.is(schemas.OpenApiTestThingInput.required, undefined, 'input: a defaulted field may be left out');
  t.deepEqual(doc.paths['/r0'].get.parameters, [
    {
      name: 'limit',
      in: 'query',
      description: 'how many',
      required: false,
      schema: { default: 10, type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
    },
    { name: 'q', in: 'query', required: true, schema: { type: 'string' } },
  ]);
  const post = doc.paths['/things/{id}'].post;
  t.deepEqual(post.requestBody, {
    required: false,
    content: { 'application/json': { schema: { $ref: '#/components/schemas/OpenApiTestThingInput' } } },
  });
  t.deepEqual(Object.keys(post.responses), [
    '200',
    '400',
    '401',
    '403',
    '404',
    '409',
    '413',
    '415',
    '422',
    '429',
    '503',
  ]);
  t.deepEqual(post.parameters[1], { $ref: '#/components/parameters/IdempotencyKey' });
});

test('the generator refuses path/params mismatches, two schemas with one name and unrepresentable types', (t) => {
  t.throws(() => openApiDocument(apiOf({ path: '/x/{id}' })), { message: /path names \{id\}/ });
  t.throws(() => openApiDocument(apiOf({ path: '/x/{id}', params: z.object({ other: z.string() }) })), {
    message: /params declares other/,
  });
  const a = z.object({ a: z.string() }).meta({ id: 'OpenApiTestDup' });
  const b = z.object({ b: z.string() }).meta({ id: 'OpenApiTestDup' });
  t.throws(
    () =>
      openApiDocument(
        apiOf(
          { response: { status: 200, description: 'a', schema: a } },
          { response: { status: 200, description: 'b', schema: z.object({ b, review: reviewRecord }) } },
        ),
      ),
    { message: /two different schemas are named OpenApiTestDup/ },
  );
  t.throws(() => openApiDocument(apiOf({ response: { status: 200, description: 'd', schema: z.date() } })), {
    message: /Date cannot be represented/,
  });
});
