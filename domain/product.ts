/** Product aggregate (`product-<id>`): a brand's catalog item, the same at every store that lists it. */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { type Decider, invalid } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { freeText, id, isoDateTime, kind, lineage, nonEmpty, percent, webUrl } from './schemas.ts';

export const streamId = (productId: number) => `product-${productId}`;

/** Body of `PUT /products/{id}`. Optional fields default to null, `image_urls` to []. */
export const productFields = z.strictObject({
  name: nonEmpty(200),
  brand_id: id,
  kind,
  kind_subtype: nonEmpty(100).nullable().default(null),
  lineage: lineage.nullable().default(null),
  description: freeText(10_000).nullable().default(null),
  percent_thc: percent.nullable().default(null),
  percent_cbd: percent.nullable().default(null),
  image_urls: z.array(webUrl).max(20).default([]),
});
export type ProductFields = z.infer<typeof productFields>;

export const events = {
  ProductUpserted: defineEvent(
    'ProductUpserted',
    z.object({
      product_id: id,
      name: z.string(),
      brand_id: id,
      kind,
      kind_subtype: z.string().nullable(),
      lineage: lineage.nullable(),
      description: z.string().nullable(),
      percent_thc: z.number().nullable(),
      percent_cbd: z.number().nullable(),
      image_urls: z.array(z.string()),
      upserted_at: isoDateTime,
    }),
  ),
};
export type ProductEvent = EventOf<typeof events>;

/** `brand_exists`: whether `brand-<fields.brand_id>` has a brand, looked up by the command handler. */
export type ProductCommand = {
  type: 'UpsertProduct';
  product_id: number;
  fields: ProductFields;
  brand_exists: boolean;
  at: string;
};

type ProductData = Omit<z.output<typeof events.ProductUpserted.schema>, 'upserted_at'>;
export type ProductState = { exists: false } | (ProductData & { exists: true; updated_at: string });

export const decider: Decider<ProductCommand, ProductEvent, ProductState> = {
  initialState: { exists: false },
  decide(command, state) {
    if (!command.brand_exists) {
      throw invalid('unknown_brand_id', `brand ${command.fields.brand_id} does not exist`, {
        brand_id: command.fields.brand_id,
      });
    }
    const event = events.ProductUpserted({
      product_id: command.product_id,
      ...command.fields,
      upserted_at: command.at,
    });
    const { upserted_at: _, ...data } = event.data;
    // An upsert that changes nothing appends nothing, so retries and replays are harmless.
    if (state.exists && isDeepStrictEqual(productData(state), data)) return [];
    return [event];
  },
  evolve(_state, event) {
    switch (event.type) {
      case 'ProductUpserted': {
        const { upserted_at, ...data } = event.data;
        return { ...data, exists: true, updated_at: upserted_at };
      }
    }
  },
};

function productData(state: Extract<ProductState, { exists: true }>): ProductData {
  const { exists: _, updated_at: __, ...data } = state;
  return data;
}

/**
 * The partner `product` record without the read side's fields (`brand`, `aggregate_rating`,
 * `review_count`, `store_ids`); null if no product.
 */
export function toRecord(state: ProductState) {
  if (!state.exists) return null;
  return { ...productData(state), updated_at: state.updated_at };
}
export type ProductRecord = NonNullable<ReturnType<typeof toRecord>>;
