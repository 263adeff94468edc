/** The reviews: ratings, comments, feelings and activities on listed products, numbered as written. */
import type { SandboxMenuProduct, SandboxReview } from './model.ts';
import { stream } from './rng.ts';
import { iso, MINUTE } from './units.ts';
import { ACTIVITIES, COMMENTS, FEELINGS } from './vocabulary.ts';

export function generateReviews(seed: number, total: number, reference: number, menu: SandboxMenuProduct[]) {
  const rng = stream(seed, 'reviews');
  const drafts = Array.from({ length: total }, () => {
    const listing = rng.pick(menu);
    const rating = rng.weighted([
      [5, 45],
      [4, 30],
      [3, 13],
      [2, 7],
      [1, 5],
    ] as const);
    return {
      at: reference - rng.int(60, 90 * 24 * 60) * MINUTE,
      body: {
        product_id: listing.body.product_id,
        store_id: listing.store_id,
        rating,
        comment: rng.chance(0.8) ? rng.pick(COMMENTS[rating]) : null,
        feelings: rng.sample(FEELINGS, rng.int(0, 3)),
        activities: rng.sample(ACTIVITIES, rng.int(0, 2)),
        verified: rng.chance(0.92),
      },
    };
  });
  // Ids in the order the reviews were written.
  return drafts
    .sort((a, b) => a.at - b.at)
    .map((d, i): SandboxReview => ({ id: i + 1, at: iso(d.at), body: d.body }));
}
