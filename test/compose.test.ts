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
import { createLogger } from '../cli/logger.ts';

type LogLine = Record<string, unknown>;

async function service(t: ExecutionContext, options: ServiceOptions) {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-compose-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const config = await loadConfig({ PDS_DATA_DIR: dir, PORT: '0' });
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
