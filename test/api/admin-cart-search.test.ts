import { randomUUID } from 'node:crypto';
import test from 'ava';
import { manualClock } from '../../domain/clock.ts';
import { CART_VIEWS_PREFIX } from '../../domain/operator-activity.ts';
import type { EventStore } from '../../eventstore/port.ts';
import {
  addItem,
  checkedOut,
  createCart,
  identify,
  must,
  seedCatalog,
  storeOperator,
} from '../support/cart-world.ts';
import { until } from '../support/probes.ts';
import { startService, type TestService } from '../support/service.ts';

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
type Json = any;

const search = async (s: TestService, query: string, token?: string) => {
  const res = await fetch(`${s.base}/admin/v1/carts${query}`, {
    headers: { authorization: `Bearer ${token ?? s.token}` },
  });
  return { status: res.status, link: res.headers.get('link'), body: (await res.json()) as Json };
};

/** The uuids a search lists, once the read model holds `expected` of them. */
const uuidsOf = async (s: TestService, query: string, expected: number) =>
  until(`the search ${query} lists ${expected} carts`, async () => {
    const { status, body } = await search(s, query);
    return status === 200 && body.carts.length === expected
      ? (body.carts as Json[]).map((c) => c.cart_uuid)
      : undefined;
  });

async function auditorToken(s: TestService): Promise<string> {
  const created = await must(s, 'POST', '/admin/v1/operators', {
    name: 'Aud',
    email: 'aud@example.com',
    role: 'auditor',
  });
  return created.operator_token as string;
}

test('carts are found by store, status, creation time and source partner, newest first, page by page', async (t) => {
  const clock = manualClock('2026-03-01T10:00:00.000Z');
  const s = await startService(t, { clock });
  await seedCatalog(s, [1, 2]);
  const { partnerId } = await storeOperator(s, 'Shop', 2);
  const a = await checkedOut(s, 1);
  clock.set('2026-03-02T10:00:00.000Z');
  const b = await createCart(s, 2);
  await addItem(s, b, 3);
  clock.set('2026-03-03T10:00:00.000Z');
  const c = randomUUID();
  await must(s, 'POST', '/platform/v1/carts', {
    uuid: c,
    store_id: 2,
    source: { channel: 'embedded', partner_id: partnerId },
  });

  t.deepEqual(await uuidsOf(s, '', 3), [c, b.uuid, a.uuid]);
  t.deepEqual(await uuidsOf(s, '?store_id=2', 2), [c, b.uuid]);
  t.deepEqual(await uuidsOf(s, '?store_id=2&status=pending', 2), [c, b.uuid]);
  t.deepEqual(await uuidsOf(s, '?status=verification', 1), [a.uuid]);
  t.deepEqual(await uuidsOf(s, `?partner_id=${partnerId}`, 1), [c]);
  t.deepEqual(
    await uuidsOf(s, '?created_after=2026-03-01T12:00:00Z&created_before=2026-03-03T00:00:00Z', 1),
    [b.uuid],
  );
  t.deepEqual(await uuidsOf(s, '?store_id=2&created_after=2026-03-02T12:00:00%2B02:00', 1), [c]);

  const first = await search(s, '?limit=2');
  t.like(first.body.carts[1], {
    cart_uuid: b.uuid,
    store_id: 2,
    store_name: 'Store 2',
    status: 'pending',
    partner_id: null,
    created_at: '2026-03-02T10:00:00.000Z',
    items: 3,
  });
  t.truthy(first.body.next_cursor);
  t.regex(first.link ?? '', /rel="next"/);
  const second = await search(s, `?limit=2&cursor=${first.body.next_cursor}`);
  t.deepEqual(
    second.body.carts.map((x: Json) => x.cart_uuid),
    [a.uuid],
  );
  t.is(second.body.next_cursor, null);
  t.false(JSON.stringify(first.body).includes('customer'), 'a listed cart shows no customer');
});

test('a search by email or phone finds the customer’s carts now, is on record as views, and never finds an erased customer', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const ana = await createCart(s);
  await identify(s, ana); // ana@example.com, +14155550100
  const renamed = await createCart(s);
  await identify(s, renamed);
  await must(s, 'PUT', `/platform/v1/carts/${renamed.uuid}/customer`, {
    email: 'bo@example.com',
    first_name: 'Bo',
    phone_number: '+1 415 555 0199',
  });
  await createCart(s); // no customer

  t.deepEqual(await uuidsOf(s, '?customer_email=ANA@example.com', 1), [ana.uuid], 'case does not matter');
  t.deepEqual(await uuidsOf(s, `?customer_phone=${encodeURIComponent('(415) 555-0100')}`, 0), []);
  t.deepEqual(await uuidsOf(s, `?customer_phone=${encodeURIComponent('+1 (415) 555-0100')}`, 1), [ana.uuid]);
  t.deepEqual(await uuidsOf(s, '?customer_email=bo@example.com&customer_phone=14155550199', 1), [
    renamed.uuid,
  ]);
  t.deepEqual(await uuidsOf(s, '?customer_email=bo@example.com&customer_phone=14155550100', 0), []);
  t.deepEqual(await uuidsOf(s, '?customer_email=ana@example.com&store_id=2', 0), []);

  const views = await must(s, 'GET', `/admin/v1/carts/${ana.uuid}/views`);
  t.is(views.views.length, 2, 'each search that listed the cart is on record as a view');
  const renamedViews = await must(s, 'GET', `/admin/v1/carts/${renamed.uuid}/views`);
  t.is(renamedViews.views.length, 1, 'only the search that listed it: not those by its old email');

  await must(s, 'POST', '/admin/v1/customers/erase', { customer: 'ana@example.com' });
  t.deepEqual(await uuidsOf(s, '?customer_email=ana@example.com', 0), []);
  t.deepEqual(await uuidsOf(s, '?customer_phone=14155550100', 0), []);
  t.true((await uuidsOf(s, '', 3)).includes(ana.uuid), 'the cart itself is still listed');
});

test('the views a search by the customer records are appended together, not one after another', async (t) => {
  // A behaviour double around the embedded store: it counts the appends to views streams in flight.
  let inFlight = 0;
  let most = 0;
  const s = await startService(t, {
    wrapStore: (store) => {
      const counting: EventStore = Object.create(store);
      counting.append = async (streamId, events, options) => {
        if (!streamId.startsWith(CART_VIEWS_PREFIX)) return store.append(streamId, events, options);
        inFlight += 1;
        most = Math.max(most, inFlight);
        try {
          return await store.append(streamId, events, options);
        } finally {
          inFlight -= 1;
        }
      };
      return counting;
    },
  });
  await seedCatalog(s);
  for (let i = 0; i < 4; i++) await identify(s, await createCart(s));
  const found = await uuidsOf(s, '?customer_email=ana@example.com', 4);
  for (const uuid of found) {
    const views = await must(s, 'GET', `/admin/v1/carts/${uuid}/views`);
    t.true(views.views.length >= 1, `the view of ${uuid} is on record`);
  }
  t.is(most, 4, 'the four views were requested together');
  const answer = await search(s, '?customer_email=ana@example.com');
  t.is(answer.body.linked_carts_capped, false, 'a search by the customer says whether it read them all');
  t.is((await search(s, '?store_id=1')).body.linked_carts_capped, undefined);
});

test('an auditor searches by store, status, time and partner, and is refused a search by email or phone', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const cart = await createCart(s);
  await identify(s, cart);
  const auditor = await auditorToken(s);
  await uuidsOf(s, '', 1);
  const allowed = await search(s, '?store_id=1&status=pending', auditor);
  t.is(allowed.status, 200);
  t.is(allowed.body.carts[0].cart_uuid, cart.uuid);
  for (const q of ['?customer_email=ana@example.com', '?store_id=1&customer_phone=14155550100']) {
    const refused = await search(s, q, auditor);
    t.is(refused.status, 403, q);
    t.like(refused.body, { code: 'insufficient_role', required_role: 'operator', role: 'auditor' });
  }
  const views = await must(s, 'GET', `/admin/v1/carts/${cart.uuid}/views`);
  t.is(views.views.length, 0, 'a refused search is no view');
});

test('bad parameters are a 400 naming the parameter', async (t) => {
  const s = await startService(t);
  const cases: Array<[string, string]> = [
    ['?store_id=abc', 'store_id'],
    ['?store_id=0', 'store_id'],
    ['?status=lost', 'status'],
    ['?created_after=yesterday', 'created_after'],
    ['?created_before=2026-13-01T00:00:00Z', 'created_before'],
    ['?partner_id=acme', 'partner_id'],
    ['?customer_email=ana', 'customer_email'],
    ['?customer_phone=call-me', 'customer_phone'],
    ['?limit=0', 'limit'],
    ['?limit=501', 'limit'],
    ['?shop=1', 'shop'],
  ];
  for (const [q, field] of cases) {
    const { status, body } = await search(s, q);
    t.is(status, 400, q);
    t.true(
      (body.errors as Json[]).some((e) => e.field === field),
      `${q} names ${field}: ${JSON.stringify(body)}`,
    );
  }
  const cursor = await search(s, '?cursor=bm90LWEtY3Vyc29y');
  t.is(cursor.status, 400);
  t.is(cursor.body.code, 'invalid_cursor');
});
