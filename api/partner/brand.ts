/**
 * The brand partner API (docs/partner-api.md): the carts that came from the partner's embedded or
 * headless site, and the catalog as it concerns the partner's brands — their menu products at a store,
 * their products near a ZIP code, the stores carrying them, their verified reviews, and the specials
 * anywhere that involve them.
 *
 * Every list is one indexed `find` of `limit + 1` documents in id order (carts: `id`, then uuid),
 * resumed after an opaque cursor; what a page needs besides (the store of a store-scoped list, the
 * stores near a ZIP code) is one more indexed read, never one per record.
 */
import { z } from 'zod';
import { CARTS, type CartDoc, cartsOfPartner } from '../../projections/read-models/carts.ts';
import {
  MENU_PRODUCTS,
  type MenuProductDoc,
  menuProductsAt,
} from '../../projections/read-models/catalog/menu-products.ts';
import {
  PRODUCTS,
  type ProductDoc,
  productsCarriedBy,
} from '../../projections/read-models/catalog/products.ts';
import { REVIEWS } from '../../projections/read-models/catalog/reviews.ts';
import {
  SPECIALS,
  type SpecialDoc,
  specialsInvolving,
} from '../../projections/read-models/catalog/specials.ts';
import {
  STORES,
  type StoreDoc,
  storeById,
  storesCarrying,
  storesWithin,
} from '../../projections/read-models/catalog/stores.ts';
import { HttpProblem } from '../http.ts';
import { pathId } from '../validation.ts';
import { answerVerifiedReviews, listQuery, reviewPage } from './brand-support.ts';
import {
  answerList,
  answerPage,
  cartAfter,
  cartFilters,
  idAfter,
  notFound,
  pageQuery,
  publicFields,
  updatedAfter,
} from './common.ts';
import { type PartnerApi, route } from './routes.ts';
import {
  menuProductRecord,
  pageOf,
  partnerCartRecord,
  productRecord,
  specialRecord,
  storeRecord,
} from './schemas.ts';
import { zipCentroid } from './zip.ts';

export const DEFAULT_RADIUS_MILES = 25;
export const MAX_RADIUS_MILES = 100;

/** The brands of a brand partner (a brand partner always names its brands; it never covers all). */
const brandsOf = (p: { brand_ids: readonly number[] }) => p.brand_ids;

// ---- GET /carts -----------------------------------------------------------------------------------

const cartsQuery = z.strictObject({ ...pageQuery, ...cartFilters });

const carts = route({
  method: 'get',
  path: '/carts',
  operationId: 'listCarts',
  summary: "Carts from the partner's embedded or headless site",
  description:
    "Every cart whose `source.partner_id` is this partner: the carts that originated from the partner's " +
    'embedded or headless e-commerce site, in `id` order.',
  query: cartsQuery,
  response: {
    status: 200,
    description: 'One page of carts',
    schema: pageOf('carts', partnerCartRecord, 'CartPage'),
  },
  problems: [400],
  async handler(ctx, { query, partner }, deps) {
    const { limit, cursor, ...filters } = query;
    const page = await cartsOfPartner(deps.collection<CartDoc>(CARTS), partner.partner_id, filters, {
      limit,
      after: cartAfter(cursor),
    });
    answerPage(ctx, 'carts', page.carts, page.next);
  },
});

// ---- GET /stores/{store_id}/menu_products -----------------------------------------------------------

const menuProducts = route({
  method: 'get',
  path: '/stores/{store_id}/menu_products',
  operationId: 'listStoreMenuProducts',
  summary: "The store's menu products of the partner's brands",
  description:
    "The menu products of the partner's brands listed at the store, in `id` order. A store that lists none " +
    'of them (or does not exist) is a 404.',
  params: z.object({ store_id: pathId }),
  query: listQuery,
  response: {
    status: 200,
    description: 'One page of menu products',
    schema: pageOf('menu_products', menuProductRecord, 'MenuProductPage'),
  },
  problems: [400, 404],
  async handler(ctx, { params, query, partner }, deps) {
    const brands = brandsOf(partner);
    const store = await storeById(deps.collection<StoreDoc>(STORES), params.store_id);
    if (!store?.brand_ids.some((b) => brands.includes(b))) throw notFound('store', params.store_id);
    const page = await menuProductsAt(
      deps.collection<MenuProductDoc>(MENU_PRODUCTS),
      store.id,
      { brandIds: brands, updatedAfter: query.updated_after },
      { limit: query.limit, after: idAfter(query.cursor) },
    );
    answerList(ctx, 'menu_products', page);
  },
});

// ---- GET /products ----------------------------------------------------------------------------------

const productsQuery = z.strictObject({
  ...pageQuery,
  zipcode: z
    .string()
    .regex(/^\d{5}$/, 'a US 5-digit ZIP code')
    .describe('US 5-digit ZIP code: the search is centred on its centroid'),
  radius: z.coerce
    .number()
    .positive()
    .max(MAX_RADIUS_MILES)
    .default(DEFAULT_RADIUS_MILES)
    .describe(
      `miles from the ZIP code's centroid (default ${DEFAULT_RADIUS_MILES}, at most ${MAX_RADIUS_MILES})`,
    ),
  updated_after: updatedAfter,
});

const products = route({
  method: 'get',
  path: '/products',
  operationId: 'listProductsNear',
  summary: "The partner's products carried near a ZIP code",
  description:
    "The partner's products carried by at least one store whose coordinates lie within `radius` miles of " +
    "the centroid of `zipcode`, in `product_id` order. Each product's `store_ids` lists those stores only. " +
    'An unknown ZIP code is a 422 `unknown_zipcode`.',
  query: productsQuery,
  response: {
    status: 200,
    description: 'One page of products',
    schema: pageOf('products', productRecord, 'ProductPage'),
  },
  problems: [400, 422],
  async handler(ctx, { query, partner }, deps) {
    const after = idAfter(query.cursor);
    const center = zipCentroid(query.zipcode);
    if (!center) {
      throw new HttpProblem(422, {
        code: 'unknown_zipcode',
        detail: `${query.zipcode} is not a US ZIP code this service knows`,
        errors: [{ field: 'zipcode', message: 'unknown ZIP code' }],
      });
    }
    const near = await storesWithin(deps.collection<StoreDoc>(STORES), center, query.radius);
    if (near.size === 0) return answerPage(ctx, 'products', [], null);
    const page = await productsCarriedBy(
      deps.collection<ProductDoc>(PRODUCTS),
      brandsOf(partner),
      [...near],
      query.updated_after,
      { limit: query.limit, after },
    );
    answerList(ctx, 'products', page, (docs) =>
      docs.map((d) => ({
        ...publicFields<ProductDoc>(d),
        store_ids: d.store_ids.filter((id) => near.has(id)),
      })),
    );
  },
});

// ---- GET /stores ------------------------------------------------------------------------------------

const stores = route({
  method: 'get',
  path: '/stores',
  operationId: 'listStores',
  summary: "The stores carrying the partner's products",
  description:
    "Every store listing at least one menu product of the partner's brands, in `id` order. A store's " +
    "`brand_ids` names which of the partner's brands it carries.",
  query: listQuery,
  response: {
    status: 200,
    description: 'One page of stores',
    schema: pageOf('stores', storeRecord, 'StorePage'),
  },
  problems: [400],
  async handler(ctx, { query, partner }, deps) {
    const brands = brandsOf(partner);
    const page = await storesCarrying(deps.collection<StoreDoc>(STORES), brands, query.updated_after, {
      limit: query.limit,
      after: idAfter(query.cursor),
    });
    answerList(ctx, 'stores', page, (docs) =>
      docs.map((d) => ({
        ...publicFields<StoreDoc>(d),
        brand_ids: d.brand_ids.filter((b) => brands.includes(b)),
      })),
    );
  },
});

// ---- GET /reviews -----------------------------------------------------------------------------------

const reviews = route({
  method: 'get',
  path: '/reviews',
  operationId: 'listReviews',
  summary: "Verified reviews of the partner's products",
  description: "Every verified review of a product of the partner's brands, in `id` order.",
  query: listQuery,
  response: { status: 200, description: 'One page of reviews', schema: reviewPage },
  problems: [400],
  handler: (ctx, { query, partner }, deps) =>
    answerVerifiedReviews(ctx, query, brandsOf(partner), deps.collection(REVIEWS)),
});

// ---- GET /specials ----------------------------------------------------------------------------------

const specials = route({
  method: 'get',
  path: '/specials',
  operationId: 'listSpecials',
  summary: "Specials involving the partner's products",
  description:
    "Every special, at any store, that involves at least one of the partner's products: it names one in " +
    "`product_ids`, names one of the partner's brands in `brand_ids`, or names in `kinds` the kind of one " +
    "of the partner's products listed at its store. In `id` order, whatever their time window or `enabled`.",
  query: listQuery,
  response: {
    status: 200,
    description: 'One page of specials',
    schema: pageOf('specials', specialRecord, 'SpecialPage'),
  },
  problems: [400],
  async handler(ctx, { query, partner }, deps) {
    const page = await specialsInvolving(
      deps.collection<SpecialDoc>(SPECIALS),
      brandsOf(partner),
      query.updated_after,
      { limit: query.limit, after: idAfter(query.cursor) },
    );
    answerList(ctx, 'specials', page);
  },
});

export const brandApi: PartnerApi = {
  base: '/partner/brand/v1',
  title: 'Brand partner API',
  description:
    "Carts from the brand's embedded or headless site, and its catalog across the network: menu products, " +
    'products near a ZIP code, the stores carrying them, verified reviews and specials.',
  kinds: ['brand'],
  routes: [carts, menuProducts, products, stores, reviews, specials],
};
