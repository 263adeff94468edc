/**
 * What an auditor's cart search reads (docs/operations.md, "Auditing carts"): the SQLite read store's
 * collection counts the documents each query looks at (`lastExamined`), as a read store's cost does.
 * A search for the last day among a month of older carts reads about its page, not the history.
 */
import test, { type ExecutionContext } from 'ava';
import * as cart from '../../domain/cart.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { type CartSearch, searchCarts } from '../../projections/read-models/cart-search.ts';
import { CARTS, type CartDoc, cartIndexes, cartsProjection } from '../../projections/read-models/carts.ts';
import { openSqliteReadStore, type SqliteCollection } from '../../projections/sqlite/read-store.ts';
import { append, eventStoreFor, project } from './support.ts';

const NOW = Date.parse('2026-05-31T12:00:00.000Z');
const HOUR = 3_600_000;
const OLD = 1_000;
const RECENT = 12;
/** Entries a walk may look at beyond its page: the extra match that says another page exists, a cursor's. */
const SLACK = 2;

const uuidOf = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

/** Every 100th cart is the walk-in customer's (one shared phone number). */
const WALK_IN = (n: number) => n % 100 === 0;

/** A cart made `hoursAgo` before NOW, at store 1 or 2, through a partner's channel or not. */
async function cartMade(es: EventStore, n: number, hoursAgo: number): Promise<void> {
  const at = new Date(NOW - hoursAgo * HOUR).toISOString();
  await append(es, cart.streamId(uuidOf(n)), [
    cart.events.CartCreated({
      cart_uuid: uuidOf(n),
      store_id: 1 + (n % 2),
      source: { channel: 'headless', partner_id: n % 3 === 0 ? 'the-partner' : null },
      user_id: null,
      created_at: at,
    }),
    ...(WALK_IN(n)
      ? [
          cart.events.CartCustomerIdentified({
            email: null,
            first_name: 'Walk',
            last_name: 'In',
            phone_number: '+1 303-555-0100',
            DOB: null,
            identified_at: at,
          }),
        ]
      : []),
  ]);
}

/** A month of older carts (the oldest first in the log), then the last day's; the read model they make. */
async function carts(t: ExecutionContext) {
  const es = await eventStoreFor(t);
  for (let n = 0; n < OLD; n++) await cartMade(es, n, 30 * 24 - (n * 29 * 24) / OLD);
  for (let n = OLD; n < OLD + RECENT; n++) await cartMade(es, n, RECENT - (n - OLD) - 0.5);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, cartsProjection);
  // The SQLite store's handle, for `lastExamined` (its `collection` overload is shadowed by the port's).
  const collection = (await readStore.collection<CartDoc>(CARTS, cartIndexes)) as SqliteCollection<CartDoc>;
  t.is(collection.size(), OLD + RECENT);
  return collection;
}

test('a search of the last day among a month of older carts reads its page, newest first, page after page', async (t) => {
  const collection = await carts(t);
  const since = new Date(NOW - 24 * HOUR).toISOString();
  const recent = Array.from({ length: RECENT }, (_, i) => uuidOf(OLD + RECENT - 1 - i)); // newest first

  const cases: Array<[string, CartSearch, (n: number) => boolean]> = [
    ['time alone', { created_after: since }, () => true],
    ['a store', { store_id: 1, created_after: since }, (n) => 1 + (n % 2) === 1],
    [
      'a store and status',
      { store_id: 2, status: 'pending', created_after: since },
      (n) => 1 + (n % 2) === 2,
    ],
    ['a status', { status: 'pending', created_after: since }, () => true],
    ['a partner', { partner_id: 'the-partner', created_after: since }, (n) => n % 3 === 0],
    // The partner's index, not the status's: a partner's carts are fewer than a status's.
    [
      'a status and a partner',
      { status: 'pending', partner_id: 'the-partner', created_after: since },
      (n) => n % 3 === 0,
    ],
  ];
  for (const [what, search, keeps] of cases) {
    const wanted = recent.filter((uuid) => keeps(Number(uuid.slice(-12))));
    const first = await searchCarts(collection, search, { limit: 2 });
    t.deepEqual(
      first.carts.map((c) => c.cart_uuid),
      wanted.slice(0, 2),
      what,
    );
    t.true(collection.lastExamined() <= 3 + SLACK, `${what}: examined ${collection.lastExamined()}`);
    // The rest of the range, from the cursor: its carts and nothing older.
    const rest = await searchCarts(collection, search, {
      limit: 100,
      ...(first.next ? { after: first.next } : {}),
    });
    t.deepEqual(
      rest.carts.map((c) => c.cart_uuid),
      wanted.slice(2),
      what,
    );
    t.is(rest.next, null);
    t.true(
      collection.lastExamined() <= wanted.length - 2 + SLACK,
      `${what}, next page: examined ${collection.lastExamined()}`,
    );
  }
});

test('a search of an old range reads that range, not the carts made since', async (t) => {
  const collection = await carts(t);
  const search: CartSearch = {
    store_id: 1,
    created_after: new Date(NOW - 30 * 24 * HOUR).toISOString(),
    created_before: new Date(NOW - 29 * 24 * HOUR).toISOString(),
  };
  const found = await searchCarts(collection, search, { limit: 500 });
  const after = Date.parse(search.created_after as string);
  const before = Date.parse(search.created_before as string);
  t.true(found.carts.length > 10);
  t.true(found.carts.every((c) => c.store_id === 1 && Date.parse(c.created_at) > after));
  t.true(found.carts.every((c) => Date.parse(c.created_at) < before));
  const times = found.carts.map((c) => c.created_at);
  t.deepEqual(times, [...times].sort().reverse(), 'newest first');
  t.true(
    collection.lastExamined() <= found.carts.length + SLACK,
    `examined ${collection.lastExamined()} for ${found.carts.length}`,
  );
});

test('a search by the customer reads at most the last carts linked to them, and says when it left some out', async (t) => {
  const collection = await carts(t);
  // The key store's links, in the order the keys were made: the carts in the order they were identified.
  const linked = Array.from({ length: OLD + RECENT }, (_, n) => n)
    .filter(WALK_IN)
    .map(uuidOf);
  t.is(linked.length, 11);
  const customer = { phone: '+1 (303) 555-0100', carts: linked };

  const all = await searchCarts(collection, { customer }, { limit: 100 });
  t.deepEqual(
    all.carts.map((c) => c.cart_uuid),
    [...linked].reverse(),
  );
  t.false(all.linkedCartsCapped);

  const capped = await searchCarts(collection, { customer }, { limit: 100 }, 4);
  t.deepEqual(
    capped.carts.map((c) => c.cart_uuid),
    linked.slice(-4).reverse(),
  );
  t.true(capped.linkedCartsCapped);
  t.true(collection.lastExamined() <= 4, `examined ${collection.lastExamined()}`);
});
