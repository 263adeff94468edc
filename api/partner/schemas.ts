/**
 * The records partners receive (docs/partner-api.md), as zod schemas: what the OpenAPI documents publish and
 * what the API tests validate every answer against. `.meta({ id })` names each one as a component.
 */
import { z } from 'zod';
import { cartRecord, cartSource } from '../../domain/cart.ts';
import { kind, lineage, money, weight } from '../../domain/schemas.ts';

const id = z.number().int().positive();
const time = z.string().describe('ISO 8601 date-time (UTC)');
const nullableNumber = z.number().nullable();
const hours = z.array(z.object({ day: z.string(), from: z.string(), to: z.string() }));

export const storeRecord = z
  .object({
    id,
    name: z.string(),
    display_name: z.string().nullable(),
    store_url: z.string().nullable(),
    address: z.string(),
    city: z.string(),
    state: z.string(),
    zip: z.string(),
    lat: z.number(),
    long: z.number(),
    phone: z.string().nullable(),
    time_zone: z.string(),
    recreational: z.boolean(),
    medical: z.boolean(),
    pickup: z.boolean(),
    delivery: z.boolean(),
    curbside: z.boolean(),
    working_hours: hours,
    brand_ids: z
      .array(id)
      .describe("the partner's brands with at least one menu product listed at the store (no other brand)"),
    rating: nullableNumber,
    reviews_count: z.number().int(),
    updated_at: time,
  })
  .meta({ id: 'Store' });

export const productRecord = z
  .object({
    product_id: id,
    name: z.string(),
    brand: z.string(),
    brand_id: id,
    kind,
    kind_subtype: z.string().nullable(),
    lineage: lineage.nullable(),
    description: z.string().nullable(),
    percent_thc: nullableNumber,
    percent_cbd: nullableNumber,
    image_urls: z.array(z.string()),
    aggregate_rating: nullableNumber,
    review_count: z.number().int(),
    store_ids: z.array(id).describe('in GET /products: the stores within the radius that carry it'),
    updated_at: time,
  })
  .meta({ id: 'Product' });

const price = money.nullable();
export const menuProductRecord = z
  .object({
    id,
    product_id: id,
    store_id: id,
    name: z.string(),
    brand: z.string(),
    brand_id: id,
    kind,
    kind_subtype: z.string().nullable(),
    lineage: lineage.nullable(),
    description: z.string().nullable(),
    available_weights: z.array(weight),
    price_each: price,
    price_half_gram: price,
    price_gram: price,
    price_two_gram: price,
    price_eighth_ounce: price,
    price_quarter_ounce: price,
    price_half_ounce: price,
    price_ounce: price,
    percent_thc: nullableNumber,
    percent_cbd: nullableNumber,
    image_urls: z.array(z.string()),
    in_stock: z.boolean(),
    aggregate_rating: nullableNumber,
    review_count: z.number().int(),
    applicable_special_ids: z.array(id),
    updated_at: time,
  })
  .meta({ id: 'MenuProduct' });

export const reviewRecord = z
  .object({
    id,
    product_id: id,
    store_id: id,
    brand_id: id,
    rating: z.number().int().min(1).max(5),
    comment: z.string().nullable(),
    feelings: z.array(z.string()),
    activities: z.array(z.string()),
    verified: z.literal(true),
    created_at: time,
    updated_at: time,
  })
  .meta({ id: 'Review' });

export const specialRecord = z
  .object({
    id,
    store_id: id,
    title: z.string(),
    description: z.string().nullable(),
    special_type: z.enum(['product', 'bulk_pricing', 'bundle', 'cart_total']),
    discount_type: z.enum(['percent', 'dollar_amount', 'target_price']),
    discount_value: z.string(),
    product_ids: z.array(id),
    brand_ids: z.array(id),
    kinds: z.array(kind),
    starts_at: time,
    ends_at: time.nullable(),
    enabled: z.boolean(),
    updated_at: time,
  })
  .meta({ id: 'Special' });

export const curbsidePickupSettingRecord = z
  .object({
    store_id: id,
    enabled: z.boolean(),
    arrival_instructions: z.string().nullable(),
    hours,
    window_minutes: z.number().int(),
    max_orders_per_window: z.number().int(),
    payment_options: z.array(z.string()),
    arrival_form_fields: z.array(z.object({ name: z.string(), label: z.string(), required: z.boolean() })),
    updated_at: time,
  })
  .meta({ id: 'CurbsidePickupSetting' });

export const partnerCartRecord = cartRecord
  .extend({
    updated_at: time,
    abandoned_at: time.nullable(),
    source: cartSource,
  })
  .meta({ id: 'Cart' });

/** RFC 9457: the standard members; extension members (e.g. `allowed`) may follow. */
export const problemRecord = z
  .looseObject({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string(),
    errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
  })
  .meta({ id: 'Problem' });

/** `{ "<plural>": [record…], "next_cursor": string | null }` */
export function pageOf(plural: string, record: z.ZodType, name: string) {
  return z.object({ [plural]: z.array(record), next_cursor: z.string().nullable() }).meta({ id: name });
}

/** `{ "<singular>": record }` */
export function oneOf(singular: string, record: z.ZodType, name: string) {
  return z.object({ [singular]: record }).meta({ id: name });
}
