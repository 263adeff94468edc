import test from 'ava';
import {
  abandonedCart,
  abandonmentDeadline,
  allowedMoves,
  type Cart,
  type CartCommand,
  type CartEvent,
  type CartState,
  type CartStatus,
  cartAmount,
  cartRecord,
  cartStatuses,
  decider,
  events,
  type LineSnapshot,
  type ReservationMode,
  streamId,
  toAbandonedCart,
  toCartRecord,
  toPartnerCart,
  toWebhookCustomer,
} from '../../domain/cart.ts';
import { fold } from '../../domain/decider.ts';
import { eventRegistry } from '../../domain/index.ts';
import { scenario } from './gwt.ts';

const cart = scenario(decider);

const UUID = '3f1c9a52-8c1e-4d7b-9b7a-2c0e5f1d6a11';
const ARRIVAL = '9b2e7c41-0d3a-4f6e-8a5b-1c2d3e4f5a6b';
const t0 = '2026-03-01T10:00:00.000Z';
const HOUR = 3_600_000;
const SIX_HOURS = 6 * HOUR;
/** t0 + ms, as ISO 8601 UTC. */
const after = (ms: number) => new Date(Date.parse(t0) + ms).toISOString();

const source = { channel: 'headless' as const, partner_id: 'partner-1' };
const created = events.CartCreated({ cart_uuid: UUID, store_id: 3, source, user_id: 42, created_at: t0 });

const gummies: LineSnapshot = {
  product_id: 11,
  store_id: 3,
  name: 'Camino Gummies',
  brand: 'Kiva',
  brand_id: 7,
  kind: 'edible',
  kind_subtype: 'gummies',
  lineage: 'hybrid',
  image_urls: ['https://img.example/11.png'],
  unit_price: '20.00',
  discounted_unit_price: '18.00',
  special_id: 5,
  special_title: '10% off Kiva',
};
const flower: LineSnapshot = {
  product_id: 12,
  store_id: 3,
  name: 'Blue Dream',
  brand: 'Glass House',
  brand_id: 8,
  kind: 'flower',
  kind_subtype: null,
  lineage: null,
  image_urls: [],
  unit_price: '0.10',
  discounted_unit_price: '0.10',
  special_id: null,
  special_title: null,
};

/** CartItemAdded for menu product 101 (gummies, each) or 102 (flower, eighth ounce). */
const addedGummies = (count: number, at = t0, over: Partial<LineSnapshot> = {}) =>
  events.CartItemAdded({ menu_product_id: 101, price_id: 'each', count, ...gummies, ...over, added_at: at });
const addedFlower = (count: number, at = t0) =>
  events.CartItemAdded({ menu_product_id: 102, price_id: 'eighth ounce', count, ...flower, added_at: at });

const allModes = { pickup: true, delivery: true, curbside_enabled: true };
const checkedOut = (mode: ReservationMode = 'pickup', at = after(HOUR), amount = 36) => [
  events.CartCheckedOut({
    reservation_mode: mode,
    reservation_start_window: '',
    promo_code: null,
    checked_out_at: at,
    amount,
  }),
  moved('pending', 'verification', at),
];
const noAssignment = {
  assigned_employee_id: null,
  assigned_employee_name: null,
  assigned_manager_id: null,
  assigned_manager_name: null,
  checkout_message: null,
  pos_order_id: null,
  queue_number: null,
};
function moved(from: CartStatus, to: CartStatus, at = after(2 * HOUR), rating: number | null = null) {
  return events.CartStatusChanged({ from, to, changed_at: at, ...noAssignment, rating });
}

const addCommand = (
  over: Partial<Extract<CartCommand, { type: 'AddCartItem' }>> = {},
): Extract<CartCommand, { type: 'AddCartItem' }> => ({
  type: 'AddCartItem',
  menu_product_id: 101,
  price_id: 'each',
  count: 2,
  at: t0,
  context: { line: gummies },
  ...over,
});
const checkoutCommand = (
  over: Partial<Extract<CartCommand, { type: 'CheckOutCart' }>> = {},
): Extract<CartCommand, { type: 'CheckOutCart' }> => ({
  type: 'CheckOutCart',
  reservation_mode: 'pickup',
  promo_code: null,
  at: after(HOUR),
  context: { store: allModes },
  ...over,
});
const curbside = {
  enabled: true,
  arrival_form_fields: [
    { name: 'vehicle_make', label: 'Vehicle make', required: true },
    { name: 'vehicle_color', label: 'Vehicle color', required: true },
    { name: 'parking_spot', label: 'Parking spot', required: false },
  ],
};
const arrivalCommand = (
  fields: Record<string, string>,
  setting: typeof curbside | null = curbside,
): Extract<CartCommand, { type: 'PostCurbsideArrival' }> => ({
  type: 'PostCurbsideArrival',
  arrival_id: ARRIVAL,
  fields,
  at: after(3 * HOUR),
  context: { curbside: setting },
});

const state = (given: CartEvent[]): Cart => {
  const s = fold(decider, given);
  if (!s.exists) throw new Error('expected a cart');
  return s;
};

test('streamId', (t) => {
  t.is(streamId(UUID), `cart-${UUID}`);
});

// ---------------------------------------------------------------------------------------------------
// CreateCart

const createCommand: CartCommand = {
  type: 'CreateCart',
  cart_uuid: UUID,
  store_id: 3,
  source,
  user_id: 42,
  at: t0,
  context: { store_exists: true },
};

test('CreateCart: CartCreated', (t) => {
  cart.given([]).when(createCommand).thenEmits(t, [created]);
});

test('CreateCart: times are normalised to ISO 8601 UTC', (t) => {
  cart
    .given([])
    .when({ ...createCommand, at: '2026-03-01T12:00:00+02:00' })
    .thenEmits(t, [created]);
});

test('CreateCart: guest cart from an embedded menu', (t) => {
  cart
    .given([])
    .when({ ...createCommand, user_id: null, source: { channel: 'embedded', partner_id: null } })
    .thenEmits(t, [
      events.CartCreated({
        cart_uuid: UUID,
        store_id: 3,
        source: { channel: 'embedded', partner_id: null },
        user_id: null,
        created_at: t0,
      }),
    ]);
});

test('CreateCart: refused for an existing cart', (t) => {
  cart.given([created]).when(createCommand).thenRefused(t, 'cart_exists', 'conflict');
});

test('CreateCart: refused for an unknown store', (t) => {
  cart
    .given([])
    .when({ ...createCommand, context: { store_exists: false } })
    .thenRefused(t, 'unknown_store_id', 'invalid');
});

test('CreateCart: refused with an unreadable time', (t) => {
  cart
    .given([])
    .when({ ...createCommand, at: 'yesterday' })
    .thenRefused(t, 'invalid_time', 'invalid');
});

// ---------------------------------------------------------------------------------------------------
// AddCartItem

test('AddCartItem: a new line carries the full snapshot and the count added', (t) => {
  cart
    .given([created])
    .when(addCommand())
    .thenEmits(t, [addedGummies(2)]);
});

test('AddCartItem: adding to an existing line adds to its count; the latest snapshot describes the line', (t) => {
  const given = [created, addedGummies(2)];
  const repriced = { ...gummies, discounted_unit_price: '20.00', special_id: null, special_title: null };
  cart
    .given(given)
    .when(addCommand({ count: 3, at: after(HOUR), context: { line: repriced } }))
    .thenEmits(t, [
      addedGummies(3, after(HOUR), { discounted_unit_price: '20.00', special_id: null, special_title: null }),
    ]);
  const s = state([...given, addedGummies(3, after(HOUR), repriced)]);
  t.is(s.lines.length, 1);
  t.is(s.lines[0].count, 5);
  t.is(s.lines[0].discounted_unit_price, '20.00');
  t.is(s.first_item_at, t0, 'a cart already holding items keeps its first_item_at');
});

test('AddCartItem: refused when the cart does not exist', (t) => {
  cart.given([]).when(addCommand()).thenRefused(t, 'cart_not_found', 'not_found');
});

test('AddCartItem: refused when the cart is checked out', (t) => {
  cart
    .given([created, addedGummies(2), ...checkedOut()])
    .when(addCommand())
    .thenRefused(t, 'cart_checked_out', 'conflict');
});

test('AddCartItem: refused with a count outside 1–100', (t) => {
  for (const count of [0, -1, 101, 1.5]) {
    cart.given([created]).when(addCommand({ count })).thenRefused(t, 'invalid_count', 'invalid');
  }
  cart
    .given([created])
    .when(addCommand({ count: 100 }))
    .thenEmits(t, [addedGummies(100)]);
});

test('AddCartItem: refused for an unknown or delisted menu product', (t) => {
  cart
    .given([created])
    .when(addCommand({ context: { line: null } }))
    .thenRefused(t, 'unknown_menu_product', 'invalid');
});

test('AddCartItem: refused when the menu product lacks that weight', (t) => {
  cart
    .given([created])
    .when(
      addCommand({
        price_id: 'ounce',
        context: { line: { ...gummies, unit_price: null, discounted_unit_price: null } },
      }),
    )
    .thenRefused(t, 'price_not_available', 'invalid');
});

test('AddCartItem: refused for a menu product of another store', (t) => {
  const err = cart
    .given([created])
    .when(addCommand({ context: { line: { ...gummies, store_id: 4 } } }))
    .thenRefused(t, 'menu_product_not_at_store', 'invalid');
  t.deepEqual(err?.details, { menu_product_id: 101, store_id: 3 });
});

test('AddCartItem: refused for an existing line in another weight', (t) => {
  const err = cart
    .given([created, addedGummies(2)])
    .when(addCommand({ price_id: 'gram' }))
    .thenRefused(t, 'line_weight_mismatch', 'conflict');
  t.deepEqual(err?.details, { menu_product_id: 101, price_id: 'each' });
});

test('AddCartItem: a line holds at most 1,000 units', (t) => {
  const given = [
    created,
    addedGummies(100),
    events.CartItemQuantityChanged({ menu_product_id: 101, count: 950, previous_count: 100, changed_at: t0 }),
  ];
  cart
    .given(given)
    .when(addCommand({ count: 51 }))
    .thenRefused(t, 'line_count_exceeded', 'invalid');
  cart
    .given(given)
    .when(addCommand({ count: 50 }))
    .thenEmits(t, [addedGummies(50)]);
});

// ---------------------------------------------------------------------------------------------------
// ChangeCartItemQuantity, RemoveCartItem

const change = (count: number, menu_product_id = 101): CartCommand => ({
  type: 'ChangeCartItemQuantity',
  menu_product_id,
  count,
  at: after(HOUR),
});

test('ChangeCartItemQuantity: CartItemQuantityChanged with the new and previous counts', (t) => {
  cart
    .given([created, addedGummies(2)])
    .when(change(7))
    .thenEmits(t, [
      events.CartItemQuantityChanged({
        menu_product_id: 101,
        count: 7,
        previous_count: 2,
        changed_at: after(HOUR),
      }),
    ]);
  t.is(
    state([created, addedGummies(2), ...decider.decide(change(7), state([created, addedGummies(2)]))])
      .lines[0].count,
    7,
  );
});

test('ChangeCartItemQuantity: the same count appends nothing', (t) => {
  cart
    .given([created, addedGummies(2)])
    .when(change(2))
    .thenEmits(t, []);
});

test('ChangeCartItemQuantity: 0 removes the line', (t) => {
  cart
    .given([created, addedGummies(2)])
    .when(change(0))
    .thenEmits(t, [
      events.CartItemRemoved({ menu_product_id: 101, previous_count: 2, removed_at: after(HOUR) }),
    ]);
});

test('ChangeCartItemQuantity: up to 1,000, not beyond', (t) => {
  cart
    .given([created, addedGummies(2)])
    .when(change(1000))
    .thenEmits(t, [
      events.CartItemQuantityChanged({
        menu_product_id: 101,
        count: 1000,
        previous_count: 2,
        changed_at: after(HOUR),
      }),
    ]);
  for (const count of [1001, -1, 2.5]) {
    cart
      .given([created, addedGummies(2)])
      .when(change(count))
      .thenRefused(t, 'invalid_count', 'invalid');
  }
});

test('ChangeCartItemQuantity: refused for a line the cart does not hold', (t) => {
  cart
    .given([created, addedGummies(2)])
    .when(change(3, 999))
    .thenRefused(t, 'cart_line_not_found', 'not_found');
});

test('ChangeCartItemQuantity: refused for an unknown or checked-out cart', (t) => {
  cart.given([]).when(change(3)).thenRefused(t, 'cart_not_found', 'not_found');
  cart
    .given([created, addedGummies(2), ...checkedOut()])
    .when(change(3))
    .thenRefused(t, 'cart_checked_out', 'conflict');
});

const remove = (menu_product_id = 101): CartCommand => ({
  type: 'RemoveCartItem',
  menu_product_id,
  at: after(HOUR),
});

test('RemoveCartItem: CartItemRemoved', (t) => {
  cart
    .given([created, addedGummies(2), addedFlower(3)])
    .when(remove())
    .thenEmits(t, [
      events.CartItemRemoved({ menu_product_id: 101, previous_count: 2, removed_at: after(HOUR) }),
    ]);
});

test('RemoveCartItem: refused for a line the cart does not hold', (t) => {
  cart
    .given([created, addedGummies(2)])
    .when(remove(102))
    .thenRefused(t, 'cart_line_not_found', 'not_found');
});

test('RemoveCartItem: refused for an unknown or checked-out cart', (t) => {
  cart.given([]).when(remove()).thenRefused(t, 'cart_not_found', 'not_found');
  cart
    .given([created, addedGummies(2), ...checkedOut()])
    .when(remove())
    .thenRefused(t, 'cart_checked_out', 'conflict');
});

test('lines keep the order of first placement; a line removed and placed again goes last', (t) => {
  const s = state([
    created,
    addedGummies(1),
    addedFlower(1),
    addedGummies(1),
    events.CartItemRemoved({ menu_product_id: 101, previous_count: 2, removed_at: t0 }),
    addedGummies(4, after(HOUR)),
  ]);
  t.deepEqual(
    s.lines.map((l) => [l.menu_product_id, l.count]),
    [
      [102, 1],
      [101, 4],
    ],
  );
  t.is(s.updated_at, after(HOUR));
});

// ---------------------------------------------------------------------------------------------------
// IdentifyCartCustomer

const customer = {
  email: 'ada@example.com',
  first_name: 'Ada',
  last_name: 'Lovelace',
  phone_number: '+15555550100',
  DOB: '1990-05-01T00:00:00.000Z',
};
const identify = (
  over: Partial<typeof customer> | Record<string, null> = {},
  at = after(HOUR),
): CartCommand => ({
  type: 'IdentifyCartCustomer',
  ...customer,
  ...over,
  at,
});
const identified = events.CartCustomerIdentified({ ...customer, user_id: 42, identified_at: after(HOUR) });

test('IdentifyCartCustomer: CartCustomerIdentified', (t) => {
  cart.given([created]).when(identify()).thenEmits(t, [identified]);
});

test('IdentifyCartCustomer: unchanged appends nothing; a change appends', (t) => {
  cart
    .given([created, identified])
    .when(identify({}, after(2 * HOUR)))
    .thenEmits(t, []);
  cart
    .given([created, identified])
    .when(identify({ phone_number: null }, after(2 * HOUR)))
    .thenEmits(t, [
      events.CartCustomerIdentified({
        ...customer,
        phone_number: null,
        user_id: 42,
        identified_at: after(2 * HOUR),
      }),
    ]);
});

test('IdentifyCartCustomer: allowed after checkout', (t) => {
  cart
    .given([created, addedGummies(2), ...checkedOut()])
    .when(identify())
    .thenEmits(t, [identified]);
});

test('IdentifyCartCustomer: refused for an unknown cart or a bad DOB', (t) => {
  cart.given([]).when(identify()).thenRefused(t, 'cart_not_found', 'not_found');
  cart
    .given([created])
    .when(identify({ DOB: '01/05/1990' }))
    .thenRefused(t, 'invalid_dob', 'invalid');
});

// ---------------------------------------------------------------------------------------------------
// CheckOutCart

test('CheckOutCart: CartCheckedOut and CartStatusChanged pending → verification, in one decision', (t) => {
  cart
    .given([created, addedGummies(2), addedFlower(3)])
    .when(
      checkoutCommand({
        reservation_mode: 'delivery',
        reservation_start_window: '2026-03-01T18:00',
        promo_code: 'SPRING',
      }),
    )
    .thenEmits(t, [
      events.CartCheckedOut({
        reservation_mode: 'delivery',
        reservation_start_window: '2026-03-01T18:00',
        promo_code: 'SPRING',
        checked_out_at: after(HOUR),
        amount: 36.3,
      }),
      moved('pending', 'verification', after(HOUR)),
    ]);
});

test('CheckOutCart: reservation_start_window defaults to ""', (t) => {
  cart
    .given([created, addedGummies(2)])
    .when(checkoutCommand())
    .thenEmits(t, checkedOut('pickup', after(HOUR), 36));
  const s = state([created, addedGummies(2), ...checkedOut('curbside')]);
  t.is(s.status, 'verification');
  t.is(s.reservation_mode, 'curbside');
  t.is(s.checked_out_at, after(HOUR));
});

test('CheckOutCart: refused for an empty cart, also once emptied', (t) => {
  cart.given([created]).when(checkoutCommand()).thenRefused(t, 'cart_empty', 'conflict');
  cart
    .given([
      created,
      addedGummies(2),
      events.CartItemRemoved({ menu_product_id: 101, previous_count: 2, removed_at: t0 }),
    ])
    .when(checkoutCommand())
    .thenRefused(t, 'cart_empty', 'conflict');
});

test('CheckOutCart: refused when already checked out', (t) => {
  cart
    .given([created, addedGummies(2), ...checkedOut()])
    .when(checkoutCommand())
    .thenRefused(t, 'cart_checked_out', 'conflict');
});

test('CheckOutCart: refused for an unknown cart', (t) => {
  cart.given([]).when(checkoutCommand()).thenRefused(t, 'cart_not_found', 'not_found');
});

test('CheckOutCart: refused for a mode the store does not offer', (t) => {
  const cases: [ReservationMode, typeof allModes][] = [
    ['pickup', { ...allModes, pickup: false }],
    ['delivery', { ...allModes, delivery: false }],
    ['curbside', { ...allModes, curbside_enabled: false }],
  ];
  for (const [mode, store] of cases) {
    const err = cart
      .given([created, addedGummies(2)])
      .when(checkoutCommand({ reservation_mode: mode, context: { store } }))
      .thenRefused(t, 'reservation_mode_unavailable', 'conflict');
    t.is(err?.details?.reservation_mode, mode);
    t.deepEqual(
      err?.details?.available,
      modes.filter((m) => m !== mode),
    );
  }
});

test('CheckOutCart: an abandoned cart can still be checked out', (t) => {
  cart
    .given([
      created,
      addedGummies(2),
      events.CartAbandoned({ abandoned_at: after(SIX_HOURS), first_item_at: t0, item_count: 2 }),
    ])
    .when(checkoutCommand({ at: after(7 * HOUR) }))
    .thenEmits(t, checkedOut('pickup', after(7 * HOUR), 36));
});

// ---------------------------------------------------------------------------------------------------
// ChangeCartStatus: the docs/write-side.md table, every pair

/** docs/write-side.md, written out independently of the implementation. */
const designTable: Record<CartStatus, CartStatus[]> = {
  pending: ['verification'],
  verification: ['staff_member_review', 'preparing', 'cancelled', 'dismissed'],
  staff_member_review: ['preparing', 'cancelled', 'dismissed'],
  preparing: ['ready_for_pickup', 'delivery_started', 'cancelled', 'dismissed'],
  ready_for_pickup: ['finished', 'dismissed'],
  delivery_started: ['delivery_finished', 'dismissed'],
  delivery_finished: ['finished'],
  finished: ['with_review'],
  with_review: [],
  cancelled: [],
  dismissed: [],
};
const modes: ReservationMode[] = ['pickup', 'curbside', 'delivery'];

function expectedAllowed(from: CartStatus, to: CartStatus, mode: ReservationMode): boolean {
  if (!designTable[from].includes(to)) return false;
  if (from === 'preparing' && to === 'ready_for_pickup') return mode !== 'delivery';
  if (from === 'preparing' && to === 'delivery_started') return mode === 'delivery';
  return true;
}

/** The statuses a checked-out cart passes through to reach `status`, or null when its mode never gets there. */
function pathTo(status: CartStatus, mode: ReservationMode): CartStatus[] | null {
  const pickupLike = mode !== 'delivery';
  const paths: Partial<Record<CartStatus, CartStatus[]>> = {
    verification: ['verification'],
    staff_member_review: ['verification', 'staff_member_review'],
    preparing: ['verification', 'preparing'],
    cancelled: ['verification', 'cancelled'],
    dismissed: ['verification', 'dismissed'],
    ...(pickupLike
      ? {
          ready_for_pickup: ['verification', 'preparing', 'ready_for_pickup'],
          finished: ['verification', 'preparing', 'ready_for_pickup', 'finished'],
          with_review: ['verification', 'preparing', 'ready_for_pickup', 'finished', 'with_review'],
        }
      : {
          delivery_started: ['verification', 'preparing', 'delivery_started'],
          delivery_finished: ['verification', 'preparing', 'delivery_started', 'delivery_finished'],
          finished: ['verification', 'preparing', 'delivery_started', 'delivery_finished', 'finished'],
          with_review: [
            'verification',
            'preparing',
            'delivery_started',
            'delivery_finished',
            'finished',
            'with_review',
          ],
        }),
  };
  return paths[status] ?? null;
}

function cartAt(status: CartStatus, mode: ReservationMode): CartEvent[] | null {
  const path = pathTo(status, mode);
  if (!path) return null;
  const given: CartEvent[] = [created, addedGummies(2), ...checkedOut(mode)];
  for (let i = 1; i < path.length; i++) {
    given.push(moved(path[i - 1], path[i], after(2 * HOUR), path[i] === 'with_review' ? 5 : null));
  }
  return given;
}

const statusCommand = (status: CartStatus, over: Record<string, unknown> = {}): CartCommand =>
  ({
    type: 'ChangeCartStatus',
    status,
    ...(status === 'with_review' ? { rating: 4 } : {}),
    at: after(3 * HOUR),
    ...over,
  }) as CartCommand;

for (const mode of modes) {
  for (const from of cartStatuses) {
    const given = cartAt(from, mode);
    if (!given) continue;
    test(`ChangeCartStatus (${mode}) from ${from}: allowed iff docs/write-side.md allows`, (t) => {
      t.is(state(given).status, from);
      const allowedTo = cartStatuses.filter((to) => expectedAllowed(from, to, mode));
      t.deepEqual(allowedMoves(state(given)), allowedTo);
      for (const to of cartStatuses) {
        const when = cart.given(given).when(statusCommand(to));
        if (expectedAllowed(from, to, mode)) {
          when.thenEmits(t, [moved(from, to, after(3 * HOUR), to === 'with_review' ? 4 : null)]);
        } else {
          const err = when.thenRefused(t, 'invalid_status_move', 'conflict');
          t.deepEqual(err?.details, { from, to, allowed: allowedTo });
          t.true(err?.message.includes(from) && err?.message.includes(to));
        }
      }
    });
  }
}

test('every status is reachable in some mode', (t) => {
  for (const s of cartStatuses.filter((s) => s !== 'pending')) {
    t.true(
      modes.some((m) => pathTo(s, m) !== null),
      s,
    );
  }
});

test('ChangeCartStatus: a pending cart reaches verification only by checking out', (t) => {
  const given = [created, addedGummies(2)];
  t.deepEqual(allowedMoves(state(given)), ['verification']);
  const err = cart
    .given(given)
    .when(statusCommand('verification'))
    .thenRefused(t, 'checkout_required', 'conflict');
  t.deepEqual(err?.details, { from: 'pending', to: 'verification', allowed: ['verification'] });
  for (const to of cartStatuses.filter((s) => s !== 'verification')) {
    const e = cart.given(given).when(statusCommand(to)).thenRefused(t, 'invalid_status_move', 'conflict');
    t.deepEqual(e?.details, { from: 'pending', to, allowed: ['verification'] });
  }
});

test('ChangeCartStatus: refused for an unknown cart', (t) => {
  cart.given([]).when(statusCommand('preparing')).thenRefused(t, 'cart_not_found', 'not_found');
  t.deepEqual(allowedMoves({ exists: false }), []);
});

test('ChangeCartStatus: assignment fields given are recorded, left-out ones carried over, null clears', (t) => {
  const given = cartAt('verification', 'pickup')!;
  const first = decider.decide(
    statusCommand('preparing', {
      assigned_employee_id: 31,
      assigned_employee_name: 'Sam',
      assigned_manager_id: 32,
      assigned_manager_name: 'Kim',
      checkout_message: 'Bring ID',
      pos_order_id: 'POS-77',
      queue_number: 12,
    }),
    state(given),
  );
  t.deepEqual(first, [
    events.CartStatusChanged({
      from: 'verification',
      to: 'preparing',
      changed_at: after(3 * HOUR),
      assigned_employee_id: 31,
      assigned_employee_name: 'Sam',
      assigned_manager_id: 32,
      assigned_manager_name: 'Kim',
      checkout_message: 'Bring ID',
      pos_order_id: 'POS-77',
      queue_number: 12,
      rating: null,
    }),
  ]);
  cart
    .given([...given, ...first])
    .when(statusCommand('ready_for_pickup', { at: after(4 * HOUR), checkout_message: null }))
    .thenEmits(t, [
      events.CartStatusChanged({
        from: 'preparing',
        to: 'ready_for_pickup',
        changed_at: after(4 * HOUR),
        assigned_employee_id: 31,
        assigned_employee_name: 'Sam',
        assigned_manager_id: 32,
        assigned_manager_name: 'Kim',
        checkout_message: null,
        pos_order_id: 'POS-77',
        queue_number: 12,
        rating: null,
      }),
    ]);
  const s = state([...given, ...first]);
  t.is(s.assigned_employee_name, 'Sam');
  t.is(s.queue_number, 12);
  t.is(s.updated_at, after(3 * HOUR));
});

test('ChangeCartStatus: with_review needs a rating 1–5; other moves take none', (t) => {
  const finished = cartAt('finished', 'pickup')!;
  cart
    .given(finished)
    .when(statusCommand('with_review', { rating: undefined }))
    .thenRefused(t, 'invalid_rating', 'invalid');
  for (const rating of [0, 6, 4.5]) {
    cart
      .given(finished)
      .when(statusCommand('with_review', { rating }))
      .thenRefused(t, 'invalid_rating', 'invalid');
  }
  cart
    .given(cartAt('verification', 'pickup')!)
    .when(statusCommand('preparing', { rating: 5 }))
    .thenRefused(t, 'rating_not_allowed', 'invalid');
  t.is(state(finished).rating, 0, 'rating is 0 until with_review');
  const reviewed = state([
    ...finished,
    ...decider.decide(statusCommand('with_review', { rating: 3 }), state(finished)),
  ]);
  t.is(reviewed.status, 'with_review');
  t.is(reviewed.rating, 3);
});

// ---------------------------------------------------------------------------------------------------
// AbandonCart and abandonmentDeadline

const abandon = (at: string, abandon_after_ms = SIX_HOURS): CartCommand => ({
  type: 'AbandonCart',
  at,
  abandon_after_ms,
});

test('AbandonCart: at the deadline exactly, CartAbandoned', (t) => {
  cart
    .given([created, addedGummies(2, t0), addedFlower(3, after(HOUR))])
    .when(abandon(after(SIX_HOURS)))
    .thenEmits(t, [
      events.CartAbandoned({ abandoned_at: after(SIX_HOURS), first_item_at: t0, item_count: 5 }),
    ]);
});

test('AbandonCart: a millisecond before the deadline, not due', (t) => {
  const err = cart
    .given([created, addedGummies(2, t0)])
    .when(abandon(after(SIX_HOURS - 1)))
    .thenRefused(t, 'abandonment_not_due', 'conflict');
  t.deepEqual(err?.details, { due_at: after(SIX_HOURS) });
});

test('AbandonCart: a timer that fires late still abandons', (t) => {
  cart
    .given([created, addedGummies(2, t0)])
    .when(abandon(after(30 * HOUR)))
    .thenEmits(t, [
      events.CartAbandoned({ abandoned_at: after(30 * HOUR), first_item_at: t0, item_count: 2 }),
    ]);
});

test('AbandonCart: the configured period is used (PDS_ABANDON_AFTER)', (t) => {
  cart
    .given([created, addedGummies(2, t0)])
    .when(abandon(after(50), 50))
    .thenEmits(t, [events.CartAbandoned({ abandoned_at: after(50), first_item_at: t0, item_count: 2 })]);
  cart
    .given([created, addedGummies(2, t0)])
    .when(abandon(after(49), 50))
    .thenRefused(t, 'abandonment_not_due', 'conflict');
  cart
    .given([created, addedGummies(2, t0)])
    .when(abandon(after(50), 0))
    .thenRefused(t, 'invalid_abandon_after', 'invalid');
});

test('AbandonCart: emptied then refilled, a new period starts at the refill', (t) => {
  const given = [
    created,
    addedGummies(2, t0),
    events.CartItemRemoved({ menu_product_id: 101, previous_count: 2, removed_at: after(HOUR) }),
    addedFlower(1, after(2 * HOUR)),
  ];
  t.is(state(given).first_item_at, after(2 * HOUR));
  t.is(abandonmentDeadline(state(given), SIX_HOURS), after(8 * HOUR));
  cart
    .given(given)
    .when(abandon(after(SIX_HOURS)))
    .thenRefused(t, 'abandonment_not_due', 'conflict');
  cart
    .given(given)
    .when(abandon(after(8 * HOUR - 1)))
    .thenRefused(t, 'abandonment_not_due', 'conflict');
  cart
    .given(given)
    .when(abandon(after(8 * HOUR)))
    .thenEmits(t, [
      events.CartAbandoned({ abandoned_at: after(8 * HOUR), first_item_at: after(2 * HOUR), item_count: 1 }),
    ]);
});

test('AbandonCart: emptying the cart cancels the pending abandonment (removal or count 0)', (t) => {
  const viaRemove = [
    created,
    addedGummies(2, t0),
    events.CartItemRemoved({ menu_product_id: 101, previous_count: 2, removed_at: after(HOUR) }),
  ];
  t.is(abandonmentDeadline(state(viaRemove), SIX_HOURS), null);
  t.is(state(viaRemove).first_item_at, null);
  cart
    .given(viaRemove)
    .when(abandon(after(SIX_HOURS)))
    .thenRefused(t, 'cart_empty', 'conflict');
  // ChangeCartItemQuantity to 0 decides CartItemRemoved: same effect.
  const zeroed = decider.decide(change(0), state([created, addedGummies(2, t0)]));
  t.is(abandonmentDeadline(state([created, addedGummies(2, t0), ...zeroed]), SIX_HOURS), null);
});

test('AbandonCart: removing one of two lines keeps the period running', (t) => {
  const given = [
    created,
    addedGummies(2, t0),
    addedFlower(1, after(HOUR)),
    events.CartItemRemoved({ menu_product_id: 101, previous_count: 2, removed_at: after(2 * HOUR) }),
  ];
  t.is(abandonmentDeadline(state(given), SIX_HOURS), after(SIX_HOURS));
});

test('AbandonCart: refused for a cart that never held an item', (t) => {
  cart
    .given([created])
    .when(abandon(after(SIX_HOURS)))
    .thenRefused(t, 'cart_empty', 'conflict');
});

test('AbandonCart: refused for a checked-out cart', (t) => {
  cart
    .given([created, addedGummies(2, t0), ...checkedOut()])
    .when(abandon(after(SIX_HOURS)))
    .thenRefused(t, 'cart_checked_out', 'conflict');
});

test('AbandonCart: a cart is abandoned once, even if emptied and refilled', (t) => {
  const abandoned = events.CartAbandoned({
    abandoned_at: after(SIX_HOURS),
    first_item_at: t0,
    item_count: 2,
  });
  cart
    .given([created, addedGummies(2, t0), abandoned])
    .when(abandon(after(20 * HOUR)))
    .thenRefused(t, 'cart_already_abandoned', 'conflict');
  const refilled = [
    created,
    addedGummies(2, t0),
    abandoned,
    events.CartItemRemoved({ menu_product_id: 101, previous_count: 2, removed_at: after(7 * HOUR) }),
    addedGummies(1, after(8 * HOUR)),
  ];
  t.is(abandonmentDeadline(state(refilled), SIX_HOURS), null);
  cart
    .given(refilled)
    .when(abandon(after(20 * HOUR)))
    .thenRefused(t, 'cart_already_abandoned', 'conflict');
});

test('AbandonCart: refused for an unknown cart', (t) => {
  cart
    .given([])
    .when(abandon(after(SIX_HOURS)))
    .thenRefused(t, 'cart_not_found', 'not_found');
});

test('abandonmentDeadline: first_item_at + period while pending, otherwise null', (t) => {
  t.is(abandonmentDeadline({ exists: false }, SIX_HOURS), null);
  t.is(abandonmentDeadline(state([created]), SIX_HOURS), null);
  t.is(abandonmentDeadline(state([created, addedGummies(1, after(HOUR))]), SIX_HOURS), after(7 * HOUR));
  t.is(
    abandonmentDeadline(
      state([created, addedGummies(1, after(HOUR)), addedFlower(1, after(3 * HOUR))]),
      SIX_HOURS,
    ),
    after(7 * HOUR),
  );
  t.is(abandonmentDeadline(state([created, addedGummies(1), ...checkedOut()]), SIX_HOURS), null);
  t.is(
    abandonmentDeadline(
      state([
        created,
        addedGummies(1),
        events.CartAbandoned({ abandoned_at: after(SIX_HOURS), first_item_at: t0, item_count: 1 }),
      ]),
      SIX_HOURS,
    ),
    null,
  );
});

// ---------------------------------------------------------------------------------------------------
// PostCurbsideArrival

const curbsideCart = [created, addedGummies(2), ...checkedOut('curbside')];

test('PostCurbsideArrival: CurbsideArrivalPosted with the store id', (t) => {
  const fields = {
    vehicle_make: 'Subaru',
    vehicle_color: 'green',
    parking_spot: '4',
    notes: 'n'.repeat(500),
  };
  cart
    .given(curbsideCart)
    .when(arrivalCommand(fields))
    .thenEmits(t, [
      events.CurbsideArrivalPosted({
        arrival_id: ARRIVAL,
        fields,
        arrived_at: after(3 * HOUR),
        store_id: 3,
        user_id: 42,
      }),
    ]);
  const s = state([...curbsideCart, ...decider.decide(arrivalCommand(fields), state(curbsideCart))]);
  t.deepEqual(s.curbside_arrivals, [{ arrival_id: ARRIVAL, fields, arrived_at: after(3 * HOUR) }]);
});

test('PostCurbsideArrival: optional fields may be left out; allowed while preparing and ready', (t) => {
  const fields = { vehicle_make: 'Subaru', vehicle_color: 'green' };
  for (const status of ['preparing', 'ready_for_pickup'] as const) {
    cart
      .given(cartAt(status, 'curbside')!)
      .when(arrivalCommand(fields))
      .thenEmits(t, [
        events.CurbsideArrivalPosted({
          arrival_id: ARRIVAL,
          fields,
          arrived_at: after(3 * HOUR),
          store_id: 3,
          user_id: 42,
        }),
      ]);
  }
});

test('PostCurbsideArrival: refused for an unknown reservation', (t) => {
  cart.given([]).when(arrivalCommand({})).thenRefused(t, 'reservation_not_found', 'not_found');
});

test('PostCurbsideArrival: refused before checkout', (t) => {
  cart
    .given([created, addedGummies(2)])
    .when(arrivalCommand({ vehicle_make: 'Subaru', vehicle_color: 'green' }))
    .thenRefused(t, 'reservation_not_checked_out', 'conflict');
});

test('PostCurbsideArrival: refused for a pickup or delivery reservation, whatever its status', (t) => {
  for (const mode of ['pickup', 'delivery'] as const) {
    for (const status of ['verification', 'preparing', 'ready_for_pickup', 'delivery_started'] as const) {
      const given = cartAt(status, mode);
      if (!given) continue;
      const refused = t.throws(() =>
        decider.decide(arrivalCommand({ vehicle_make: 'VW', vehicle_color: 'red' }), state(given)),
      );
      t.like(refused, {
        code: 'reservation_not_curbside',
        kind: 'conflict',
        details: { reservation_mode: mode },
      });
    }
  }
});

test('PostCurbsideArrival: refused once the reservation is closed', (t) => {
  for (const status of ['finished', 'with_review', 'cancelled', 'dismissed'] as const) {
    cart
      .given(cartAt(status, 'curbside')!)
      .when(arrivalCommand({ vehicle_make: 'Subaru', vehicle_color: 'green' }))
      .thenRefused(t, 'reservation_closed', 'conflict');
  }
});

test('PostCurbsideArrival: refused when the store has curbside off or no setting', (t) => {
  const fields = { vehicle_make: 'Subaru', vehicle_color: 'green' };
  cart
    .given(curbsideCart)
    .when(arrivalCommand(fields, { ...curbside, enabled: false }))
    .thenRefused(t, 'curbside_disabled', 'conflict');
  cart.given(curbsideCart).when(arrivalCommand(fields, null)).thenRefused(t, 'curbside_disabled', 'conflict');
});

test('PostCurbsideArrival: refused with missing, empty, unknown or over-long fields, each named', (t) => {
  const err = cart
    .given(curbsideCart)
    .when(
      arrivalCommand({
        vehicle_color: '   ',
        parking_spot: 'x'.repeat(201),
        licence_plate: 'ABC123',
        notes: 'n'.repeat(501),
      }),
    )
    .thenRefused(t, 'invalid_arrival_fields', 'invalid');
  const errors = (err?.details?.errors ?? []) as { field: string; message: string }[];
  t.deepEqual(errors.map((e) => e.field).sort(), [
    'licence_plate',
    'notes',
    'parking_spot',
    'vehicle_color',
    'vehicle_make',
  ]);
  for (const e of errors) t.true(e.message.length > 0);
});

test('PostCurbsideArrival: a value of exactly 200 characters is accepted', (t) => {
  const fields = { vehicle_make: 'm'.repeat(200), vehicle_color: 'green' };
  cart
    .given(curbsideCart)
    .when(arrivalCommand(fields))
    .thenEmits(t, [
      events.CurbsideArrivalPosted({
        arrival_id: ARRIVAL,
        fields,
        arrived_at: after(3 * HOUR),
        store_id: 3,
        user_id: 42,
      }),
    ]);
});

// ---------------------------------------------------------------------------------------------------
// Read helpers

test('cartAmount: sum of discounted unit price × count, exact to the cent', (t) => {
  t.is(cartAmount({ exists: false }), 0);
  t.is(cartAmount(state([created])), 0);
  // 3 × 0.10 is 0.30000000000000004 in floats; the cart says 0.3.
  t.is(cartAmount(state([created, addedFlower(3)])), 0.3);
  t.is(cartAmount(state([created, addedGummies(2), addedFlower(3)])), 36.3);
});

test('toCartRecord: the `cart_status_updated` cart (docs/webhooks.md) of a checked-out, assigned cart', (t) => {
  const s = state([
    created,
    addedGummies(2),
    addedFlower(3),
    events.CartCustomerIdentified({ ...customer, identified_at: after(HOUR) }),
    events.CartCheckedOut({
      reservation_mode: 'pickup',
      reservation_start_window: '2026-03-01T18:00',
      promo_code: 'SPRING',
      checked_out_at: '2026-03-01T11:05:09.123Z',
      amount: 36.3,
    }),
    moved('pending', 'verification', '2026-03-01T11:05:09.123Z'),
    events.CartStatusChanged({
      from: 'verification',
      to: 'preparing',
      changed_at: after(2 * HOUR),
      ...noAssignment,
      assigned_employee_id: 31,
      assigned_employee_name: 'Sam',
      pos_order_id: 'POS-77',
      queue_number: 12,
      rating: null,
    }),
  ]);
  const record = toCartRecord(s, { id: 9001, store_name: 'Green Leaf' });
  t.deepEqual(record, {
    id: 9001,
    uuid: UUID,
    amount: 36.3,
    status: 'preparing',
    reservation_mode: 'pickup',
    reservation_start_window: '2026-03-01T18:00',
    checked_out_time: '2026-03-01 11:05:09',
    created_at: '2026-03-01 10:00:00',
    store_id: 3,
    store_name: 'Green Leaf',
    user_id: 42,
    customer_phone_number: '+15555550100',
    customer_email_address: 'ada@example.com',
    rating: 0,
    assigned_employee_id: 31,
    assigned_employee_name: 'Sam',
    assigned_manager_id: null,
    assigned_manager_name: null,
    checkout_message: null,
    customer_name: 'Ada Lovelace',
    pos_order_id: 'POS-77',
    promo_code: 'SPRING',
    queue_number: 12,
    tags: null,
    external_user_id: null,
    external_user_source: null,
    products: [
      {
        brand: 'Kiva',
        name: 'Camino Gummies',
        kind: 'edible',
        kind_subtype: 'gummies',
        lineage: 'hybrid',
        product_id: 11,
        price_id: 'each',
        count: 2,
        checkout_price: 20,
        discounted_checkout_price: 18,
        special_id: 5,
        special_title: '10% off Kiva',
      },
      {
        brand: 'Glass House',
        name: 'Blue Dream',
        kind: 'flower',
        kind_subtype: null,
        lineage: null,
        product_id: 12,
        price_id: 'eighth ounce',
        count: 3,
        checkout_price: 0.1,
        discounted_checkout_price: 0.1,
        special_id: null,
        special_title: null,
      },
    ],
  });
  t.true(cartRecord.safeParse(record).success);
  t.deepEqual(Object.keys(record), Object.keys(cartRecord.shape), 'fields in the specification table order');
});

test('toCartRecord: an open cart has empty strings for unset times, mode and contact; nulls elsewhere', (t) => {
  const record = toCartRecord(state([created, addedGummies(1)]), { id: 1, store_name: 'Green Leaf' });
  t.like(record, {
    status: 'pending',
    reservation_mode: '',
    reservation_start_window: '',
    checked_out_time: '',
    customer_phone_number: '',
    customer_email_address: '',
    customer_name: null,
    promo_code: null,
    rating: 0,
    amount: 36 / 2,
  });
  t.true(cartRecord.safeParse(record).success);
  const partial = toCartRecord(
    state([
      created,
      events.CartCustomerIdentified({
        email: null,
        first_name: 'Ada',
        last_name: null,
        phone_number: null,
        DOB: null,
        identified_at: t0,
      }),
    ]),
    { id: 1, store_name: 'Green Leaf' },
  );
  t.is(partial.customer_name, 'Ada');
  t.is(partial.customer_email_address, '');
});

test('toCartRecord: rating after with_review', (t) => {
  const record = toCartRecord(state(cartAt('with_review', 'delivery')!), { id: 1, store_name: 'Green Leaf' });
  t.is(record.status, 'with_review');
  t.is(record.rating, 5);
});

test('toPartnerCart: the webhook cart plus updated_at, abandoned_at and source', (t) => {
  const abandonedAt = after(SIX_HOURS);
  const s = state([
    created,
    addedGummies(2),
    events.CartAbandoned({ abandoned_at: abandonedAt, first_item_at: t0, item_count: 2 }),
  ]);
  t.like(toPartnerCart(s, { id: 1, store_name: 'Green Leaf' }), {
    uuid: UUID,
    updated_at: abandonedAt,
    abandoned_at: abandonedAt,
    source,
  });
});

test('toAbandonedCart: the docs/webhooks.md cart', (t) => {
  const s = state([
    events.CartCreated({
      cart_uuid: UUID,
      store_id: 3,
      source,
      user_id: 42,
      created_at: '2026-03-01T12:00:00+02:00',
    }),
    addedGummies(2),
    addedFlower(3),
  ]);
  const body = toAbandonedCart(s);
  t.deepEqual(body, {
    uuid: UUID,
    created_at: t0,
    products: [
      {
        product_id: 11,
        product_name: 'Camino Gummies',
        product_brand_name: 'Kiva',
        product_image: ['https://img.example/11.png'],
        product_price: '20.00',
        quantity: 2,
        category: 'edible',
        subcategory: 'gummies',
        lineage: 'hybrid',
        weight_variant: null,
      },
      {
        product_id: 12,
        product_name: 'Blue Dream',
        product_brand_name: 'Glass House',
        product_image: [],
        product_price: '0.10',
        quantity: 3,
        category: 'flower',
        subcategory: null,
        lineage: null,
        weight_variant: 'eighth ounce',
      },
    ],
  });
  t.true(abandonedCart.safeParse(body).success);
});

test('toWebhookCustomer: the docs/webhooks.md customer, or null', (t) => {
  const none: CartState = { exists: false };
  t.is(toWebhookCustomer(none), null);
  t.is(toWebhookCustomer(state([created])), null);
  t.deepEqual(toWebhookCustomer(state([created, identified])), customer);
  t.deepEqual(Object.keys(toWebhookCustomer(state([created, identified]))!), [
    'email',
    'first_name',
    'last_name',
    'phone_number',
    'DOB',
  ]);
  const cleared = events.CartCustomerIdentified({
    email: null,
    first_name: null,
    last_name: null,
    phone_number: null,
    DOB: null,
    identified_at: after(2 * HOUR),
  });
  t.is(toWebhookCustomer(state([created, identified, cleared])), null);
  t.deepEqual(
    toWebhookCustomer(state([created, { ...cleared, data: { ...cleared.data, email: 'x@example.com' } }])),
    { email: 'x@example.com', first_name: null, last_name: null, phone_number: null, DOB: null },
  );
});

test('the cart as of any revision is rebuilt from its own stream', (t) => {
  const stream: CartEvent[] = [created];
  const commands: CartCommand[] = [
    addCommand({ count: 2, at: t0 }),
    {
      ...addCommand({ menu_product_id: 102, price_id: 'eighth ounce', count: 3, context: { line: flower } }),
      at: after(HOUR),
    },
    change(5),
    identify(),
    checkoutCommand({ at: after(2 * HOUR) }),
    statusCommand('preparing'),
  ];
  for (const c of commands) stream.push(...decider.decide(c, fold(decider, stream)));
  const s = state(stream);
  t.is(s.status, 'preparing');
  t.is(cartAmount(s), 5 * 18 + 0.3);
  t.deepEqual(
    s.lines.map((l) => [l.menu_product_id, l.price_id, l.count]),
    [
      [101, 'each', 5],
      [102, 'eighth ounce', 3],
    ],
  );
  const checkout = stream.find((e) => e.type === 'CartCheckedOut');
  t.is(checkout?.type === 'CartCheckedOut' ? checkout.data.amount : null, 90.3);
  // Every event validates against its registered schema (as the command handler re-checks).
  for (const e of stream) t.notThrows(() => events[e.type].schema.parse(e.data));
});

test('EraseCartCustomer: CartCustomerErased, after which the cart holds no customer and no arrival answers', (t) => {
  const ERASURE = '0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9';
  const arrived = [
    ...(cartAt('preparing', 'curbside') as CartEvent[]),
    events.CurbsideArrivalPosted({
      arrival_id: ARRIVAL,
      fields: { vehicle_make: 'Subaru' },
      arrived_at: after(3 * HOUR),
      store_id: 3,
      user_id: 42,
    }),
  ];
  const given = [...arrived.slice(0, 1), identified, ...arrived.slice(1)];
  const command = { type: 'EraseCartCustomer' as const, erasure_id: ERASURE, at: after(4 * HOUR) };
  const erased = events.CartCustomerErased({ erasure_id: ERASURE, erased_at: after(4 * HOUR) });
  cart.given(given).when(command).thenEmits(t, [erased]);
  const state = fold(decider, [...given, erased]);
  if (!state.exists) return t.fail('the cart exists');
  t.is(state.customer, null);
  t.deepEqual(
    state.curbside_arrivals.map((a) => a.fields),
    [{}],
  );
  t.is(state.updated_at, after(4 * HOUR));
  cart.given([]).when(command).thenRefused(t, 'cart_not_found');
  // Nothing left to forget: erased before, or never identified.
  cart
    .given([...given, erased])
    .when(command)
    .thenEmits(t, []);
  cart.given([created]).when(command).thenEmits(t, []);
});

test('CartCustomerIdentified and CurbsideArrivalPosted written at version 1 read with no user id', (t) => {
  const v1 = { ...customer, identified_at: after(HOUR) };
  t.like(eventRegistry.parse('CartCustomerIdentified', v1, 1).data, { ...customer, user_id: null });
  const arrival = { arrival_id: ARRIVAL, fields: { a: 'b' }, arrived_at: after(HOUR), store_id: 3 };
  t.like(eventRegistry.read('CurbsideArrivalPosted', arrival, 1).data, { fields: { a: 'b' }, user_id: null });
});
