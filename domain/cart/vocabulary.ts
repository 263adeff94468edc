/**
 * The cart's vocabulary (docs/write-side.md, "Carts"): its stream, statuses and the moves between them,
 * reservation modes, channels, limits, and the shapes of a line, an assignment, a customer and an
 * arrival form field.
 */
import { z } from 'zod';
import { id, isoDateTime, kind, lineage, money } from '../schemas.ts';

export const streamId = (cartUuid: string) => `cart-${cartUuid}`;

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
export const closedStatuses: readonly CartStatus[] = ['finished', 'with_review', 'cancelled', 'dismissed'];

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

export const assignmentShape = {
  assigned_employee_id: id.nullable(),
  assigned_employee_name: z.string().nullable(),
  assigned_manager_id: id.nullable(),
  assigned_manager_name: z.string().nullable(),
  checkout_message: z.string().nullable(),
  pos_order_id: z.string().nullable(),
  queue_number: z.number().int().nonnegative().nullable(),
};
export type CartAssignment = { [K in keyof typeof assignmentShape]: z.infer<(typeof assignmentShape)[K]> };
export const assignmentKeys = Object.keys(assignmentShape) as (keyof CartAssignment)[];

export const customerShape = {
  email: z.string().nullable(),
  first_name: z.string().nullable(),
  last_name: z.string().nullable(),
  phone_number: z.string().nullable(),
  /** Date of birth, an ISO 8601 date-time (docs/webhooks.md). */
  DOB: isoDateTime.nullable(),
};
export type CartCustomer = { [K in keyof typeof customerShape]: z.infer<(typeof customerShape)[K]> };
export const customerKeys = Object.keys(customerShape) as (keyof CartCustomer)[];

export const arrivalFormField = z.object({ name: z.string(), label: z.string(), required: z.boolean() });
export type ArrivalFormField = z.infer<typeof arrivalFormField>;
