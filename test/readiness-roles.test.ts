/**
 * `/readyz` reflects what each role needs (docs/operations.md, "Health"), on the embedded stores with
 * the faults a real deployment has: an EventStoreDB outage (`support/faulty-store.ts` drops every
 * subscription and refuses new ones until the server is back) and a MongoDB out of reach
 * (`support/unreachable-read-store.ts`).
 *
 * - An `api` replica serves partner reads from the read store: with its subscriptions down it stays
 *   ready, `degraded`, naming each; writes answer 503 `event_store_unavailable` as before; partner
 *   reads go on. Its read store out of reach makes it unready (`read_store`).
 * - A `projector` and a `dispatcher` work through their subscriptions: down, they are unready; the
 *   projector's read store and the dispatcher's store out of reach make them unready too.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import type { Role } from '../cli/compose.ts';
import { caughtUp, type Json, registerPartner } from './support/brand-partner.ts';
import { seedCatalog } from './support/cart-world.ts';
import { type FaultyStore, faultyStore } from './support/faulty-store.ts';
import { until } from './support/probes.ts';
import { startService, type TestService } from './support/service.ts';
import { type UnreachableReadStore, unreachableReadStore } from './support/unreachable-read-store.ts';

interface Readyz {
  code: number;
  body: {
    status: string;
    role: string;
    checks: Record<string, string>;
    failing?: string[];
    degraded?: string[];
  };
}

async function readyz(s: Pick<TestService, 'base'>): Promise<Readyz> {
  const res = await fetch(`${s.base}/readyz`);
  return { code: res.status, body: (await res.json()) as Readyz['body'] };
}

const subscriptionChecks = (r: Readyz) =>
  Object.keys(r.body.checks).filter((n) => n.startsWith('subscription:'));

/** A service of `role` on a faulty event store, ready; the outage is over before it stops. */
async function serviceOnFaultyStore(
  t: ExecutionContext,
  role: Role,
  env: Record<string, string> = {},
): Promise<{ s: TestService; store: FaultyStore }> {
  let faulty: FaultyStore | undefined;
  const s = await startService(t, {
    role,
    env,
    wrapStore: (inner) => {
      faulty = faultyStore(inner);
      return faulty;
    },
  });
  const store = faulty as FaultyStore;
  t.teardown(() => store.refuseSubscriptions(false));
  await until(`the ${role} is ready`, async () => (await readyz(s)).code === 200);
  return { s, store };
}

/** The event store goes away: every subscription drops, and none can open again until it is back. */
async function outage(t: ExecutionContext, s: TestService, store: FaultyStore): Promise<Readyz> {
  store.refuseSubscriptions(true);
  t.true(store.dropSubscriptions() > 0);
  return until('every subscription is down', async () => {
    const r = await readyz(s);
    const subscriptions = subscriptionChecks(r);
    return subscriptions.length > 0 && subscriptions.every((n) => r.body.checks[n] === 'failing') && r;
  });
}

test('an api replica stays ready through an EventStoreDB outage, degraded, naming each subscription down; writes answer 503 event_store_unavailable, partner reads go on', async (t) => {
  // With a `memory` read store the api process also keeps its own read models (by its own projections).
  const { s, store } = await serviceOnFaultyStore(t, 'api', { PDS_READ_STORE: 'memory' });
  await seedCatalog(s);
  const operator = await registerPartner(t, s, { name: 'Op', kind: 'store_operator', store_ids: [1] });
  await caughtUp(t, s);
  t.like((await readyz(s)).body, { status: 'ready', role: 'api' });

  const down = await outage(t, s, store);
  t.is(down.code, 200);
  t.is(down.body.status, 'degraded');
  t.false('failing' in down.body);
  t.deepEqual(down.body.degraded?.sort(), subscriptionChecks(down).sort());
  for (const name of [
    'subscription:lookups',
    'subscription:projection_carts',
    'subscription:projection_catalog',
  ])
    t.true(down.body.degraded?.includes(name), name);

  // Partner reads are served from the read store meanwhile.
  const read = await s.partnerCall<Json>('/partner/store/v1', 'GET', '/menu_products', operator.api_key);
  t.is(read.status, 200);
  t.is(read.body.menu_products.length, 1);
  // A write the event store refuses answers 503, as it did.
  store.failAppends(100);
  const write = await s.call('PUT', '/platform/v1/brands/9', { name: 'Nine' });
  t.is(write.status, 503);
  t.is(write.headers.get('retry-after'), '1');
  t.like(await write.json(), { code: 'event_store_unavailable' });

  store.failAppends(0);
  store.refuseSubscriptions(false);
  const back = await until('subscribed again', async () => {
    const r = await readyz(s);
    return r.body.status === 'ready' && r;
  });
  t.false('degraded' in back.body);
  t.is((await s.call('PUT', '/platform/v1/brands/9', { name: 'Nine' })).status, 201);
});

test('an api replica started during an EventStoreDB outage serves partner reads, degraded by write_side_lookups; platform writes answer 503 write_side_starting until they are built; role all requires them', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-readiness-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  // The catalog and a partner key, projected into read.db by a whole service beforehand.
  const before = await startService(t, { role: 'all', dataDir });
  await seedCatalog(before);
  const operator = await registerPartner(t, before, { name: 'Op', kind: 'store_operator', store_ids: [1] });
  await caughtUp(t, before);
  t.is(
    (await before.service.readiness.check()).impacts.write_side_lookups,
    'required',
    'role all requires them',
  );
  await before.service.stop();

  // The event store is down from the start: no read, no subscription.
  let faulty: FaultyStore | undefined;
  const s = await startService(t, {
    role: 'api',
    dataDir,
    wrapStore: (inner) => {
      faulty = faultyStore(inner);
      faulty.refuseSubscriptions(true);
      faulty.refuseReads(true);
      return faulty;
    },
  });
  const store = faulty as FaultyStore;
  t.teardown(() => {
    store.refuseReads(false);
    store.refuseSubscriptions(false);
  });
  const down = await readyz(s);
  t.is(down.code, 200);
  t.is(down.body.status, 'degraded');
  t.is(down.body.checks.write_side_lookups, 'failing');
  t.true(down.body.degraded?.includes('write_side_lookups'), JSON.stringify(down.body));
  t.false('failing' in down.body);
  t.regex(s.logs(), /the event store does not answer: the write side lookups are built once it does/);

  const read = await s.partnerCall<Json>('/partner/store/v1', 'GET', '/menu_products', operator.api_key);
  t.is(read.status, 200);
  t.is(read.body.menu_products.length, 1);
  const write = await s.call('PUT', '/platform/v1/brands/9', { name: 'Nine' });
  t.is(write.status, 503);
  t.is(write.headers.get('content-type')?.split(';')[0], 'application/problem+json');
  t.is(write.headers.get('retry-after'), '5');
  t.like(await write.json(), { status: 503, code: 'write_side_starting' });

  store.refuseReads(false);
  store.refuseSubscriptions(false);
  const back = await until('the write side built', async () => {
    const r = await readyz(s);
    return r.body.status === 'ready' && r;
  });
  t.is(back.body.checks.write_side_lookups, 'ok');
  t.is((await s.call('PUT', '/platform/v1/brands/9', { name: 'Nine' })).status, 201);
  t.regex(s.logs(), /the write side lookups are built: platform writes are served/);
});

for (const role of ['projector', 'dispatcher'] as const) {
  test(`role ${role}: unready while its subscriptions are down, ready again once they are back`, async (t) => {
    const { s, store } = await serviceOnFaultyStore(t, role);
    const down = await outage(t, s, store);
    t.is(down.code, 503);
    t.is(down.body.status, 'not_ready');
    t.deepEqual(down.body.failing?.sort(), subscriptionChecks(down).sort());
    t.false('degraded' in down.body);

    store.refuseSubscriptions(false);
    await until('ready again', async () => (await readyz(s)).body.status === 'ready');
  });
}

for (const [role, file, check] of [
  ['api', 'read.db', 'read_store'],
  ['projector', 'read.db', 'read_store'],
  ['dispatcher', 'dispatcher.db', 'dispatcher_store'],
] as const) {
  test(`role ${role}: unready while its ${check.replace('_', ' ')} is out of reach (${check}), ready again after`, async (t) => {
    let unreachable: UnreachableReadStore | undefined;
    const s = await startService(t, {
      role,
      wrapReadStore: async (store, url) => {
        if (!url.endsWith(`/${file}`)) return store;
        unreachable = await unreachableReadStore(store);
        return unreachable;
      },
    });
    const store = unreachable as UnreachableReadStore;
    t.teardown(() => {
      store.unreachable = false;
    });
    await until(`the ${role} is ready`, async () => (await readyz(s)).code === 200);
    t.is((await readyz(s)).body.checks[check], 'ok');

    store.unreachable = true;
    const down = await readyz(s);
    t.is(down.code, 503);
    t.is(down.body.checks[check], 'failing');
    t.true(down.body.failing?.includes(check), JSON.stringify(down.body));

    store.unreachable = false;
    await until('ready again', async () => (await readyz(s)).code === 200);
  });
}
