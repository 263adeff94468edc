/**
 * The platform API's OpenAPI 3.1 document (`GET /platform/v1/openapi.json`; docs/write-side.md):
 * valid OpenAPI 3.1 with valid draft 2020-12 schemas, exactly the operations of the platform's route
 * tables, each naming the role `route-roles.ts` declares for it, every `$ref` resolved, deterministic,
 * and served without a token. Checked against the routes the real app mounts, both ways; the hostile
 * suite checks every answer against it (`test/hostile/routes.ts`, `apiBase`).
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import test from 'ava';
import { koaPattern } from '../api/admin-route-table.ts';
import { PLATFORM_BASE, platformRouteTables } from '../api/platform.ts';
import { platformOpenApiDocument } from '../api/platform-openapi.ts';
import { ROUTE_ROLES } from '../api/route-roles.ts';
import { mountedRoutes } from './support/mounted-routes.ts';
import { resolvePointer, responseErrors } from './support/openapi-validate.ts';
import { startService } from './support/service.ts';

// biome-ignore lint/suspicious/noExplicitAny: documents are walked as plain JSON
type Json = Record<string, any>;

// The tables' handlers are never called here: the document needs only their schemas.
const tables = platformRouteTables({} as never);
const doc = platformOpenApiDocument(tables) as Json;

function* refs(value: unknown): Generator<string> {
  if (Array.isArray(value)) for (const v of value) yield* refs(v);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') yield v;
      else yield* refs(v);
    }
  }
}

test('the platform document is valid OpenAPI 3.1, its schemas valid draft 2020-12, every $ref resolved', async (t) => {
  const result = await new Validator().validate(structuredClone(doc));
  t.true(result.valid, JSON.stringify(result.errors, null, 2));
  const ajv = new Ajv2020({ strict: true, strictTypes: false, strictTuples: false });
  formats.default(ajv);
  for (const [name, schema] of Object.entries(doc.components.schemas as Json)) {
    t.true(ajv.validateSchema(schema) as boolean, `${name}: ${ajv.errorsText(ajv.errors)}`);
  }
  for (const ref of refs(doc)) t.not(resolvePointer(doc, ref), undefined, ref);
  t.deepEqual(platformOpenApiDocument(tables), doc, 'the same tables, the same document');
});

test('every operation of the tables, with the role it needs, a bearer token, If-Match and its problems', (t) => {
  t.deepEqual(doc.servers, [{ url: PLATFORM_BASE }]);
  t.deepEqual(doc.security, [{ operatorToken: [] }]);
  t.deepEqual(Object.keys(doc.components.securitySchemes), ['operatorToken']);
  t.like(doc.components.securitySchemes.operatorToken, { type: 'http', scheme: 'bearer' });
  t.is(doc.components.parameters.CsrfToken, undefined, 'no console session on the platform API');
  for (const r of tables) {
    const op = doc.paths[r.path][r.method];
    t.is(op['x-required-role'], ROUTE_ROLES[`${r.method.toUpperCase()} ${koaPattern(r, PLATFORM_BASE)}`]);
    t.is(op['x-required-role'], 'operator', r.operationId);
    for (const status of [401, 403, 503, 412, ...(r.params ? [404] : []), ...r.problems])
      t.truthy(op.responses[String(status)], `${r.operationId} ${status}`);
    if (r.body) t.truthy(op.requestBody, r.operationId);
    const parameterRefs = (op.parameters ?? []).map((p: Json) => p.$ref);
    t.true(parameterRefs.includes('#/components/parameters/IfMatch'), r.operationId);
    t.is(
      parameterRefs.includes('#/components/parameters/IdempotencyKey'),
      r.method === 'post',
      r.operationId,
    );
    // An upsert answers 201 when it created the resource, 200 otherwise, with one schema.
    if (r.method === 'put' && r.response.also) {
      t.deepEqual(op.responses['201'].content, op.responses['200'].content, r.operationId);
    }
  }
  t.deepEqual(
    tables.map((r) => `${r.method.toUpperCase()} ${r.path}`),
    [
      'PUT /stores/{id}',
      'PUT /stores/{id}/curbside_pickup_setting',
      'PUT /brands/{id}',
      'PUT /products/{id}',
      'PUT /stores/{store_id}/menu_products/{id}',
      'DELETE /stores/{store_id}/menu_products/{id}',
      'PUT /reviews/{id}',
      'PUT /specials/{id}',
      'POST /carts',
      'POST /carts/{uuid}/items',
      'PATCH /carts/{uuid}/items/{menu_product_id}',
      'DELETE /carts/{uuid}/items/{menu_product_id}',
      'PUT /carts/{uuid}/customer',
      'POST /carts/{uuid}/checkout',
      'POST /carts/{uuid}/status',
    ],
  );
  t.true(doc.paths['/carts'].post.responses['201'].headers.Location.required);
});

test('the served document describes exactly the platform routes the app mounts, and is served without a token', async (t) => {
  const s = await startService(t);
  const mounted = mountedRoutes(s.service.app).filter((r) => r.split(' ')[1].startsWith(`${PLATFORM_BASE}/`));
  const res = await fetch(`${s.base}${PLATFORM_BASE}/openapi.json`);
  t.is(res.status, 200);
  t.is(res.headers.get('cache-control'), 'no-store');
  const served = (await res.json()) as Json;
  t.deepEqual(served, doc);
  const documented = Object.entries(served.paths as Json).flatMap(([path, item]) =>
    Object.keys(item).map((m) => `${m.toUpperCase()} ${PLATFORM_BASE}${path.replace(/\{(\w+)\}/g, ':$1')}`),
  );
  t.deepEqual(
    mounted.filter((r) => !documented.includes(r) && r !== `GET ${PLATFORM_BASE}/openapi.json`).sort(),
    [],
    'mounted platform routes the document leaves out',
  );
  t.deepEqual(
    documented.filter((r) => !mounted.includes(r)),
    [],
    'documented operations the app does not mount',
  );
});

test('real answers match the document: a store created (201) and changed (200), a cart opened and a line added', async (t) => {
  const s = await startService(t);
  const call = async (method: string, path: string, body: unknown) => {
    const res = await fetch(`${s.base}${PLATFORM_BASE}${path}`, {
      method,
      headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const parsed = await res.json();
    const errors = responseErrors(doc, method, `${PLATFORM_BASE}${path}`, res.status, parsed, {
      contentType: res.headers.get('content-type'),
      headers: res.headers,
    });
    t.deepEqual(errors, [], `${method} ${path} ${res.status}`);
    return { status: res.status, body: parsed as Json };
  };
  const store = {
    name: 'Doc Store',
    address: '1 Main St',
    city: 'Oakland',
    state: 'CA',
    zip: '94607',
    lat: 37.8,
    long: -122.27,
  };
  t.is((await call('PUT', '/stores/9101', store)).status, 201);
  t.is((await call('PUT', '/stores/9101', { ...store, name: 'Doc Store 2' })).status, 200);
  t.is((await call('PUT', '/brands/9201', { name: 'Doc Brand' })).status, 201);
  t.is(
    (await call('PUT', '/products/9301', { name: 'Doc Flower', brand_id: 9201, kind: 'flower' })).status,
    201,
  );
  const listing = await call('PUT', '/stores/9101/menu_products/9401', {
    product_id: 9301,
    prices: { gram: '10.00' },
  });
  t.is(listing.status, 201);
  const created = await call('POST', '/carts', {
    store_id: 9101,
    source: { channel: 'headless', partner_id: 'doc' },
  });
  t.is(created.status, 201);
  const uuid = created.body.cart.uuid as string;
  t.is(
    (await call('POST', `/carts/${uuid}/items`, { menu_product_id: 9401, price_id: 'gram', count: 2 }))
      .status,
    200,
  );
  t.is((await call('DELETE', '/stores/9101/menu_products/9401', undefined)).status, 200);
  // A refusal is a problem the document describes too.
  t.is((await call('POST', `/carts/${uuid}/status`, { status: 'nonsense' })).status, 422);
});
