/**
 * The composition root in process: component order per role, graceful stop with a deadline.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Router from '@koa/router';
import test, { type ExecutionContext } from 'ava';
import type { AppState } from '../api/http.ts';
import { type Component, type ComponentRole, createService, type ServiceOptions } from '../cli/compose.ts';
import { loadConfig } from '../cli/config.ts';
import { openKeyStore } from '../cli/customer-keys.ts';
import { createLogger } from '../cli/logger.ts';

type LogLine = Record<string, unknown>;

async function service(t: ExecutionContext, options: ServiceOptions, env: Record<string, string> = {}) {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-compose-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const config = await loadConfig({ PDS_DATA_DIR: dir, PORT: '0', ...env });
  const lines: LogLine[] = [];
  const logger = createLogger('debug', { write: (line: string) => void lines.push(JSON.parse(line)) });
  const s = createService(config, { logger, ...options });
  t.teardown(() => s.stop());
  return { service: s, lines };
}

function recorder(events: string[], name: string, roles: ComponentRole[], fail = false): Component {
  return {
    name,
    roles,
    start(ctx) {
      events.push(`start ${name} (${ctx.role}, store ${ctx.eventStore.kind})`);
      if (fail) throw new Error(`${name} cannot start`);
    },
    stop() {
      events.push(`stop ${name}`);
    },
  };
}

test('role all starts every component in order, then HTTP; stops in reverse, then closes the store', async (t) => {
  const events: string[] = [];
  const { service: s } = await service(t, {
    role: 'all',
    components: [
      recorder(events, 'projector', ['projector']),
      recorder(events, 'dispatcher', ['dispatcher']),
    ],
  });
  t.deepEqual(s.components, ['projector', 'dispatcher', 'http']);
  const port = await s.start();
  t.true(port > 0);
  t.deepEqual(events, ['start projector (all, store sqlite)', 'start dispatcher (all, store sqlite)']);
  const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
  t.like(await ready.json(), { status: 'ready', role: 'all', checks: { event_store: 'ok' } });
  await s.stop();
  t.deepEqual(events.slice(2), ['stop dispatcher', 'stop projector']);
  await t.throwsAsync(fetch(`http://127.0.0.1:${port}/healthz`));
  await s.stop(); // idempotent
});

test('a single role runs only its components, plus the ops HTTP server', async (t) => {
  const events: string[] = [];
  const { service: s } = await service(t, {
    role: 'dispatcher',
    components: [
      recorder(events, 'projector', ['projector']),
      recorder(events, 'dispatcher', ['dispatcher']),
    ],
  });
  t.deepEqual(s.components, ['dispatcher', 'http']);
  const port = await s.start();
  t.deepEqual(events, ['start dispatcher (dispatcher, store sqlite)']);
  t.is((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
});

const OPS_PATHS = ['/healthz', '/readyz', '/metrics'];

test('PDS_OPS_PORT: the ops endpoints answer on their own port only, which opens before HTTP and closes after it', async (t) => {
  const events: string[] = [];
  const { service: s } = await service(
    t,
    { role: 'all', components: [recorder(events, 'first', ['api']), slowRoutes(Promise.resolve())] },
    { PDS_OPS_PORT: '0' },
  );
  t.deepEqual(s.components, ['first', 'slow-api', 'ops-http', 'http']);
  t.is(s.opsPort(), 0, 'not bound before the start');
  const port = await s.start();
  const opsPort = s.opsPort();
  t.true(opsPort > 0 && opsPort !== port, `${opsPort} beside ${port}`);
  const main = `http://127.0.0.1:${port}`;
  const ops = `http://127.0.0.1:${opsPort}`;

  t.is((await fetch(`${main}/slow`)).status, 200, 'the service port serves the routes');
  for (const p of OPS_PATHS) {
    const here = await fetch(`${main}${p}`);
    t.is(here.status, 404, `${p} on the service port`);
    t.regex(here.headers.get('content-type') ?? '', /^application\/problem\+json/);
    t.like(await here.json(), { status: 404, code: 'not_found' });
    t.is((await fetch(`${ops}${p}`)).status, 200, `${p} on the ops port`);
  }
  t.like(await (await fetch(`${ops}/readyz`)).json(), { status: 'ready', role: 'all' });
  t.is((await fetch(`${ops}/slow`)).status, 404, 'the ops port serves nothing else');
  // One registry: both ports' requests are counted (the three 404s of the service port, /slow on the ops port).
  const metrics = await (await fetch(`${ops}/metrics`)).text();
  t.regex(metrics, /http_request_duration_seconds_count\{method="GET",route="\/slow",status="200"\} 1/);
  t.regex(metrics, /http_request_duration_seconds_count\{method="GET",route="unmatched",status="404"\} 4/);

  await s.stop();
  await t.throwsAsync(fetch(`${ops}/healthz`), undefined, 'closed by the stop');
  await t.throwsAsync(fetch(`${main}/healthz`));
});

test('without PDS_OPS_PORT the ops endpoints are on the service port, and there is no other listener', async (t) => {
  const { service: s } = await service(t, { role: 'all', components: [] });
  t.deepEqual(s.components, ['http']);
  const port = await s.start();
  t.is(s.opsPort(), 0);
  for (const p of OPS_PATHS) t.is((await fetch(`http://127.0.0.1:${port}${p}`)).status, 200, p);
});

test('a component failing to start undoes the start', async (t) => {
  const events: string[] = [];
  const { service: s, lines } = await service(t, {
    components: [recorder(events, 'first', ['api']), recorder(events, 'second', ['api'], true)],
  });
  await t.throwsAsync(s.start(), { message: 'second cannot start' });
  t.deepEqual(events, ['start first (all, store sqlite)', 'start second (all, store sqlite)', 'stop first']);
  t.false(lines.some((line) => line.msg === 'component failed to stop'));
});

/** Routes whose `/slow` waits for `release`; `arrived` resolves once a request is being handled. */
function slowRoutes(release: Promise<void>, onArrival: () => void = () => undefined): Component {
  return {
    name: 'slow-api',
    roles: ['api'],
    start(ctx) {
      const router = new Router<AppState>();
      router.get('/slow', async (c) => {
        onArrival();
        await release;
        c.body = { done: true };
      });
      ctx.app.use(router.routes());
    },
    stop() {},
  };
}

test('stop lets an in-flight request finish and refuses new connections', async (t) => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let arrive!: () => void;
  const arrived = new Promise<void>((resolve) => {
    arrive = resolve;
  });
  const { service: s } = await service(t, { components: [slowRoutes(released, arrive)] });
  const port = await s.start();
  const inFlight = fetch(`http://127.0.0.1:${port}/slow`);
  await arrived; // the request is being handled, not merely sent
  let stopped = false;
  const stopping = s.stop().then(() => {
    stopped = true;
  });
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.false(stopped, 'waits for the request');
  await t.throwsAsync(fetch(`http://127.0.0.1:${port}/healthz`), undefined, 'no new connections');
  release();
  const response = await inFlight;
  t.is(response.status, 200);
  t.deepEqual(await response.json(), { done: true });
  await stopping;
  t.true(stopped);
});

test('stop closes connections still busy at the deadline', async (t) => {
  let arrive!: () => void;
  const arrived = new Promise<void>((resolve) => {
    arrive = resolve;
  });
  const { service: s } = await service(t, {
    components: [slowRoutes(new Promise<void>(() => undefined), arrive)],
    stopTimeoutMs: 200,
  });
  const port = await s.start();
  const inFlight = fetch(`http://127.0.0.1:${port}/slow`);
  inFlight.catch(() => undefined);
  await arrived;
  const started = Date.now();
  await s.stop();
  t.true(Date.now() - started < 2_000);
  await t.throwsAsync(inFlight);
});

test('/readyz shows the key store down when it does not answer', async (t) => {
  const down = { now: false };
  const { service: s } = await service(t, {
    role: 'all',
    components: [],
    async openKeyStore(url) {
      const store = await openKeyStore(url);
      return {
        ...store,
        key: (keyId: string) =>
          down.now ? Promise.reject(new Error('key store unreachable')) : store.key(keyId),
      };
    },
  });
  const port = await s.start();
  const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
  t.like(await ready.json(), { status: 'ready', checks: { key_store: 'ok' } });
  down.now = true;
  const notReady = await fetch(`http://127.0.0.1:${port}/readyz`);
  t.is(notReady.status, 503);
  t.like(await notReady.json(), { checks: { key_store: 'failing' } });
});
