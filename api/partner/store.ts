/**
 * The Store Operator API (docs/partner-api.md, `/partner/store/v1`) and the Store Menu Feed API (docs/partner-api.md,
 * `/partner/store-menu-feed/v1`). Both serve the same seven store-scoped routes, defined once here
 * (`storeRoutes`); only the store operator has `GET /carts` (the menu feed's base path has no such
 * route: 404).
 *
 * Store-scoped routes act on one store of the key (`store_id`, required when the key covers several
 * stores; a store outside the key answers 404). Lists page by `limit`/`cursor` in id order and read
 * one index range (`limit + 1` documents to know whether a next page exists).
 *
 * Decisions beyond the specification (docs/partner-api.md records them; left to the API):
 * - `GET /carts`: the carts whose `source.partner_id` is the operator, at the stores of its key (or the
 *   one given by `store_id`); filters `created_after`, `created_before`, `updated_after` (exclusive
 *   bounds), `status`, `abandoned`.
 * - `GET /products/{product_id}/reviews`: the verified reviews of the product posted at the selected
 *   store (a review belongs to the store where it was written; other stores' reviews stay theirs).
 * - `GET /products/{product_id}/recommendations`: `{ "recommendations": [{ score, menu_product }] }`,
 *   up to `limit` (1–10, default 10), best first; no paging (see `recommendations.ts` for the scoring).
 *   Candidates: one index range of the store's menu products of the product's kind (at most
 *   `CANDIDATE_LIMIT`, in id order) and, when that gives fewer than 10 products, one range of its other
 *   kinds: never the whole catalog.
 * - `GET /specials`: every special of the store (disabled and past ones too, with `enabled`,
 *   `starts_at`, `ends_at`), so an `updated_after` sync sees a special switched off.
 * - `POST /reservations/{uuid}/curbside_arrival`: body `{ <form field>: string, …, notes? }` (the
 *   names of the store's `arrival_form_fields`); answer 201
 *   `{ "curbside_arrival": { arrival_id, reservation_uuid, store_id, arrived_at, fields } }`, `fields`
 *   holding the answers as posted (nested, so a form field can have any name). A partner posts
 *   arrivals for the reservations made through its own site (`source.partner_id`) at the stores of
 *   its key, and no other (docs/partner-api.md, "The curbside arrival").
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import * as cart from '../../domain/cart.ts';
import { weights } from '../../domain/schemas.ts';
import * as store from '../../domain/store.ts';
import { CARTS, type CartDoc, cartsOfPartner } from '../../projections/read-models/carts.ts';
import {
  CURBSIDE_PICKUP_SETTINGS,
  type CurbsidePickupSettingDoc,
  settingOf,
} from '../../projections/read-models/catalog/curbside-pickup-settings.ts';
import {
  listingsOfProductAt,
  MENU_PRODUCTS,
  type MenuProductDoc,
  menuProductAt,
  menuProductsAt,
  recommendationCandidates,
} from '../../projections/read-models/catalog/menu-products.ts';
import { REVIEWS, type ReviewDoc, verifiedReviews } from '../../projections/read-models/catalog/reviews.ts';
import { SPECIALS, type SpecialDoc, specialsAt } from '../../projections/read-models/catalog/specials.ts';
import { pathId, pathUuid } from '../validation.ts';
import { commandMetadata } from '../write-support.ts';
import {
  answerList,
  answerPage,
  cartAfter,
  cartFilters,
  idAfter,
  notFound,
  pageQuery,
  publicFields,
  selectStore,
  updatedAfter,
} from './common.ts';
import { type Characteristics, DEFAULT_RECOMMENDATIONS, lowestPrice, recommend } from './recommendations.ts';
import type { PartnerApi, PartnerDeps, PartnerRoute } from './routes.ts';
import { route } from './routes.ts';
import {
  curbsidePickupSettingRecord,
  menuProductRecord,
  oneOf,
  pageOf,
  partnerCartRecord,
  reviewRecord,
  specialRecord,
} from './schemas.ts';

// ---- parameters ---------------------------------------------------------------------------------

const storeIdParam = z.coerce
  .number()
  .int()
  .positive()
  .max(Number.MAX_SAFE_INTEGER)
  .optional()
  .describe('The store asked about; required when the API key covers several stores');

/** Query of a store-scoped list: the store, paging, `updated_after`. */
const storeListQuery = z.strictObject({ store_id: storeIdParam, ...pageQuery, updated_after: updatedAfter });

const storeOnlyQuery = z.strictObject({ store_id: storeIdParam });

const cartsQuerySchema = z.strictObject({
  store_id: storeIdParam.describe('Only the carts of this store of the key (default: all of its stores)'),
  ...pageQuery,
  ...cartFilters,
});

export const MAX_RECOMMENDATIONS = DEFAULT_RECOMMENDATIONS;
const recommendationsQuery = z.strictObject({
  store_id: storeIdParam,
  limit: z.coerce.number().int().min(1).max(MAX_RECOMMENDATIONS).default(MAX_RECOMMENDATIONS),
});

const menuProductParams = z.object({ menu_product_id: pathId });
const productParams = z.object({ product_id: pathId });
const reservationParams = z.object({ uuid: pathUuid });

// ---- answers ------------------------------------------------------------------------------------

export const recommendationRecord = z
  .object({
    score: z
      .number()
      .min(0)
      .max(1)
      .describe('How closely the menu product matches the given product, 0–1; the list is sorted by it'),
    menu_product: menuProductRecord,
  })
  .meta({ id: 'Recommendation' });

export const curbsideArrivalRecord = z
  .object({
    arrival_id: z.uuid(),
    reservation_uuid: z.uuid(),
    store_id: z.number().int().positive(),
    arrived_at: z.string().describe('ISO 8601 date-time (UTC)'),
    fields: z
      .record(z.string(), z.string())
      .describe('The answers to the store’s arrival form (`arrival_form_fields`), and `notes` if given'),
  })
  .meta({ id: 'CurbsideArrival' });

export const curbsideArrivalBody = cart.curbsideArrivalFields.describe(
  'The answers to the store’s arrival form: one string per name of its `arrival_form_fields` ' +
    '(required ones must be non-empty; by default vehicle_make, vehicle_color, parking_spot), plus an ' +
    'optional free-text `notes`. Other names are refused (422).',
);

const cartPage = pageOf('carts', partnerCartRecord, 'StoreCartPage');
const menuProductPage = pageOf('menu_products', menuProductRecord, 'StoreMenuProductPage');
const reviewPage = pageOf('reviews', reviewRecord, 'StoreReviewPage');
const specialPage = pageOf('specials', specialRecord, 'StoreSpecialPage');
const oneMenuProduct = oneOf('menu_product', menuProductRecord, 'StoreMenuProductAnswer');
const oneSetting = oneOf(
  'curbside_pickup_setting',
  curbsidePickupSettingRecord,
  'StoreCurbsidePickupSettingAnswer',
);
const oneArrival = oneOf('curbside_arrival', curbsideArrivalRecord, 'StoreCurbsideArrivalAnswer');
const recommendationList = z
  .object({ recommendations: z.array(recommendationRecord) })
  .meta({ id: 'StoreRecommendationList' });

// ---- queries ------------------------------------------------------------------------------------

/** At most this many candidates per query (same kind; other kinds) are scored for recommendations. */
export const CANDIDATE_LIMIT = 250;

/** The product's listings at the store; a product the store does not carry is a 404. */
async function listingsAt(deps: PartnerDeps, storeId: number, productId: number): Promise<MenuProductDoc[]> {
  const docs = await listingsOfProductAt(deps.collection<MenuProductDoc>(MENU_PRODUCTS), storeId, productId);
  if (docs.length === 0) throw notFound('product', productId);
  return docs;
}

const priceFieldNames = weights.map((w) => `price_${w.replaceAll(' ', '_')}` as keyof MenuProductDoc);

const characteristics = (doc: MenuProductDoc): Characteristics & { id: number } => ({
  id: doc.id,
  product_id: doc.product_id,
  kind: doc.kind,
  lineage: doc.lineage,
  percent_thc: doc.percent_thc,
  percent_cbd: doc.percent_cbd,
  lowest_price: lowestPrice(priceFieldNames.map((f) => doc[f] as string | null)),
  in_stock: doc.in_stock,
});

// ---- routes -------------------------------------------------------------------------------------

const PAGE_PROBLEMS = [400, 404];

export const listCarts = route({
  method: 'get',
  path: '/carts',
  operationId: 'listCarts',
  summary: 'Carts from the operator’s own site',
  description:
    'All carts whose `source.partner_id` is this partner (its embedded or headless site), at the stores ' +
    'of the API key, in id order. Time bounds are exclusive.',
  query: cartsQuerySchema,
  response: { status: 200, description: 'A page of carts', schema: cartPage },
  problems: PAGE_PROBLEMS,
  async handler(ctx, { query, partner }, deps) {
    const storeIds = query.store_id === undefined ? partner.store_ids : [selectStore(ctx)];
    const { limit, cursor, store_id: _, ...filters } = query;
    const page = await cartsOfPartner(
      deps.collection<CartDoc>(CARTS),
      partner.partner_id,
      filters,
      { limit, after: cartAfter(cursor) },
      storeIds,
    );
    answerPage(ctx, 'carts', page.carts, page.next);
  },
});

const listMenuProducts = route({
  method: 'get',
  path: '/menu_products',
  operationId: 'listMenuProducts',
  summary: 'The store’s menu products',
  description: 'Every menu product listed at the store, in id order.',
  query: storeListQuery,
  response: { status: 200, description: 'A page of menu products', schema: menuProductPage },
  problems: PAGE_PROBLEMS,
  async handler(ctx, { query }, deps) {
    const storeId = selectStore(ctx);
    const page = await menuProductsAt(
      deps.collection<MenuProductDoc>(MENU_PRODUCTS),
      storeId,
      { updatedAfter: query.updated_after },
      { limit: query.limit, after: idAfter(query.cursor) },
    );
    answerList(ctx, 'menu_products', page);
  },
});

const getMenuProduct = route({
  method: 'get',
  path: '/menu_products/{menu_product_id}',
  operationId: 'getMenuProduct',
  summary: 'One menu product of the store',
  params: menuProductParams,
  query: storeOnlyQuery,
  response: { status: 200, description: 'The menu product', schema: oneMenuProduct },
  problems: [400, 404],
  async handler(ctx, { params }, deps) {
    const storeId = selectStore(ctx);
    const doc = await menuProductAt(
      deps.collection<MenuProductDoc>(MENU_PRODUCTS),
      storeId,
      params.menu_product_id,
    );
    if (!doc) throw notFound('menu_product', params.menu_product_id);
    ctx.body = { menu_product: publicFields(doc) };
  },
});

const listRecommendations = route({
  method: 'get',
  path: '/products/{product_id}/recommendations',
  operationId: 'listProductRecommendations',
  summary: 'Menu products of the store to recommend beside a product',
  description:
    'Up to `limit` menu products of the store, each with a `score` (0–1), best first: the same kind ' +
    'first, then lineage, closeness of THC and CBD, price band (the lowest prices at the store) and ' +
    'stock. Never the product itself; one listing per product. 404 when the store does not carry the product.',
  params: productParams,
  query: recommendationsQuery,
  response: { status: 200, description: 'The recommendations, best first', schema: recommendationList },
  problems: [400, 404],
  async handler(ctx, { params, query }, deps) {
    const storeId = selectStore(ctx);
    const own = await listingsAt(deps, storeId, params.product_id);
    const first = own[0];
    const subject: Characteristics = {
      ...characteristics(first),
      // The product's lowest price at the store, over all its listings there.
      lowest_price: lowestPrice(own.flatMap((d) => priceFieldNames.map((f) => d[f] as string | null))),
    };
    const candidates = await recommendationCandidates(
      deps.collection<MenuProductDoc>(MENU_PRODUCTS),
      storeId,
      first,
      CANDIDATE_LIMIT,
      MAX_RECOMMENDATIONS,
    );
    const byId = new Map(candidates.map((d) => [d.id, d]));
    const best = recommend(subject, candidates.map(characteristics), query.limit);
    ctx.body = {
      recommendations: best.map(({ score, item }) => ({
        score,
        menu_product: publicFields(byId.get(item.id) as MenuProductDoc),
      })),
    };
  },
});

const listProductReviews = route({
  method: 'get',
  path: '/products/{product_id}/reviews',
  operationId: 'listProductReviews',
  summary: 'Verified reviews of a product at the store',
  description:
    'The verified reviews of the product written at the store, in id order. 404 when the store does ' +
    'not carry the product.',
  params: productParams,
  query: storeListQuery,
  response: { status: 200, description: 'A page of reviews', schema: reviewPage },
  problems: PAGE_PROBLEMS,
  async handler(ctx, { params, query }, deps) {
    const storeId = selectStore(ctx);
    const after = idAfter(query.cursor);
    await listingsAt(deps, storeId, params.product_id);
    const page = await verifiedReviews(
      deps.collection<ReviewDoc>(REVIEWS),
      { productId: params.product_id, storeId },
      query.updated_after,
      { limit: query.limit, after },
    );
    answerList(ctx, 'reviews', page);
  },
});

const listSpecials = route({
  method: 'get',
  path: '/specials',
  operationId: 'listSpecials',
  summary: 'The store’s deals and specials',
  description:
    'Every special of the store, in id order, enabled or not and whatever its time window ' +
    '(`enabled`, `starts_at`, `ends_at` tell whether it is offered now).',
  query: storeListQuery,
  response: { status: 200, description: 'A page of specials', schema: specialPage },
  problems: PAGE_PROBLEMS,
  async handler(ctx, { query }, deps) {
    const storeId = selectStore(ctx);
    const page = await specialsAt(deps.collection<SpecialDoc>(SPECIALS), storeId, query.updated_after, {
      limit: query.limit,
      after: idAfter(query.cursor),
    });
    answerList(ctx, 'specials', page);
  },
});

const getCurbsidePickupSetting = route({
  method: 'get',
  path: '/curbside_pickup_setting',
  operationId: 'getCurbsidePickupSetting',
  summary: 'The store’s curbside pickup setting',
  description: 'Whether the store offers curbside pickup, and the fields of its customer-arrival form.',
  query: storeOnlyQuery,
  response: { status: 200, description: 'The setting', schema: oneSetting },
  problems: [400, 404],
  async handler(ctx, _input, deps) {
    const storeId = selectStore(ctx);
    const doc = await settingOf(deps.collection<CurbsidePickupSettingDoc>(CURBSIDE_PICKUP_SETTINGS), storeId);
    if (!doc) throw notFound('curbside_pickup_setting', storeId);
    ctx.body = { curbside_pickup_setting: publicFields(doc) };
  },
});

const postCurbsideArrival = route({
  method: 'post',
  path: '/reservations/{uuid}/curbside_arrival',
  operationId: 'postCurbsideArrival',
  summary: 'Post a customer’s arrival at the curbside',
  description:
    'Records that the customer of a checked-out curbside reservation has arrived, with the answers to ' +
    'the store’s arrival form; the store is notified. Only for a reservation made through this ' +
    'partner’s own site (its `source.partner_id`) at a store of the key: any other, like an unknown ' +
    'one, is a 404. 409 when it is not checked out, is for pickup or delivery ' +
    '(`reservation_not_curbside`), is finished, cancelled or dismissed, or the store has curbside ' +
    'off; 422 for a missing required field or one the form does not ask. Send an `Idempotency-Key` to ' +
    'retry safely: a retry answers the first result.',
  params: reservationParams,
  body: curbsideArrivalBody,
  response: { status: 201, description: 'The arrival, recorded', schema: oneArrival },
  problems: [400, 404, 409, 413, 415, 422],
  async handler(ctx, { params, body, partner, execute }, deps) {
    const streamId = cart.streamId(params.uuid);
    // The cart's own stream decides whether it exists, whose store it is and whose site it came from:
    // another partner's reservation is answered as one that does not exist. Checked before the
    // Idempotency-Key is claimed: a reservation the partner cannot see stores nothing.
    const reservation = (await deps.commands.load(streamId, cart.decider)).state;
    const visible =
      reservation.exists &&
      partner.store_ids.includes(reservation.store_id) &&
      reservation.source.partner_id === partner.partner_id;
    if (!visible) throw notFound('reservation', params.uuid);
    const storeId = reservation.store_id;
    await execute(async () => {
      const shop = (await deps.commands.load(store.streamId(storeId), store.decider)).state;
      const actor = { type: 'partner', id: partner.partner_id } as const;
      const result = await deps.commands.handle(
        streamId,
        cart.decider,
        {
          type: 'PostCurbsideArrival',
          arrival_id: randomUUID(),
          fields: body,
          at: deps.clock.now().toISOString(),
          context: {
            curbside: shop.exists
              ? {
                  enabled: store.curbsideEnabled(shop),
                  arrival_form_fields: shop.curbside_pickup_setting.arrival_form_fields,
                }
              : null,
          },
        },
        commandMetadata(ctx, actor, deps.clock),
      );
      const posted = result.events.find((e) => e.type === 'CurbsideArrivalPosted');
      if (posted?.type !== 'CurbsideArrivalPosted') throw new Error('no CurbsideArrivalPosted appended');
      ctx.status = 201;
      ctx.body = {
        curbside_arrival: {
          arrival_id: posted.data.arrival_id,
          reservation_uuid: params.uuid,
          store_id: posted.data.store_id,
          arrived_at: posted.data.arrived_at,
          fields: posted.data.fields,
        },
      };
    });
  },
});

/** The seven routes both store APIs serve (docs/partner-api.md: the store operator's, without `/carts`). */
export const storeRoutes: readonly PartnerRoute[] = [
  listMenuProducts,
  getMenuProduct,
  listRecommendations,
  listProductReviews,
  listSpecials,
  getCurbsidePickupSetting,
  postCurbsideArrival,
];

export const storeOperatorApi: PartnerApi = {
  base: '/partner/store/v1',
  title: 'Store Operator API',
  description:
    'For a store operator: the carts from its own embedded or headless site, and the menu, reviews, ' +
    'specials, curbside pickup setting and customer arrivals of its stores.',
  kinds: ['store_operator'],
  routes: [listCarts, ...storeRoutes],
};

export const storeMenuFeedApi: PartnerApi = {
  base: '/partner/store-menu-feed/v1',
  title: 'Store Menu Feed API',
  description:
    'For a store menu feed partner: the menu, reviews, specials, curbside pickup setting and customer ' +
    'arrivals of the stores of its key. There is no /carts here.',
  kinds: ['store_menu_feed'],
  routes: storeRoutes,
};
