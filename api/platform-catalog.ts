/**
 * The platform's catalog upserts (docs/write-side.md): stores and their curbside pickup settings,
 * brands, products, menu products (listed and delisted), reviews and specials. An upsert answers 201
 * when it created the resource and 200 otherwise; one that changes nothing appends nothing.
 */
import { z } from 'zod';
import * as brand from '../domain/brand.ts';
import * as menuProduct from '../domain/menu-product.ts';
import * as product from '../domain/product.ts';
import * as review from '../domain/review.ts';
import * as special from '../domain/special.ts';
import * as store from '../domain/store.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import {
  brandWritten,
  curbsidePickupSettingWritten,
  menuProductDelisted,
  menuProductWritten,
  productWritten,
  reviewWritten,
  specialWritten,
  storeWritten,
} from './platform-records.ts';
import type { PlatformWrites } from './platform-writes.ts';
import { pathId } from './validation.ts';
import { answerWrite } from './write-support.ts';

const idParams = z.object({ id: pathId });
const menuProductParams = z.object({ store_id: pathId, id: pathId });

/** An upsert's answers: 200 for a change (or none), 201 when it created the resource. */
const upserted = (what: string, schema: z.ZodType) => ({
  status: 200,
  description: `The ${what} as it is now.`,
  schema,
  also: [{ status: 201, description: `The ${what}, created by this write.` }],
});

/** Stores and their curbside pickup settings. */
function storeRoutes({ run, now, createdOr200 }: PlatformWrites): AdminRoute[] {
  const upsert = adminRoute({
    method: 'put',
    path: '/stores/{id}',
    operationId: 'upsertStore',
    summary: 'Create or replace a store',
    description: "Absent optional fields take their defaults; `time_zone` defaults to the state's.",
    params: idParams,
    body: store.storeFields,
    ifMatch: true,
    response: upserted('store', storeWritten),
    problems: [],
    async handler(ctx, { params, body }) {
      const result = await run(ctx, store.streamId(params.id), store.decider, {
        type: 'UpsertStore',
        store_id: params.id,
        fields: body,
        at: now(),
      });
      answerWrite(ctx, createdOr200(result), { store: store.toRecord(result.state) }, result);
    },
  });
  const curbside = adminRoute({
    method: 'put',
    path: '/stores/{id}/curbside_pickup_setting',
    operationId: 'setCurbsidePickupSetting',
    summary: "Replace a store's curbside pickup setting",
    description: 'Whether curbside arrivals and curbside checkouts are accepted, and the arrival form.',
    params: idParams,
    body: store.curbsidePickupSettingFields,
    ifMatch: true,
    response: { status: 200, description: 'The setting as it is now.', schema: curbsidePickupSettingWritten },
    problems: [404],
    async handler(ctx, { params, body }) {
      const result = await run(ctx, store.streamId(params.id), store.decider, {
        type: 'SetCurbsidePickupSetting',
        store_id: params.id,
        fields: body,
        at: now(),
      });
      const setting = store.toCurbsidePickupSettingRecord(result.state);
      answerWrite(ctx, 200, { curbside_pickup_setting: setting }, result);
    },
  });
  return [upsert, curbside];
}

/** Brands and products. */
function productRoutes({ run, now, exists, createdOr200 }: PlatformWrites): AdminRoute[] {
  const upsertBrand = adminRoute({
    method: 'put',
    path: '/brands/{id}',
    operationId: 'upsertBrand',
    summary: 'Create or rename a brand',
    params: idParams,
    body: brand.brandFields,
    ifMatch: true,
    response: upserted('brand', brandWritten),
    problems: [],
    async handler(ctx, { params, body }) {
      const result = await run(ctx, brand.streamId(params.id), brand.decider, {
        type: 'UpsertBrand',
        brand_id: params.id,
        fields: body,
        at: now(),
      });
      answerWrite(ctx, createdOr200(result), { brand: brand.toRecord(result.state) }, result);
    },
  });
  const upsertProduct = adminRoute({
    method: 'put',
    path: '/products/{id}',
    operationId: 'upsertProduct',
    summary: 'Create or replace a product',
    description: 'Its brand must exist (422 `unknown_brand_id`).',
    params: idParams,
    body: product.productFields,
    ifMatch: true,
    response: upserted('product', productWritten),
    problems: [],
    async handler(ctx, { params, body }) {
      const brandExists = await exists(brand.streamId(body.brand_id), brand.decider as never);
      const result = await run(ctx, product.streamId(params.id), product.decider, {
        type: 'UpsertProduct',
        product_id: params.id,
        fields: body,
        brand_exists: brandExists,
        at: now(),
      });
      answerWrite(ctx, createdOr200(result), { product: product.toRecord(result.state) }, result);
    },
  });
  return [upsertBrand, upsertProduct];
}

/** Menu products: a product listed at a store with its prices, and delisted. */
function menuProductRoutes({ run, now, storeExists, createdOr200, commands }: PlatformWrites): AdminRoute[] {
  const list = adminRoute({
    method: 'put',
    path: '/stores/{store_id}/menu_products/{id}',
    operationId: 'listMenuProduct',
    summary: 'List a product at a store, or change its prices and stock',
    description:
      'The store must exist (404 `store_not_found`) and the product too (422 `unknown_product_id`); a ' +
      'menu product stays at the store it was first listed at (409).',
    params: menuProductParams,
    body: menuProduct.menuProductFields,
    ifMatch: true,
    response: upserted('menu product', menuProductWritten),
    problems: [409],
    async handler(ctx, { params, body }) {
      const { store_id, id } = params;
      const listedProduct = (await commands.load(product.streamId(body.product_id), product.decider)).state;
      const result = await run(ctx, menuProduct.streamId(id), menuProduct.decider, {
        type: 'ListMenuProduct',
        menu_product_id: id,
        store_id,
        fields: body,
        store_exists: await storeExists(store_id),
        product: listedProduct.exists
          ? { product_id: listedProduct.product_id, brand_id: listedProduct.brand_id }
          : null,
        at: now(),
      });
      const record = menuProduct.toRecord(result.state);
      answerWrite(ctx, createdOr200(result), { menu_product: record }, result);
    },
  });
  const delist = adminRoute({
    method: 'delete',
    path: '/stores/{store_id}/menu_products/{id}',
    operationId: 'delistMenuProduct',
    summary: 'Delist a menu product',
    description: 'Partners no longer see it; listing it again (`PUT`) brings it back.',
    params: menuProductParams,
    ifMatch: true,
    response: { status: 200, description: 'The menu product, delisted.', schema: menuProductDelisted },
    problems: [409],
    async handler(ctx, { params }) {
      const { store_id, id } = params;
      const result = await run(ctx, menuProduct.streamId(id), menuProduct.decider, {
        type: 'DelistMenuProduct',
        menu_product_id: id,
        store_id,
        at: now(),
      });
      answerWrite(ctx, 200, { menu_product: { id, store_id, listed: false } }, result);
    },
  });
  return [list, delist];
}

/** Reviews and specials. */
function reviewAndSpecialRoutes(writes: PlatformWrites): AdminRoute[] {
  const { run, now, storeExists, createdOr200, commands, pricingApplies } = writes;
  const postReview = adminRoute({
    method: 'put',
    path: '/reviews/{id}',
    operationId: 'upsertReview',
    summary: 'Post or revise a review',
    description: 'Its product and store must exist (422 `unknown_product_id`, `unknown_store_id`).',
    params: idParams,
    body: review.reviewFields,
    ifMatch: true,
    response: upserted('review', reviewWritten),
    problems: [],
    async handler(ctx, { params, body }) {
      const reviewed = (await commands.load(product.streamId(body.product_id), product.decider)).state;
      const result = await run(ctx, review.streamId(params.id), review.decider, {
        type: 'PostReview',
        review_id: params.id,
        fields: body,
        product: reviewed.exists ? { brand_id: reviewed.brand_id } : null,
        store_exists: await storeExists(body.store_id),
        at: now(),
      });
      answerWrite(ctx, createdOr200(result), { review: review.toRecord(result.state) }, result);
    },
  });
  const upsertSpecial = adminRoute({
    method: 'put',
    path: '/specials/{id}',
    operationId: 'upsertSpecial',
    summary: 'Create or replace a special',
    description:
      'Answered once pricing on this replica applies it: items placed after the answer are priced with ' +
      'it. 503 `pricing_catching_up` when pricing has not caught up yet: the write stands, and a retry ' +
      'writes nothing again.',
    params: idParams,
    body: special.specialFields,
    ifMatch: true,
    response: upserted('special', specialWritten),
    problems: [],
    async handler(ctx, { params, body }) {
      const result = await run(ctx, special.streamId(params.id), special.decider, {
        type: 'UpsertSpecial',
        special_id: params.id,
        fields: body,
        store_exists: await storeExists(body.store_id),
        at: now(),
      });
      // Items placed after this answer are priced with this special.
      await pricingApplies(params.id, result);
      answerWrite(ctx, createdOr200(result), { special: special.toRecord(result.state) }, result);
    },
  });
  return [postReview, upsertSpecial];
}

/** The catalog's routes, in the order the document shows them. */
export function catalogRoutes(writes: PlatformWrites): AdminRoute[] {
  return [
    ...storeRoutes(writes),
    ...productRoutes(writes),
    ...menuProductRoutes(writes),
    ...reviewAndSpecialRoutes(writes),
  ];
}
