/**
 * Who did what (docs/operations.md, "Accounts and roles"): the events a person's request causes name
 * them as actor, and the admin API shows their name beside the id (a cart's history, a delivery's
 * redeliveries); every answered read of a cart's history is recorded first (no record, no history),
 * and `GET /carts/{uuid}/views` says who read it; a projection rebuild and a webhook test request are
 * on record with the person who asked.
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { buildWorld } from '../hostile/world.ts';
import { type Json, ok, problem } from '../support/admin-answers.ts';
import { seedCatalog } from '../support/cart-world.ts';
import { faultyStore } from '../support/faulty-store.ts';
import { startService, type TestService } from '../support/service.ts';

const A = '/admin/v1';

async function account(t: ExecutionContext, s: TestService, name: string, role: string) {
  const out = await ok(
    t,
    await s.call('POST', `${A}/operators`, {
      name,
      email: `${name.split(' ')[0].toLowerCase()}@example.com`,
      role,
    }),
    201,
  );
  return { id: out.operator.operator_id as string, token: out.operator_token as string, name };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A cart with a customer, written by `writer` through the platform API. */
async function cartBy(t: ExecutionContext, s: TestService, writer: { token: string }): Promise<string> {
  const uuid = randomUUID();
  const store = await s.call(
    'PUT',
    '/platform/v1/stores/5',
    { name: 'S', address: '1 Main St', city: 'Denver', state: 'CO', zip: '80202', lat: 39.7, long: -104.9 },
    bearer(writer.token),
  );
  t.true(store.ok, await store.text());
  await ok(
    t,
    await s.call(
      'POST',
      '/platform/v1/carts',
      { uuid, store_id: 5, source: { channel: 'headless', partner_id: null } },
      bearer(writer.token),
    ),
    201,
  );
  await ok(
    t,
    await s.call(
      'PUT',
      `/platform/v1/carts/${uuid}/customer`,
      { email: 'shopper@example.com', first_name: 'Jo', last_name: 'Shopper' },
      bearer(writer.token),
    ),
  );
  return uuid;
}

test("a cart's history names each event's person; every read of it is recorded, and listed by GET /views", async (t) => {
  const s = await startService(t);
  const writer = await account(t, s, 'Olive Operator', 'operator');
  const auditor = await account(t, s, 'Avery Auditor', 'auditor');
  const admin = await account(t, s, 'Ada Admin', 'admin');
  const uuid = await cartBy(t, s, writer);

  const history = await ok(
    t,
    await s.call('GET', `${A}/carts/${uuid}/history`, undefined, bearer(auditor.token)),
  );
  t.deepEqual(
    history.events.map((e: Json) => e.actor),
    [1, 2].map(() => ({ type: 'platform', id: writer.id, name: 'Olive Operator' })),
  );
  await ok(t, await s.call('GET', `${A}/carts/${uuid}/history`, undefined, bearer(admin.token)));

  // The records: one small event per read, the reader as actor, nothing of what was read.
  const inspect = await s.openStore();
  const views = await inspect.readStream(`cartviews-${uuid}`);
  t.deepEqual(
    views.map((e) => [e.type, e.metadata.actor]),
    [
      ['CartHistoryViewed', { type: 'operator', id: auditor.id }],
      ['CartHistoryViewed', { type: 'operator', id: admin.id }],
    ],
  );
  t.deepEqual(Object.keys(views[0].data as Json).sort(), ['cart_uuid', 'viewed_at']);
  t.false(JSON.stringify(views).includes('shopper@example.com'), 'no personal data is copied');

  // Who read it, newest first, paged; reading that list records nothing.
  const head = await inspect.headPosition();
  const first = await s.partnerCall<Json>(A, 'GET', `/carts/${uuid}/views?limit=1`, auditor.token);
  t.is(first.status, 200);
  t.deepEqual(
    first.body.views.map((v: Json) => v.by),
    [{ type: 'operator', id: admin.id, name: 'Ada Admin' }],
  );
  t.regex(first.headers.get('link') ?? '', /rel="next"/);
  const second = await s.partnerCall<Json>(
    A,
    'GET',
    `/carts/${uuid}/views?limit=1&cursor=${first.body.next_cursor}`,
    auditor.token,
  );
  t.deepEqual(
    second.body.views.map((v: Json) => v.by.name),
    ['Avery Auditor'],
  );
  t.is(second.body.next_cursor, null);
  t.is(second.body.views[0].viewed_at, (views[0].data as Json).viewed_at);
  t.is(second.body.views[0].position, views[0].position);
  t.is(await inspect.headPosition(), head, 'listing the views appends nothing');

  // An unknown cart, a foreign cursor; a cart nobody read has an empty list.
  await problem(t, await s.call('GET', `${A}/carts/${randomUUID()}/views`), 404, 'cart_not_found');
  await problem(t, await s.call('GET', `${A}/carts/${uuid}/views?cursor=JGd0`), 400, 'invalid_cursor');
  await problem(t, await s.call('GET', `${A}/carts/${randomUUID()}/history`), 404, 'cart_not_found');
  t.is(await inspect.headPosition(), head, 'a refused read records nothing');
  t.is((await s.call('HEAD', `${A}/carts/${uuid}/history`, undefined, bearer(auditor.token))).status, 200);
  t.is(await inspect.headPosition(), head, 'a HEAD sends no history, and records no read');
  const unread = await cartBy(t, s, writer);
  t.deepEqual((await ok(t, await s.call('GET', `${A}/carts/${unread}/views`))).views, []);
});

test('a read of a cart history that cannot be recorded is refused: no unrecorded look at personal data', async (t) => {
  let faulty: ReturnType<typeof faultyStore> | undefined;
  const s = await startService(t, {
    wrapStore: (store) => {
      faulty = faultyStore(store);
      return faulty;
    },
  });
  const writer = await account(t, s, 'Olive Operator', 'operator');
  const uuid = await cartBy(t, s, writer);
  if (!faulty) throw new Error('no store');
  faulty.failAppends(4);
  const refused = await problem(
    t,
    await s.call('GET', `${A}/carts/${uuid}/history`),
    503,
    'event_store_unavailable',
  );
  t.false(JSON.stringify(refused).includes('shopper@example.com'));
  faulty.failAppends(0);
  t.is((await s.call('GET', `${A}/carts/${uuid}/history`)).status, 200);
});

test('redeliveries name who asked; rebuilds and test requests are on record with the person', async (t) => {
  t.timeout(120_000);
  const s = await startService(t);
  const world = await buildWorld(t, s);
  const person = await account(t, s, 'Rita Redeliver', 'operator');

  const answer = await ok(
    t,
    await s.call(
      'POST',
      `${A}/webhooks/deliveries/${world.redeliverableId}/redeliver`,
      {},
      bearer(person.token),
    ),
    202,
  );
  t.deepEqual(answer.delivery.redeliveries.at(-1).requested_by, {
    type: 'operator',
    id: person.id,
    name: 'Rita Redeliver',
  });
  const shown = await ok(t, await s.call('GET', `${A}/webhooks/deliveries/${world.redeliverableId}`));
  t.is(shown.delivery.redeliveries.at(-1).requested_by.name, 'Rita Redeliver');
  const cart = await ok(t, await s.call('GET', `${A}/carts/${shown.delivery.cart_uuid}/webhooks`));
  const listed = cart.deliveries.find((d: Json) => d.delivery_id === world.redeliverableId);
  t.is(listed.redeliveries.at(-1).requested_by.id, person.id);

  // A rebuild request: an event naming the person, before the rebuild starts, and a log line.
  const rebuild = await ok(
    t,
    await s.call('POST', `${A}/projections/catalog/rebuild`, undefined, bearer(person.token)),
    202,
  );
  t.is(rebuild.projection, 'catalog');
  const recorded = await (await s.openStore()).readStream('projectionrebuilds-catalog');
  t.deepEqual(
    recorded.map((e) => [e.type, e.metadata.actor, (e.data as Json).projection]),
    [['ProjectionRebuildRequested', { type: 'operator', id: person.id }, 'catalog']],
  );
  const logged = s
    .logs()
    .split('\n')
    .filter((l) => l.includes('projection rebuild requested'));
  t.is(logged.length, 1);
  t.like(JSON.parse(logged[0]), { projection: 'catalog', operator_id: person.id });

  // A test request: sent, recorded nowhere but the log, which names who sent it.
  await ok(t, await s.call('POST', `${A}/webhooks/${world.webhookId}/test`, {}, bearer(person.token)));
  const sent = s
    .logs()
    .split('\n')
    .filter((l) => l.includes('webhook test request sent'))
    .map((l) => JSON.parse(l) as Json);
  t.like(sent.at(-1), { webhook_id: world.webhookId, operator_id: person.id });
});

test("one person's Idempotency-Key is theirs: the same key from another person runs their request, in their name", async (t) => {
  const s = await startService(t);
  const alice = await account(t, s, 'Alice Operator', 'operator');
  const bob = await account(t, s, 'Bob Operator', 'operator');
  const body = { name: 'Same Key', kind: 'brand_feed', all_brands: true };
  const key = { 'idempotency-key': 'k2' };
  const first = await s.call('POST', `${A}/partners`, body, { ...bearer(alice.token), ...key });
  const again = await s.call('POST', `${A}/partners`, body, { ...bearer(alice.token), ...key });
  t.is(again.headers.get('idempotent-replayed'), 'true', "Alice's retry replays her answer");
  const second = await s.call('POST', `${A}/partners`, body, { ...bearer(bob.token), ...key });
  t.is(second.status, 201);
  t.is(second.headers.get('idempotent-replayed'), null, "Bob's request runs");
  const [a, b] = [(await ok(t, first, 201)).partner, (await ok(t, second, 201)).partner];
  t.not(a.partner_id, b.partner_id);
  const store = await s.openStore();
  const actors = await Promise.all(
    [a.partner_id, b.partner_id].map(
      async (id) => (await store.readStream(`partner-${id}`))[0].metadata.actor,
    ),
  );
  t.deepEqual(actors, [
    { type: 'operator', id: alice.id },
    { type: 'operator', id: bob.id },
  ]);
});

test("a webhook subscription's every change names the person who made it", async (t) => {
  const s = await startService(t, { env: { PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'true' } });
  const olive = await account(t, s, 'Olive Operator', 'operator');
  const otto = await account(t, s, 'Otto Operator', 'operator');
  await seedCatalog(s);
  const created = await ok(
    t,
    await s.call(
      'POST',
      `${A}/webhooks`,
      { url: 'http://127.0.0.1:9/hooks', auth_token: 'receiver-token-0001', store_ids: [1] },
      bearer(olive.token),
    ),
    201,
  );
  const id = created.webhook.webhook_id as string;
  await ok(t, await s.call('PATCH', `${A}/webhooks/${id}`, { enabled: false }, bearer(otto.token)));
  await ok(t, await s.call('POST', `${A}/webhooks/${id}/rotate-secret`, {}, bearer(olive.token)));
  await ok(t, await s.call('DELETE', `${A}/webhooks/${id}`, undefined, bearer(otto.token)));
  const events = await (await s.openStore()).readStream(`webhooksub-${id}`);
  t.deepEqual(
    events.map((e) => e.metadata.actor.id),
    [olive.id, otto.id, olive.id, otto.id],
  );
});
