/**
 * Product recommendations (docs/partner-api.md `GET /products/{product_id}/recommendations`), as pure functions:
 * the store's menu products scored against the characteristics of the given product.
 *
 * A score lies in [0, 1] (4 decimals) and is a weighted sum of similarities, each in [0, 1]:
 *
 * | part | weight | similarity |
 * |---|---|---|
 * | kind | 0.55 | 1 when the same kind (flower, edible, …), else 0 |
 * | lineage | 0.15 | 1 same lineage; 0.5 hybrid beside indica or sativa; 0 otherwise or unknown |
 * | THC | 0.10 | 1 − |Δ percent_thc| / 15, at least 0; 0 when either is unknown |
 * | CBD | 0.06 | 1 − |Δ percent_cbd| / 10, at least 0; 0 when either is unknown |
 * | price band | 0.08 | ratio r = higher / lower of the two lowest prices: 1 when r ≤ 1.25, 0 when r ≥ 2, linear between |
 * | in stock | 0.06 | 1 when the candidate is in stock at the store |
 *
 * The kind's weight exceeds all the others together, so every candidate of the same kind ranks above
 * every candidate of another kind; within a kind, lineage weighs most, then THC and CBD, price, stock.
 * Order: score descending, then menu product id ascending. The product itself is never recommended,
 * and a product listed more than once at the store appears once (its best-scoring listing).
 */
import type { z } from 'zod';
import type { lineage as lineageSchema } from '../../domain/schemas.ts';

export type Lineage = z.infer<typeof lineageSchema>;

/** What a recommendation compares: a product's data as a menu product carries it, and its listing. */
export interface Characteristics {
  product_id: number;
  kind: string | null;
  lineage: Lineage | null;
  percent_thc: number | null;
  percent_cbd: number | null;
  /** The lowest of its prices at the store (any weight), null when it has none. */
  lowest_price: number | null;
  in_stock: boolean;
}

export const WEIGHTS = {
  kind: 0.55,
  lineage: 0.15,
  thc: 0.1,
  cbd: 0.06,
  price: 0.08,
  in_stock: 0.06,
} as const;

export const DEFAULT_RECOMMENDATIONS = 10;
const THC_SPAN = 15;
const CBD_SPAN = 10;
const PRICE_SAME_BAND = 1.25;
const PRICE_OTHER_BAND = 2;

/** The lowest of some decimal prices ("12.50"; null for a weight not sold), or null when none. */
export function lowestPrice(prices: readonly (string | null | undefined)[]): number | null {
  let lowest: number | null = null;
  for (const p of prices) {
    if (p === null || p === undefined) continue;
    const n = Number(p);
    if (Number.isFinite(n) && (lowest === null || n < lowest)) lowest = n;
  }
  return lowest;
}

export function lineageSimilarity(a: Lineage | null, b: Lineage | null): number {
  if (a === null || b === null) return 0;
  if (a === b) return 1;
  const pair = new Set([a, b]);
  return pair.has('hybrid') && (pair.has('indica') || pair.has('sativa')) ? 0.5 : 0;
}

/** 1 when equal, falling linearly to 0 at `span` apart; 0 when either is unknown. */
export function closeness(a: number | null, b: number | null, span: number): number {
  if (a === null || b === null) return 0;
  return Math.max(0, 1 - Math.abs(a - b) / span);
}

/** Whether two prices lie in the same band: 1 within 25 % of each other, 0 from twice, linear between. */
export function priceSimilarity(a: number | null, b: number | null): number {
  if (a === null || b === null) return 0;
  if (a === b) return 1;
  const low = Math.min(a, b);
  if (low <= 0) return 0;
  const ratio = Math.max(a, b) / low;
  if (ratio <= PRICE_SAME_BAND) return 1;
  if (ratio >= PRICE_OTHER_BAND) return 0;
  return (PRICE_OTHER_BAND - ratio) / (PRICE_OTHER_BAND - PRICE_SAME_BAND);
}

const round4 = (x: number) => Math.round(x * 10_000) / 10_000;

/** How well `candidate` stands in for `subject`, in [0, 1]. */
export function score(subject: Characteristics, candidate: Characteristics): number {
  const sameKind = subject.kind !== null && subject.kind === candidate.kind ? 1 : 0;
  return round4(
    WEIGHTS.kind * sameKind +
      WEIGHTS.lineage * lineageSimilarity(subject.lineage, candidate.lineage) +
      WEIGHTS.thc * closeness(subject.percent_thc, candidate.percent_thc, THC_SPAN) +
      WEIGHTS.cbd * closeness(subject.percent_cbd, candidate.percent_cbd, CBD_SPAN) +
      WEIGHTS.price * priceSimilarity(subject.lowest_price, candidate.lowest_price) +
      WEIGHTS.in_stock * (candidate.in_stock ? 1 : 0),
  );
}

export interface Scored<T> {
  score: number;
  item: T;
}

/**
 * The best `limit` candidates for `subject`: the subject's own product left out, one listing per
 * product (the best), ordered by score descending, then id ascending.
 */
export function recommend<T extends Characteristics & { id: number }>(
  subject: Characteristics,
  candidates: readonly T[],
  limit = DEFAULT_RECOMMENDATIONS,
): Scored<T>[] {
  const better = (a: Scored<T>, b: Scored<T>) => b.score - a.score || a.item.id - b.item.id;
  const byProduct = new Map<number, Scored<T>>();
  for (const item of candidates) {
    if (item.product_id === subject.product_id) continue;
    const scored = { score: score(subject, item), item };
    const known = byProduct.get(item.product_id);
    if (!known || better(scored, known) < 0) byProduct.set(item.product_id, scored);
  }
  return [...byProduct.values()].sort(better).slice(0, Math.max(0, limit));
}
