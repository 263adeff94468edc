/**
 * The hostile-input suite covers every route (issue 8, part 3). The catalogue of `routes.ts` must name
 * exactly the routes the service's routers register (`router.stack` of every router mounted in the
 * app) and, for the partner APIs, exactly the operations their OpenAPI documents publish: a route added
 * anywhere without being attacked fails here. The public routes (operational endpoints, OpenAPI
 * documents, the docs page) and paths no router serves are attacked here too.
 */
import http from 'node:http';
import test from 'ava';
import fc from 'fast-check';
import { mountedRoutes } from '../support/mounted-routes.ts';
import { startService } from '../support/service.ts';
import { attack, cleanPrototype, exchange, type Harness, summary, violations } from './harness.ts';
import { adminRoutes, allRoutes, partnerRoutes, platformRoutes, publicRoutes } from './routes.ts';
import { hostileSegment, pct } from './values.ts';
import { buildWorld } from './world.ts';

const names = (routes: readonly { method: string; path: string }[]) =>
  routes.map((r) => `${r.method} ${r.path}`).sort();

test('every route the service serves is in the hostile catalogue, and is attacked', async (t) => {
  t.timeout(120_000);
  const s = await startService(t);
  const served = mountedRoutes(s.service.app);
  t.true(served.length > 60, `found the routers (${served.length} routes)`);
  const listed = names(allRoutes);
  t.deepEqual(
    {
      unattacked: served.filter((r) => !listed.includes(r)),
      unserved: listed.filter((r) => !served.includes(r)),
    },
    { unattacked: [], unserved: [] },
    'the catalogue names exactly the registered routes',
  );
  t.is(new Set(names(allRoutes)).size, allRoutes.length, 'no route is listed twice');
  // Each group is attacked by its own test file; the public routes below.
  t.is(
    partnerRoutes.length + platformRoutes.length + adminRoutes.length + publicRoutes.length,
    allRoutes.length,
  );

  // The partner operations as their OpenAPI documents publish them.
  const bases = [...new Set(partnerRoutes.map((r) => r.apiBase!))];
  const documented: string[] = [];
  for (const base of bases) {
    const doc = (await s.openApiDocument(base)) as { paths: Record<string, Record<string, unknown>> };
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of Object.keys(item)) {
        if (['get', 'post', 'put', 'patch', 'delete'].includes(method)) {
          documented.push(`${method.toUpperCase()} ${base}${path.replace(/\{(\w+)\}/g, ':$1')}`);
        }
      }
    }
  }
  const partner = names(partnerRoutes);
  t.deepEqual(
    {
      unattacked: documented.filter((r) => !partner.includes(r)),
      undocumented: partner.filter((r) => !documented.includes(r)),
    },
    { unattacked: [], undocumented: [] },
    'the partner catalogue is what the documents publish',
  );

  const world = await buildWorld(t, s);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const h: Harness = { s, world, inspect: await s.openStore(), agent };
  const results = await attack(h, publicRoutes, 50);
  t.log(summary(results));
  t.deepEqual(
    results.filter((r) => r.failure).map((r) => `${r.route}\n${r.failure}`),
    [],
  );
  for (const r of results) {
    t.true(
      r.successes > 0,
      `${r.route} never succeeded: ${JSON.stringify(r.statuses)} ${JSON.stringify(r.samples)}`,
    );
  }

  // Paths no router serves, under every prefix: a 404 (or 405) problem, never anything else.
  const prefixes = ['', '/admin/v1', '/platform/v1', ...bases, '/partner', '/docs/assets', '/admin/v2'];
  const unrouted = fc
    .tuple(
      fc.constantFrom(...prefixes),
      fc.array(fc.oneof(hostileSegment, fc.constantFrom('carts', 'webhooks', 'openapi.json', '..')), {
        minLength: 1,
        maxLength: 4,
      }),
      fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'TRACE'),
      fc.boolean(),
    )
    .map(([prefix, segments, method, authorized]) => ({
      method,
      url: `${prefix}/${segments.join('/')}`,
      headers: authorized ? { authorization: `Bearer ${s.token}` } : ({} as Record<string, string>),
      how: 'unrouted',
    }));
  const catchAll = {
    method: 'GET' as const,
    path: '/*',
    auth: 'public' as const,
    query: [],
    params: () => ({}),
  };
  await fc.assert(
    fc.asyncProperty(unrouted, async (req) => {
      const a = await exchange(h, req);
      const wrong = await violations(h, catchAll, req, a);
      if (wrong.length > 0) throw new Error(`${req.method} ${req.url}: ${wrong.join('; ')}`);
    }),
    { numRuns: 150 },
  );
  // A sanity check of the generator: a path of a real route is not "unrouted".
  t.is((await exchange(h, { method: 'GET', url: `/${pct('healthz')}`, headers: {}, how: '' })).status, 200);
  t.deepEqual(cleanPrototype(), [], 'Object.prototype is untouched');
});
