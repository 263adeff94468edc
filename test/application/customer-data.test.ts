import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test from 'ava';
import { createCommandHandler } from '../../application/command-handler.ts';
import { SecretBoxError } from '../../application/credentials.ts';
import { createCustomerData, KEY_CACHE_TTL_MS } from '../../application/customer-data.ts';
import { eraseCustomer, finishPendingErasures } from '../../application/customer-erasure.ts';
import { CustomerKeyMissing } from '../../application/customer-keys.ts';
import { protectCustomerData } from '../../application/protected-event-store.ts';
import { readState } from '../../application/read-state.ts';
import * as cart from '../../domain/cart.ts';
import { manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import { openSqliteKeyStore } from '../../eventstore/key-store-sqlite.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { CARTS, type CartDoc, cartsProjection } from '../../projections/read-models/carts.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { project, snapshot } from '../projections/support.ts';

const at = '2026-03-01T10:00:00.000Z';
const metadata = {
  correlationId: 'c-1',
  causationId: null,
  actor: { type: 'operator' as const, id: 'op-1' },
  at,
};
const ada = {
  email: 'ada.lovelace@example.com',
  first_name: 'Ada',
  last_name: 'Lovelace',
  phone_number: '+1 555-0142',
  DOB: '1990-12-10T00:00:00.000Z',
};

async function world(t: { teardown(fn: () => void | Promise<void>): void }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'pds-customer-data-'));
  const log = await openSqliteEventStore(path.join(dir, 'events.db'));
  const keys = openSqliteKeyStore(path.join(dir, 'keys.db'));
  const secretKey = randomBytes(32);
  const data = createCustomerData(keys, secretKey);
  const store = protectCustomerData(log, data);
  const commands = createCommandHandler(store, eventRegistry);
  t.teardown(async () => {
    await keys.close();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });
  async function newCart(user_id: number | null, customer = ada) {
    const uuid = randomUUID();
    const stream = cart.streamId(uuid);
    await commands.handle(
      stream,
      cart.decider,
      {
        type: 'CreateCart',
        cart_uuid: uuid,
        store_id: 1,
        source: { channel: 'headless', partner_id: null },
        user_id,
        at,
        context: { store_exists: true },
      },
      metadata,
    );
    await commands.handle(stream, cart.decider, { type: 'IdentifyCartCustomer', at, ...customer }, metadata);
    return uuid;
  }
  const customerOf = async (uuid: string) => {
    const { state } = await readState(store, eventRegistry, cart.streamId(uuid), cart.decider);
    return state.exists ? state.customer : undefined;
  };
  return { log, keys, secretKey, data, store, commands, newCart, customerOf };
}

test('the log holds a customer sealed, and its readers get them back as they were identified', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const [, identified] = await w.log.readStream(cart.streamId(uuid));
  const raw = JSON.stringify(identified.data);
  for (const value of Object.values(ada)) t.false(raw.includes(value), `${value} is not in the log`);
  t.truthy((identified.data as { personal?: unknown }).personal);
  t.deepEqual(await w.customerOf(uuid), ada);
  const [, opened] = await w.store.readStream(cart.streamId(uuid));
  t.like(opened.data, { ...ada, user_id: 7 });
});

test('erasing by email leaves a tombstone for the key: the events open erased, the carts record it, the state forgets', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const [keyId] = (await w.data.resolve(uuid)).key_ids;
  const outcome = await eraseCustomer(w.data, w.commands, 'Ada.Lovelace@example.com', metadata);
  t.is(outcome.keys_destroyed, 1);
  t.deepEqual(await w.keys.key(keyId), {
    tombstone: { key_id: keyId, cart_uuid: uuid, erasure_id: outcome.erasure_id, erased_at: at },
  });
  t.deepEqual(outcome.carts, [uuid]);
  t.is(await w.customerOf(uuid), null);
  const events = await w.store.readStream(cart.streamId(uuid));
  t.like(events[1].data, { email: null, first_name: null, phone_number: null, erased: true });
  t.deepEqual(
    events.map((e) => e.type),
    ['CartCreated', 'CartCustomerIdentified', 'CartCustomerErased'],
  );
  t.false(JSON.stringify(events[2].data).includes('ada'));
  // Nothing is left to erase: by any name, nothing changes.
  for (const target of [ada.email, uuid, '7']) {
    t.deepEqual(await eraseCustomer(w.data, w.commands, target, metadata), {
      erasure_id: null,
      keys_destroyed: 0,
      carts: [],
      finished: true,
    });
  }
});

test('each cart has a key of its own; a user id, an email or a cart uuid names the carts identified with it, and no others', async (t) => {
  const w = await world(t);
  const signedIn = await w.newCart(7);
  const guest = await w.newCart(null);
  const other = await w.newCart(8, { ...ada, email: 'grace@example.com', first_name: 'Grace' });
  const byUser = await w.data.resolve('7');
  t.is(byUser.key_ids.length, 1);
  t.deepEqual(byUser.cart_uuids, [signedIn]);
  t.deepEqual((await w.data.resolve(guest)).cart_uuids, [guest]);
  t.deepEqual((await w.data.resolve(ada.email)).cart_uuids.sort(), [signedIn, guest].sort());
  t.is((await w.data.resolve(ada.email)).key_ids.length, 2);
  // Both of a request's identifiers, in one go: every cart either names.
  t.deepEqual((await w.data.resolve(['7', 'grace@example.com'])).cart_uuids.sort(), [signedIn, other].sort());
  await eraseCustomer(w.data, w.commands, guest, metadata);
  t.like(await w.customerOf(signedIn), { first_name: 'Ada' });
  t.is(await w.customerOf(guest), null);
  t.like(await w.customerOf(other), { first_name: 'Grace' });
});

test('two people who once shared an email are resolved and erased apart by their user ids', async (t) => {
  const w = await world(t);
  const shared = 'family@example.com';
  const ada7 = await w.newCart(7, { ...ada, email: shared });
  const grace8 = await w.newCart(8, { ...ada, email: shared, first_name: 'Grace' });
  // Ada's later cart under an address of her own: reached by her user id, not by the shared email.
  const ada7later = await w.newCart(7, ada);
  t.deepEqual((await w.data.resolve('7')).cart_uuids.sort(), [ada7, ada7later].sort());
  t.deepEqual((await w.data.resolve('8')).cart_uuids, [grace8]);
  const outcome = await eraseCustomer(w.data, w.commands, '7', metadata);
  t.deepEqual(outcome.carts.sort(), [ada7, ada7later].sort());
  t.is(outcome.keys_destroyed, 2);
  t.is(await w.customerOf(ada7), null);
  t.is(await w.customerOf(ada7later), null);
  t.like(await w.customerOf(grace8), { first_name: 'Grace', email: shared });
  t.deepEqual((await w.data.resolve(shared)).cart_uuids, [grace8]);
});

test('one user id identified with two emails: erasing one email leaves the other cart, erasing both identifiers reaches both', async (t) => {
  const w = await world(t);
  const first = await w.newCart(7, ada);
  const second = await w.newCart(7, { ...ada, email: 'ada@work.example.com' });
  const byEmail = await eraseCustomer(w.data, w.commands, ada.email, metadata);
  t.deepEqual(byEmail.carts, [first]);
  t.like(await w.customerOf(second), { email: 'ada@work.example.com' });
  const third = await w.newCart(9, { ...ada, email: 'ada@home.example.com' });
  const both = await eraseCustomer(w.data, w.commands, ['7', 'ada@home.example.com'], metadata);
  t.deepEqual(both.carts.sort(), [second, third].sort());
  t.is(both.keys_destroyed, 2);
  t.deepEqual(await w.keys.pendingErasures(), []);
});

test('a cart identified again keeps its one key, whose links are that cart’s identities only', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  for (const email of ['b@example.com', 'c@example.com']) {
    await w.commands.handle(
      cart.streamId(uuid),
      cart.decider,
      { type: 'IdentifyCartCustomer', at, ...ada, email },
      metadata,
    );
  }
  await w.newCart(7, { ...ada, email: 'd@example.com' });
  const [key] = await w.keys.keysLinkedTo([`cart:${uuid}`]);
  t.is(key.links.length, 1 + 1 + 3 + 1, 'its cart, its user id, its three emails, its phone number');
  t.deepEqual(
    key.links.filter((l) => l.startsWith('cart:')),
    [`cart:${uuid}`],
  );
});

test('a customer identified on a cart again after its erasure is sealed under a new key of the cart, linked to their identities, which opens when the log is folded again', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const erased = await eraseCustomer(w.data, w.commands, '7', metadata);
  t.deepEqual((await w.data.resolve(uuid)).key_ids, [], 'the erased key is no longer linked to the cart');
  await w.commands.handle(
    cart.streamId(uuid),
    cart.decider,
    { type: 'IdentifyCartCustomer', at, ...ada, first_name: 'Augusta' },
    metadata,
  );
  const [after] = (await w.data.resolve(uuid)).key_ids;
  t.truthy(after);
  t.like(await w.keys.key(after), { key: { key_id: after } });
  t.deepEqual((await w.data.resolve(ada.email)).key_ids, [after], 'an erasure by their email finds it');
  t.deepEqual((await w.data.resolve('7')).key_ids, [after], 'and one by their user id');
  t.is(erased.keys_destroyed, 1);
  t.like(await w.customerOf(uuid), { first_name: 'Augusta' });
});

test('a webhook body rendered before an erasure and sealed after it, by a process with the key cached, stays erased and makes no new key', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const body = JSON.stringify({ webhook_event: 'cart_abandoned', customer: ada, cart: { uuid } });
  // The dispatcher thread: a CustomerData of its own, its cache warm with the cart's key.
  const dispatcher = createCustomerData(w.keys, w.secretKey);
  await dispatcher.openBody(await dispatcher.sealBody(body));
  await eraseCustomer(w.data, w.commands, uuid, metadata);
  const sealed = await dispatcher.sealBody(body);
  t.false([ada.email, ada.phone_number, 'Lovelace'].some((v) => sealed.includes(v)));
  const fresh = createCustomerData(w.keys, w.secretKey);
  t.like(JSON.parse(await fresh.openBody(sealed)), { webhook_event: 'cart_abandoned', customer: null });
  t.deepEqual((await w.data.resolve(uuid)).key_ids, [], 'no key of the cart was made');
  t.deepEqual(await w.keys.keysLinkedTo([`cart:${uuid}`]), []);
});

test('an answer recorded for replay after its cart’s customer was erased keeps only the erased form', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const dispatcher = createCustomerData(w.keys, w.secretKey);
  const cartRecord = {
    uuid,
    customer_phone_number: ada.phone_number,
    customer_email_address: ada.email,
    customer_name: 'Ada Lovelace',
  };
  const recorded = {
    type: 'IdempotentResponseRecorded',
    data: { key: 'k-1', status: 200, body: { cart: cartRecord } },
    metadata: {
      correlation_id: 'c-1',
      causation_id: null,
      actor: metadata.actor,
      occurred_at: at,
      schema_version: 1,
    },
  };
  t.truthy(((await dispatcher.seal('idempotency-k-1', recorded)).data as { personal?: unknown }).personal);
  await eraseCustomer(w.data, w.commands, uuid, metadata);
  const after = await dispatcher.seal('idempotency-k-1', recorded);
  t.false(JSON.stringify(after).includes(ada.email));
  t.is((after.data as { personal?: unknown }).personal, undefined);
  t.like((after.data as { body: { cart: unknown } }).body.cart, {
    customer_email_address: '',
    customer_name: null,
  });
  t.deepEqual(await w.keys.keysLinkedTo([`cart:${uuid}`]), [], 'no key of the cart was made');
});

test('a body sealed under a key cached before its erasure does not open for a fresh reader, nor at the next attempt of the process that cached it', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const body = JSON.stringify({ webhook_event: 'cart_abandoned', customer: ada, cart: { uuid } });
  const dispatcher = createCustomerData(w.keys, w.secretKey);
  const sealed = await dispatcher.sealBody(body);
  t.is(await dispatcher.openBody(sealed), body);
  await eraseCustomer(w.data, w.commands, uuid, metadata);
  t.like(JSON.parse(await dispatcher.openBody(sealed)), { customer: null }, 'at once, despite its cache');
  t.like(JSON.parse(await createCustomerData(w.keys, w.secretKey).openBody(sealed)), { customer: null });
});

test('an erasure interrupted after the keys are destroyed is finished by the next call to finish them', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const found = await w.data.resolve('7');
  await w.keys.beginErasure({ erasure_id: randomUUID(), ...found, requested_at: at });
  await w.data.keys.destroyKeys(found.key_ids, { erasure_id: randomUUID(), erased_at: at });
  // The cart's events open erased, but the cart has not recorded it yet.
  t.deepEqual(await w.customerOf(uuid), {
    email: null,
    first_name: null,
    last_name: null,
    phone_number: null,
    DOB: null,
  });
  t.is(await finishPendingErasures(w.data, w.commands, metadata), 1);
  t.is(await w.customerOf(uuid), null);
  t.deepEqual(await w.keys.pendingErasures(), []);
});

test('a target naming nobody erases nothing', async (t) => {
  const w = await world(t);
  await w.newCart(7);
  t.deepEqual(await eraseCustomer(w.data, w.commands, 'nobody@example.com', metadata), {
    erasure_id: null,
    keys_destroyed: 0,
    carts: [],
    finished: true,
  });
});

test('a cart uuid naming no cart, or a cart erased before, erases nothing and records no erasure', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  t.like(await eraseCustomer(w.data, w.commands, uuid, metadata), { keys_destroyed: 1, carts: [uuid] });
  const begun: string[] = [];
  const beginErasure = w.data.keys.beginErasure.bind(w.data.keys);
  w.data.keys.beginErasure = async (erasure) => {
    begun.push(erasure.erasure_id);
    await beginErasure(erasure);
  };
  const nothing = { erasure_id: null, keys_destroyed: 0, carts: [], finished: true };
  t.deepEqual(await eraseCustomer(w.data, w.commands, uuid, metadata), nothing);
  t.deepEqual(await eraseCustomer(w.data, w.commands, randomUUID(), metadata), nothing);
  t.deepEqual(begun, [], 'no erasure recorded in the ledger or the key store');
});

test('an erasure whose keys a reader keeps in keys.db’s WAL reads as erased and stays pending; the next erasure finishes it', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'pds-customer-data-'));
  const log = await openSqliteEventStore(path.join(dir, 'events.db'));
  const file = path.join(dir, 'keys.db');
  const keys = openSqliteKeyStore(file, { checkpointAttempts: 2, checkpointPauseMs: 0 });
  t.teardown(async () => {
    await keys.close();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const data = createCustomerData(keys, randomBytes(32));
  const store = protectCustomerData(log, data);
  const commands = createCommandHandler(store, eventRegistry);
  const uuid = randomUUID();
  await commands.handle(
    cart.streamId(uuid),
    cart.decider,
    {
      type: 'CreateCart',
      cart_uuid: uuid,
      store_id: 1,
      source: { channel: 'headless', partner_id: null },
      user_id: 7,
      at,
      context: { store_exists: true },
    },
    metadata,
  );
  await commands.handle(
    cart.streamId(uuid),
    cart.decider,
    { type: 'IdentifyCartCustomer', at, ...ada },
    metadata,
  );
  // Another connection in the middle of a read transaction (a backup, a slow reader).
  const reader = new DatabaseSync(file);
  reader.exec('BEGIN');
  reader.prepare('SELECT count(*) FROM customer_keys').get();
  const held = await eraseCustomer(data, commands, '7', metadata);
  t.like(held, { keys_destroyed: 1, carts: [uuid], finished: false });
  t.deepEqual(
    (await keys.pendingErasures()).map((e) => e.erasure_id),
    [held.erasure_id],
  );
  const [, identified] = await log.readStream(cart.streamId(uuid));
  t.like((await data.open(identified)).data, { email: null, erased: true });
  reader.exec('COMMIT');
  reader.close();
  const next = await eraseCustomer(data, commands, 'nobody@example.com', metadata);
  t.is(next.erasure_id, null);
  t.deepEqual(await keys.pendingErasures(), []);
});

test('a pending erasure that keeps failing is reported and does not stop a new one', async (t) => {
  const w = await world(t);
  const [stuck, next] = [await w.newCart(7), await w.newCart(8, { ...ada, email: 'b@example.com' })];
  const found = await w.data.resolve(stuck);
  const erasureId = randomUUID();
  await w.keys.beginErasure({ erasure_id: erasureId, ...found, requested_at: at });
  // Its cart's stream can no longer take the record (say, the log refuses it).
  const refusing: typeof w.commands = {
    ...w.commands,
    handle(streamId, decider, command, meta, options) {
      if (streamId === cart.streamId(stuck)) return Promise.reject(new Error('the log refused the append'));
      return w.commands.handle(streamId, decider, command, meta, options);
    },
  };
  const failures: string[] = [];
  const outcome = await eraseCustomer(w.data, refusing, 'b@example.com', metadata, (id) => failures.push(id));
  t.like(outcome, { carts: [next], finished: true });
  t.deepEqual(failures, [erasureId]);
  t.deepEqual(
    (await w.keys.pendingErasures()).map((e) => e.erasure_id),
    [erasureId],
  );
});

test('a webhook body is sealed with its cart’s customer, sent as it was, and without the customer once erased', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const cartRecord = {
    uuid,
    status: 'verification',
    customer_phone_number: ada.phone_number,
    customer_email_address: ada.email,
    customer_name: 'Ada Lovelace',
    amount: 12.5,
  };
  const updated = JSON.stringify({ webhook_event: 'cart_status_updated', cart: cartRecord });
  const abandoned = JSON.stringify({
    webhook_event: 'cart_abandoned',
    customer: ada,
    store: { id: 1 },
    cart: { uuid, products: [] },
  });
  const sealed = await Promise.all([updated, abandoned].map((b) => w.data.sealBody(b)));
  for (const body of sealed) t.false([ada.email, ada.phone_number, 'Lovelace'].some((v) => body.includes(v)));
  t.is(await w.data.sealBody(sealed[0]), sealed[0], 'a sealed body is left as it is');
  t.deepEqual(await Promise.all(sealed.map((b) => w.data.openBody(b))), [updated, abandoned]);
  const nobody = JSON.stringify({ webhook_event: 'cart_abandoned', customer: null, cart: { uuid } });
  t.is(await w.data.sealBody(nobody), nobody);

  await eraseCustomer(w.data, w.commands, uuid, metadata);
  t.deepEqual(JSON.parse(await w.data.openBody(sealed[0])).cart, {
    ...cartRecord,
    customer_phone_number: '',
    customer_email_address: '',
    customer_name: null,
  });
  t.like(JSON.parse(await w.data.openBody(sealed[1])), { webhook_event: 'cart_abandoned', customer: null });
});

test('the carts read model forgets an erased customer, and a rebuild from the log gives the same documents', async (t) => {
  const w = await world(t);
  const [erased, kept] = [await w.newCart(7), await w.newCart(8, { ...ada, email: 'grace@example.com' })];
  const live = openSqliteReadStore(':memory:');
  await project(w.store, live, cartsProjection);
  const docs = await live.collection<CartDoc>(CARTS);
  t.like((await docs.findByIds([erased]))[0]?._state, { customer: ada });
  await eraseCustomer(w.data, w.commands, '7', metadata);
  await project(w.store, live, cartsProjection);
  t.like((await docs.findByIds([erased]))[0]?._state, { customer: null });
  t.like((await docs.findByIds([kept]))[0]?._state, { customer: { email: 'grace@example.com' } });
  const rebuilt = openSqliteReadStore(':memory:');
  await project(w.store, rebuilt, cartsProjection);
  t.deepEqual(await snapshot(rebuilt, cartsProjection), await snapshot(live, cartsProjection));
});

test('data whose key is gone without an erasure is a fault, never read as erased', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const [, identified] = await w.log.readStream(cart.streamId(uuid));
  const body = await w.data.sealBody(
    JSON.stringify({ webhook_event: 'cart_abandoned', customer: ada, cart: { uuid } }),
  );
  // Another process over an empty key store (its own file, say): it has neither the key nor a tombstone.
  const elsewhere = createCustomerData(openSqliteKeyStore(':memory:'), w.secretKey);
  await t.throwsAsync(elsewhere.open(identified), { instanceOf: CustomerKeyMissing });
  await t.throwsAsync(elsewhere.openBody(body), { instanceOf: CustomerKeyMissing });
  // Here, only the erasure makes it read as erased.
  t.like((await w.data.open(identified)).data, { email: ada.email });
  await eraseCustomer(w.data, w.commands, uuid, metadata);
  t.like((await w.data.open(identified)).data, { email: null, erased: true });
});

test('a webhook body whose box does not open is an error, not a body without its customer', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const body = await w.data.sealBody(
    JSON.stringify({ webhook_event: 'cart_abandoned', customer: ada, cart: { uuid } }),
  );
  const [prefix, keyId, token, ...rest] = body.split(' ');
  const damaged = [prefix, keyId, `${token.slice(0, -4)}AAAA`, ...rest].join(' ');
  await t.throwsAsync(w.data.openBody(damaged), { instanceOf: SecretBoxError });
  // Under another PDS_SECRET_KEY the data key does not unwrap either.
  const otherSecret = createCustomerData(w.keys, randomBytes(32));
  await t.throwsAsync(otherSecret.openBody(body), { instanceOf: SecretBoxError });
});

test('keys are kept unwrapped a while: the erasing process forgets them at once, another within the time-to-live', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const [, identified] = await w.log.readStream(cart.streamId(uuid));
  const clock = manualClock();
  const reads = { count: 0 };
  const counted = {
    ...w.keys,
    key(id: string) {
      reads.count += 1;
      return w.keys.key(id);
    },
  };
  const other = createCustomerData(counted, w.secretKey, { clock, keyCacheTtlMs: KEY_CACHE_TTL_MS });
  for (let i = 0; i < 3; i++) t.like((await other.open(identified)).data, { email: ada.email });
  t.is(reads.count, 1, 'one key store read for three opens');
  await eraseCustomer(w.data, w.commands, uuid, metadata);
  t.like((await w.data.open(identified)).data, { erased: true }, 'the erasing process, at once');
  clock.advance(KEY_CACHE_TTL_MS);
  t.like((await other.open(identified)).data, { email: ada.email }, 'another, until its entry expires');
  clock.advance(1);
  t.like((await other.open(identified)).data, { erased: true });
});

test('asked for the last carts of a shared phone number, the key store answers the keys last made and no more', async (t) => {
  const w = await world(t);
  const made = [];
  for (let i = 0; i < 4; i++) made.push(await w.newCart(null, { ...ada, email: `walk-in-${i}@example.com` }));
  const answered = { keys: 0 };
  const counted = {
    ...w.keys,
    async keysLinkedTo(links: readonly string[], last?: number) {
      const found = await w.keys.keysLinkedTo(links, last);
      answered.keys += found.length;
      return found;
    },
  };
  const data = createCustomerData(counted, w.secretKey);
  t.deepEqual(await data.cartsLinkedTo({ phone: ada.phone_number }, 2), made.slice(2));
  t.is(answered.keys, 2, 'two keys read of four');
  t.deepEqual(await data.cartsLinkedTo({ phone: ada.phone_number }), made);
  // The email's keys first, then those linked to the phone too.
  t.deepEqual(await data.cartsLinkedTo({ email: 'walk-in-1@example.com', phone: ada.phone_number }, 1), [
    made[1],
  ]);
});

test('the carts of an email or a phone number are found by their keyed links, never after an erasure', async (t) => {
  const w = await world(t);
  const uuid = await w.newCart(7);
  const other = await w.newCart(8, { ...ada, email: 'grace@example.com', phone_number: '+1 555 0199' });
  t.deepEqual(await w.data.cartsLinkedTo({ email: ' ADA.Lovelace@example.com' }), [uuid]);
  t.deepEqual(await w.data.cartsLinkedTo({ phone: '(1) 555 0142' }), [uuid], 'by its digits');
  t.deepEqual(await w.data.cartsLinkedTo({ email: ada.email, phone: '+1 555 0199' }), [], 'both must link');
  t.deepEqual(await w.data.cartsLinkedTo({ phone: '+' }), [], 'no digits link nothing');
  const links = (await w.keys.keysLinkedTo([`cart:${uuid}`]))[0].links.join(' ');
  t.false(links.includes('555') || links.includes('0142'), 'the key store holds no phone number');
  await eraseCustomer(w.data, w.commands, ada.email, metadata);
  t.deepEqual(await w.data.cartsLinkedTo({ email: ada.email }), []);
  t.deepEqual(await w.data.cartsLinkedTo({ phone: ada.phone_number }), []);
  t.deepEqual(await w.data.cartsLinkedTo({ phone: '15550199' }), [other]);
});
