/**
 * A special's write waits for this process's pricing to apply it (docs/write-side.md, "Lookups"). With
 * the specials' follower down (the event store refusing subscriptions, as for a while after an
 * EventStoreDB restart: support/faulty-store.ts), the write stands and the answer is a 503 problem that
 * says so, with Retry-After, never an opaque 500; once the follower is back, the retry answers 200 and
 * writes nothing again. The platform API alone, on the embedded store, with a short wait.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createHttpApp, createMetricsRegistry, createReadiness, routesOf } from '../../api/http.ts';
import { createPlatformRouter } from '../../api/platform.ts';
import { createCommandHandler } from '../../application/command-handler.ts';
import { Lookups } from '../../application/lookups.ts';
import { bootstrapAuthenticator } from '../../application/operator-principal.ts';
import { createStoreSpecials } from '../../application/store-specials.ts';
import { createLogger } from '../../cli/logger.ts';
import { systemClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { seedCatalog } from '../support/cart-world.ts';
import { type FaultyStore, faultyStore } from '../support/faulty-store.ts';
import { until } from '../support/probes.ts';

const TOKEN = 'operator-token-for-tests';

/** The platform API on a faulty embedded store, its specials' follower refused from the start. */
async function platformApi(t: ExecutionContext): Promise<{
  call(method: string, url: string, body?: unknown): Promise<Response>;
  store: FaultyStore;
}> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-pricing-'));
  const inner = await openSqliteEventStore(path.join(dir, 'events.db'));
  const store = faultyStore(inner);
  store.refuseSubscriptions(true);
  const specials = createStoreSpecials(store, eventRegistry);
  const lookups = new Lookups({
    store,
    registry: eventRegistry,
    prefixes: ['menuproduct-', 'product-', 'brand-', 'store-'],
  });
  const app = createHttpApp({
    logger: createLogger('silent'),
    registry: createMetricsRegistry(),
    readiness: createReadiness(),
    role: 'api',
  });
  const commands = createCommandHandler(store, eventRegistry);
  app.use(
    routesOf(
      createPlatformRouter({
        store,
        commands,
        specials,
        lookups,
        clock: systemClock,
        operators: bootstrapAuthenticator(TOKEN),
        specialsWaitMs: 100,
      }),
    ),
  );
  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await specials.stop();
    await inner.close();
    await rm(dir, { recursive: true, force: true });
  });
  return {
    store,
    call: (method, url, body) =>
      fetch(`${base}${url}`, {
        method,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
  };
}

const special = {
  store_id: 1,
  title: '20% off Blue Dream',
  special_type: 'product',
  discount_type: 'percent',
  discount_value: '20.00',
  product_ids: [1],
  starts_at: '2020-01-01T00:00:00Z',
};

test('a special written while pricing cannot catch up answers 503 pricing_catching_up, saying it was written; the retry once it has answers 200 and writes nothing again', async (t) => {
  const api = await platformApi(t);
  await seedCatalog(api);

  const lagging = await api.call('PUT', '/platform/v1/specials/7', special);
  t.is(lagging.status, 503);
  t.is(lagging.headers.get('content-type')?.split(';')[0], 'application/problem+json');
  t.is(lagging.headers.get('retry-after'), '5');
  const problem = (await lagging.json()) as Record<string, unknown>;
  t.like(problem, { status: 503, code: 'pricing_catching_up', revision: 0 });
  t.regex(
    String(problem.detail),
    /^special 7 was written \(revision 0, position \d+\), but pricing on this replica/,
  );
  const written = await api.store.readStream('special-7');
  t.deepEqual(
    written.map((e) => e.type),
    ['SpecialUpserted'],
    'the write stands',
  );
  t.is(problem.position, written[0].position);

  api.store.refuseSubscriptions(false);
  const applied = await until('pricing applies the special', async () => {
    const res = await api.call('PUT', '/platform/v1/specials/7', special);
    return res.status === 200 && res;
  });
  t.like(await applied.json(), { revision: 0, special: { id: 7 } });
  t.is((await api.store.readStream('special-7')).length, 1, 'the retry wrote nothing');
});
