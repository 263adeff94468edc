/** The read side inside the service: rebuilt from the events at start, readiness, admin and CLI. */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import type { ProjectionStatus } from '../projections/projector.ts';
import { startService, type TestService } from './support/service.ts';

const exec = promisify(execFile);

async function seedCatalog(s: TestService): Promise<void> {
  const ok = async (r: Promise<Response>) => {
    const res = await r;
    if (res.status >= 300) throw new Error(`${res.status} ${await res.text()}`);
  };
  await ok(
    s.call('PUT', '/platform/v1/stores/1', {
      name: 'Green Leaf',
      address: '1 Main St',
      city: 'Denver',
      state: 'CO',
      zip: '80202',
      lat: 39.75,
      long: -104.99,
    }),
  );
  await ok(s.call('PUT', '/platform/v1/brands/2', { name: 'Kiva' }));
  for (let p = 1; p <= 5; p++) {
    await ok(
      s.call('PUT', `/platform/v1/products/${p}`, { name: `Gummies ${p}`, brand_id: 2, kind: 'edible' }),
    );
    await ok(
      s.call('PUT', `/platform/v1/stores/1/menu_products/${100 + p}`, {
        product_id: p,
        prices: { each: '10.00' },
      }),
    );
  }
}

async function projections(s: TestService): Promise<ProjectionStatus[]> {
  return (
    (await (await s.call('GET', '/admin/v1/projections')).json()) as { projections: ProjectionStatus[] }
  ).projections;
}

async function until(predicate: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('embedded mode rebuilds the read models from the events at start, then reports ready', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-readside-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const first = await startService(t, { dataDir });
  await seedCatalog(first);
  const head = await (await first.openStore()).headPosition();
  await first.service.stop();

  const second = await startService(t, { dataDir });
  await until(async () => (await fetch(`${second.base}/readyz`)).status === 200);
  const ready = (await (await fetch(`${second.base}/readyz`)).json()) as { checks: Record<string, string> };
  t.is(ready.checks.projections_caught_up, 'ok');
  const catalog = (await projections(second)).find((p) => p.name === 'catalog');
  t.like(catalog, { state: 'live', checkpoint: head, lag_events: 0 });
  t.true((catalog?.events_applied ?? 0) >= 12);
  const metrics = await (await fetch(`${second.base}/metrics`)).text();
  t.regex(metrics, new RegExp(`pds_projection_checkpoint\\{projection="catalog"\\} ${head}`));
});

test('admin rebuild: 202, then live again with full progress; unknown names are 404; token required', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const res = await s.call('POST', '/admin/v1/projections/catalog/rebuild');
  t.is(res.status, 202);
  await until(async () => {
    const c = (await projections(s)).find((p) => p.name === 'catalog');
    return c?.state === 'live' && c.progress?.percent === 100;
  });
  const unknown = await s.call('POST', '/admin/v1/projections/nope/rebuild');
  t.is(unknown.status, 404);
  t.is(unknown.headers.get('content-type'), 'application/problem+json');
  t.is((await fetch(`${s.base}/admin/v1/projections`)).status, 401);
});

test('pds projections status and rebuild, as tables and as JSON', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const env = { PATH: process.env.PATH ?? '', PDS_URL: s.base, PDS_OPERATOR_TOKEN: s.token };
  const status = await exec(process.execPath, ['cli/pds.ts', 'projections', 'status'], { env });
  t.regex(status.stdout, /^name\s+state\s+status\s+checkpoint/);
  t.regex(status.stdout, /catalog\s+live\s+ok/);
  const json = await exec(process.execPath, ['cli/pds.ts', 'projections', 'status', '--json'], { env });
  t.deepEqual(
    (JSON.parse(json.stdout) as { projections: ProjectionStatus[] }).projections.map((p) => p.name).sort(),
    ['carts', 'catalog', 'operators', 'partner_keys', 'webhook_deliveries', 'webhook_subscriptions'],
  );
  const rebuilt = await exec(
    process.execPath,
    ['cli/pds.ts', 'projections', 'rebuild', '--all', '--json', '--poll', '50'],
    {
      env,
    },
  );
  const done = (JSON.parse(rebuilt.stdout) as { projections: ProjectionStatus[] }).projections;
  t.is(done.length, 6);
  for (const p of done) t.like(p, { state: 'live', progress: { percent: 100 } });
  const withBar = await exec(
    process.execPath,
    ['cli/pds.ts', 'projections', 'rebuild', 'carts', '--poll', '50'],
    { env },
  );
  t.regex(withBar.stdout, /carts\s+live/);
  const usage = await exec(process.execPath, ['cli/pds.ts', 'projections', 'rebuild'], { env }).catch(
    (e) => e,
  );
  t.is((usage as { code: number }).code, 2);
});
