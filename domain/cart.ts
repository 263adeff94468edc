/**
 * Cart aggregate (`cart-<uuid>`): the open cart and its lines, the customer, checkout, the status
 * table of docs/write-side.md, abandonment (docs/write-side.md, "Abandonment") and curbside arrivals (docs/partner-api.md).
 *
 * Pure: no I/O and no clock. Times come in each command as `at`; facts the command handler reads from
 * other streams (the store, the menu product with its product, brand and specials, the curbside
 * setting) come in the command's `context`. Every event carries what is needed to rebuild the cart as
 * of any revision from this stream alone, so webhook bodies can be built by folding it.
 */
import { z } from 'zod';
import { conflict, type Decider, invalid, notFound } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { centsToNumber, moneyToNumber, toCents } from './pricing.ts';
import { id, isoDateTime, kind, lineage, money, uuid, type Weight, weight, weights } from './schemas.ts';

export const streamId = (cartUuid: string) => `cart-${cartUuid}`;

// ---------------------------------------------------------------------------------------------------
// Vocabulary

export const cartStatuses = [
  'pending',
  'verification',
  'staff_member_review',
  'preparing',
  'ready_for_pickup',
  'delivery_started',
  'delivery_finished',
  'finished',
  'with_review',
  'cancelled',
  'dismissed',
] as const;
export const cartStatus = z.enum(cartStatuses);
export type CartStatus = z.infer<typeof cartStatus>;

export const reservationModes = ['pickup', 'curbside', 'delivery'] as const;
export const reservationMode = z.enum(reservationModes);
export type ReservationMode = z.infer<typeof reservationMode>;

export const cartChannels = ['embedded', 'headless'] as const;
export const cartSource = z.object({ channel: z.enum(cartChannels), partner_id: z.string().nullable() });
export type CartSource = z.infer<typeof cartSource>;

/** Limits on a line's count. */
export const MAX_ADD_COUNT = 100;
export const MAX_LINE_COUNT = 1000;
/** Curbside arrival: values of the form's fields, and of the optional free-text `notes`. */
export const MAX_ARRIVAL_FIELD_LENGTH = 200;
export const MAX_ARRIVAL_NOTES_LENGTH = 500;

/** Statuses after which a reservation takes no curbside arrival. */
const closedStatuses: readonly CartStatus[] = ['finished', 'with_review', 'cancelled', 'dismissed'];

/**
 * docs/write-side.md, "Carts". `pending → verification` happens only through checkout (CheckOutCart);
 * `preparing → ready_for_pickup` only for pickup and curbside, `preparing → delivery_started` only
 * for delivery (see `allowedMoves`).
 */
export const statusMoves: Readonly<Record<CartStatus, readonly CartStatus[]>> = {
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

/**
 * A cart line as it was when placed: what the handler read from the menu product, product, brand and
 * specials streams (`discounted_unit_price` etc. from `applySpecials`).
 */
export const lineSnapshot = z.object({
  product_id: id,
  store_id: id,
  name: z.string(),
  brand: z.string(),
  brand_id: id,
  kind,
  kind_subtype: z.string().nullable(),
  lineage: lineage.nullable(),
  image_urls: z.array(z.string()),
  unit_price: money,
  discounted_unit_price: money,
  special_id: id.nullable(),
  special_title: z.string().nullable(),
});
export type LineSnapshot = z.infer<typeof lineSnapshot>;

const assignmentShape = {
  assigned_employee_id: id.nullable(),
  assigned_employee_name: z.string().nullable(),
  assigned_manager_id: id.nullable(),
  assigned_manager_name: z.string().nullable(),
  checkout_message: z.string().nullable(),
  pos_order_id: z.string().nullable(),
  queue_number: z.number().int().nonnegative().nullable(),
};
export type CartAssignment = { [K in keyof typeof assignmentShape]: z.infer<(typeof assignmentShape)[K]> };
const assignmentKeys = Object.keys(assignmentShape) as (keyof CartAssignment)[];

const customerShape = {
  email: z.string().nullable(),
  first_name: z.string().nullable(),
  last_name: z.string().nullable(),
  phone_number: z.string().nullable(),
  /** Date of birth, an ISO 8601 date-time (docs/webhooks.md). */
  DOB: isoDateTime.nullable(),
};
export type CartCustomer = { [K in keyof typeof customerShape]: z.infer<(typeof customerShape)[K]> };
const customerKeys = Object.keys(customerShape) as (keyof CartCustomer)[];

export const arrivalFormField = z.object({ name: z.string(), label: z.string(), required: z.boolean() });
export type ArrivalFormField = z.infer<typeof arrivalFormField>;

// ---------------------------------------------------------------------------------------------------
// Request bodies (docs/write-side.md), for the API to parse before building commands.

const text = (max: number) => z.string().trim().max(max);

export const createCartFields = z.strictObject({
  uuid: uuid.optional(),
  store_id: id,
  source: z.strictObject({
    channel: z.enum(cartChannels),
    partner_id: text(100).min(1).nullable().default(null),
  }),
  user_id: id.nullable().default(null),
});
export const addCartItemFields = z.strictObject({
  menu_product_id: id,
  price_id: weight,
  count: z.number().int().min(1).max(MAX_ADD_COUNT),
});
export const changeCartItemQuantityFields = z.strictObject({
  count: z.number().int().min(0).max(MAX_LINE_COUNT),
});
export const cartCustomerFields = z.strictObject({
  email: z.email().max(254).nullable().default(null),
  first_name: text(100).nullable().default(null),
  last_name: text(100).nullable().default(null),
  phone_number: text(40).nullable().default(null),
  DOB: isoDateTime.nullable().default(null),
});
export const checkOutCartFields = z.strictObject({
  reservation_mode: reservationMode,
  reservation_start_window: text(100).default(''),
  promo_code: text(100).min(1).nullable().default(null),
});
export const changeCartStatusFields = z.strictObject({
  status: cartStatus,
  assigned_employee_id: id.nullable().optional(),
  assigned_employee_name: text(200).nullable().optional(),
  assigned_manager_id: id.nullable().optional(),
  assigned_manager_name: text(200).nullable().optional(),
  checkout_message: text(1000).nullable().optional(),
  pos_order_id: text(100).nullable().optional(),
  queue_number: z.number().int().min(0).max(1_000_000).nullable().optional(),
  /** 1–5; only with `with_review`, and required there. */
  rating: z.number().int().min(1).max(5).optional(),
});
/** The arrival form's answers; which names are accepted depends on the store's setting (checked by the decider). */
export const curbsideArrivalFields = z.record(z.string().max(100), z.string());

// ---------------------------------------------------------------------------------------------------
// Events

export const events = {
  CartCreated: defineEvent(
    'CartCreated',
    z.object({
      cart_uuid: uuid,
      store_id: id,
      source: cartSource,
      user_id: id.nullable(),
      created_at: isoDateTime,
    }),
  ),
  /** `count` is the number added; the rest is the line as the handler saw it when the item was placed. */
  CartItemAdded: defineEvent(
    'CartItemAdded',
    z.object({
      menu_product_id: id,
      price_id: weight,
      count: z.number().int().positive(),
      ...lineSnapshot.shape,
      added_at: isoDateTime,
    }),
  ),
  CartItemQuantityChanged: defineEvent(
    'CartItemQuantityChanged',
    z.object({
      menu_product_id: id,
      count: z.number().int().positive(),
      previous_count: z.number().int().positive(),
      changed_at: isoDateTime,
    }),
  ),
  CartItemRemoved: defineEvent(
    'CartItemRemoved',
    z.object({ menu_product_id: id, previous_count: z.number().int().positive(), removed_at: isoDateTime }),
  ),
  CartCustomerIdentified: defineEvent(
    'CartCustomerIdentified',
    z.object({ ...customerShape, identified_at: isoDateTime }),
  ),
  CartCheckedOut: defineEvent(
    'CartCheckedOut',
    z.object({
      reservation_mode: reservationMode,
      reservation_start_window: z.string(),
      promo_code: z.string().nullable(),
      checked_out_at: isoDateTime,
      /** The cart total at checkout (sum of discounted unit price × count). */
      amount: z.number().nonnegative(),
    }),
  ),
  /**
   * Every status move, checkout included. The assignment fields are those in force after the move:
   * the values the command gave, the previous ones for fields it left out. `rating` is set only by
   * the move to `with_review`.
   */
  CartStatusChanged: defineEvent(
    'CartStatusChanged',
    z.object({
      from: cartStatus,
      to: cartStatus,
      changed_at: isoDateTime,
      ...assignmentShape,
      rating: z.number().int().min(1).max(5).nullable(),
    }),
  ),
  /** `item_count`: the units in the cart (sum of the lines' counts). */
  CartAbandoned: defineEvent(
    'CartAbandoned',
    z.object({
      abandoned_at: isoDateTime,
      first_item_at: isoDateTime,
      item_count: z.number().int().positive(),
    }),
  ),
  CurbsideArrivalPosted: defineEvent(
    'CurbsideArrivalPosted',
    z.object({
      arrival_id: uuid,
      fields: z.record(z.string(), z.string()),
      arrived_at: isoDateTime,
      store_id: id,
    }),
  ),
};
export type CartEvent = EventOf<typeof events>;

// ---------------------------------------------------------------------------------------------------
// Commands

export type CartCommand =
  | {
      type: 'CreateCart';
      cart_uuid: string;
      store_id: number;
      source: CartSource;
      user_id: number | null;
      at: string;
      context: { store_exists: boolean };
    }
  | {
      type: 'AddCartItem';
      menu_product_id: number;
      price_id: Weight;
      count: number;
      at: string;
      /**
       * The line as the handler builds it from the menu product (prices after specials); null when
       * the menu product is unknown or delisted; `unit_price`/`discounted_unit_price` null when it
       * is not sold in `price_id`.
       */
      context: {
        line:
          | (Omit<LineSnapshot, 'unit_price' | 'discounted_unit_price'> & {
              unit_price: string | null;
              discounted_unit_price: string | null;
            })
          | null;
      };
    }
  | { type: 'ChangeCartItemQuantity'; menu_product_id: number; count: number; at: string }
  | { type: 'RemoveCartItem'; menu_product_id: number; at: string }
  | ({ type: 'IdentifyCartCustomer'; at: string } & CartCustomer)
  | {
      type: 'CheckOutCart';
      reservation_mode: ReservationMode;
      reservation_start_window?: string;
      promo_code: string | null;
      at: string;
      context: { store: { pickup: boolean; delivery: boolean; curbside_enabled: boolean } };
    }
  | ({
      type: 'ChangeCartStatus';
      status: CartStatus;
      rating?: number;
      at: string;
    } & Partial<CartAssignment>)
  | { type: 'AbandonCart'; at: string; abandon_after_ms: number }
  | {
      type: 'PostCurbsideArrival';
      /** A fresh uuid from the handler (the same one on an idempotent retry). */
      arrival_id: string;
      fields: Record<string, string>;
      at: string;
      /** The store's curbside pickup setting; null when it has none (curbside is then off). */
      context: { curbside: { enabled: boolean; arrival_form_fields: readonly ArrivalFormField[] } | null };
    };

// ---------------------------------------------------------------------------------------------------
// State

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

const noAssignment: CartAssignment = {
  assigned_employee_id: null,
  assigned_employee_name: null,
  assigned_manager_id: null,
  assigned_manager_name: null,
  checkout_message: null,
  pos_order_id: null,
  queue_number: null,
};

// ---------------------------------------------------------------------------------------------------
// Pure helpers

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

/** `2026-03-01T10:00:00.000Z` → `2026-03-01 10:00:00` (UTC), the docs/webhooks.md time format. */
export const toCartTime = (iso: string): string => new Date(iso).toISOString().slice(0, 19).replace('T', ' ');

const nonEmptyOrNull = (s: string | null | undefined): string | null => (s && s.trim() !== '' ? s : null);

/** The cart of the `cart_status_updated` body (docs/webhooks.md, "Events and bodies"). */
export const cartRecordLine = z.object({
  brand: z.string(),
  name: z.string(),
  kind: z.string(),
  kind_subtype: z.string().nullable(),
  lineage: z.string().nullable(),
  product_id: id,
  price_id: z.string(),
  count: z.number().int(),
  checkout_price: z.number(),
  discounted_checkout_price: z.number(),
  special_id: id.nullable(),
  special_title: z.string().nullable(),
});
export const cartRecord = z.object({
  id,
  uuid,
  amount: z.number(),
  status: cartStatus,
  /** '' before checkout. */
  reservation_mode: z.union([reservationMode, z.literal('')]),
  reservation_start_window: z.string(),
  /** `YYYY-MM-DD HH:MM:SS` UTC, '' before checkout. */
  checked_out_time: z.string(),
  /** `YYYY-MM-DD HH:MM:SS` UTC. */
  created_at: z.string(),
  store_id: id,
  store_name: z.string(),
  /** null for a guest cart. */
  user_id: id.nullable(),
  customer_phone_number: z.string(),
  customer_email_address: z.string(),
  rating: z.number(),
  assigned_employee_id: id.nullable(),
  assigned_employee_name: z.string().nullable(),
  assigned_manager_id: id.nullable(),
  assigned_manager_name: z.string().nullable(),
  checkout_message: z.string().nullable(),
  customer_name: z.string().nullable(),
  pos_order_id: z.string().nullable(),
  promo_code: z.string().nullable(),
  queue_number: z.number().int().nullable(),
  tags: z.array(z.string()).nullable(),
  external_user_id: z.string().nullable(),
  external_user_source: z.string().nullable(),
  products: z.array(cartRecordLine),
});
export type CartRecord = z.infer<typeof cartRecord>;

export function toCartRecord(state: Cart, ctx: { id: number; store_name: string }): CartRecord {
  const c = state.customer;
  const name = [c?.first_name, c?.last_name].filter((s) => nonEmptyOrNull(s) !== null).join(' ');
  return {
    id: ctx.id,
    uuid: state.uuid,
    amount: cartAmount(state),
    status: state.status,
    reservation_mode: state.reservation_mode ?? '',
    reservation_start_window: state.reservation_start_window,
    checked_out_time: state.checked_out_at === null ? '' : toCartTime(state.checked_out_at),
    created_at: toCartTime(state.created_at),
    store_id: state.store_id,
    store_name: ctx.store_name,
    user_id: state.user_id,
    customer_phone_number: c?.phone_number ?? '',
    customer_email_address: c?.email ?? '',
    rating: state.rating,
    assigned_employee_id: state.assigned_employee_id,
    assigned_employee_name: state.assigned_employee_name,
    assigned_manager_id: state.assigned_manager_id,
    assigned_manager_name: state.assigned_manager_name,
    checkout_message: state.checkout_message,
    customer_name: name === '' ? null : name,
    pos_order_id: state.pos_order_id,
    promo_code: state.promo_code,
    queue_number: state.queue_number,
    // Not tracked by the platform write side: always null.
    tags: null,
    external_user_id: null,
    external_user_source: null,
    products: state.lines.map((l) => ({
      brand: l.brand,
      name: l.name,
      kind: l.kind,
      kind_subtype: l.kind_subtype,
      lineage: l.lineage,
      product_id: l.product_id,
      price_id: l.price_id,
      count: l.count,
      checkout_price: moneyToNumber(l.unit_price),
      discounted_checkout_price: moneyToNumber(l.discounted_unit_price),
      special_id: l.special_id,
      special_title: l.special_title,
    })),
  };
}

/** docs/partner-api.md: the partner API's cart, the `cart_status_updated` cart (docs/webhooks.md) plus `updated_at`, `abandoned_at` and `source`. */
export function toPartnerCart(state: Cart, ctx: { id: number; store_name: string }) {
  return {
    ...toCartRecord(state, ctx),
    updated_at: state.updated_at,
    abandoned_at: state.abandoned_at,
    source: state.source,
  };
}

/** The cart of the `cart_abandoned` body (docs/webhooks.md, "Events and bodies"). */
export const abandonedCartLine = z.object({
  product_id: id,
  product_name: z.string(),
  product_brand_name: z.string(),
  product_image: z.array(z.string()),
  product_price: money,
  quantity: z.number().int(),
  category: kind,
  subcategory: z.string().nullable(),
  lineage: z.string().nullable(),
  weight_variant: z.string().nullable(),
});
export const abandonedCart = z.object({
  uuid,
  created_at: isoDateTime,
  products: z.array(abandonedCartLine),
});
export type AbandonedCart = z.infer<typeof abandonedCart>;

export function toAbandonedCart(state: Cart): AbandonedCart {
  return {
    uuid: state.uuid,
    created_at: new Date(state.created_at).toISOString(),
    products: state.lines.map((l) => ({
      product_id: l.product_id,
      product_name: l.name,
      product_brand_name: l.brand,
      product_image: [...l.image_urls],
      // The unit price (docs/partner-api.md: `product_price` is the unit price, `quantity` the count).
      product_price: l.unit_price,
      quantity: l.count,
      category: l.kind,
      subcategory: l.kind_subtype,
      lineage: l.lineage,
      // A unit sold "each" has no weight variant.
      weight_variant: l.price_id === 'each' ? null : l.price_id,
    })),
  };
}

/** The customer of the `cart_abandoned` body: all five fields, or null (docs/webhooks.md). */
export const webhookCustomer = z.object(customerShape).nullable();

/** The `customer` of the `cart_abandoned` body: null when nothing is known about the customer. */
export function toWebhookCustomer(state: CartState): CartCustomer | null {
  if (!state.exists || state.customer === null) return null;
  const c = state.customer;
  if (customerKeys.every((k) => c[k] === null)) return null;
  return {
    email: c.email,
    first_name: c.first_name,
    last_name: c.last_name,
    phone_number: c.phone_number,
    DOB: c.DOB,
  };
}

// ---------------------------------------------------------------------------------------------------
// Decider

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

export const decider: Decider<CartCommand, CartEvent, CartState> = {
  initialState: { exists: false },

  decide(command, state) {
    switch (command.type) {
      case 'CreateCart': {
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

      case 'AddCartItem': {
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

      case 'ChangeCartItemQuantity': {
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

      case 'RemoveCartItem': {
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

      case 'IdentifyCartCustomer': {
        const at = time(command.at);
        const cart = existing(state);
        const customer = Object.fromEntries(customerKeys.map((k) => [k, command[k] ?? null])) as CartCustomer;
        if (customer.DOB !== null && !isoDateTime.safeParse(customer.DOB).success) {
          throw invalid('invalid_dob', 'DOB must be an ISO 8601 date-time');
        }
        const before = cart.customer;
        if (before && customerKeys.every((k) => before[k] === customer[k])) return [];
        return [events.CartCustomerIdentified({ ...customer, identified_at: at })];
      }

      case 'CheckOutCart': {
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

      case 'ChangeCartStatus': {
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

      case 'AbandonCart': {
        const at = time(command.at);
        const cart = existing(state);
        if (!Number.isFinite(command.abandon_after_ms) || command.abandon_after_ms <= 0) {
          throw invalid('invalid_abandon_after', 'abandon_after_ms must be a positive number');
        }
        if (cart.checked_out_at !== null)
          throw conflict('cart_checked_out', 'A checked-out cart is not abandoned');
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

      case 'PostCurbsideArrival': {
        const at = time(command.at);
        const cart = existing(state, 'reservation_not_found');
        if (cart.checked_out_at === null) {
          throw conflict('reservation_not_checked_out', 'The cart has not been checked out yet');
        }
        if (closedStatuses.includes(cart.status)) {
          throw conflict('reservation_closed', `The reservation is ${cart.status}`, { status: cart.status });
        }
        const setting = command.context.curbside;
        if (!setting?.enabled)
          throw conflict('curbside_disabled', 'The store does not offer curbside pickup');
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
          }),
        ];
      }
    }
  },

  evolve(state, event) {
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
        const { identified_at, ...customer } = event.data;
        return { ...state, customer, updated_at: identified_at };
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
    }
  },
};

function pickAssignment(cart: Cart): CartAssignment {
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
