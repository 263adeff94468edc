/**
 * A read store out of reach (a MongoDB outage, docs/operations.md, "MongoDB") seen from the APIs: a
 * real service whose read store fails as the MongoDB adapter fails once no server answers within its
 * bounded selection time (`support/unreachable-read-store.ts`). Partner and admin reads answer at once
 * with a documented 503 `read_store_unavailable` and `Retry-After`, never a 500 or a wait; `/readyz`
 * names `read_store`; both recover by themselves when the server is back.
 */
import test from 'ava';
import { caughtUp, type Json, registerPartner } from './support/brand-partner.ts';
import { seedCatalog } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService } from './support/service.ts';
import { type UnreachableReadStore, unreachableReadStore } from './support/unreachable-read-store.ts';

const STORE_API = '/partner/store/v1';

test('while the read store is out of reach, partner and admin reads answer 503 read_store_unavailable with Retry-After, and recover after', async (t) => {
  let readStore: UnreachableReadStore | undefined;
  const s = await startService(t, {
    wrapReadStore: async (store, url) => {
      if (!url.endsWith('/read.db')) return store;
      readStore = await unreachableReadStore(store);
      return readStore;
    },
  });
  const store = readStore as UnreachableReadStore;
  // Teardowns run last-registered first: the server is back before the service stops.
  t.teardown(() => {
    store.unreachable = false;
  });
  await seedCatalog(s);
  const operator = await registerPartner(t, s, { name: 'Op', kind: 'store_operator', store_ids: [1] });
  await caughtUp(t, s);
  const before = await s.partnerCall<Json>(STORE_API, 'GET', '/menu_products', operator.api_key);
  t.is(before.status, 200);
  t.is(before.body.menu_products.length, 1);

  store.unreachable = true;
  // partnerCall checks the answer against the API's OpenAPI document: a 503 with Retry-After is documented.
  const during = await s.partnerCall<Json>(STORE_API, 'GET', '/menu_products', operator.api_key);
  t.is(during.status, 503);
  t.regex(during.headers.get('content-type') ?? '', /^application\/problem\+json/);
  t.is(during.headers.get('retry-after'), '5');
  t.like(during.body, { status: 503, code: 'read_store_unavailable' });
  const one = await s.partnerCall<Json>(STORE_API, 'GET', '/menu_products/100', operator.api_key);
  t.like(one, { status: 503, body: { code: 'read_store_unavailable' } });
  const admin = await s.call('GET', '/admin/v1/partners');
  t.is(admin.status, 503);
  t.like(await admin.json(), { code: 'read_store_unavailable' });
  t.true(store.refused >= 3);
  const ready = await fetch(`${s.base}/readyz`);
  t.is(ready.status, 503);
  t.like(await ready.json(), {
    status: 'not_ready',
    checks: { read_store: 'failing' },
    failing: ['read_store'],
  });

  store.unreachable = false;
  const after = await s.partnerCall<Json>(STORE_API, 'GET', '/menu_products', operator.api_key);
  t.is(after.status, 200);
  t.deepEqual(after.body, before.body);
  await until('ready again', async () => (await fetch(`${s.base}/readyz`)).status === 200);
});
