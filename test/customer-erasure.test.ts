/**
 * Customer erasure end to end on the embedded files (docs/operations.md, "Customer data"): a customer
 * identified on a cart whose status webhooks go out, erased through the admin API. Afterwards the
 * read model, the history and the next webhook hold none of their data, and once the service has
 * stopped (its files checkpointed) no byte of their email, phone number or names is in any file under
 * the data directory.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { manualClock } from '../domain/clock.ts';
import { KEY_STORE_FILE, openSqliteKeyStore } from '../eventstore/key-store-sqlite.ts';
import { createCart, createWebhook, identify, move, seedCatalog, ticking } from './support/cart-world.ts';
import {
  caughtUp,
  checkpoint,
  customer,
  filesHolding,
  historyOf,
  identifiedCart,
  personal,
  storedCustomer,
} from './support/customer-world.ts';
import { until } from './support/probes.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

test('an erased customer is gone from the read model, the history, the next webhook and every file of the data dir', async (t) => {
  const s = await startService(t);
  const receiver = await startReceiver(t);
  await seedCatalog(s);
  await createWebhook(s, receiver.url, [1], ['cart_status_updated']);
  const cart = await identifiedCart(t, s);
  // With a key, the answer (the cart, with its customer) is recorded for a retry to replay.
  const checkout = { reservation_mode: 'pickup', reservation_start_window: '2026-03-01 10:00' };
  const once = { 'Idempotency-Key': 'checkout-1', 'content-type': 'application/json' };
  const checkOut = () => s.call('POST', `/platform/v1/carts/${cart.uuid}/checkout`, checkout, once);
  t.like(await (await checkOut()).json(), { cart: { customer_email_address: customer.email } });
  const [before] = await receiver.waitFor(1);
  t.is(before.body.cart.customer_email_address, customer.email);
  await caughtUp(s);
  // The customer is in the files' pages now, not only in their WALs: the scan finds them there.
  checkpoint(s.dataDir);
  t.deepEqual(filesHolding(s.dataDir, personal), [`read.db: ${personal.join(', ')}`]);

  const erased = await s.call('POST', '/admin/v1/customers/erase', {
    customer: customer.email.toUpperCase(),
  });
  t.is(erased.status, 200);
  t.like(await erased.json(), { keys_destroyed: 1, carts: [cart.uuid] });

  const replayed = await checkOut();
  t.is(replayed.headers.get('idempotent-replayed'), 'true');
  t.like(await replayed.json(), {
    cart: { uuid: cart.uuid, customer_email_address: '', customer_phone_number: '', customer_name: null },
  });

  await move(s, cart, 'preparing');
  const [, after] = await receiver.waitFor(2);
  t.like(after.body.cart, { customer_email_address: '', customer_phone_number: '', customer_name: null });
  t.false(personal.some((v) => after.raw.includes(Buffer.from(v))));

  const history = await historyOf(s, cart.uuid);
  t.like(history.events.find((e) => e.type === 'CartCustomerIdentified')?.data, {
    email: null,
    first_name: null,
    phone_number: null,
    erased: true,
  });
  t.truthy(history.events.find((e) => e.type === 'CartCustomerErased'));
  t.false(personal.some((v) => JSON.stringify(history).includes(v)));

  // Erased already: nothing is held, nothing changes.
  const again = await s.call('POST', '/admin/v1/customers/erase', { customer: customer.email });
  t.deepEqual(await again.json(), { erasure_id: null, keys_destroyed: 0, carts: [], finished: true });

  await caughtUp(s);
  await s.service.stop();
  t.is(await storedCustomer(s.dataDir, cart.uuid), null);
  t.deepEqual(filesHolding(s.dataDir, personal), []);
});

test('a webhook whose receiver failed before the erasure (echoing the customer) is retried after it under the same webhook id, without the customer, and no echo is kept', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,5s,5m' } });
  const receiver = await startReceiver(t);
  // A receiver that answers an error page showing what it was sent.
  receiver.script({ status: 500, body: 'rejected: ', echo: true });
  await seedCatalog(s);
  await createWebhook(s, receiver.url, [1], ['cart_status_updated']);
  const cart = await identifiedCart(t, s);
  await s.call('POST', `/platform/v1/carts/${cart.uuid}/checkout`, {
    reservation_mode: 'pickup',
    reservation_start_window: '2026-03-01 10:00',
  });
  const [failed] = await receiver.waitFor(1);
  t.is(failed.body.cart.customer_email_address, customer.email);
  const attempts = async () => {
    const store = await s.openStore();
    const events = await store.readAll({ filter: { streamPrefixes: ['webhookdelivery-'] } });
    return events.filter((e) => e.type === 'WebhookDeliveryAttempted');
  };
  await until('the failed attempt is recorded', async () => (await attempts()).length === 1);
  const [first] = await attempts();
  t.like(first.data, { outcome: 'failed', status: 500 });
  t.regex(String((first.data as { response_excerpt: string }).response_excerpt), /^rejected: /);
  t.false(
    personal.some((v) => JSON.stringify(first.data).includes(v)),
    'the echo is struck',
  );

  t.is((await s.call('POST', '/admin/v1/customers/erase', { customer: customer.email })).status, 200);
  clock.advance(6_000);
  const [, retried] = await ticking(s, () => receiver.waitFor(2));
  t.is(retried.headers['x-service-webhook-id'], failed.headers['x-service-webhook-id']);
  t.is(retried.headers['x-service-delivery-attempt'], '2');
  t.like(retried.body.cart, { customer_email_address: '', customer_phone_number: '', customer_name: null });
  t.false(personal.some((v) => retried.raw.includes(Buffer.from(v))));

  await caughtUp(s);
  await s.service.stop();
  t.deepEqual(filesHolding(s.dataDir, personal), []);
});

test('a body naming no customer (or an empty or bad list) is a 422; one naming nobody the service holds erases nothing', async (t) => {
  const s = await startService(t);
  for (const customer of ['', 'ana\u0000@example.com', 'x'.repeat(255), [], ['4242', ''], 42]) {
    const refused = await s.call('POST', '/admin/v1/customers/erase', { customer });
    t.is(refused.status, 422, JSON.stringify(customer));
  }
  // A typo would otherwise erase nothing and answer as if done: each is refused, by its place.
  for (const [customer, names] of [
    ['ana@example', /not an email address/],
    ['42a', /neither a user id \(a positive integer\), an email address nor a cart uuid/],
    [['4242', '0'], /neither a user id/],
    [['4242', `${randomUUID().slice(0, -1)}`], /neither a user id/],
    ['-7', /neither a user id/],
  ] as const) {
    for (const route of ['erase', 'export']) {
      const refused = await s.call('POST', `/admin/v1/customers/${route}`, { customer });
      t.is(refused.status, 422, JSON.stringify(customer));
      t.regex(await refused.text(), names);
    }
  }
  const unknown = await s.call('POST', '/admin/v1/customers/erase', { customer: '4242' });
  t.is(unknown.status, 200);
  t.deepEqual(await unknown.json(), { erasure_id: null, keys_destroyed: 0, carts: [], finished: true });
});

test('an erasure interrupted after its keys were destroyed is finished at the next start, and logged', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-erasure-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const first = await startService(t, { dataDir });
  await seedCatalog(first);
  const cart = await createCart(first);
  await identify(first, cart);
  await caughtUp(first);
  await first.service.stop();
  // What a process stopped in the middle of an erasure leaves: the erasure begun, its key destroyed.
  const keys = openSqliteKeyStore(path.join(dataDir, KEY_STORE_FILE));
  const [key] = await keys.keysLinkedTo([`cart:${cart.uuid}`]);
  const erasure = {
    erasure_id: randomUUID(),
    key_ids: [key.key_id],
    cart_uuids: [cart.uuid],
    requested_at: '2026-03-01T00:00:00.000Z',
  };
  await keys.beginErasure(erasure);
  await keys.destroyKeys(erasure.key_ids, {
    erasure_id: erasure.erasure_id,
    erased_at: erasure.requested_at,
  });
  await keys.close();

  const again = await startService(t, { dataDir });
  t.regex(again.logs(), /finished customer erasures an earlier run began/);
  const history = await historyOf(again, cart.uuid);
  t.like(history.events.find((e) => e.type === 'CartCustomerErased')?.data, {
    erasure_id: erasure.erasure_id,
  });
  await again.service.stop();
  const reopened = openSqliteKeyStore(path.join(dataDir, KEY_STORE_FILE));
  t.deepEqual(await reopened.pendingErasures(), []);
  await reopened.close();
});
