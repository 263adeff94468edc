/**
 * Role `all` with the projector on a worker thread of its own (`cli/role-thread.ts`, as `npm start`
 * runs it): the read models the APIs read are built on the thread, the parent's admin routes reach its
 * status and rebuilds, its readiness and metrics show through the parent, a thread that dies is
 * started again and projects what was written meanwhile, and a stop ends it.
 */
import { createSecretKey } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import test from 'ava';
import { parseConfig } from '../../cli/config.ts';
import { PROJECTOR_THREAD_CACHE_MIB, projectorThreadSide, readSide } from '../../cli/read-side.ts';
import { roleThread, ThreadUnavailableError } from '../../cli/role-thread.ts';
import { seedSandbox } from '../../cli/sandbox/seed.ts';
import type { ProjectionStatus } from '../../projections/projector.ts';
import { seedCatalog } from '../support/cart-world.ts';
import { killThread, metrics, readyz, until } from '../support/probes.ts';
import { startService, type TestService } from '../support/service.ts';
import { recordingOpenings } from '../support/store-openings.ts';

async function projections(s: TestService): Promise<ProjectionStatus[]> {
  const res = await s.call('GET', '/admin/v1/projections');
  if (res.status !== 200) throw new Error(`GET /admin/v1/projections: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { projections: ProjectionStatus[] }).projections;
}

/** A store operator's key: the admin API answers once the thread projected it (read-your-writes). */
async function storeKey(s: TestService): Promise<string> {
  const res = await s.call('POST', '/admin/v1/partners', {
    name: 'Store one',
    kind: 'store_operator',
    store_ids: [1],
  });
  if (res.status !== 201) throw new Error(`POST /admin/v1/partners: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { api_key: string }).api_key;
}

async function menuProductIds(s: TestService, key: string): Promise<number[]> {
  const res = await fetch(`${s.base}/partner/store/v1/menu_products?limit=50`, {
    headers: { authorization: `Bearer ${key}` },
  });
  const body = (await res.json()) as { menu_products: { id: number }[] };
  return body.menu_products.map((m) => m.id).sort((a, b) => a - b);
}

test('the projector thread builds what the APIs read; its status, checks and metrics show through the parent', async (t) => {
  const thread = roleThread('projector');
  const s = await startService(t, { threads: { projector: thread } });
  t.truthy(thread.worker, 'a thread runs');
  t.is(thread.worker?.resourceLimits?.maxYoungGenerationSizeMb, 3, '1 MB semi-spaces');
  await seedCatalog(s);
  const key = await storeKey(s);
  // The key is projected (the admin API waited for it); the catalog may come a moment later.
  await until('the menu product is served', async () => (await menuProductIds(s, key)).length > 0);
  t.deepEqual(await menuProductIds(s, key), [100]);

  const head = await (await s.openStore()).headPosition();
  await until('every projection applied every event', async () =>
    (await projections(s)).every((p) => p.state === 'live' && p.lag_events === 0),
  );
  t.deepEqual((await projections(s)).map((p) => p.name).sort(), [
    'carts',
    'catalog',
    'operators',
    'partner_keys',
    'webhook_deliveries',
    'webhook_subscriptions',
  ]);
  const ready = await readyz(s);
  t.is(ready.code, 200);
  t.like(ready.checks, {
    projector_thread: 'ok',
    'projector:projections_caught_up': 'ok',
    'projector:subscription:projection_catalog': 'ok',
    'subscription:lookups': 'ok',
  });
  t.false('projections_caught_up' in ready.checks, 'not run on the API thread');
  // The thread sends its metrics every second: the checkpoint shows once it has sent them since.
  const checkpoint = new RegExp(`^pds_projection_checkpoint\\{projection="partner_keys"\\} ${head}$`, 'm');
  const text = await until('the checkpoint is in /metrics', async () => {
    const scraped = await metrics(s);
    return checkpoint.test(scraped) && scraped;
  });
  t.regex(text, /^pds_subscription_up\{subscription="projection_catalog"\} 1$/m);
  t.regex(text, /^pds_thread_restarts_total\{thread="projector"\} 0$/m);
});

test('a rebuild asked of the parent runs on the thread: 202, then live again; unknown names are 404', async (t) => {
  const s = await startService(t, { threads: { projector: roleThread('projector') } });
  await seedCatalog(s);
  const key = await storeKey(s);
  const res = await s.call('POST', '/admin/v1/projections/catalog/rebuild');
  t.is(res.status, 202);
  t.like(await res.json(), { projection: 'catalog', state: 'rebuilding' });
  await until('the rebuilt catalog is live', async () => {
    const catalog = (await projections(s)).find((p) => p.name === 'catalog');
    return catalog?.state === 'live' && catalog.progress?.percent === 100;
  });
  t.deepEqual(await menuProductIds(s, key), [100], 'the rebuilt copy serves');

  const unknown = await s.call('POST', '/admin/v1/projections/nope/rebuild');
  t.is(unknown.status, 404);
  t.is(unknown.headers.get('content-type'), 'application/problem+json');
  t.regex(((await unknown.json()) as { detail: string }).detail, /known: .*catalog/);
});

test('a projector thread that dies is started again and projects what was written while it was down', async (t) => {
  const thread = roleThread('projector');
  const s = await startService(t, { threads: { projector: thread } });
  await seedCatalog(s);
  const key = await storeKey(s);
  const dead = await killThread(thread);

  // Down: not ready, no projector to ask (a 503 to retry), and the write side still takes writes.
  const down = await readyz(s);
  t.is(down.code, 503);
  t.is(down.checks.projector_thread, 'failing');
  const status = await s.call('GET', '/admin/v1/projections');
  t.is(status.status, 503);
  t.is(status.headers.get('content-type'), 'application/problem+json');
  t.is(status.headers.get('retry-after'), '1');
  t.like(await status.json(), { code: 'projector_unavailable' });
  const written = await s.call('PUT', '/platform/v1/stores/1/menu_products/101', {
    product_id: 1,
    prices: { gram: '11.00' },
  });
  t.is(written.status, 201);

  await until('the thread is back', async () => thread.restarts === 1 && (await readyz(s)).code === 200);
  t.not(thread.worker, dead);
  await until('the menu product written meanwhile is served', async () =>
    (await menuProductIds(s, key)).includes(101),
  );
  t.deepEqual(await menuProductIds(s, key), [100, 101]);
  t.regex(await metrics(s), /^pds_thread_restarts_total\{thread="projector"\} 1$/m);
});

test('a call to a thread that is not running is refused at once, one past its deadline too; a stop ends the thread with code 0', async (t) => {
  const idle = roleThread('projector');
  await t.throwsAsync(idle.call('status'), { instanceOf: ThreadUnavailableError, message: /not running/ });

  const thread = roleThread('projector');
  const s = await startService(t, { threads: { projector: thread } });
  // A call may be given a deadline. The smallest sandbox gives the catalog thousands of events: its
  // rebuild takes far longer than a millisecond (an empty one could answer within it).
  await seedSandbox({
    store: await s.openStore(),
    secretKey: createSecretKey(Buffer.alloc(32, 3)),
    abandonAfterMs: 6 * 3_600_000,
    size: 1,
  });
  await t.throwsAsync(thread.call('rebuild', ['catalog'], { timeoutMs: 1 }), {
    instanceOf: ThreadUnavailableError,
    message: /did not answer rebuild within 1 ms/,
  });
  const worker = thread.worker;
  if (!worker) return t.fail('no thread');
  const code = new Promise<number>((resolve) => worker.once('exit', resolve));
  await s.service.stop();
  t.is(await code, 0, 'ended by itself, not terminated');
  t.falsy(thread.worker);
  t.is(thread.restarts, 0);
});

/** The nice value of each of this process's threads named `name` (Linux: `/proc/self/task/<tid>/stat`). */
function niceOfThreads(name: string): number[] {
  return readdirSync('/proc/self/task')
    .filter((tid) => readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim() === name)
    .map((tid) => {
      // Fields after the command's closing parenthesis start at the state (field 3); nice is field 19.
      const fields = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
      return Number(fields[16]);
    });
}

const linux = existsSync('/proc/thread-self');
(linux ? test.serial : test.skip)(
  'the projector thread runs 10 nice levels below the process; the dispatcher thread does not',
  async (t) => {
    const s = await startService(t, {
      threads: { projector: roleThread('projector'), dispatcher: roleThread('dispatcher') },
    });
    // Lowered once ready: the catch-up at start runs at the process's priority.
    await until('ready', async () => (await readyz(s)).code === 200);
    const own = niceOfThreads('MainThread')[0];
    t.deepEqual(niceOfThreads('pds-projector'), [Math.min(19, own + 10)]);
    t.deepEqual(niceOfThreads('pds-dispatcher'), [own]);
  },
);

test('the projector thread opens read.db with a page cache of its own, 8 MiB; the APIs’ connection with PDS_READ_STORE_CACHE_MIB', async (t) => {
  const config = parseConfig({ PDS_DATA_DIR: '/tmp/pds-unused', PDS_READ_STORE_CACHE_MIB: '48' });
  // No role: neither side starts a projector here, each only opens its connection.
  const { ctx, opened } = recordingOpenings(config);
  for (const side of [projectorThreadSide({}, 'owner-1'), readSide({}, { project: false })]) {
    await side.start(ctx);
    t.teardown(() => side.stop());
  }
  t.deepEqual(opened, [
    { url: config.readStoreUrl, cacheMiB: PROJECTOR_THREAD_CACHE_MIB },
    { url: config.readStoreUrl, cacheMiB: 48 },
  ]);
  t.is(PROJECTOR_THREAD_CACHE_MIB, 8);
});
