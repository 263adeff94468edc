import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { checkedOut, createWebhook, seedCatalog } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
type Json = any;

const shared = {
  email: 'family@example.com',
  last_name: 'Lee',
  phone_number: '+14155550100',
  DOB: '1990-04-01T00:00:00.000Z',
};

/** A cart of the user at store 1; its uuid. */
async function userCart(t: ExecutionContext, s: TestService, user_id: number): Promise<string> {
  const uuid = randomUUID();
  const created = await s.call('POST', '/platform/v1/carts', {
    uuid,
    store_id: 1,
    source: { channel: 'headless', partner_id: null },
    user_id,
  });
  t.is(created.status, 201);
  return uuid;
}

test('an export holds the customer’s carts and the webhooks they produced; it is on record, refuses an Idempotency-Key (never kept), and is erased after an erasure', async (t) => {
  const s = await startService(t);
  const receiver = await startReceiver(t);
  await seedCatalog(s);
  await createWebhook(s, receiver.url, [1], ['cart_status_updated']);
  const cart = await checkedOut(s);
  await receiver.waitFor(1);
  const exportOf = async (customer: string, headers: Record<string, string> = {}) => {
    const res = await s.call(
      'POST',
      '/admin/v1/customers/export',
      { customer },
      {
        'content-type': 'application/json',
        ...headers,
      },
    );
    t.is(res.status, 200);
    return (await res.json()) as Json;
  };
  const deliveredExport = await until('the delivery is in its read model', async () => {
    const answer = await exportOf('ana@example.com');
    return answer.export.carts[0]?.webhooks.length === 1 ? answer : undefined;
  });
  const [held] = deliveredExport.export.carts;
  t.is(deliveredExport.export.carts.length, 1);
  t.like(held.cart, { uuid: cart.uuid, customer: { email: 'ana@example.com', first_name: 'Ana' } });
  t.like(held.webhooks[0], {
    event_kind: 'cart_status_updated',
    body: { cart: { uuid: cart.uuid, customer_email_address: 'ana@example.com', customer_name: 'Ana Lee' } },
  });
  const views = (await (await s.call('GET', `/admin/v1/carts/${cart.uuid}/views`)).json()) as Json;
  t.true(views.views.length >= 1, 'each export of the cart is on record as a read of its history');

  // Never kept, so never replayed: a key is refused, naming why, and claims nothing.
  for (let i = 0; i < 2; i++) {
    const keyed = await s.call(
      'POST',
      '/admin/v1/customers/export',
      { customer: 'ana@example.com' },
      { 'content-type': 'application/json', 'Idempotency-Key': 'export-1' },
    );
    t.is(keyed.status, 422);
    t.like(await keyed.json(), {
      code: 'idempotency_key_not_allowed',
      errors: [{ field: 'Idempotency-Key' }],
    });
  }

  t.is((await s.call('POST', '/admin/v1/customers/erase', { customer: cart.uuid })).status, 200);
  const erased = await exportOf(cart.uuid);
  t.like(erased.export.carts[0], {
    cart: { customer: null },
    webhooks: [
      { body: { cart: { customer_email_address: '', customer_phone_number: '', customer_name: null } } },
    ],
  });
  t.deepEqual((await exportOf('ana@example.com')).export.carts, [], 'the email no longer names anyone');
});

test('two customers who shared an email: an export or an erasure by one’s user id leaves the other’s cart out', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const cartOf = async (user_id: number, first_name: string) => {
    const uuid = await userCart(t, s, user_id);
    const customer = { ...shared, first_name };
    t.is((await s.call('PUT', `/platform/v1/carts/${uuid}/customer`, customer)).status, 200);
    return uuid;
  };
  const ada = await cartOf(7, 'Ada');
  const grace = await cartOf(8, 'Grace');
  const exportOf = async (customer: string | string[]) =>
    (
      (await (await s.call('POST', '/admin/v1/customers/export', { customer })).json()) as Json
    ).export.carts.map((c: Json) => c.cart.uuid);
  t.deepEqual(await exportOf('7'), [ada]);
  t.deepEqual(await exportOf(['7', '8']), [ada, grace].sort());
  const erased = await s.call('POST', '/admin/v1/customers/erase', { customer: ['7'] });
  t.like(await erased.json(), { keys_destroyed: 1, carts: [ada] });
  const graceCart = (await (await s.call('GET', `/admin/v1/carts/${grace}/history`)).json()) as Json;
  t.like(graceCart.events.find((e: Json) => e.type === 'CartCustomerIdentified').data, {
    first_name: 'Grace',
    email: shared.email,
  });
  t.deepEqual(await exportOf(shared.email), [grace]);
});

test('an export is shown to operators, not to auditors', async (t) => {
  const s = await startService(t);
  const auditor = (await (
    await s.call('POST', '/admin/v1/operators', { name: 'Aud', email: 'aud@example.com', role: 'auditor' })
  ).json()) as Json;
  const refused = await fetch(`${s.base}/admin/v1/customers/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${auditor.operator_token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ customer: 'ana@example.com' }),
  });
  t.is(refused.status, 403);
  t.is((await s.call('POST', '/admin/v1/customers/export', { customer: 'ana@example.com' })).status, 200);
});

test('an export by user id also lists that user’s carts never identified with a customer', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const [anonymous, identified, other] = [
    await userCart(t, s, 7),
    await userCart(t, s, 7),
    await userCart(t, s, 8),
  ];
  t.is(
    (await s.call('PUT', `/platform/v1/carts/${identified}/customer`, { ...shared, first_name: 'Ada' }))
      .status,
    200,
  );
  const exported = await until('both carts of user 7 are in the carts read model', async () => {
    const answer = (await (
      await s.call('POST', '/admin/v1/customers/export', { customer: '7' })
    ).json()) as Json;
    const uuids = answer.export.carts.map((c: Json) => c.cart.uuid);
    return uuids.length === 2 ? uuids : undefined;
  });
  t.deepEqual(exported, [anonymous, identified].sort());
  t.false(exported.includes(other));
  // By email, only the cart identified with it.
  const byEmail = (await (
    await s.call('POST', '/admin/v1/customers/export', { customer: shared.email })
  ).json()) as Json;
  t.deepEqual(
    byEmail.export.carts.map((c: Json) => c.cart.uuid),
    [identified],
  );
});
