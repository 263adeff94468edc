import test, { type ExecutionContext } from 'ava';
import * as brand from '../../domain/brand.ts';
import * as cart from '../../domain/cart.ts';
import { fold } from '../../domain/decider.ts';
import * as partner from '../../domain/partner.ts';
import * as product from '../../domain/product.ts';
import * as store from '../../domain/store.ts';
import type { EventStore, RecordedEvent } from '../../eventstore/port.ts';
import type { ProjectionTx } from '../../projections/projector.ts';
import {
  CART_BRAND_NAMES,
  CART_STORE_NAMES,
  CARTS,
  type CartDoc,
  cartByUuid,
  cartIndexes,
  cartsOfBrands,
  cartsOfPartner,
  cartsOfStore,
  cartsProjection,
  findCarts,
  type PartnerCart,
  toCartRecord,
} from '../../projections/read-models/carts.ts';
import type { Doc } from '../../projections/read-store.ts';
import { openSqliteReadStore, type SqliteCollection } from '../../projections/sqlite/read-store.ts';
import {
  append,
  eventStoreFor,
  indexViews,
  project,
  rebuildThrough,
  recording,
  resetCheckpoint,
  snapshot,
  storeUpserted,
  withoutPosition,
} from './support.ts';

const CART_A = '3f6c2a1e-8b4d-4c9a-9e2f-1a2b3c4d5e6f';
const CART_B = '7d1e9b20-4f3a-4e8b-a1c2-d3e4f5a6b7c8';
const STOREFRONT = 'b2a7c9e4-1d3f-4a5b-8c6d-7e8f9a0b1c2d';

const kivaGummies = {
  menu_product_id: 9001,
  price_id: 'each' as const,
  product_id: 301,
  store_id: 1,
  name: 'Camino Midnight Blueberry Gummies',
  brand: 'Kiva',
  brand_id: 10,
  kind: 'edible' as const,
  kind_subtype: 'gummies',
  lineage: 'indica' as const,
  image_urls: ['https://images.example.com/301.jpg'],
  unit_price: '20.00',
  discounted_unit_price: '18.00',
  special_id: 77,
  special_title: '10% off Kiva',
};
const wyldFlower = {
  menu_product_id: 9002,
  price_id: 'eighth ounce' as const,
  product_id: 302,
  store_id: 1,
  name: 'Elderberry Indica',
  brand: 'Wyld',
  brand_id: 11,
  kind: 'flower' as const,
  kind_subtype: null,
  lineage: 'indica' as const,
  image_urls: [],
  unit_price: '35.00',
  discounted_unit_price: '35.00',
  special_id: null,
  special_title: null,
};

/** Cart A: a headless cart of a storefront partner, checked out and being prepared. */
function cartAEvents() {
  return [
    cart.events.CartCreated({
      cart_uuid: CART_A,
      store_id: 1,
      source: { channel: 'headless', partner_id: STOREFRONT },
      user_id: 501,
      created_at: '2026-05-01T10:00:00.000Z',
    }),
    cart.events.CartItemAdded({ ...kivaGummies, count: 2, added_at: '2026-05-01T10:05:00.000Z' }),
    cart.events.CartItemAdded({ ...wyldFlower, count: 1, added_at: '2026-05-01T10:06:00.000Z' }),
    cart.events.CartCustomerIdentified({
      email: 'jane@example.com',
      first_name: 'Jane',
      last_name: 'Doe',
      phone_number: '+1 303-555-0100',
      DOB: '1990-04-01T00:00:00.000Z',
      identified_at: '2026-05-01T10:10:00.000Z',
    }),
    cart.events.CartCheckedOut({
      reservation_mode: 'pickup',
      reservation_start_window: '2026-05-01 15:00',
      promo_code: null,
      checked_out_at: '2026-05-01T10:20:00.000Z',
      amount: 71,
    }),
    cart.events.CartStatusChanged({
      from: 'pending',
      to: 'verification',
      changed_at: '2026-05-01T10:20:00.000Z',
      assigned_employee_id: null,
      assigned_employee_name: null,
      assigned_manager_id: null,
      assigned_manager_name: null,
      checkout_message: null,
      pos_order_id: null,
      queue_number: null,
      rating: null,
    }),
    cart.events.CartStatusChanged({
      from: 'verification',
      to: 'preparing',
      changed_at: '2026-05-01T10:30:00.000Z',
      assigned_employee_id: 42,
      assigned_employee_name: 'Sam Budtender',
      assigned_manager_id: null,
      assigned_manager_name: null,
      checkout_message: 'Bring your ID',
      pos_order_id: 'POS-1001',
      queue_number: 7,
      rating: null,
    }),
  ];
}

/** Cart B: an embedded guest cart at store 2, abandoned. */
function cartBEvents() {
  return [
    cart.events.CartCreated({
      cart_uuid: CART_B,
      store_id: 2,
      source: { channel: 'embedded', partner_id: null },
      user_id: null,
      created_at: '2026-05-01T11:00:00.000Z',
    }),
    cart.events.CartItemAdded({
      ...kivaGummies,
      menu_product_id: 9101,
      store_id: 2,
      count: 1,
      special_id: null,
      special_title: null,
      discounted_unit_price: '20.00',
      added_at: '2026-05-01T11:01:00.000Z',
    }),
    cart.events.CartAbandoned({
      abandoned_at: '2026-05-01T17:01:00.000Z',
      first_item_at: '2026-05-01T11:01:00.000Z',
      item_count: 1,
    }),
  ];
}

interface World {
  store: EventStore;
  /** Global position of each cart's CartCreated: the record's `id`. */
  idA: number;
  idB: number;
}

async function world(t: Parameters<typeof eventStoreFor>[0]): Promise<World> {
  const es = await eventStoreFor(t);
  await append(es, store.streamId(1), [storeUpserted(1, 'Green Leaf Downtown', '2026-04-01T09:00:00.000Z')]);
  await append(es, store.streamId(2), [storeUpserted(2, 'Mile High Cannabis', '2026-04-01T09:00:00.000Z')]);
  await append(es, brand.streamId(10), [
    brand.events.BrandUpserted({ brand_id: 10, name: 'Kiva', upserted_at: '2026-04-01T09:00:00.000Z' }),
  ]);
  await append(es, brand.streamId(11), [
    brand.events.BrandUpserted({ brand_id: 11, name: 'Wyld', upserted_at: '2026-04-01T09:00:00.000Z' }),
  ]);
  const [createdA, ...restA] = cartAEvents();
  const idA = await append(es, cart.streamId(CART_A), [createdA]);
  const [createdB, ...restB] = cartBEvents();
  const idB = await append(es, cart.streamId(CART_B), [createdB]);
  await append(es, cart.streamId(CART_A), restA);
  await append(es, cart.streamId(CART_B), restB);
  return { store: es, idA, idB };
}

/** A cart as a partner sees it, with the private fields the read model keeps beside its state. */
type ExpectedCart = PartnerCart &
  Pick<
    CartDoc,
    '_id' | '_state' | '_created_at' | '_updated_at' | '_partner_id' | '_brand_ids' | '_abandoned'
  >;

/** What the read model stores of an expected cart, and the record it renders for a partner. */
function stored(expected: ExpectedCart): { doc: CartDoc; record: PartnerCart } {
  const { _id, _state, _created_at, _updated_at, _partner_id, _brand_ids, _abandoned, ...record } = expected;
  const { id, store_id, status, store_name } = record;
  const doc: CartDoc = {
    _id,
    id,
    store_id,
    status,
    store_name,
    _state,
    _created_at,
    _updated_at,
    _partner_id,
    _user_id: _state.user_id ?? null,
    _brand_ids,
    _abandoned,
  };
  return { doc, record };
}

/** The stored documents are the expected ones, and each renders the expected partner record. */
function assertCarts(t: ExecutionContext, docs: readonly Doc[], expected: ExpectedCart[]): void {
  t.deepEqual(
    docs,
    expected.map((e) => stored(e).doc),
  );
  t.deepEqual(
    docs.map((d) => toCartRecord(d as CartDoc)),
    expected.map((e) => stored(e).record),
  );
}

function expectedA(id: number, names: { store: string; kiva: string }): ExpectedCart {
  const state = fold(cart.decider, cartAEvents());
  if (!state.exists) throw new Error('no cart');
  const lines = state.lines.map((l) => (l.brand_id === 10 ? { ...l, brand: names.kiva } : l));
  return {
    _id: CART_A,
    id,
    uuid: CART_A,
    amount: 71,
    status: 'preparing',
    reservation_mode: 'pickup',
    reservation_start_window: '2026-05-01 15:00',
    checked_out_time: '2026-05-01 10:20:00',
    created_at: '2026-05-01 10:00:00',
    store_id: 1,
    store_name: names.store,
    user_id: 501,
    customer_phone_number: '+1 303-555-0100',
    customer_email_address: 'jane@example.com',
    rating: 0,
    assigned_employee_id: 42,
    assigned_employee_name: 'Sam Budtender',
    assigned_manager_id: null,
    assigned_manager_name: null,
    checkout_message: 'Bring your ID',
    customer_name: 'Jane Doe',
    pos_order_id: 'POS-1001',
    promo_code: null,
    queue_number: 7,
    tags: null,
    external_user_id: null,
    external_user_source: null,
    products: [
      {
        brand: names.kiva,
        name: 'Camino Midnight Blueberry Gummies',
        kind: 'edible',
        kind_subtype: 'gummies',
        lineage: 'indica',
        product_id: 301,
        price_id: 'each',
        count: 2,
        checkout_price: 20,
        discounted_checkout_price: 18,
        special_id: 77,
        special_title: '10% off Kiva',
      },
      {
        brand: 'Wyld',
        name: 'Elderberry Indica',
        kind: 'flower',
        kind_subtype: null,
        lineage: 'indica',
        product_id: 302,
        price_id: 'eighth ounce',
        count: 1,
        checkout_price: 35,
        discounted_checkout_price: 35,
        special_id: null,
        special_title: null,
      },
    ],
    updated_at: '2026-05-01T10:30:00.000Z',
    abandoned_at: null,
    source: { channel: 'headless', partner_id: STOREFRONT },
    _state: { ...state, lines },
    _created_at: '2026-05-01T10:00:00.000Z',
    _updated_at: '2026-05-01T10:30:00.000Z',
    _partner_id: STOREFRONT,
    _brand_ids: [10, 11],
    _abandoned: false,
  };
}

function expectedB(id: number, names: { kiva: string }): ExpectedCart {
  const state = fold(cart.decider, cartBEvents());
  if (!state.exists) throw new Error('no cart');
  const lines = state.lines.map((l) => ({ ...l, brand: names.kiva }));
  return {
    _id: CART_B,
    id,
    uuid: CART_B,
    amount: 20,
    status: 'pending',
    reservation_mode: '',
    reservation_start_window: '',
    checked_out_time: '',
    created_at: '2026-05-01 11:00:00',
    store_id: 2,
    store_name: 'Mile High Cannabis',
    user_id: null,
    customer_phone_number: '',
    customer_email_address: '',
    rating: 0,
    assigned_employee_id: null,
    assigned_employee_name: null,
    assigned_manager_id: null,
    assigned_manager_name: null,
    checkout_message: null,
    customer_name: null,
    pos_order_id: null,
    promo_code: null,
    queue_number: null,
    tags: null,
    external_user_id: null,
    external_user_source: null,
    products: [
      {
        brand: names.kiva,
        name: 'Camino Midnight Blueberry Gummies',
        kind: 'edible',
        kind_subtype: 'gummies',
        lineage: 'indica',
        product_id: 301,
        price_id: 'each',
        count: 1,
        checkout_price: 20,
        discounted_checkout_price: 20,
        special_id: null,
        special_title: null,
      },
    ],
    updated_at: '2026-05-01T17:01:00.000Z',
    abandoned_at: '2026-05-01T17:01:00.000Z',
    source: { channel: 'embedded', partner_id: null },
    _state: { ...state, lines },
    _created_at: '2026-05-01T11:00:00.000Z',
    _updated_at: '2026-05-01T17:01:00.000Z',
    _partner_id: null,
    _brand_ids: [10],
    _abandoned: true,
  };
}

async function cartsCollection(readStore: ReturnType<typeof openSqliteReadStore>) {
  // The SQLite store's handle, for `lastExamined` (its `collection` overload is shadowed by the port's).
  return (await readStore.collection<CartDoc>(CARTS, cartIndexes)) as SqliteCollection<CartDoc>;
}

test('each cart is stored as its state and query fields, renders the partner cart record, names in lookups', async (t) => {
  const w = await world(t);
  const readStore = openSqliteReadStore(':memory:');
  await project(w.store, readStore, cartsProjection);
  const docs = await snapshot(readStore, cartsProjection);
  assertCarts(t, docs[CARTS], [
    expectedA(w.idA, { store: 'Green Leaf Downtown', kiva: 'Kiva' }),
    expectedB(w.idB, { kiva: 'Kiva' }),
  ]);
  t.deepEqual(docs[CART_STORE_NAMES], [
    { _id: 1, name: 'Green Leaf Downtown' },
    { _id: 2, name: 'Mile High Cannabis' },
  ]);
  t.deepEqual(docs[CART_BRAND_NAMES], [
    { _id: 10, name: 'Kiva' },
    { _id: 11, name: 'Wyld' },
  ]);
  // The record the API shows is exactly what toPartnerCart renders.
  const state = fold(cart.decider, cartAEvents());
  if (!state.exists) throw new Error('no cart');
  const page = await cartsOfStore(await cartsCollection(readStore), 1, {}, { limit: 10 });
  t.deepEqual(page.carts, [cart.toPartnerCart(state, { id: w.idA, store_name: 'Green Leaf Downtown' })]);
  t.is(page.next, null);
  const one = await cartByUuid(await cartsCollection(readStore), CART_B);
  t.deepEqual(one && withoutPosition(one), stored(expectedB(w.idB, { kiva: 'Kiva' })).doc);
});

test('a version 1 document (the record stored beside the state), served while version 2 is built, renders the same record', (t) => {
  const expected = expectedA(4, { store: 'Green Leaf Downtown', kiva: 'Kiva' });
  const { doc, record } = stored(expected);
  const versionOne = { ...expected, _position: 9 } as unknown as CartDoc;
  t.deepEqual(toCartRecord(versionOne), record);
  t.deepEqual(toCartRecord(doc), record);
});

test('a store rename and a brand rename propagate to the carts that show them, live and in order', async (t) => {
  const w = await world(t);
  const readStore = openSqliteReadStore(':memory:');
  await project(w.store, readStore, cartsProjection);

  await append(w.store, store.streamId(1), [
    storeUpserted(1, 'Green Leaf Uptown', '2026-05-02T09:00:00.000Z'),
  ]);
  await append(w.store, brand.streamId(10), [
    brand.events.BrandUpserted({
      brand_id: 10,
      name: 'Kiva Confections',
      upserted_at: '2026-05-02T09:00:00.000Z',
    }),
  ]);
  // A store upsert that keeps the name changes no cart.
  await append(w.store, store.streamId(2), [
    { ...storeUpserted(2, 'Mile High Cannabis', '2026-05-02T09:30:00.000Z') },
  ]);
  const { readStore: watched, writes } = recording(readStore);
  await project(w.store, watched, cartsProjection);

  const docs = await snapshot(readStore, cartsProjection);
  assertCarts(t, docs[CARTS], [
    expectedA(w.idA, { store: 'Green Leaf Uptown', kiva: 'Kiva Confections' }),
    expectedB(w.idB, { kiva: 'Kiva Confections' }),
  ]);
  t.deepEqual(docs[CART_STORE_NAMES], [
    { _id: 1, name: 'Green Leaf Uptown' },
    { _id: 2, name: 'Mile High Cannabis' },
  ]);
  t.deepEqual(docs[CART_BRAND_NAMES], [
    { _id: 10, name: 'Kiva Confections' },
    { _id: 11, name: 'Wyld' },
  ]);
  // Lookups of store 1, brand 10 and store 2; carts A (both renames, in one batch) and B.
  t.is(writes.length, 5);

  // An item placed after the rename shows the current name even if the line's snapshot is older.
  await append(w.store, cart.streamId(CART_B), [
    cart.events.CartItemAdded({
      ...kivaGummies,
      menu_product_id: 9102,
      product_id: 303,
      store_id: 2,
      count: 1,
      added_at: '2026-05-02T10:00:00.000Z',
    }),
  ]);
  await project(w.store, readStore, cartsProjection);
  const b = await cartByUuid(await cartsCollection(readStore), CART_B);
  t.deepEqual(b && toCartRecord(b).products.map((p) => p.brand), ['Kiva Confections', 'Kiva Confections']);
  t.deepEqual(
    b?._state.lines.map((l) => l.brand),
    ['Kiva Confections', 'Kiva Confections'],
  );
});

test('a cart of a store not yet known gets its name when the store is first upserted', async (t) => {
  const es = await eventStoreFor(t);
  const id = await append(es, cart.streamId(CART_A), [cartAEvents()[0]]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, cartsProjection);
  t.is((await cartByUuid(await cartsCollection(readStore), CART_A))?.store_name, '');
  await append(es, store.streamId(1), [storeUpserted(1, 'Green Leaf Downtown', '2026-05-01T12:00:00.000Z')]);
  await project(es, readStore, cartsProjection);
  const doc = await cartByUuid(await cartsCollection(readStore), CART_A);
  t.is(doc?.store_name, 'Green Leaf Downtown');
  t.is(doc?.id, id);
});

test('applying the same events again changes nothing; any batching gives the same documents', async (t) => {
  const w = await world(t);
  await append(w.store, store.streamId(1), [
    storeUpserted(1, 'Green Leaf Uptown', '2026-05-02T09:00:00.000Z'),
  ]);
  await append(w.store, brand.streamId(10), [
    brand.events.BrandUpserted({
      brand_id: 10,
      name: 'Kiva Confections',
      upserted_at: '2026-05-02T09:00:00.000Z',
    }),
  ]);
  await append(w.store, store.streamId(1), [
    storeUpserted(1, 'Green Leaf Midtown', '2026-05-03T09:00:00.000Z'),
  ]);
  const readStore = openSqliteReadStore(':memory:');
  await project(w.store, readStore, cartsProjection);
  const first = await snapshot(readStore, cartsProjection);
  t.is(first[CARTS][0].store_name, 'Green Leaf Midtown');

  for (const batchSize of [1, 3, 1000]) {
    await resetCheckpoint(readStore, cartsProjection.name);
    const { readStore: watched, writes } = recording(readStore);
    await project(w.store, watched, cartsProjection, { batchSize });
    t.deepEqual(await snapshot(readStore, cartsProjection), first);
    t.deepEqual(writes, [], `replay with batches of ${batchSize} wrote nothing`);
  }

  for (const batchSize of [1, 2, 5]) {
    const fresh = openSqliteReadStore(':memory:');
    await project(w.store, fresh, cartsProjection, { batchSize });
    t.deepEqual(await snapshot(fresh, cartsProjection), first);
  }

  // An operator's rebuild (bulk shadows: a rename reads carts by store and by brand while applying).
  const views = await indexViews(readStore, cartsProjection);
  for (const batchSize of [1, 1000]) {
    await rebuildThrough(w.store, readStore, cartsProjection, { batchSize });
    t.deepEqual(await snapshot(readStore, cartsProjection), first, `rebuilt in batches of ${batchSize}`);
    t.deepEqual(await indexViews(readStore, cartsProjection), views, 'every index answers alike');
  }
});

test('a crash after a rename reached the lookups but not the carts is repaired by the replay', async (t) => {
  const w = await world(t);
  const readStore = openSqliteReadStore(':memory:');
  await project(w.store, readStore, cartsProjection);
  const carts = await cartsCollection(readStore);
  const beforeRename = await carts.find({});
  const checkpoint = await readStore.getCheckpoint(cartsProjection.name);
  if (!checkpoint) throw new Error('no checkpoint');

  await append(w.store, store.streamId(1), [
    storeUpserted(1, 'Green Leaf Uptown', '2026-05-02T09:00:00.000Z'),
  ]);
  await append(w.store, brand.streamId(10), [
    brand.events.BrandUpserted({
      brand_id: 10,
      name: 'Kiva Confections',
      upserted_at: '2026-05-02T09:00:00.000Z',
    }),
  ]);
  await project(w.store, readStore, cartsProjection);
  const renamed = await snapshot(readStore, cartsProjection);

  // The state a crash can leave: each collection has its own bulk write, so the lookups' landed and
  // the carts' did not, and the checkpoint was not committed.
  await carts.bulkWrite(
    beforeRename.map((doc) => ({ replaceOne: { filter: { _id: doc._id }, replacement: doc } })),
  );
  await readStore.setCheckpoint(cartsProjection.name, checkpoint);
  t.is((await cartByUuid(carts, CART_A))?.store_name, 'Green Leaf Downtown');

  await project(w.store, readStore, cartsProjection);
  t.deepEqual(await snapshot(readStore, cartsProjection), renamed);
});

test('events of other streams are ignored', async (t) => {
  const w = await world(t);
  const readStore = openSqliteReadStore(':memory:');
  await project(w.store, readStore, cartsProjection);
  const before = await snapshot(readStore, cartsProjection);

  await append(w.store, product.streamId(301), [
    product.events.ProductUpserted({
      product_id: 301,
      name: 'Renamed Gummies',
      brand_id: 10,
      kind: 'edible',
      kind_subtype: null,
      lineage: null,
      description: null,
      percent_thc: null,
      percent_cbd: null,
      image_urls: [],
      upserted_at: '2026-05-02T09:00:00.000Z',
    }),
  ]);
  await append(w.store, partner.streamId(STOREFRONT), [
    partner.events.PartnerRegistered({
      partner_id: STOREFRONT,
      name: 'Storefront Co',
      kind: 'store_operator',
      brand_ids: [],
      store_ids: [1],
      all_brands: false,
      rate_limit_per_minute: 600,
      registered_at: '2026-05-02T09:00:00.000Z',
    }),
  ]);
  // A store event that is not a listing change.
  await append(w.store, store.streamId(1), [
    store.events.CurbsidePickupSettingChanged({
      store_id: 1,
      ...store.defaultCurbsidePickupSetting(),
      enabled: true,
      changed_at: '2026-05-02T09:00:00.000Z',
    }),
  ]);
  const { readStore: watched, writes } = recording(readStore);
  await project(w.store, watched, cartsProjection);
  t.deepEqual(writes, []);
  t.deepEqual(await snapshot(readStore, cartsProjection), before);

  // Handed one directly, the projection touches nothing.
  const untouchable = new Proxy({} as ProjectionTx, {
    get() {
      throw new Error('the projection touched the read store');
    },
  });
  const foreign: RecordedEvent = {
    id: 'e1',
    streamId: 'review-5',
    type: 'ReviewPosted',
    revision: 0,
    position: 999,
    data: {},
    metadata: {
      correlation_id: 'c',
      causation_id: null,
      actor: { type: 'platform', id: 'x' },
      occurred_at: '2026-05-02T09:00:00.000Z',
      schema_version: 1,
    },
    recordedAt: '2026-05-02T09:00:00.000Z',
  };
  t.notThrows(() => cartsProjection.apply(foreign, untouchable));
  t.deepEqual(cartsProjection.prefetch?.(foreign), []);
});

test('partner cart queries use their index: only the partner’s (store’s, brand’s) carts are examined', async (t) => {
  const es = await eventStoreFor(t);
  await append(es, store.streamId(1), [storeUpserted(1, 'Green Leaf Downtown', '2026-04-01T09:00:00.000Z')]);
  await append(es, store.streamId(2), [storeUpserted(2, 'Mile High Cannabis', '2026-04-01T09:00:00.000Z')]);
  const uuidOf = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
  const at = (minute: number) => new Date(Date.UTC(2026, 4, 1, 10, minute)).toISOString();
  // 300 carts of another partner at store 2, many holding brand 11.
  for (let n = 1; n <= 300; n++) {
    await append(es, cart.streamId(uuidOf(n)), [
      cart.events.CartCreated({
        cart_uuid: uuidOf(n),
        store_id: 2,
        source: { channel: 'headless', partner_id: 'other-partner' },
        user_id: null,
        created_at: at(n % 60),
      }),
      ...(n % 3 === 0
        ? [cart.events.CartItemAdded({ ...wyldFlower, store_id: 2, count: 1, added_at: at(n % 60) })]
        : []),
    ]);
  }
  // 6 carts of ours at store 1: created at minutes 0..50; the ones at 20 and 40 checked out.
  const ours: Array<{ uuid: string; id: number; minute: number; status: string }> = [];
  for (let i = 0; i < 6; i++) {
    const uuid = uuidOf(1000 + i);
    const minute = i * 10;
    const id = await append(es, cart.streamId(uuid), [
      cart.events.CartCreated({
        cart_uuid: uuid,
        store_id: 1,
        source: { channel: 'headless', partner_id: STOREFRONT },
        user_id: null,
        created_at: at(minute),
      }),
    ]);
    await append(es, cart.streamId(uuid), [
      cart.events.CartItemAdded({ ...kivaGummies, count: 1, added_at: at(minute + 1) }),
    ]);
    let status = 'pending';
    if (minute === 20 || minute === 40) {
      await append(es, cart.streamId(uuid), [
        cart.events.CartCheckedOut({
          reservation_mode: 'pickup',
          reservation_start_window: '',
          promo_code: null,
          checked_out_at: at(minute + 2),
          amount: 18,
        }),
        cart.events.CartStatusChanged({
          from: 'pending',
          to: 'verification',
          changed_at: at(minute + 2),
          assigned_employee_id: null,
          assigned_employee_name: null,
          assigned_manager_id: null,
          assigned_manager_name: null,
          checkout_message: null,
          pos_order_id: null,
          queue_number: null,
          rating: null,
        }),
      ]);
      status = 'verification';
    }
    if (minute === 50) {
      await append(es, cart.streamId(uuid), [
        cart.events.CartAbandoned({ abandoned_at: at(59), first_item_at: at(51), item_count: 1 }),
      ]);
    }
    ours.push({ uuid, id, minute, status });
  }
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, cartsProjection);
  const carts = await cartsCollection(readStore);
  t.is(carts.size(), 306);

  const pending = await cartsOfPartner(
    carts,
    STOREFRONT,
    { created_after: at(5), status: 'pending' },
    { limit: 100 },
  );
  t.deepEqual(
    pending.carts.map((c) => c.uuid),
    ours.filter((c) => c.minute > 5 && c.status === 'pending').map((c) => c.uuid),
  );
  t.true(carts.lastExamined() <= ours.length, `examined ${carts.lastExamined()}`);
  t.true(pending.carts.every((c) => !Object.keys(c).some((k) => k.startsWith('_'))));

  const window = await cartsOfPartner(
    carts,
    STOREFRONT,
    { created_after: at(0), created_before: at(40) },
    { limit: 100 },
  );
  t.deepEqual(
    window.carts.map((c) => c.id),
    ours.filter((c) => c.minute > 0 && c.minute < 40).map((c) => c.id),
  );
  t.true(carts.lastExamined() <= ours.length);

  const abandoned = await cartsOfPartner(carts, STOREFRONT, { abandoned: true }, { limit: 100 });
  t.deepEqual(
    abandoned.carts.map((c) => c.uuid),
    [ours[5].uuid],
  );
  t.true(carts.lastExamined() <= ours.length);

  const updated = await cartsOfPartner(carts, STOREFRONT, { updated_after: at(41) }, { limit: 100 });
  t.deepEqual(
    updated.carts.map((c) => c.uuid),
    [ours[4].uuid, ours[5].uuid],
  );
  t.true(carts.lastExamined() <= ours.length);

  // Paging in id order: every cart once, in order, whatever the page size.
  const seen: number[] = [];
  let after: [number, string] | undefined;
  for (;;) {
    const page = await findCarts(
      carts,
      { partner_id: STOREFRONT },
      {},
      { limit: 4, ...(after ? { after } : {}) },
    );
    seen.push(...page.carts.map((c) => c.id));
    t.true(carts.lastExamined() <= 5);
    if (!page.next) break;
    after = page.next;
  }
  t.deepEqual(
    seen,
    ours.map((c) => c.id),
  );

  await cartsOfStore(carts, 1, { status: 'pending' }, { limit: 100 });
  t.true(carts.lastExamined() <= ours.length);

  const kiva = await cartsOfBrands(carts, [10], {}, { limit: 100 });
  t.is(kiva.carts.length, ours.length);
  t.is(carts.lastExamined(), ours.length);
  const wyld = await cartsOfBrands(carts, [11], {}, { limit: 1000 });
  t.is(wyld.carts.length, 100);
  t.is(carts.lastExamined(), 100);
});
