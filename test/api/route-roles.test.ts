/**
 * Every route declares its role (docs/operations.md, "Accounts and roles"; `api/route-roles.ts`): the
 * routes the real app mounts under `/admin` and `/platform`, whichever module added them, each have a
 * declaration; an auditor's token is refused every write with 403 `insufficient_role` naming the role
 * needed (and the refusal appends nothing), and reads every route declared for auditors, whose answers
 * hold no secret; an operator's token is refused account management and nothing else.
 */
import http from 'node:http';
import type Router from '@koa/router';
import test from 'ava';
import { adminRouteTables } from '../../api/admin.ts';
import { declaredRole, ROUTE_ROLES, stricter } from '../../api/route-roles.ts';
import { hashApiKey } from '../../application/credentials.ts';
import { exchange, type Harness, validRequest } from '../hostile/harness.ts';
import { allRoutes, type RouteSpec } from '../hostile/routes.ts';
import { buildWorld } from '../hostile/world.ts';
import { type Json, ok } from '../support/admin-answers.ts';
import { mountedRoutes } from '../support/mounted-routes.ts';
import { startService } from '../support/service.ts';

const guarded = (route: string) => / \/(admin|platform)\//.test(route);

test('every admin and platform route the app mounts declares a role, and the table names only those', async (t) => {
  const s = await startService(t);
  const routes = mountedRoutes(s.service.app).filter(guarded);
  t.true(routes.length > 40, `${routes.length} routes found`);
  t.deepEqual(
    routes.filter((r) => {
      const [method, pattern] = r.split(' ');
      return declaredRole(method, pattern) === undefined;
    }),
    [],
    'routes that declare no role',
  );
  t.deepEqual(
    Object.keys(ROUTE_ROLES).filter((r) => !routes.includes(r)),
    [],
    'declarations of routes nobody mounts',
  );

  // The admin API's OpenAPI document names the same role for each operation it describes.
  const document = (await s.openApiDocument('/admin/v1')) as {
    paths: Record<string, Record<string, { 'x-required-role': string }>>;
  };
  const documented = Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => [
      `${method.toUpperCase()} /admin/v1${path.replace(/\{(\w+)\}/g, ':$1')}`,
      op['x-required-role'],
    ]),
  );
  t.true(documented.length >= adminRouteTables({} as never).length);
  for (const [route, role] of documented) t.is(role, ROUTE_ROLES[route], route);
});

test('a path in another letter case reaches no route past its authentication: every admin, platform and partner route, no token', async (t) => {
  const s = await startService(t);
  const sample = (pattern: string) =>
    pattern.replace(/:(\w+)/g, (_, name: string) =>
      /uuid|id$/.test(name) ? '00000000-0000-4000-8000-000000000000' : 'x',
    );
  // The prefix, a segment after it, or the whole path in other letters.
  const variants = (path: string) => {
    const [, first, ...rest] = path.split('/');
    return [
      `/${first.toUpperCase()}/${rest.join('/')}`,
      `/${first}/${rest[0]?.toUpperCase() ?? ''}${rest.length > 1 ? `/${rest.slice(1).join('/')}` : ''}`,
      path.toUpperCase(),
    ];
  };
  const answered: string[] = [];
  for (const route of mountedRoutes(s.service.app).filter((r) => / \/(admin|platform|partner)\//.test(r))) {
    const [method, pattern] = route.split(' ');
    for (const path of variants(sample(pattern))) {
      const res = await fetch(`${s.base}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        body: method === 'GET' || method === 'DELETE' ? undefined : '{}',
      });
      await res.arrayBuffer();
      if (res.status < 400 || res.status >= 500) answered.push(`${method} ${path}: ${res.status}`);
    }
  }
  t.deepEqual(answered, []);
});

test('where two declared patterns match one request, the stricter role applies', (t) => {
  t.is(stricter('admin', 'auditor'), 'admin');
  t.is(stricter('auditor', 'admin'), 'admin');
  t.is(stricter('operator', 'auditor'), 'operator');
  t.is(stricter('auditor', 'operator'), 'operator');
  t.is(stricter('public', 'auditor'), 'auditor');
  t.is(stricter('auditor', 'public'), 'auditor');
});

test('an undeclared route is for admins only: a forgotten declaration fails closed', async (t) => {
  const s = await startService(t);
  const auditor = await ok(
    t,
    await s.call('POST', '/admin/v1/operators', { name: 'A', email: 'a@example.com', role: 'auditor' }),
    201,
  );
  // A route another module adds to the admin router after it is built, without a declaration.
  const admin = (s.service.app as unknown as { middleware: { router?: Router }[] }).middleware
    .map((mw) => mw.router)
    .find((r) => r?.opts.prefix === '/admin/v1');
  if (!admin) throw new Error('no admin router');
  admin.get('/undeclared', (ctx) => {
    ctx.body = { reached: true };
  });
  const as = (token: string) =>
    fetch(`${s.base}/admin/v1/undeclared`, { headers: { authorization: `Bearer ${token}` } });
  const refused = await (await as(auditor.operator_token)).json();
  t.like(refused, { status: 403, code: 'insufficient_role', required_role: 'admin', role: 'auditor' });
  t.is((await as(s.token)).status, 200);
});

/** Every secret the world and the test made: none may appear in an auditor's answer. */
interface Secrets {
  values: string[];
}

test('an auditor reads what auditors may and is refused every write; an operator is refused account management', async (t) => {
  t.timeout(180_000);
  const s = await startService(t);
  const world = await buildWorld(t, s);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const h: Harness = { s, world, inspect: await s.openStore(), agent };
  const account = async (role: string) =>
    ok(
      t,
      await s.call('POST', '/admin/v1/operators', {
        name: `The ${role}`,
        email: `${role}@example.com`,
        role,
      }),
      201,
    );
  const auditor = await account('auditor');
  const operator = await account('operator');
  // A subscription whose secrets the test knows, and keys of every partner.
  const webhook = await ok(
    t,
    await s.call('POST', '/admin/v1/webhooks', {
      url: world.receiver.url,
      auth_token: 'auditor-must-not-see-this-token',
      store_ids: [101],
    }),
    201,
  );
  const secrets: Secrets = {
    values: [
      webhook.signing_secret,
      'auditor-must-not-see-this-token',
      world.authToken,
      ...Object.values(world.keys),
      ...Object.values(world.keys).map(hashApiKey),
      auditor.operator_token,
      operator.operator_token,
      hashApiKey(operator.operator_token),
      s.token,
    ],
  };
  t.true(secrets.values.every((v) => typeof v === 'string' && v.length >= 20));

  const guardedRoutes = allRoutes.filter((r) => r.auth === 'operator');
  const reads = guardedRoutes.filter((r) => declaredRole(r.method, r.path) === 'auditor');
  const writes = guardedRoutes.filter((r) => declaredRole(r.method, r.path) !== 'auditor');
  t.true(writes.length >= 30 && reads.length >= 12, `${writes.length} writes, ${reads.length} reads`);
  t.true(
    writes.every((r) => r.method !== 'GET' || r.path.includes('/operators')),
    'what auditors may not do is every write and account management',
  );

  const send = (spec: RouteSpec, token: string) => {
    const req = validRequest(spec, h);
    return exchange(h, { ...req, headers: { ...req.headers, authorization: `Bearer ${token}` } });
  };

  for (const spec of writes) {
    const a = await send(spec, auditor.operator_token);
    const route = `${spec.method} ${spec.path}`;
    t.is(a.status, 403, `${route}: ${a.text}`);
    t.regex(String(a.headers['content-type']), /^application\/problem\+json/, route);
    t.like(
      JSON.parse(a.text),
      { code: 'insufficient_role', required_role: declaredRole(spec.method, spec.path), role: 'auditor' },
      route,
    );
    t.deepEqual(
      a.appended.filter((e) => e.metadata.actor.type !== 'system').map((e) => e.type),
      [],
      `${route}: the refusal appends nothing`,
    );
  }
  for (const spec of reads) {
    const a = await send(spec, auditor.operator_token);
    const route = `${spec.method} ${spec.path}`;
    t.is(a.status, 200, `${route}: ${a.text.slice(0, 300)}`);
    const leaked = secrets.values.filter((v) => a.text.includes(v));
    t.deepEqual(
      leaked.map((v) => `${v.slice(0, 8)}…`),
      [],
      `${route} shows a secret`,
    );
  }

  // An operator: refused account management (the admin's routes), let through everywhere else.
  for (const spec of guardedRoutes) {
    const needed = declaredRole(spec.method, spec.path);
    const a = await send(spec, operator.operator_token);
    const route = `${spec.method} ${spec.path}`;
    if (needed === 'admin') {
      t.is(a.status, 403, `${route}: ${a.text}`);
      t.like(JSON.parse(a.text) as Json, {
        code: 'insufficient_role',
        required_role: 'admin',
        role: 'operator',
      });
    } else {
      t.not(a.status, 403, `${route}: ${a.text.slice(0, 300)}`);
    }
  }
  t.true(
    guardedRoutes.some((r) => declaredRole(r.method, r.path) === 'admin' && r.path.includes('/operators')),
    'account management was walked',
  );
});
