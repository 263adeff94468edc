import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import test, { type ExecutionContext } from 'ava';
import {
  type AppState,
  createHttpApp,
  createMetricsRegistry,
  createReadiness,
  HttpProblem,
  httpProblem,
  PROBLEM_CONTENT_TYPE,
  type Readiness,
  routesOf,
  useEach,
} from '../api/http.ts';
import { createLogger } from '../cli/logger.ts';
import { ReadStoreUnavailableError } from '../projections/read-store.ts';

type LogLine = Record<string, unknown>;

/** An app on an ephemeral port, with a router like the partner/admin ones mounted after the ops routes. */
async function startApp(
  t: ExecutionContext,
  setup?: (readiness: Readiness) => void,
  level: 'debug' | 'warn' = 'debug',
) {
  const lines: LogLine[] = [];
  const logger = createLogger(level, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const children: unknown[] = [];
  const child = logger.child.bind(logger);
  logger.child = ((bindings, options) => {
    children.push(bindings);
    return child(bindings, options);
  }) as typeof logger.child;
  const registry = createMetricsRegistry();
  const readiness = createReadiness({ timeoutMs: 200 });
  setup?.(readiness);
  const app = createHttpApp({ logger, registry, readiness, role: 'all' });

  const router = new Router<AppState>({ prefix: '/things' });
  router.get('/:id', (ctx) => {
    ctx.set('Link', '</things/2>; rel="next"');
    if (ctx.params.id === 'missing') throw httpProblem(404, 'thing_not_found', 'No thing missing.');
    if (ctx.params.id === 'invalid') {
      throw new HttpProblem(422, {
        detail: 'The thing is invalid.',
        errors: [{ field: 'limit', message: 'must be at most 500' }],
      });
    }
    if (ctx.params.id === 'busy')
      throw httpProblem(429, undefined, 'Slow down.', { headers: { 'Retry-After': '7' } });
    if (ctx.params.id === 'koa') ctx.throw(400, 'bad thing from ctx.throw');
    if (ctx.params.id === 'unavailable') ctx.throw(503, 'esdb at 10.0.0.5 is down');
    if (ctx.params.id === 'boom') throw new Error('database password is hunter2');
    if (ctx.params.id === 'unreachable') {
      throw new ReadStoreUnavailableError('MongoDB at mongodb://***@10.0.0.7:27017/pds is unavailable');
    }
    ctx.body = { thing: { id: ctx.params.id } };
  });
  app.use(router.routes());
  app.use(router.allowedMethods());

  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, lines, readiness, children };
}

async function json(response: Response): Promise<Record<string, unknown>> {
  return (await response.json()) as Record<string, unknown>;
}

function assertProblem(
  t: ExecutionContext,
  response: Response,
  body: Record<string, unknown>,
  status: number,
) {
  t.is(response.status, status);
  t.is(response.headers.get('content-type')?.split(';')[0], PROBLEM_CONTENT_TYPE);
  t.is(body.status, status);
  for (const key of ['type', 'title', 'detail', 'code']) t.is(typeof body[key], 'string', key);
}

test('GET /healthz answers ok', async (t) => {
  const { base } = await startApp(t);
  const response = await fetch(`${base}/healthz`);
  t.is(response.status, 200);
  t.deepEqual(await response.json(), { status: 'ok' });
});

test('GET /readyz is 200 when every check passes', async (t) => {
  const { base } = await startApp(t, (readiness) => {
    readiness.add('event_store', () => true);
    readiness.add('projections_caught_up', async () => true);
  });
  const response = await fetch(`${base}/readyz`);
  t.is(response.status, 200);
  t.deepEqual(await response.json(), {
    status: 'ready',
    role: 'all',
    checks: { event_store: 'ok', projections_caught_up: 'ok' },
  });
});

test('GET /readyz is 503 naming failing, throwing and hanging checks', async (t) => {
  const { base, lines } = await startApp(t, (readiness) => {
    readiness.add('event_store', () => true);
    readiness.add('projections_caught_up', () => false);
    readiness.add('read_store', () => Promise.reject(new Error('connection refused')));
    readiness.add('slow', () => new Promise<boolean>(() => undefined));
  });
  const response = await fetch(`${base}/readyz`);
  t.is(response.status, 503);
  t.deepEqual(await response.json(), {
    status: 'not_ready',
    role: 'all',
    checks: { event_store: 'ok', projections_caught_up: 'failing', read_store: 'failing', slow: 'failing' },
    failing: ['projections_caught_up', 'read_store', 'slow'],
  });
  t.true(lines.some((line) => line.msg === 'readiness check failed'));
});

test('GET /readyz stays 200 while only checks that degrade the role fail, naming them', async (t) => {
  const { base } = await startApp(t, (readiness) => {
    readiness.add('event_store', () => true);
    readiness.add('lookups', () => false, { impact: 'degraded' });
    readiness.addEach('subscription', () => ({ lookups: false, specials: true }), { impact: 'degraded' });
  });
  const response = await fetch(`${base}/readyz`);
  t.is(response.status, 200);
  t.deepEqual(await response.json(), {
    status: 'degraded',
    role: 'all',
    checks: {
      event_store: 'ok',
      lookups: 'failing',
      'subscription:lookups': 'failing',
      'subscription:specials': 'ok',
    },
    degraded: ['lookups', 'subscription:lookups'],
  });
});

test('GET /readyz is 503 when a required check fails beside degraded ones, naming each by what it means', async (t) => {
  const { base, readiness } = await startApp(t, (r) => {
    r.add('read_store', () => false);
    r.add('lookups', () => false, { impact: 'degraded' });
    // A group whose checks say their own impact (a role thread passing on its own).
    r.addEach('projector', () => ({
      'subscription:projection_carts': { ok: false, impact: 'required' },
      'subscription:lookups': { ok: false, impact: 'degraded' },
      projections_caught_up: true,
    }));
  });
  const response = await fetch(`${base}/readyz`);
  t.is(response.status, 503);
  t.deepEqual(await response.json(), {
    status: 'not_ready',
    role: 'all',
    checks: {
      read_store: 'failing',
      lookups: 'failing',
      'projector:subscription:projection_carts': 'failing',
      'projector:subscription:lookups': 'failing',
      'projector:projections_caught_up': 'ok',
    },
    failing: ['read_store', 'projector:subscription:projection_carts'],
    degraded: ['lookups', 'projector:subscription:lookups'],
  });
  t.like((await readiness.check()).impacts, {
    read_store: 'required',
    lookups: 'degraded',
    'projector:projections_caught_up': 'required',
    'projector:subscription:lookups': 'degraded',
  });
});

test('readiness registry refuses a duplicate name, and reports stopping', async (t) => {
  const { base, readiness } = await startApp(t, (r) => r.add('event_store', () => true));
  t.throws(() => readiness.add('event_store', () => true));
  readiness.markStopping();
  const response = await fetch(`${base}/readyz`);
  t.is(response.status, 503);
  t.like(await response.json(), { status: 'stopping', failing: [] });
});

test('X-Request-Id: a sane one is echoed, others replaced by a UUID', async (t) => {
  const { base } = await startApp(t);
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
  const echoed = await fetch(`${base}/healthz`, { headers: { 'X-Request-Id': 'abc.DEF_123-x' } });
  t.is(echoed.headers.get('x-request-id'), 'abc.DEF_123-x');
  for (const bad of ['has space', 'a'.repeat(129), 'semi;colon', '{"json":1}']) {
    const response = await fetch(`${base}/healthz`, { headers: { 'X-Request-Id': bad } });
    t.regex(response.headers.get('x-request-id') ?? '', uuid, bad);
  }
  const generated = await fetch(`${base}/healthz`);
  t.regex(generated.headers.get('x-request-id') ?? '', uuid);
  const max = 'b'.repeat(128);
  t.is(
    (await fetch(`${base}/healthz`, { headers: { 'X-Request-Id': max } })).headers.get('x-request-id'),
    max,
  );
});

test('an unknown route is a 404 problem', async (t) => {
  const { base } = await startApp(t);
  const response = await fetch(`${base}/nowhere?x=1`);
  const body = await json(response);
  assertProblem(t, response, body, 404);
  t.deepEqual(body, {
    type: 'about:blank',
    title: 'Not Found',
    status: 404,
    detail: 'Nothing is served at GET /nowhere.',
    code: 'not_found',
  });
  t.truthy(response.headers.get('x-request-id'));
});

test('a wrong method is a 405 problem with Allow', async (t) => {
  const { base } = await startApp(t);
  const response = await fetch(`${base}/healthz`, { method: 'POST' });
  const body = await json(response);
  assertProblem(t, response, body, 405);
  t.is(body.code, 'method_not_allowed');
  t.regex(response.headers.get('allow') ?? '', /GET/);
});

test('a thrown HttpProblem is rendered, with its code, errors and headers', async (t) => {
  const { base } = await startApp(t);
  const notFound = await fetch(`${base}/things/missing`);
  const notFoundBody = await json(notFound);
  assertProblem(t, notFound, notFoundBody, 404);
  t.like(notFoundBody, { code: 'thing_not_found', detail: 'No thing missing.', title: 'Not Found' });
  // Headers a handler set before failing do not leak into the problem.
  t.is(notFound.headers.get('link'), null);

  const invalid = await fetch(`${base}/things/invalid`);
  const invalidBody = await json(invalid);
  assertProblem(t, invalid, invalidBody, 422);
  t.deepEqual(invalidBody, {
    type: 'about:blank',
    title: 'Unprocessable Entity',
    status: 422,
    detail: 'The thing is invalid.',
    code: 'validation_failed',
    errors: [{ field: 'limit', message: 'must be at most 500' }],
  });

  const busy = await fetch(`${base}/things/busy`);
  assertProblem(t, busy, await json(busy), 429);
  t.is(busy.headers.get('retry-after'), '7');
});

test('a Koa ctx.throw error keeps its status and exposed message', async (t) => {
  const { base } = await startApp(t);
  const response = await fetch(`${base}/things/koa`);
  const body = await json(response);
  assertProblem(t, response, body, 400);
  t.like(body, { code: 'bad_request', detail: 'bad thing from ctx.throw' });
});

test('a Koa 5xx error keeps its status but not its message', async (t) => {
  const { base, lines } = await startApp(t);
  const response = await fetch(`${base}/things/unavailable`);
  const text = await response.text();
  assertProblem(t, response, JSON.parse(text), 503);
  t.like(JSON.parse(text), { code: 'unavailable', title: 'Service Unavailable' });
  t.false(text.includes('10.0.0.5'));
  t.true(lines.some((line) => line.msg === 'request failed'));
});

test('the read store out of reach, whatever route read it, is a 503 read_store_unavailable with Retry-After, its server not named', async (t) => {
  const { base, lines } = await startApp(t);
  const response = await fetch(`${base}/things/unreachable`);
  const text = await response.text();
  assertProblem(t, response, JSON.parse(text), 503);
  t.like(JSON.parse(text), { code: 'read_store_unavailable', title: 'Service Unavailable' });
  t.is(response.headers.get('retry-after'), '5');
  t.false(text.includes('10.0.0.7'));
  t.regex(JSON.stringify(lines.find((line) => line.msg === 'request failed')?.err), /10\.0\.0\.7/);
});

test('an unknown error is a 500 without stack or message, and is logged', async (t) => {
  const { base, lines } = await startApp(t);
  const response = await fetch(`${base}/things/boom`, { headers: { 'X-Request-Id': 'req-boom' } });
  const text = await response.text();
  const body = JSON.parse(text);
  assertProblem(t, response, body, 500);
  t.is(body.code, 'internal_error');
  t.regex(String(body.detail), /req-boom/);
  t.false(text.includes('hunter2'));
  t.false(text.includes('at '), 'no stack frames');
  const logged = lines.find((line) => line.msg === 'request failed');
  t.is(logged?.request_id, 'req-boom');
  t.regex(JSON.stringify(logged?.err), /hunter2/); // the log keeps what the response hides
});

test('the access log has method, path without query, route, status, duration and request id; no secrets', async (t) => {
  const { base, lines } = await startApp(t);
  await fetch(`${base}/things/42?api_key=sk_live_secret&cursor=abc`, {
    headers: { Authorization: 'Bearer very-secret-key', 'X-Request-Id': 'req-1' },
  });
  const line = lines.find((l) => l.msg === 'request' && l.request_id === 'req-1');
  t.like(line, {
    level: 30,
    method: 'GET',
    path: '/things/42',
    route: '/things/:id',
    status: 200,
    service: 'pds',
  });
  t.is(typeof line?.duration_ms, 'number');
  t.is(line?.correlation_id, 'req-1', 'without X-Correlation-Id the correlation is the request');
  const all = JSON.stringify(lines);
  t.false(all.includes('very-secret-key'));
  t.false(all.includes('sk_live_secret'));

  await fetch(`${base}/things/43`, { headers: { 'X-Request-Id': 'req-2', 'X-Correlation-Id': 'order-77' } });
  t.like(
    lines.find((l) => l.msg === 'request' && l.request_id === 'req-2'),
    { correlation_id: 'order-77' },
  );
});

test('probe requests are logged at debug level', async (t) => {
  const { base, lines } = await startApp(t);
  await fetch(`${base}/healthz`, { headers: { 'X-Request-Id': 'probe' } });
  t.like(
    lines.find((l) => l.request_id === 'probe'),
    { level: 20, path: '/healthz' },
  );
});

test('a request logs through a child logger made only when something is logged', async (t) => {
  const { base, lines, children } = await startApp(t, undefined, 'warn');
  await fetch(`${base}/things/1`, { headers: { 'X-Request-Id': 'quiet' } });
  t.deepEqual(children, [], 'nothing logged at warn for a 200: no child made');
  t.false(lines.some((l) => l.request_id === 'quiet'));

  await fetch(`${base}/things/boom`, { headers: { 'X-Request-Id': 'loud', 'X-Correlation-Id': 'order-9' } });
  t.deepEqual(children, [{ request_id: 'loud', correlation_id: 'order-9' }], 'one child, for the error');
  t.like(
    lines.find((l) => l.msg === 'request failed'),
    { level: 50, request_id: 'loud', correlation_id: 'order-9' },
  );
});

test('GET /metrics: default metrics and the request histogram by route pattern', async (t) => {
  const { base } = await startApp(t);
  await fetch(`${base}/things/1`);
  await fetch(`${base}/things/2`);
  await fetch(`${base}/no/such/path`);
  const response = await fetch(`${base}/metrics`);
  t.is(response.status, 200);
  t.regex(response.headers.get('content-type') ?? '', /^text\/plain/);
  const text = await response.text();
  t.regex(text, /process_cpu_user_seconds_total/);
  t.regex(text, /http_request_duration_seconds_count\{method="GET",route="\/things\/:id",status="200"\} 2/);
  t.regex(text, /http_request_duration_seconds_count\{method="GET",route="unmatched",status="404"\} 1/);
  t.false(text.includes('/things/1'));
});

test('two apps in one process keep separate registries', async (t) => {
  const a = await startApp(t);
  const b = await startApp(t);
  await fetch(`${a.base}/things/1`);
  const text = await (await fetch(`${b.base}/metrics`)).text();
  t.false(text.includes('route="/things/:id"'));
});

test('the logger censors authorization headers, tokens, secrets and keys', (t) => {
  const lines: LogLine[] = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  logger.info(
    {
      headers: { authorization: 'Bearer a1' },
      req: { headers: { authorization: 'Bearer a2' } },
      token: 't1',
      subscription: { signing_secret: 's1', auth_token: 't2', url: 'https://example.com' },
      partner: { api_key: 'k1', apiKey: 'k2' },
      config: { operator_token: 'o1', secret_key: 'k3' },
    },
    'hello',
  );
  const text = JSON.stringify(lines);
  for (const secret of ['a1', 'a2', 't1', 's1', 't2', 'k1', 'k2', 'o1', 'k3']) {
    t.false(text.includes(`"${secret}"`) || text.includes(`Bearer ${secret}`), secret);
  }
  t.true(text.includes('https://example.com'));
});

test("the logger censors the console's session cookie and CSRF token wherever a log call puts them", (t) => {
  const lines: LogLine[] = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  logger.info(
    {
      cookie: 'pds_console_session=c1',
      req: { headers: { cookie: 'pds_console_session=c2' } },
      res: { headers: { 'set-cookie': 'pds_console_session=c3; HttpOnly' } },
      headers: { 'set-cookie': 'pds_console_session=c4' },
      session: { session_id: 'c5', csrf_token: 'x1', csrfToken: 'x2' },
    },
    'hello',
  );
  const text = JSON.stringify(lines);
  for (const secret of ['c1', 'c2', 'c3', 'c4', 'c5', 'x1', 'x2']) t.false(text.includes(secret), secret);
});

/** An app of the shared middleware alone, logging nothing, for routers a test mounts itself. */
const quietApp = () =>
  createHttpApp({
    logger: createLogger('warn', { write: () => {} }),
    registry: createMetricsRegistry(),
    readiness: createReadiness({ timeoutMs: 200 }),
    role: 'all',
  });

test('routesOf consults a router only for paths under its prefix, in its letter case', async (t) => {
  const app = quietApp();
  const consulted: string[] = [];
  for (const prefix of ['/things', '/other']) {
    const router = new Router<AppState>({ prefix });
    router.get('/:id', (ctx) => {
      ctx.body = { router: prefix, id: ctx.params.id };
    });
    const match = router.match.bind(router);
    router.match = (path, method) => {
      consulted.push(`${prefix} ${path}`);
      return match(path, method);
    };
    app.use(routesOf(router));
  }
  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const get = async (path: string) => {
    consulted.length = 0;
    const response = await fetch(`${base}${path}`);
    return { status: response.status, body: await json(response), consulted: [...consulted] };
  };

  t.like(await get('/other/7'), {
    status: 200,
    body: { router: '/other', id: '7' },
    consulted: ['/other /other/7'],
  });
  // Letter case counts, as it does for the router's middleware (createRouter): another case is elsewhere.
  t.deepEqual(await get('/THINGS/8').then((r) => [r.status, r.consulted]), [404, []]);
  // A path that merely begins with the prefix's letters is not under it.
  t.deepEqual(await get('/thingsx/9').then((r) => [r.status, r.consulted]), [404, []]);
  t.deepEqual(await get('/elsewhere').then((r) => [r.status, r.consulted]), [404, []]);
});

test("useEach runs a router's shared middleware in order, as one layer, only for its routes", async (t) => {
  const app = quietApp();
  const ran: string[] = [];
  const step = (name: string) => async (_ctx: unknown, next: () => Promise<unknown>) => {
    ran.push(`${name} in`);
    await next();
    ran.push(`${name} out`);
  };
  const router = new Router<AppState>({ prefix: '/things' });
  useEach(router, step('auth'), step('errors'), async (ctx, next) => {
    if (ctx.get('X-Stop') === 'yes') throw httpProblem(401, 'unauthorized', 'stopped before the route');
    await next();
  });
  router.get('/:id', (ctx) => {
    ran.push(`route ${ctx.params.id}`);
    ctx.body = { id: ctx.params.id };
  });
  app.use(routesOf(router));
  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // One layer ahead of the route: the router tests one pattern and composes two layers per request.
  t.is(router.stack.filter((layer) => layer.methods.length === 0).length, 1);
  t.is((await fetch(`${base}/things/3`)).status, 200);
  t.deepEqual(ran, ['auth in', 'errors in', 'route 3', 'errors out', 'auth out']);
  ran.length = 0;
  const refused = await fetch(`${base}/things/4`, { headers: { 'X-Stop': 'yes' } });
  t.is(refused.status, 401);
  t.like(await json(refused), { code: 'unauthorized' });
  t.deepEqual(ran, ['auth in', 'errors in']);
  ran.length = 0;
  // No route of the router matches: none of its shared middleware runs, as with `router.use`.
  t.is((await fetch(`${base}/things/4/more`)).status, 404);
  t.deepEqual(ran, []);
});
