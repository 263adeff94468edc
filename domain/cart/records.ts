/**
 * What a cart shows partners and receivers: the cart of the `cart_status_updated` body, the partner's
 * cart (that cart plus `updated_at`, `abandoned_at` and `source`), and the cart and customer of the
 * `cart_abandoned` body (docs/webhooks.md, "Events and bodies"; docs/partner-api.md, "Records").
 */
import { z } from 'zod';
import { moneyToNumber } from '../pricing.ts';
import { id, isoDateTime, kind, money, uuid } from '../schemas.ts';
import { type Cart, type CartState, cartAmount } from './state.ts';
import { type CartCustomer, cartStatus, customerKeys, customerShape, reservationMode } from './vocabulary.ts';

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
