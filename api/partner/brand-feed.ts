/**
 * The brand feed partner API (docs/partner-api.md): verified reviews of the brands within the
 * partner's API policy — its `brand_ids`, or every brand when the policy covers all brands — for
 * partners (e.g. wholesale marketplaces) enriching their own catalogue. Lists are one indexed `find`
 * of `limit + 1` documents in id order, resumed after an opaque cursor.
 */
import { z } from 'zod';
import { PRODUCTS, type ProductDoc, productById } from '../../projections/read-models/catalog/products.ts';
import { REVIEWS, type ReviewDoc, verifiedReviews } from '../../projections/read-models/catalog/reviews.ts';
import { pathId } from '../validation.ts';
import { answerVerifiedReviews, listQuery, reviewPage } from './brand-support.ts';
import { answerList, brandScope, idAfter, notFound } from './common.ts';
import { type PartnerApi, route } from './routes.ts';

const reviews = route({
  method: 'get',
  path: '/reviews',
  operationId: 'listReviews',
  summary: "Verified reviews of the brands within the partner's policy",
  description:
    "Every verified review of a product of a brand within the partner's API policy (its brands, or all " +
    'brands), in `id` order.',
  query: listQuery,
  response: { status: 200, description: 'One page of reviews', schema: reviewPage },
  problems: [400],
  handler: (ctx, { query, partner }, deps) =>
    answerVerifiedReviews(ctx, query, brandScope(partner), deps.collection(REVIEWS)),
});

const productReviews = route({
  method: 'get',
  path: '/products/{product_id}/reviews',
  operationId: 'listProductReviews',
  summary: 'Verified reviews of one product',
  description:
    "Every verified review of the product, in `id` order. A product of a brand outside the partner's policy " +
    '(or one that does not exist) is a 404.',
  params: z.object({ product_id: pathId }),
  query: listQuery,
  response: { status: 200, description: 'One page of reviews', schema: reviewPage },
  problems: [400, 404],
  async handler(ctx, { params, query, partner }, deps) {
    const after = idAfter(query.cursor);
    const brands = brandScope(partner);
    const product = await productById(deps.collection<ProductDoc>(PRODUCTS), params.product_id);
    if (!product || (brands !== undefined && !brands.includes(product.brand_id))) {
      throw notFound('product', params.product_id);
    }
    const page = await verifiedReviews(
      deps.collection<ReviewDoc>(REVIEWS),
      { productId: product.product_id },
      query.updated_after,
      { limit: query.limit, after },
    );
    answerList(ctx, 'reviews', page);
  },
});

export const brandFeedApi: PartnerApi = {
  base: '/partner/brand-feed/v1',
  title: 'Brand feed partner API',
  description:
    "Verified product reviews of the brands within the partner's API policy, to enrich the partner's own catalogue.",
  kinds: ['brand_feed'],
  routes: [reviews, productReviews],
};
