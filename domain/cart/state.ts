/**
 * A cart as its events make it (`evolve`), and what can be read of it.
 */
import { centsToNumber, toCents } from '../pricing.ts';
import type { Weight } from '../schemas.ts';
import type { CartEvent } from './events.ts';
import {
  type CartAssignment,
  type CartCustomer,
  type CartSource,
  type CartStatus,
  type LineSnapshot,
  type ReservationMode,
  statusMoves,
} from './vocabulary.ts';

export type CartLine = {
  menu_product_id: number;
  price_id: Weight;
  count: number;
} & LineSnapshot;

export type CurbsideArrival = { arrival_id: string; fields: Record<string, string>; arrived_at: string };

export type Cart = {
  exists: true;
  uuid: string;
  store_id: number;
  source: CartSource;
  user_id: number | null;
  created_at: string;
  /** Time of the last event. */
  updated_at: string;
  /** In order of first placement (a line removed and placed again goes last). */
  lines: CartLine[];
  /** When the cart last went from empty to non-empty; null while empty. */
  first_item_at: string | null;
  customer: CartCustomer | null;
  status: CartStatus;
  reservation_mode: ReservationMode | null;
  reservation_start_window: string;
  checked_out_at: string | null;
  promo_code: string | null;
  /** 0 until `with_review`. */
  rating: number;
  abandoned_at: string | null;
  curbside_arrivals: CurbsideArrival[];
} & CartAssignment;

export type CartState = { exists: false } | Cart;

export const noAssignment: CartAssignment = {
  assigned_employee_id: null,
  assigned_employee_name: null,
  assigned_manager_id: null,
  assigned_manager_name: null,
  checkout_message: null,
  pos_order_id: null,
  queue_number: null,
};

/** The moves a cart may make from its current status (docs/write-side.md), given its reservation mode. */
export function allowedMoves(state: CartState): CartStatus[] {
  if (!state.exists) return [];
  return statusMoves[state.status].filter((to) => {
    if (state.status !== 'preparing') return true;
    if (to === 'ready_for_pickup')
      return state.reservation_mode === 'pickup' || state.reservation_mode === 'curbside';
    if (to === 'delivery_started') return state.reservation_mode === 'delivery';
    return true;
  });
}

/** Cart total: sum of discounted unit price × count, as a number of dollars (exact to the cent). */
export function cartAmount(state: CartState): number {
  if (!state.exists) return 0;
  return centsToNumber(state.lines.reduce((sum, l) => sum + toCents(l.discounted_unit_price) * l.count, 0));
}

export const itemCount = (state: CartState): number =>
  state.exists ? state.lines.reduce((sum, l) => sum + l.count, 0) : 0;

export const isCheckedOut = (state: CartState): boolean => state.exists && state.checked_out_at !== null;

/**
 * When the cart's pending abandonment falls due (`first_item_at + abandon_after_ms`, ISO 8601 UTC), or
 * null when none is pending: the cart is empty, checked out, or was abandoned already (once per cart).
 * A deadline already past is still returned, so a timer that fires late still acts. Emptying the cart
 * cancels the pending abandonment; filling it again starts a new period.
 */
export function abandonmentDeadline(state: CartState, abandon_after_ms: number): string | null {
  if (!state.exists || state.checked_out_at !== null || state.abandoned_at !== null) return null;
  if (state.first_item_at === null || state.lines.length === 0) return null;
  return new Date(Date.parse(state.first_item_at) + abandon_after_ms).toISOString();
}

export function pickAssignment(cart: Cart): CartAssignment {
  return {
    assigned_employee_id: cart.assigned_employee_id,
    assigned_employee_name: cart.assigned_employee_name,
    assigned_manager_id: cart.assigned_manager_id,
    assigned_manager_name: cart.assigned_manager_name,
    checkout_message: cart.checkout_message,
    pos_order_id: cart.pos_order_id,
    queue_number: cart.queue_number,
  };
}

export function evolve(state: CartState, event: CartEvent): CartState {
  if (event.type === 'CartCreated') {
    const d = event.data;
    return {
      exists: true,
      uuid: d.cart_uuid,
      store_id: d.store_id,
      source: d.source,
      user_id: d.user_id,
      created_at: d.created_at,
      updated_at: d.created_at,
      lines: [],
      first_item_at: null,
      customer: null,
      status: 'pending',
      reservation_mode: null,
      reservation_start_window: '',
      checked_out_at: null,
      promo_code: null,
      ...noAssignment,
      rating: 0,
      abandoned_at: null,
      curbside_arrivals: [],
    };
  }
  // Every other event follows CartCreated in its stream.
  if (!state.exists) return state;
  switch (event.type) {
    case 'CartItemAdded': {
      const { added_at, ...line } = event.data;
      const current = state.lines.find((l) => l.menu_product_id === line.menu_product_id);
      // The latest placement's snapshot (name, prices, special) describes the whole line.
      const lines = current
        ? state.lines.map((l) => (l === current ? { ...line, count: current.count + line.count } : l))
        : [...state.lines, line];
      return {
        ...state,
        lines,
        first_item_at: state.lines.length === 0 ? added_at : state.first_item_at,
        updated_at: added_at,
      };
    }
    case 'CartItemQuantityChanged': {
      const { menu_product_id, count, changed_at } = event.data;
      return {
        ...state,
        lines: state.lines.map((l) => (l.menu_product_id === menu_product_id ? { ...l, count } : l)),
        updated_at: changed_at,
      };
    }
    case 'CartItemRemoved': {
      const lines = state.lines.filter((l) => l.menu_product_id !== event.data.menu_product_id);
      return {
        ...state,
        lines,
        first_item_at: lines.length === 0 ? null : state.first_item_at,
        updated_at: event.data.removed_at,
      };
    }
    case 'CartCustomerIdentified': {
      const { email, first_name, last_name, phone_number, DOB, identified_at } = event.data;
      return {
        ...state,
        customer: { email, first_name, last_name, phone_number, DOB },
        updated_at: identified_at,
      };
    }
    case 'CartCheckedOut': {
      const d = event.data;
      return {
        ...state,
        reservation_mode: d.reservation_mode,
        reservation_start_window: d.reservation_start_window,
        promo_code: d.promo_code,
        checked_out_at: d.checked_out_at,
        updated_at: d.checked_out_at,
      };
    }
    case 'CartStatusChanged': {
      const { from: _from, to, changed_at, rating, ...assignment } = event.data;
      return {
        ...state,
        ...assignment,
        status: to,
        rating: rating ?? state.rating,
        updated_at: changed_at,
      };
    }
    case 'CartAbandoned':
      return { ...state, abandoned_at: event.data.abandoned_at, updated_at: event.data.abandoned_at };
    case 'CurbsideArrivalPosted': {
      const { arrival_id, fields, arrived_at } = event.data;
      return {
        ...state,
        curbside_arrivals: [...state.curbside_arrivals, { arrival_id, fields, arrived_at }],
        updated_at: arrived_at,
      };
    }
    case 'CartCustomerErased':
      return {
        ...state,
        customer: null,
        curbside_arrivals: state.curbside_arrivals.map((a) => ({ ...a, fields: {} })),
        updated_at: event.data.erased_at,
      };
  }
}
