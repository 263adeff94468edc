/**
 * The cart's decisions (docs/write-side.md, "Carts"): each command is handled by a small named function
 * that refuses it with a `DomainError` or answers the events it leads to. Pure: times come in the
 * command's `at`, facts from other streams in its `context`.
 */
import { conflict, invalid, notFound } from '../decider.ts';
import { isoDateTime, weights } from '../schemas.ts';
import type { CartCommand } from './commands.ts';
import { type CartEvent, events } from './events.ts';
import {
  abandonmentDeadline,
  allowedMoves,
  type Cart,
  type CartLine,
  type CartState,
  cartAmount,
  itemCount,
  pickAssignment,
} from './state.ts';
import {
  type ArrivalFormField,
  assignmentKeys,
  type CartCustomer,
  closedStatuses,
  customerKeys,
  MAX_ADD_COUNT,
  MAX_ARRIVAL_FIELD_LENGTH,
  MAX_ARRIVAL_NOTES_LENGTH,
  MAX_LINE_COUNT,
  reservationModes,
} from './vocabulary.ts';

type Command<T extends CartCommand['type']> = Extract<CartCommand, { type: T }>;

/** Normalises a command time to ISO 8601 UTC. */
function time(at: string): string {
  const t = typeof at === 'string' ? Date.parse(at) : Number.NaN;
  if (Number.isNaN(t)) throw invalid('invalid_time', `not a date-time: ${String(at)}`);
  return new Date(t).toISOString();
}

function existing(state: CartState, code = 'cart_not_found'): Cart {
  if (!state.exists) throw notFound(code, 'No such cart');
  return state;
}

function open(state: CartState): Cart {
  const cart = existing(state);
  if (cart.checked_out_at !== null)
    throw conflict('cart_checked_out', 'The cart is checked out; its lines can no longer change');
  return cart;
}

function findLine(cart: Cart, menuProductId: number): CartLine {
  const line = cart.lines.find((l) => l.menu_product_id === menuProductId);
  if (!line) {
    throw notFound('cart_line_not_found', `The cart holds no line for menu product ${menuProductId}`, {
      menu_product_id: menuProductId,
    });
  }
  return line;
}

const isWholeIn = (n: number, min: number, max: number) => Number.isInteger(n) && n >= min && n <= max;

function arrivalFieldErrors(
  fields: Record<string, unknown>,
  form: readonly ArrivalFormField[],
): { field: string; message: string }[] {
  const errors: { field: string; message: string }[] = [];
  const known = new Map(form.map((f) => [f.name, f]));
  for (const [name, value] of Object.entries(fields)) {
    if (!known.has(name) && name !== 'notes') {
      errors.push({ field: name, message: 'is not a field of this store’s arrival form' });
      continue;
    }
    const max = name === 'notes' ? MAX_ARRIVAL_NOTES_LENGTH : MAX_ARRIVAL_FIELD_LENGTH;
    if (typeof value !== 'string') errors.push({ field: name, message: 'must be a string' });
    else if (value.length > max) errors.push({ field: name, message: `must be at most ${max} characters` });
  }
  for (const f of form) {
    if (!f.required) continue;
    const value = fields[f.name];
    if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) {
      errors.push({ field: f.name, message: `${f.label || f.name} is required` });
    }
  }
  return errors;
}

function createCart(command: Command<'CreateCart'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  if (state.exists) throw conflict('cart_exists', `Cart ${state.uuid} already exists`);
  if (!command.context.store_exists) {
    throw invalid('unknown_store_id', `No store ${command.store_id}`, { store_id: command.store_id });
  }
  return [
    events.CartCreated({
      cart_uuid: command.cart_uuid,
      store_id: command.store_id,
      source: command.source,
      user_id: command.user_id,
      created_at: at,
    }),
  ];
}

function addCartItem(command: Command<'AddCartItem'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  const cart = open(state);
  if (!isWholeIn(command.count, 1, MAX_ADD_COUNT)) {
    throw invalid('invalid_count', `count must be a whole number from 1 to ${MAX_ADD_COUNT}`);
  }
  if (!(weights as readonly string[]).includes(command.price_id)) {
    throw invalid('invalid_price_id', `price_id must be one of: ${weights.join(', ')}`);
  }
  const line = command.context.line;
  if (line === null) {
    throw invalid('unknown_menu_product', `No menu product ${command.menu_product_id}`, {
      menu_product_id: command.menu_product_id,
    });
  }
  if (line.store_id !== cart.store_id) {
    throw invalid(
      'menu_product_not_at_store',
      `Menu product ${command.menu_product_id} is not sold at this cart's store`,
      {
        menu_product_id: command.menu_product_id,
        store_id: cart.store_id,
      },
    );
  }
  if (line.unit_price === null || line.discounted_unit_price === null) {
    throw invalid(
      'price_not_available',
      `Menu product ${command.menu_product_id} is not sold as "${command.price_id}"`,
      {
        menu_product_id: command.menu_product_id,
        price_id: command.price_id,
      },
    );
  }
  const current = cart.lines.find((l) => l.menu_product_id === command.menu_product_id);
  if (current && current.price_id !== command.price_id) {
    throw conflict(
      'line_weight_mismatch',
      `The cart holds menu product ${command.menu_product_id} as "${current.price_id}", not "${command.price_id}"`,
      { menu_product_id: command.menu_product_id, price_id: current.price_id },
    );
  }
  if (current && current.count + command.count > MAX_LINE_COUNT) {
    throw invalid('line_count_exceeded', `A line holds at most ${MAX_LINE_COUNT} units`, {
      menu_product_id: command.menu_product_id,
      count: current.count,
      max: MAX_LINE_COUNT,
    });
  }
  return [
    events.CartItemAdded({
      menu_product_id: command.menu_product_id,
      price_id: command.price_id,
      count: command.count,
      product_id: line.product_id,
      store_id: line.store_id,
      name: line.name,
      brand: line.brand,
      brand_id: line.brand_id,
      kind: line.kind,
      kind_subtype: line.kind_subtype,
      lineage: line.lineage,
      image_urls: [...line.image_urls],
      unit_price: line.unit_price,
      discounted_unit_price: line.discounted_unit_price,
      special_id: line.special_id,
      special_title: line.special_title,
      added_at: at,
    }),
  ];
}

function changeCartItemQuantity(command: Command<'ChangeCartItemQuantity'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  const cart = open(state);
  if (!isWholeIn(command.count, 0, MAX_LINE_COUNT)) {
    throw invalid('invalid_count', `count must be a whole number from 0 to ${MAX_LINE_COUNT}`);
  }
  const line = findLine(cart, command.menu_product_id);
  if (command.count === line.count) return [];
  if (command.count === 0) {
    return [
      events.CartItemRemoved({
        menu_product_id: line.menu_product_id,
        previous_count: line.count,
        removed_at: at,
      }),
    ];
  }
  return [
    events.CartItemQuantityChanged({
      menu_product_id: line.menu_product_id,
      count: command.count,
      previous_count: line.count,
      changed_at: at,
    }),
  ];
}

function removeCartItem(command: Command<'RemoveCartItem'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  const line = findLine(open(state), command.menu_product_id);
  return [
    events.CartItemRemoved({
      menu_product_id: line.menu_product_id,
      previous_count: line.count,
      removed_at: at,
    }),
  ];
}

function identifyCartCustomer(command: Command<'IdentifyCartCustomer'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  const cart = existing(state);
  const customer = Object.fromEntries(customerKeys.map((k) => [k, command[k] ?? null])) as CartCustomer;
  if (customer.DOB !== null && !isoDateTime.safeParse(customer.DOB).success) {
    throw invalid('invalid_dob', 'DOB must be an ISO 8601 date-time');
  }
  const before = cart.customer;
  if (before && customerKeys.every((k) => before[k] === customer[k])) return [];
  return [events.CartCustomerIdentified({ ...customer, user_id: cart.user_id, identified_at: at })];
}

function checkOutCart(command: Command<'CheckOutCart'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  const cart = open(state);
  if (cart.lines.length === 0) throw conflict('cart_empty', 'An empty cart cannot be checked out');
  const store = command.context.store;
  const offered =
    command.reservation_mode === 'pickup'
      ? store.pickup
      : command.reservation_mode === 'delivery'
        ? store.delivery
        : command.reservation_mode === 'curbside'
          ? store.curbside_enabled
          : false;
  if (!offered) {
    const available = reservationModes.filter((m) =>
      m === 'pickup' ? store.pickup : m === 'delivery' ? store.delivery : store.curbside_enabled,
    );
    throw conflict(
      'reservation_mode_unavailable',
      `The store does not offer ${String(command.reservation_mode)}`,
      {
        reservation_mode: command.reservation_mode,
        available,
      },
    );
  }
  return [
    events.CartCheckedOut({
      reservation_mode: command.reservation_mode,
      reservation_start_window: command.reservation_start_window ?? '',
      promo_code: command.promo_code ?? null,
      checked_out_at: at,
      amount: cartAmount(cart),
    }),
    events.CartStatusChanged({
      from: 'pending',
      to: 'verification',
      changed_at: at,
      ...pickAssignment(cart),
      rating: null,
    }),
  ];
}

function changeCartStatus(command: Command<'ChangeCartStatus'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  const cart = existing(state);
  const { status: from } = cart;
  const to = command.status;
  const allowed = allowedMoves(cart);
  if (from === 'pending' && to === 'verification') {
    throw conflict('checkout_required', 'A pending cart moves to verification by being checked out', {
      from,
      to,
      allowed,
    });
  }
  if (!allowed.includes(to)) {
    throw conflict('invalid_status_move', `A cart cannot move from ${from} to ${String(to)}`, {
      from,
      to,
      allowed,
    });
  }
  if (command.rating !== undefined && to !== 'with_review') {
    throw invalid('rating_not_allowed', 'A rating is given only with the move to with_review');
  }
  if (to === 'with_review' && (command.rating === undefined || !isWholeIn(command.rating, 1, 5))) {
    throw invalid('invalid_rating', 'The move to with_review needs a rating from 1 to 5');
  }
  const assignment = pickAssignment(cart);
  for (const k of assignmentKeys) {
    const given = command[k];
    if (given !== undefined) (assignment as Record<string, unknown>)[k] = given;
  }
  return [
    events.CartStatusChanged({
      from,
      to,
      changed_at: at,
      ...assignment,
      rating: to === 'with_review' ? (command.rating ?? null) : null,
    }),
  ];
}

function abandonCart(command: Command<'AbandonCart'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  const cart = existing(state);
  if (!Number.isFinite(command.abandon_after_ms) || command.abandon_after_ms <= 0) {
    throw invalid('invalid_abandon_after', 'abandon_after_ms must be a positive number');
  }
  if (cart.checked_out_at !== null) throw conflict('cart_checked_out', 'A checked-out cart is not abandoned');
  if (cart.abandoned_at !== null) {
    throw conflict('cart_already_abandoned', `The cart was abandoned at ${cart.abandoned_at}`, {
      abandoned_at: cart.abandoned_at,
    });
  }
  const due = abandonmentDeadline(cart, command.abandon_after_ms);
  if (due === null || cart.first_item_at === null)
    throw conflict('cart_empty', 'An empty cart is not abandoned');
  if (Date.parse(at) < Date.parse(due)) {
    throw conflict('abandonment_not_due', `The cart counts as abandoned from ${due}`, { due_at: due });
  }
  return [
    events.CartAbandoned({
      abandoned_at: at,
      first_item_at: cart.first_item_at,
      item_count: itemCount(cart),
    }),
  ];
}

function postCurbsideArrival(command: Command<'PostCurbsideArrival'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  const cart = existing(state, 'reservation_not_found');
  if (cart.checked_out_at === null) {
    throw conflict('reservation_not_checked_out', 'The cart has not been checked out yet');
  }
  // docs/partner-api.md, "The curbside arrival": a pickup or delivery customer does not arrive at the curb.
  if (cart.reservation_mode !== 'curbside') {
    throw conflict(
      'reservation_not_curbside',
      `The reservation is for ${cart.reservation_mode}, not curbside pickup`,
      { reservation_mode: cart.reservation_mode },
    );
  }
  if (closedStatuses.includes(cart.status)) {
    throw conflict('reservation_closed', `The reservation is ${cart.status}`, { status: cart.status });
  }
  const setting = command.context.curbside;
  if (!setting?.enabled) throw conflict('curbside_disabled', 'The store does not offer curbside pickup');
  const errors = arrivalFieldErrors(command.fields, setting.arrival_form_fields);
  if (errors.length > 0) {
    throw invalid('invalid_arrival_fields', 'The arrival form is not filled in correctly', { errors });
  }
  return [
    events.CurbsideArrivalPosted({
      arrival_id: command.arrival_id,
      fields: { ...command.fields },
      arrived_at: at,
      store_id: cart.store_id,
      user_id: cart.user_id,
    }),
  ];
}

/**
 * docs/operations.md, "Customer data": recorded on each of the customer's carts, whatever their status;
 * nothing on a cart that holds no customer and no arrival answers (erased before, or never given).
 */
function eraseCartCustomer(command: Command<'EraseCartCustomer'>, state: CartState): CartEvent[] {
  const at = time(command.at);
  const cart = existing(state);
  const holds =
    cart.customer !== null || cart.curbside_arrivals.some((a) => Object.keys(a.fields).length > 0);
  if (!holds) return [];
  return [events.CartCustomerErased({ erasure_id: command.erasure_id, erased_at: at })];
}

export function decide(command: CartCommand, state: CartState): CartEvent[] {
  switch (command.type) {
    case 'CreateCart':
      return createCart(command, state);
    case 'AddCartItem':
      return addCartItem(command, state);
    case 'ChangeCartItemQuantity':
      return changeCartItemQuantity(command, state);
    case 'RemoveCartItem':
      return removeCartItem(command, state);
    case 'IdentifyCartCustomer':
      return identifyCartCustomer(command, state);
    case 'CheckOutCart':
      return checkOutCart(command, state);
    case 'ChangeCartStatus':
      return changeCartStatus(command, state);
    case 'AbandonCart':
      return abandonCart(command, state);
    case 'PostCurbsideArrival':
      return postCurbsideArrival(command, state);
    case 'EraseCartCustomer':
      return eraseCartCustomer(command, state);
  }
}
