/**
 * The admin API's OpenAPI 3.1 document (`GET /admin/v1/openapi.json`;
 * docs/operations.md, "Accounts and roles"): valid OpenAPI 3.1 with valid draft 2020-12 schemas,
 * exactly the operations of the admin route tables, each naming the role `route-roles.ts` declares for
 * it, every `$ref` resolved, deterministic, and served without a token.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import test from 'ava';
import { adminRouteTables } from '../api/admin.ts';
import { adminOpenApiDocument } from '../api/admin-openapi.ts';
import { koaPattern } from '../api/admin-route-table.ts';
import { ROUTE_ROLES } from '../api/route-roles.ts';
import { resolvePointer } from './support/openapi-validate.ts';
import { startService } from './support/service.ts';

// biome-ignore lint/suspicious/noExplicitAny: documents are walked as plain JSON
type Json = Record<string, any>;

// The tables' handlers are never called here: the document needs only their schemas.
const tables = adminRouteTables({} as never);
const doc = adminOpenApiDocument(tables) as Json;

function* refs(value: unknown): Generator<string> {
  if (Array.isArray(value)) for (const v of value) yield* refs(v);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') yield v;
      else yield* refs(v);
    }
  }
}

test('the admin document is valid OpenAPI 3.1, its schemas valid draft 2020-12, every $ref resolved', async (t) => {
  const result = await new Validator().validate(structuredClone(doc));
  t.true(result.valid, JSON.stringify(result.errors, null, 2));
  const ajv = new Ajv2020({ strict: true, strictTypes: false, strictTuples: false });
  formats.default(ajv);
  for (const [name, schema] of Object.entries(doc.components.schemas as Json)) {
    t.true(ajv.validateSchema(schema) as boolean, `${name}: ${ajv.errorsText(ajv.errors)}`);
  }
  for (const ref of refs(doc)) t.not(resolvePointer(doc, ref), undefined, ref);
  t.deepEqual(adminOpenApiDocument(tables), doc, 'the same tables, the same document');
});

test('every operation of the tables, each with the role it needs and its problems', (t) => {
  const documented = Object.entries(doc.paths as Json).flatMap(([path, item]) =>
    Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`),
  );
  t.deepEqual(documented.sort(), tables.map((r) => `${r.method.toUpperCase()} ${r.path}`).sort());
  for (const r of tables) {
    const op = doc.paths[r.path][r.method];
    const role = ROUTE_ROLES[`${r.method.toUpperCase()} ${koaPattern(r)}`];
    t.truthy(role, `${r.operationId} declares a role`);
    t.is(op['x-required-role'], role);
    t.true(op.description.startsWith(`Needs the \`${role}\` role.`));
    for (const status of [401, 403, 503, ...r.problems])
      t.truthy(op.responses[String(status)], `${r.operationId} ${status}`);
    if (r.body) t.truthy(op.responses['422']);
    if (r.method === 'post')
      t.true(op.parameters.some((p: Json) => p.$ref === '#/components/parameters/IdempotencyKey'));
  }
  // The description carries the role of every route of the admin and platform APIs.
  for (const [route, role] of Object.entries(ROUTE_ROLES))
    t.true(doc.info.description.includes(`| \`${route}\` | ${role} |`), route);
  t.deepEqual(doc.servers, [{ url: '/admin/v1' }]);
  t.like(doc.components.securitySchemes.operatorToken, { type: 'http', scheme: 'bearer' });
});

test('the service serves it at /admin/v1/openapi.json without a token', async (t) => {
  const s = await startService(t);
  const res = await fetch(`${s.base}/admin/v1/openapi.json`);
  t.is(res.status, 200);
  t.deepEqual(await res.json(), doc);
});
