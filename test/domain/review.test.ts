import test from 'ava';
import {
  decider,
  events,
  type ReviewCommand,
  reviewFields,
  streamId,
  toRecord,
} from '../../domain/review.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-02T10:00:00.000Z';
const review = scenario(decider);

const body = { product_id: 11, store_id: 3, rating: 4, verified: true };
const post = (over: Partial<ReviewCommand> = {}): ReviewCommand => ({
  type: 'PostReview',
  review_id: 90,
  fields: reviewFields.parse(body),
  product: { brand_id: 7 },
  store_exists: true,
  at,
  ...over,
});
const data = {
  review_id: 90,
  product_id: 11,
  store_id: 3,
  brand_id: 7,
  rating: 4,
  comment: null,
  feelings: [],
  activities: [],
  verified: true,
};
const posted = events.ReviewPosted({ ...data, posted_at: at });

test('streamId', (t) => {
  t.is(streamId(90), 'review-90');
});

test('PostReview on a new review: ReviewPosted with the brand of the product', (t) => {
  review.given([]).when(post()).thenEmits(t, [posted]);
});

test('PostReview changing a posted review: ReviewRevised with the full data', (t) => {
  const fields = reviewFields.parse({
    ...body,
    rating: 5,
    comment: 'Great for sleep.',
    feelings: ['relaxed', 'sleepy'],
    activities: ['sleeping'],
  });
  review
    .given([posted])
    .when(post({ fields, at: later }))
    .thenEmits(t, [
      events.ReviewRevised({
        ...data,
        rating: 5,
        comment: 'Great for sleep.',
        feelings: ['relaxed', 'sleepy'],
        activities: ['sleeping'],
        revised_at: later,
      }),
    ]);
});

test('PostReview with the same data: nothing', (t) => {
  review
    .given([posted])
    .when(post({ at: later }))
    .thenEmits(t, []);
});

test('PostReview with the same data after a revision: nothing', (t) => {
  const revised = events.ReviewRevised({ ...data, rating: 2, revised_at: later });
  review
    .given([posted, revised])
    .when(post({ fields: reviewFields.parse({ ...body, rating: 2 }), at: later }))
    .thenEmits(t, []);
});

test('PostReview of an unknown product is refused', (t) => {
  const err = review
    .given([])
    .when(post({ product: null }))
    .thenRefused(t, 'unknown_product_id', 'invalid');
  t.deepEqual(err?.details, { product_id: 11 });
});

test('PostReview at an unknown store is refused', (t) => {
  const err = review
    .given([])
    .when(post({ store_exists: false }))
    .thenRefused(t, 'unknown_store_id', 'invalid');
  t.deepEqual(err?.details, { store_id: 3 });
});

test('toRecord: the review record, created at the first post and updated at the last revision', (t) => {
  t.is(toRecord(review.given([]).state), null);
  const revised = events.ReviewRevised({ ...data, rating: 2, revised_at: later });
  const { review_id, ...rest } = data;
  t.deepEqual(toRecord(review.given([posted, revised]).state), {
    id: review_id,
    ...rest,
    rating: 2,
    created_at: at,
    updated_at: later,
  });
});

// --- request schema ----------------------------------------------------------------------------

const issuePaths = (r: { error?: { issues: { path: PropertyKey[] }[] } }) => [
  ...new Set(r.error?.issues.map((i) => i.path.join('.'))),
];

test('reviewFields fills the defaults', (t) => {
  t.deepEqual(reviewFields.parse(body), { ...body, comment: null, feelings: [], activities: [] });
});

test('reviewFields refuses unknown fields', (t) => {
  t.is(reviewFields.safeParse({ ...body, brand_id: 7 }).error?.issues[0].code, 'unrecognized_keys');
});

test('reviewFields refuses missing required fields, naming each', (t) => {
  t.deepEqual(issuePaths(reviewFields.safeParse({})).sort(), [
    'product_id',
    'rating',
    'store_id',
    'verified',
  ]);
});

test('reviewFields refuses wrong types', (t) => {
  t.deepEqual(issuePaths(reviewFields.safeParse({ ...body, rating: '4' })), ['rating']);
  t.deepEqual(issuePaths(reviewFields.safeParse({ ...body, verified: 'true' })), ['verified']);
  t.deepEqual(issuePaths(reviewFields.safeParse({ ...body, feelings: 'happy' })), ['feelings']);
  t.deepEqual(issuePaths(reviewFields.safeParse({ ...body, activities: [1] })), ['activities.0']);
});

test('reviewFields refuses out-of-range values', (t) => {
  for (const [field, value] of [
    ['rating', 0],
    ['rating', 6],
    ['rating', 3.5],
    ['comment', 'x'.repeat(5001)],
    ['store_id', 0],
  ] as const) {
    t.deepEqual(
      issuePaths(reviewFields.safeParse({ ...body, [field]: value })),
      [field],
      `${field}: ${value}`,
    );
  }
  const many = Array.from({ length: 21 }, (_, i) => `tag ${i}`);
  t.deepEqual(issuePaths(reviewFields.safeParse({ ...body, feelings: many })), ['feelings']);
  t.deepEqual(issuePaths(reviewFields.safeParse({ ...body, activities: many })), ['activities']);
  t.deepEqual(issuePaths(reviewFields.safeParse({ ...body, feelings: [''] })), ['feelings.0']);
  t.true(reviewFields.safeParse({ ...body, comment: 'x'.repeat(5000) }).success);
});
