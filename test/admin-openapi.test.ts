/**
 * The admin API's OpenAPI 3.1 document (`GET /admin/v1/openapi.json`;
 * docs/operations.md, "Accounts and roles"): valid OpenAPI 3.1 with valid draft 2020-12 schemas,
 * exactly the operations of the admin route tables and the console session's routes, each naming the
 * role `route-roles.ts` declares for it and the credentials it takes, every `$ref` resolved,
 * deterministic, and served without a token. Checked against the routes the real app mounts, so an
 * admin route added outside the tables fails here.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import test from 'ava';
import { adminRouteTables } from '../api/admin.ts';
import { adminOpenApiDocument } from '../api/admin-openapi.ts';
import { projectionRoutes } from '../api/admin-projections.ts';
import { koaPattern } from '../api/admin-route-table.ts';
import { sessionRoutes } from '../api/admin-session.ts';
import { ROUTE_ROLES } from '../api/route-roles.ts';
import { mountedRoutes } from './support/mounted-routes.ts';
import { resolvePointer } from './support/openapi-validate.ts';
import { startService } from './support/service.ts';

// biome-ignore lint/suspicious/noExplicitAny: documents are walked as plain JSON
type Json = Record<string, any>;

// The tables' handlers are never called here: the document needs only their schemas.
const sessionTable = sessionRoutes({} as never);
const tables = [...sessionTable, ...adminRouteTables({} as never), ...projectionRoutes({} as never)];
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

test('every operation of the tables, each with the role it needs, its credentials and its problems', (t) => {
  const documented = Object.entries(doc.paths as Json).flatMap(([path, item]) =>
    Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`),
  );
  t.deepEqual(documented.sort(), tables.map((r) => `${r.method.toUpperCase()} ${r.path}`).sort());
  for (const r of tables) {
    const op = doc.paths[r.path][r.method];
    const role = ROUTE_ROLES[`${r.method.toUpperCase()} ${koaPattern(r)}`];
    t.truthy(role, `${r.operationId} declares a role`);
    t.is(op['x-required-role'], role);
    const shared = role === 'public' ? [503] : [401, 403, 503];
    for (const status of [...shared, ...r.problems])
      t.truthy(op.responses[String(status)], `${r.operationId} ${status}`);
    if (r.body) t.truthy(op.responses['422']);
    const refs = (op.parameters ?? []).map((p: Json) => p.$ref);
    if (role === 'public') {
      t.true(op.description.startsWith('Public: needs no operator token.'));
      t.false(refs.includes('#/components/parameters/IdempotencyKey'), r.operationId);
    } else {
      // The document's security applies: a bearer token or the console's session cookie, whose
      // writes carry the CSRF token.
      t.true(op.description.startsWith(`Needs the \`${role}\` role.`));
      t.is(op.security, undefined, r.operationId);
      // Every POST behind the admin router takes an Idempotency-Key; the projections' router has none,
      // and an export refuses one (never kept for a replay).
      t.is(
        refs.includes('#/components/parameters/IdempotencyKey'),
        r.method === 'post' && !['rebuildProjection', 'exportCustomer'].includes(r.operationId),
        r.operationId,
      );
      t.is(refs.includes('#/components/parameters/CsrfToken'), r.method !== 'get', r.operationId);
    }
  }
  // The description carries the role of every route of the admin and platform APIs.
  for (const [route, role] of Object.entries(ROUTE_ROLES))
    t.true(doc.info.description.includes(`| \`${route}\` | ${role} |`), route);
  t.deepEqual(doc.servers, [{ url: '/admin/v1' }]);
  t.like(doc.components.securitySchemes.operatorToken, { type: 'http', scheme: 'bearer' });
  t.like(doc.components.securitySchemes.cookieAuth, {
    type: 'apiKey',
    in: 'cookie',
    name: 'pds_console_session',
  });
  t.deepEqual(doc.security, [{ operatorToken: [] }, { cookieAuth: [] }]);
  t.like(doc.components.parameters.CsrfToken, { name: 'X-CSRF-Token', in: 'header', required: false });
});

test("the console session's routes: public, sign-in without credentials, sign-out with the cookie and its CSRF token", (t) => {
  t.deepEqual(
    sessionTable.map((r) => `${r.method.toUpperCase()} ${r.path}`),
    ['POST /session', 'GET /session', 'DELETE /session'],
  );
  const session = doc.paths['/session'];
  for (const op of Object.values(session) as Json[]) t.is(op['x-required-role'], 'public');
  t.deepEqual(session.post.security, []);
  t.deepEqual(session.get.security, [{}, { cookieAuth: [] }]);
  t.deepEqual(session.delete.security, [{ cookieAuth: [] }]);
  t.like(session.delete.parameters[0], { name: 'X-CSRF-Token', in: 'header', required: true });
  t.deepEqual(Object.keys(session.post.responses).sort(), ['201', '400', '401', '413', '415', '422', '503']);
  t.true(session.post.responses['201'].headers['Set-Cookie'].required);
  t.deepEqual(Object.keys(session.delete.responses).sort(), ['204', '401', '403', '503']);
  t.is(session.delete.responses['204'].content, undefined);
  // One person: the session shows who is signed in with the schema `GET /me` shows the caller with.
  const person = { $ref: '#/components/schemas/Person' };
  t.deepEqual(doc.components.schemas.Me.properties.operator, person);
  t.deepEqual(doc.components.schemas.ConsoleSession.properties.operator, person);
  t.deepEqual(session.post.responses['201'].content['application/json'].schema, {
    $ref: '#/components/schemas/ConsoleSession',
  });
  t.deepEqual(session.get.responses['200'].content['application/json'].schema, {
    anyOf: [
      { $ref: '#/components/schemas/ConsoleSession' },
      { $ref: '#/components/schemas/NoConsoleSession' },
    ],
  });
});

/**
 * Admin routes the app mounts that no table describes: the document itself. A route added without a
 * table entry fails the test below until it is described, or named here.
 */
const NOT_DESCRIBED = ['GET /admin/v1/openapi.json'];

test('the served document describes the admin routes the app mounts: every one of the tables and the session, none unmounted, the document itself the only other', async (t) => {
  const s = await startService(t);
  const mounted = mountedRoutes(s.service.app).filter((r) => r.split(' ')[1].startsWith('/admin/v1/'));
  const served = (await s.openApiDocument('/admin/v1')) as Json;
  const documented = Object.entries(served.paths as Json).flatMap(([path, item]) =>
    Object.keys(item).map((m) => `${m.toUpperCase()} /admin/v1${path.replace(/\{(\w+)\}/g, ':$1')}`),
  );
  t.deepEqual(
    tables.map((r) => `${r.method.toUpperCase()} ${koaPattern(r)}`).filter((r) => !documented.includes(r)),
    [],
    'routes of the tables or the session the served document leaves out',
  );
  t.deepEqual(
    documented.filter((r) => !mounted.includes(r)),
    [],
    'documented operations the app does not mount',
  );
  t.deepEqual(
    mounted.filter((r) => !documented.includes(r) && !NOT_DESCRIBED.includes(r)),
    [],
    'mounted admin routes the document does not describe',
  );
  t.deepEqual(
    NOT_DESCRIBED.filter((r) => documented.includes(r) || !mounted.includes(r)),
    [],
    'named as not described, but described or not mounted',
  );
});

test('the service serves it at /admin/v1/openapi.json without a token', async (t) => {
  const s = await startService(t);
  const res = await fetch(`${s.base}/admin/v1/openapi.json`);
  t.is(res.status, 200);
  t.deepEqual(await res.json(), doc);
});
