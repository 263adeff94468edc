/**
 * What may be asked of a cart: the request bodies the API parses (docs/write-side.md), and the
 * commands the decider takes, with the facts the command handler reads from other streams in their
 * `context`.
 */
import { z } from 'zod';
import {
  freeText,
  id,
  isoDateTime,
  oneLine,
  oneLineText,
  printableText,
  uuid,
  type Weight,
  weight,
} from '../schemas.ts';
import {
  type ArrivalFormField,
  type CartAssignment,
  type CartCustomer,
  type CartSource,
  type CartStatus,
  cartChannels,
  cartStatus,
  type LineSnapshot,
  MAX_ADD_COUNT,
  MAX_LINE_COUNT,
  type ReservationMode,
  reservationMode,
} from './vocabulary.ts';

/** One line of printable text (docs/write-side.md): names, codes, windows. */
const text = oneLine;

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
  checkout_message: freeText(1000).nullable().optional(),
  pos_order_id: text(100).nullable().optional(),
  queue_number: z.number().int().min(0).max(1_000_000).nullable().optional(),
  /** 1–5; only with `with_review`, and required there. */
  rating: z.number().int().min(1).max(5).optional(),
});
/** The arrival form's answers; which names are accepted depends on the store's setting (checked by the decider). */
export const curbsideArrivalFields = z.record(oneLineText.max(100), printableText);

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
    }
  /** The customer's key is being destroyed (docs/operations.md, "Customer data"). */
  | { type: 'EraseCartCustomer'; erasure_id: string; at: string };
