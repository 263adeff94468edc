/**
 * Every query the service makes of its default read store is served by a SQLite index
 * (docs/read-side.md). The service runs on `sqlite:<data dir>/read.db`; every route of the hostile
 * catalogue is called with its valid request, then with each query parameter it reads, then for the
 * next page of a list; the projections run meanwhile. Every statement the read store ran is then put
 * to `EXPLAIN QUERY PLAN`, and none may scan a collection or sort its matches in a temporary B-tree.
 * A walk in index order that stops at the page's limit (`bounded`) reads what the page returns, so an
 * ordered `SCAN` of an index is allowed there and only there.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import {
  ColdQueues,
  type DeliveryQueueDoc,
  QUEUE_INDEXES,
  queueDocument,
} from '../dispatcher/cold-queues.ts';
import { DELIVERY_FOLLOWER } from '../dispatcher/delivery-worker.ts';
import { shardCheckpoint, takeLayout } from '../dispatcher/shards.ts';
import { manualClock } from '../domain/clock.ts';
import {
  WEBHOOK_DELIVERIES,
  type WebhookDeliveryDoc,
  webhookDeliveryIndexes,
} from '../projections/read-models/webhook-deliveries.ts';
import { oldestQueued, queuedInQueues } from '../projections/read-models/webhook-delivery-queues.ts';
import type { ReadStore } from '../projections/read-store.ts';
import { observeQueries } from '../projections/sqlite/documents-table.ts';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';
import { BULK_INDEXES, loadBulkWrites } from './contract/read-store-bulk.ts';
import { send } from './hostile/harness.ts';
import { allRoutes, type RouteSpec, validQueryValues } from './hostile/routes.ts';
import { pct } from './hostile/values.ts';
import { buildWorld, caughtUp, type World } from './hostile/world.ts';
import { startService, type TestService } from './support/service.ts';

interface Seen {
  /** SQLite's plan, taken when the statement first ran (a rebuild drops the tables it read). */
  plan: string[];
  bounded: boolean;
  /** The request that ran it first, for the failure report. */
  during: string;
}

/** The path of a route's valid request (its first valid value of each path parameter). */
function pathOf(spec: RouteSpec, world: World): string {
  const valid = spec.params(world);
  return spec.path.replace(/:(\w+)/g, (_, name: string) => pct(valid[name][0]));
}

/** The credentials of a route's caller, as headers: a bearer token, or the console session's cookie. */
function credentialsOf(spec: RouteSpec, s: TestService, world: World): Record<string, string> {
  if (spec.auth === 'session') return { cookie: world.session.cookie, 'x-csrf-token': world.session.csrf };
  const key = spec.auth === 'operator' ? s.token : spec.auth === 'public' ? undefined : world.keys[spec.auth];
  return key ? { authorization: `Bearer ${key}` } : {};
}

/** The URLs a well-behaved client asks of a route: plain, with each query parameter, and all of them. */
function urlsOf(spec: RouteSpec, world: World): string[] {
  const base = pathOf(spec, world);
  const required = (spec.requiredQuery ?? []).map((k) => `${k}=${pct(validQueryValues(k)[0])}`);
  const optional = spec.query.filter((k) => k !== 'cursor' && !(spec.requiredQuery ?? []).includes(k));
  const variants = [
    [...required],
    ...optional.map((k) => [...required, `${k}=${pct(validQueryValues(k)[0])}`]),
    [...required, ...optional.map((k) => `${k}=${pct(validQueryValues(k)[0])}`)],
  ];
  return [...new Set(variants.map((q) => (q.length > 0 ? `${base}?${q.join('&')}` : base)))];
}

/** What in a statement's plan reads more than it returns: a scan, or a sort of every match. */
function problems(plan: readonly string[], bounded: boolean, sql: string): string[] {
  // An index build at the end of a build's load (docs/read-side.md, "How a build writes its shadows"):
  // one pass over the documents and one sort of their entries, by design; never a lookup per row.
  if (/^INSERT INTO/.test(sql)) {
    return plan.filter((line) => !/^SCAN [de]\b/.test(line) && !/^USE TEMP B-TREE FOR ORDER BY$/.test(line));
  }
  return plan.filter((line) => {
    if (/USE TEMP B-TREE/.test(line)) return true;
    if (!/^SCAN /.test(line)) return false;
    if (/^SCAN json_each/.test(line)) return false; // the list of ids a query was given
    return !(bounded && /ORDER BY/.test(sql)); // an ordered walk that stops at the page's limit
  });
}

test('every query of every route, and of the projections, is served by an index (EXPLAIN QUERY PLAN)', async (t) => {
  t.timeout(180_000);
  const seen = new Map<string, Seen>();
  let during = 'projections';
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-plans-'));
  // Each statement explained on its own connection: read.db, dispatcher.db and sessions.db have tables
  // of alike names.
  const unobserve = observeQueries((sql, _params, bounded, explain) => {
    const key = `${bounded ? 'bounded' : 'all'} ${sql}`;
    if (!seen.has(key)) seen.set(key, { plan: explain(), bounded, during });
  });
  t.teardown(async () => {
    unobserve();
    await rm(dataDir, { recursive: true, force: true });
  });
  const s = await startService(t, { dataDir });
  const world = await buildWorld(t, s);
  await caughtUp(s);
  const agent = new http.Agent({ keepAlive: true });
  t.teardown(() => agent.destroy());

  // Reads first (writes may remove what later reads ask for), then every other route.
  const ordered = [...allRoutes].sort((a, b) => Number(a.method !== 'GET') - Number(b.method !== 'GET'));
  let requests = 0;
  for (const spec of ordered) {
    const headers = credentialsOf(spec, s, world);
    const body = spec.body?.(world);
    if (body !== undefined) headers['content-type'] = 'application/json';
    for (const url of spec.method === 'GET' ? urlsOf(spec, world) : [pathOf(spec, world)]) {
      during = `${spec.method} ${url}`;
      const res = await send(s.base, agent, {
        method: spec.method,
        url,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      requests += 1;
      // The next page of a list: the query after a cursor.
      const link = String(res.headers.link ?? '').match(/<([^>]+)>;\s*rel="next"/);
      if (spec.method === 'GET' && link) {
        const next = new URL(link[1], s.base);
        during = `${spec.method} ${next.pathname}${next.search}`;
        await send(s.base, agent, { method: 'GET', url: `${next.pathname}${next.search}`, headers });
        requests += 1;
      }
    }
  }
  for (const spec of ordered.filter((r) => r.method === 'GET' && r.query.includes('limit'))) {
    const headers = credentialsOf(spec, s, world);
    const url = `${urlsOf(spec, world)[0]}${spec.requiredQuery?.length ? '&' : '?'}limit=1`;
    during = `GET ${url}`;
    const res = await send(s.base, agent, {
      method: 'GET',
      url,
      headers,
    });
    const link = String(res.headers.link ?? '').match(/<([^>]+)>;\s*rel="next"/);
    if (link) {
      const next = new URL(link[1], s.base);
      during = `GET ${next.pathname}${next.search} (next page)`;
      await send(s.base, agent, {
        method: 'GET',
        url: `${next.pathname}${next.search}`,
        headers,
      });
    }
    requests += 1;
  }
  // The cart search's combinations (docs/operations.md, "Auditing carts"), each bounded by a time range
  // on either side or both, and its next page.
  const range = ['created_after=2020-01-01T00%3A00%3A00Z', 'created_before=2099-01-01T00%3A00%3A00Z'];
  const cartSearch = allRoutes.find((r) => r.method === 'GET' && r.path === '/admin/v1/carts');
  if (!cartSearch) throw new Error('the cart search is a route of the catalogue');
  const scopes = [
    '',
    'store_id=101',
    'status=pending',
    'store_id=101&status=pending',
    `partner_id=${world.partnerIds.store_operator}`,
  ];
  for (const scope of scopes) {
    for (const bounds of [[], [range[0]], [range[1]], range]) {
      const query = [scope, ...bounds, 'limit=1'].filter((p) => p !== '').join('&');
      let url: string | undefined = `/admin/v1/carts?${query}`;
      for (let page = 0; url && page < 2; page++) {
        during = `GET ${url}`;
        const res = await send(s.base, agent, {
          method: 'GET',
          url,
          headers: credentialsOf(cartSearch, s, world),
        });
        requests += 1;
        const link = String(res.headers.link ?? '').match(/<([^>]+)>;\s*rel="next"/);
        const next = link ? new URL(link[1], s.base) : undefined;
        url = next ? `${next.pathname}${next.search}` : undefined;
      }
    }
  }
  await caughtUp(s);

  const failures: string[] = [];
  for (const [key, { plan, bounded, during: by }] of seen) {
    const sql = key.slice(key.indexOf(' ') + 1);
    const bad = problems(plan, bounded, sql);
    if (bad.length > 0) failures.push(`${by}\n  ${sql}\n  ${bad.join('\n  ')}`);
  }
  t.log(`${requests} requests, ${seen.size} distinct statements explained`);
  t.true(seen.size > 40, `the routes ran the read store's queries (${seen.size} statements)`);
  t.deepEqual(failures, [], failures.join('\n\n'));
});

/** Every statement the read stores run during the test, with its plan. */
function recordPlans(t: ExecutionContext): { sql: string; plan: string[]; bounded: boolean }[] {
  const plans: { sql: string; plan: string[]; bounded: boolean }[] = [];
  t.teardown(
    observeQueries((sql, _params, bounded, explain) => {
      plans.push({ sql, plan: explain(), bounded });
    }),
  );
  return plans;
}

test("the queued deliveries of a page's queues and a subscription's delivery queued longest are served by indexes", async (t) => {
  // Named here, not left to the route walk: the hostile world's receivers take every delivery, so no
  // page of it holds one waiting in its queue.
  const plans = recordPlans(t);
  const store = openSqliteReadStore(':memory:');
  t.teardown(() => store.close());
  const deliveries = await store.collection<WebhookDeliveryDoc>(WEBHOOK_DELIVERIES, webhookDeliveryIndexes);
  const hook = 'aaaaaaaa-0000-4000-8000-000000000001';
  const queues = [1, 2, 3].map((n) => ({
    webhook_id: hook,
    cart_uuid: `cccccccc-0000-4000-8000-00000000000${n}`,
  }));
  plans.length = 0;
  await queuedInQueues(deliveries, queues);
  await oldestQueued(deliveries, hook);
  t.true(plans.length >= 2, `${plans.length} statements`);
  const failures = plans.flatMap(({ sql, plan, bounded }) => {
    const bad = problems(plan, bounded, sql);
    return bad.length > 0 ? [`${sql}\n  ${bad.join('\n  ')}`] : [];
  });
  t.deepEqual(failures, [], failures.join('\n\n'));
  // The queues' lookups reach the index on webhook id, cart and status, not one of the first two alone.
  const lookups = plans.filter(({ sql }) => !/ORDER BY/.test(sql));
  t.true(lookups.length > 0);
  for (const { sql, plan } of lookups) {
    t.true(
      plan.some((line) => /^SEARCH t USING PRIMARY KEY \(k0=\? AND k1=\? AND k2=\?\)$/.test(line)),
      `${sql}\n${plan.join('\n')}`,
    );
  }
});

// Serial: the statements are observed process-wide, and the other tests' checks are of their own.
/** Opens the queue collection a worker of `count` shards reads, as a start would (`layout`: after a change). */
async function queuesOf(store: ReadStore, count: number) {
  if (count === 1) return store.collection<DeliveryQueueDoc>(DELIVERY_FOLLOWER.collection, QUEUE_INDEXES);
  // Queues of shard 1 of `count` stored by one worker, then the layout changed to `count` shards.
  const one = await store.collection<DeliveryQueueDoc>(DELIVERY_FOLLOWER.collection, QUEUE_INDEXES);
  const at = '2026-03-01T10:00:00.000Z';
  const docs = Array.from({ length: 20 }, (_, i) => {
    const hook = `aaaaaaaa-0000-4000-8000-${String(i).padStart(12, '0')}`;
    const stream = `webhookdelivery-${hook}_cccccccc-0000-4000-8000-000000000001`;
    return queueDocument(stream, 0, 1, [], {});
  });
  await one.bulkWrite(
    docs.map((doc) => ({ replaceOne: { filter: { _id: doc._id }, replacement: doc, upsert: true } })),
  );
  await store.setCheckpoint(DELIVERY_FOLLOWER.name, { position: 1, events: 1, updated_at: at, version: '2' });
  await takeLayout({
    ...DELIVERY_FOLLOWER,
    indexes: QUEUE_INDEXES,
    readStore: store,
    count,
    clock: manualClock(at),
  });
  const names = shardCheckpoint(DELIVERY_FOLLOWER, { index: 0, count });
  const queues = await store.collection<DeliveryQueueDoc>(names.collection, QUEUE_INDEXES);
  if ((await queues.count()) < 2) throw new Error('the layout change copied the queues');
  return queues;
}

for (const count of [1, 2])
  test.serial(
    `the delivery worker's cold queues are found by indexes: the due ones in due order, the oldest waiting, one by id (${count === 1 ? 'one worker' : 'a shard’s collection after a layout change'})`,
    async (t) => {
      const plans = recordPlans(t);
      const store = openSqliteReadStore(':memory:');
      t.teardown(() => store.close());
      const queues = await queuesOf(store, count);
      const cold = new ColdQueues();
      cold.attach(queues, await ColdQueues.storedPending(queues));
      plans.length = 0;
      await cold.due(new Date(), 10, () => false);
      await cold.refreshOldest();
      await cold.get(
        'webhookdelivery-aaaaaaaa-0000-4000-8000-000000000001_cccccccc-0000-4000-8000-000000000001',
      );
      t.true(plans.length >= 3, `${plans.length} statements`);
      const failures = plans.flatMap(({ sql, plan, bounded }) => {
        const bad = problems(plan, bounded, sql);
        return bad.length > 0 ? [`${sql}\n  ${bad.join('\n  ')}`] : [];
      });
      t.deepEqual(failures, [], failures.join('\n\n'));
      // The walks are of the indexes on due_at and queued_since, not the collection in _id order.
      const walks = plans.filter(({ sql }) => /ORDER BY/.test(sql));
      t.is(walks.length, 2);
      for (const { sql, plan } of walks)
        t.true(
          plan.some((line) => /USING INDEX|USING COVERING INDEX|_i[01]/.test(line)),
          `${sql}\n${plan.join('\n')}`,
        );
    },
  );

test.serial(
  'the index build sorts the stored entries once and appends them: no lookup per row',
  async (t) => {
    const plans: Array<{ sql: string; plan: string[] }> = [];
    const store = openSqliteReadStore(':memory:', {
      onQuery: (sql, _params, _bounded, explain) => {
        if (sql.startsWith('INSERT INTO')) plans.push({ sql, plan: explain() });
      },
    });
    t.teardown(() => store.close());
    const bulk = await store.createShadow('items', BULK_INDEXES, { bulk: true });
    await loadBulkWrites(store, bulk);
    await store.finishBulk(bulk);
    t.is(plans.length, BULK_INDEXES.length - 1, 'one statement per deferred index');
    for (const { sql, plan } of plans) {
      t.deepEqual(problems(plan, false, sql), [], sql);
      t.true(
        plan.some((line) => /USE TEMP B-TREE FOR ORDER BY/.test(line)),
        `sorted once: ${sql}\n${plan.join('\n')}`,
      );
      t.deepEqual(
        plan.filter((line) => /^SEARCH|CORRELATED|AUTOMATIC/.test(line)),
        [],
        `no lookup per row: ${plan.join('\n')}`,
      );
      t.deepEqual(
        plan.filter((line) => /^SCAN/.test(line)).map((line) => line.split(' ')[1]),
        ['d', 'e'],
        'one pass over the documents, their entries unnested',
      );
    }
  },
);
