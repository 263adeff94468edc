/**
 * Review aggregate (`review-<id>`): a customer's review of a product bought at a store. The first
 * `PostReview` posts it; later ones that change something revise it. Partners see verified reviews only.
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { type Decider, invalid } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { freeText, id, isoDateTime, nonEmpty } from './schemas.ts';

export const streamId = (reviewId: number) => `review-${reviewId}`;

const tags = z.array(nonEmpty(100)).max(20);

/** Body of `PUT /reviews/{id}`. `comment` defaults to null, `feelings` and `activities` to []. */
export const reviewFields = z.strictObject({
  product_id: id,
  store_id: id,
  rating: z.number().int().min(1).max(5),
  comment: freeText(5000).nullable().default(null),
  feelings: tags.default([]),
  activities: tags.default([]),
  verified: z.boolean(),
});
export type ReviewFields = z.infer<typeof reviewFields>;

const reviewData = {
  review_id: id,
  product_id: id,
  store_id: id,
  brand_id: id,
  rating: z.number().int(),
  comment: z.string().nullable(),
  feelings: z.array(z.string()),
  activities: z.array(z.string()),
  verified: z.boolean(),
};

export const events = {
  ReviewPosted: defineEvent('ReviewPosted', z.object({ ...reviewData, posted_at: isoDateTime })),
  ReviewRevised: defineEvent('ReviewRevised', z.object({ ...reviewData, revised_at: isoDateTime })),
};
export type ReviewEvent = EventOf<typeof events>;

/**
 * Context the command handler looks up: `product` (the body's product and its brand, or null when
 * there is none) and `store_exists` (the body's store).
 */
export type ReviewCommand = {
  type: 'PostReview';
  review_id: number;
  fields: ReviewFields;
  product: { brand_id: number } | null;
  store_exists: boolean;
  at: string;
};

type ReviewData = Omit<z.output<typeof events.ReviewPosted.schema>, 'posted_at'>;
export type ReviewState =
  | { exists: false }
  | (ReviewData & { exists: true; created_at: string; updated_at: string });

export const decider: Decider<ReviewCommand, ReviewEvent, ReviewState> = {
  initialState: { exists: false },
  decide(command, state) {
    const { fields } = command;
    if (command.product === null) {
      throw invalid('unknown_product_id', `product ${fields.product_id} does not exist`, {
        product_id: fields.product_id,
      });
    }
    if (!command.store_exists) {
      throw invalid('unknown_store_id', `store ${fields.store_id} does not exist`, {
        store_id: fields.store_id,
      });
    }
    const data = { review_id: command.review_id, ...fields, brand_id: command.product.brand_id };
    if (!state.exists) return [events.ReviewPosted({ ...data, posted_at: command.at })];
    const event = events.ReviewRevised({ ...data, revised_at: command.at });
    const { revised_at: _, ...revised } = event.data;
    // A revision that changes nothing appends nothing, so retries and replays are harmless.
    if (isDeepStrictEqual(reviewDataOf(state), revised)) return [];
    return [event];
  },
  evolve(state, event) {
    switch (event.type) {
      case 'ReviewPosted': {
        const { posted_at, ...data } = event.data;
        return { ...data, exists: true, created_at: posted_at, updated_at: posted_at };
      }
      case 'ReviewRevised': {
        const { revised_at, ...data } = event.data;
        return {
          ...data,
          exists: true,
          created_at: state.exists ? state.created_at : revised_at,
          updated_at: revised_at,
        };
      }
    }
  },
};

function reviewDataOf(state: Extract<ReviewState, { exists: true }>): ReviewData {
  const { exists: _, created_at: __, updated_at: ___, ...data } = state;
  return data;
}

/**
 * The partner `review` record (plus `updated_at`, for incremental sync); null if no review.
 * Partners see only verified reviews: the read side filters on `verified`.
 */
export function toRecord(state: ReviewState) {
  if (!state.exists) return null;
  const { review_id, ...data } = reviewDataOf(state);
  return { id: review_id, ...data, created_at: state.created_at, updated_at: state.updated_at };
}
export type ReviewRecord = NonNullable<ReturnType<typeof toRecord>>;
