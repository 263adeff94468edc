/**
 * The brand feed partner API (seed §4.2, DESIGN §4): verified reviews of the brands within the
 * partner's API policy — its `brand_ids`, or every brand when the policy covers all brands — for
 * partners (e.g. wholesale marketplaces) enriching their own catalogue. Lists are one indexed `find`
 * of `limit + 1` documents in id order, resumed after an opaque cursor.
 */
import { z } from 'zod';
import { PRODUCTS, type ProductDoc } from '../../projections/read-models/products.ts';
import { REVIEWS, type ReviewDoc } from '../../projections/read-models/reviews.ts';
import { pathId } from '../validation.ts';
import {
  answerIdPage,
  answerVerifiedReviews,
  idAfter,
  listQuery,
  reviewPage,
  withUpdatedAfter,
} from './brand-support.ts';
import { brandScope, notFound } from './common.ts';
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
    const [product] = await deps.collection<ProductDoc>(PRODUCTS).findByIds([params.product_id]);
    if (!product || (brands !== undefined && !brands.includes(product.brand_id))) {
      throw notFound('product', params.product_id);
    }
    const filter = withUpdatedAfter({ product_id: product.product_id, verified: true }, query.updated_after);
    await answerIdPage(
      ctx,
      deps.collection<ReviewDoc>(REVIEWS),
      filter,
      { limit: query.limit, after },
      'reviews',
    );
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
