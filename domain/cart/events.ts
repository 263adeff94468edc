/**
 * What happens to a cart: its events, each with a zod schema and a schema version. Every event
 * carries what is needed to rebuild the cart as of any revision from its stream alone.
 */
import { z } from 'zod';
import { defineEvent, type EventOf } from '../events.ts';
import { id, isoDateTime, uuid, weight } from '../schemas.ts';
import {
  assignmentShape,
  cartSource,
  cartStatus,
  customerShape,
  lineSnapshot,
  reservationMode,
} from './vocabulary.ts';

/** Set only on an event read back after the customer's key was destroyed. */
const erasedShape = { erased: z.literal(true).optional() };

/** v1 was written before the cart's user id was kept beside the personal fields: it had none. */
function withoutUserId(data: unknown): unknown {
  return { ...(data as object), user_id: null };
}

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
  /**
   * v2 adds `user_id` (the cart's, opaque): whose key seals the personal fields in the log, and
   * `erased` (read back after the customer's key was destroyed: every personal field is null;
   * docs/write-side.md, "Customer data in events").
   */
  CartCustomerIdentified: defineEvent(
    'CartCustomerIdentified',
    z.object({
      ...customerShape,
      user_id: id.nullable().default(null),
      ...erasedShape,
      identified_at: isoDateTime,
    }),
    { version: 2, upcast: withoutUserId },
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
  /** v2 adds `user_id` and `erased` as `CartCustomerIdentified` did; erased, `fields` is empty. */
  CurbsideArrivalPosted: defineEvent(
    'CurbsideArrivalPosted',
    z.object({
      arrival_id: uuid,
      fields: z.record(z.string(), z.string()),
      arrived_at: isoDateTime,
      store_id: id,
      user_id: id.nullable().default(null),
      ...erasedShape,
    }),
    { version: 2, upcast: withoutUserId },
  ),
  /**
   * The customer's personal data was erased (docs/operations.md, "Customer data"): their key is
   * destroyed, so the cart forgets the customer and the arrivals' answers. Holds no personal data.
   */
  CartCustomerErased: defineEvent(
    'CartCustomerErased',
    z.object({ erasure_id: uuid, erased_at: isoDateTime }),
  ),
};
export type CartEvent = EventOf<typeof events>;
