/**
 * What the platform API answers (docs/write-side.md): the resource a write left, as the domain
 * renders it (`toRecord`), with the stream's revision and the global position (`answerWrite`). The
 * records are the partner records (`partner/schemas.ts`) without the fields the read side adds.
 */
import { z } from 'zod';
import {
  curbsidePickupSettingRecord,
  menuProductRecord,
  partnerCartRecord,
  productRecord,
  reviewRecord,
  specialRecord,
  storeRecord,
} from './partner/schemas.ts';

const written = {
  revision: z.int().describe("The stream's revision after the write (also the `ETag`)."),
  position: z.int().describe("The write's global position in the event store."),
};

/** `{ "<name>": record, revision, position }`, named `id`. */
const answer = (name: string, record: z.ZodType, id: string) =>
  z.object({ [name]: record, ...written }).meta({ id });

export const storeWritten = answer(
  'store',
  storeRecord.omit({ brand_ids: true, rating: true, reviews_count: true }).meta({ id: 'PlatformStore' }),
  'StoreWritten',
);
export const curbsidePickupSettingWritten = answer(
  'curbside_pickup_setting',
  curbsidePickupSettingRecord,
  'CurbsidePickupSettingWritten',
);
export const brandWritten = answer(
  'brand',
  z.object({ id: z.int().positive(), name: z.string(), updated_at: z.string() }).meta({ id: 'Brand' }),
  'BrandWritten',
);
export const productWritten = answer(
  'product',
  productRecord
    .omit({ brand: true, aggregate_rating: true, review_count: true, store_ids: true })
    .meta({ id: 'PlatformProduct' }),
  'ProductWritten',
);
const platformMenuProduct = menuProductRecord
  .pick({
    id: true,
    product_id: true,
    store_id: true,
    brand_id: true,
    available_weights: true,
    price_each: true,
    price_half_gram: true,
    price_gram: true,
    price_two_gram: true,
    price_eighth_ounce: true,
    price_quarter_ounce: true,
    price_half_ounce: true,
    price_ounce: true,
    in_stock: true,
    updated_at: true,
  })
  .meta({ id: 'PlatformMenuProduct' });
export const menuProductWritten = answer('menu_product', platformMenuProduct, 'MenuProductWritten');
export const menuProductDelisted = answer(
  'menu_product',
  z
    .object({ id: z.int().positive(), store_id: z.int().positive(), listed: z.literal(false) })
    .meta({ id: 'DelistedMenuProduct' }),
  'MenuProductDelisted',
);
export const reviewWritten = answer(
  'review',
  reviewRecord
    .extend({ verified: z.boolean().describe('Partners see only verified reviews.') })
    .meta({ id: 'PlatformReview' }),
  'ReviewWritten',
);
export const specialWritten = answer('special', specialRecord, 'SpecialWritten');
export const cartWritten = answer('cart', partnerCartRecord, 'CartWritten');
