/** The pure recommendation scorer (api/partner/recommendations.ts). */
import test from 'ava';
import {
  type Characteristics,
  closeness,
  lineageSimilarity,
  lowestPrice,
  priceSimilarity,
  recommend,
  score,
  WEIGHTS,
} from '../api/partner/recommendations.ts';

const subject: Characteristics = {
  product_id: 1,
  kind: 'flower',
  lineage: 'hybrid',
  percent_thc: 20,
  percent_cbd: 1,
  lowest_price: 10,
  in_stock: true,
};
const candidate = (id: number, over: Partial<Characteristics> = {}) => ({
  ...subject,
  id,
  product_id: 100 + id,
  ...over,
});

test('weights add up to 1, and the kind outweighs all the rest together', (t) => {
  const { kind, ...rest } = WEIGHTS;
  const others = Object.values(rest).reduce((a, b) => a + b, 0);
  t.is(Math.round((kind + others) * 1e9) / 1e9, 1);
  t.true(kind > others);
});

test('lowestPrice: the smallest decimal, ignoring missing prices', (t) => {
  t.is(lowestPrice(['35.00', null, '10.50', undefined, '12.00']), 10.5);
  t.is(lowestPrice([null, undefined]), null);
  t.is(lowestPrice([]), null);
  t.is(lowestPrice(['0.00', '3.00']), 0);
});

test('lineageSimilarity: same 1, hybrid beside indica or sativa 0.5, otherwise or unknown 0', (t) => {
  t.is(lineageSimilarity('indica', 'indica'), 1);
  t.is(lineageSimilarity('cbd', 'cbd'), 1);
  t.is(lineageSimilarity('hybrid', 'indica'), 0.5);
  t.is(lineageSimilarity('sativa', 'hybrid'), 0.5);
  t.is(lineageSimilarity('indica', 'sativa'), 0);
  t.is(lineageSimilarity('cbd', 'hybrid'), 0);
  t.is(lineageSimilarity(null, 'hybrid'), 0);
  t.is(lineageSimilarity(null, null), 0);
});

test('closeness: linear from 1 (equal) to 0 (span apart), 0 when unknown', (t) => {
  t.is(closeness(20, 20, 15), 1);
  t.is(closeness(20, 27.5, 15), 0.5);
  t.is(closeness(20, 5, 15), 0);
  t.is(closeness(20, 0, 15), 0);
  t.is(closeness(null, 3, 10), 0);
  t.is(closeness(3, null, 10), 0);
});

test('priceSimilarity: 1 within 25 %, 0 from twice, linear between; 0 when unknown', (t) => {
  t.is(priceSimilarity(10, 10), 1);
  t.is(priceSimilarity(10, 12.5), 1);
  t.is(priceSimilarity(12.5, 10), 1);
  t.is(priceSimilarity(10, 20), 0);
  t.is(priceSimilarity(10, 40), 0);
  t.true(Math.abs(priceSimilarity(10, 16.25) - 0.5) < 1e-9);
  t.is(priceSimilarity(null, 10), 0);
  t.is(priceSimilarity(0, 0), 1);
  t.is(priceSimilarity(0, 5), 0);
});

test('score: a perfect match is 1, every part adds its weight', (t) => {
  t.is(score(subject, candidate(1)), 1);
  t.is(score(subject, candidate(1, { kind: 'vape' })), 0.45);
  t.is(score(subject, candidate(1, { in_stock: false })), 0.94);
  t.is(score(subject, candidate(1, { lineage: 'indica' })), 0.925);
  t.is(score(subject, candidate(1, { lineage: null })), 0.85);
  t.is(score(subject, candidate(1, { percent_thc: null, percent_cbd: null })), 0.84);
  t.is(score(subject, candidate(1, { lowest_price: 100 })), 0.92);
  t.is(
    score(subject, {
      product_id: 9,
      kind: 'gear',
      lineage: null,
      percent_thc: null,
      percent_cbd: null,
      lowest_price: null,
      in_stock: false,
    }),
    0,
  );
  // Rounded to 4 decimals.
  const s = score(subject, candidate(1, { percent_thc: 21 }));
  t.is(s, Math.round(s * 10_000) / 10_000);
  t.true(s < 1 && s > 0.99);
});

test('recommend: same kind first, then by score, ties by id; never the product itself', (t) => {
  const list = [
    candidate(1, { kind: 'vape' }), // other kind, otherwise perfect: 0.45
    candidate(2, { lineage: 'sativa', percent_thc: 5, percent_cbd: null, lowest_price: 50, in_stock: false }), // 0.55 + 0.5 × 0.15
    candidate(3, { in_stock: false }), // 0.94
    candidate(4), // 1
    candidate(5, { product_id: subject.product_id }), // the product itself (another listing)
    candidate(6), // 1, tie with 4: id order
    candidate(7, { lineage: 'indica' }), // 0.925
  ];
  const out = recommend(subject, list);
  t.deepEqual(
    out.map((r) => [r.item.id, r.score]),
    [
      [4, 1],
      [6, 1],
      [3, 0.94],
      [7, 0.925],
      [2, 0.625],
      [1, 0.45],
    ],
  );
});

test('recommend: one listing per product (its best), at most `limit`, and an empty list stays empty', (t) => {
  const list = [
    candidate(1, { product_id: 50, in_stock: false }),
    candidate(2, { product_id: 50 }),
    candidate(3, { product_id: 51, lineage: 'indica' }),
    ...Array.from({ length: 20 }, (_, i) => candidate(10 + i, { product_id: 60 + i, kind: 'edible' })),
  ];
  const out = recommend(subject, list);
  t.is(out.length, 10);
  t.deepEqual(
    out.slice(0, 2).map((r) => r.item.id),
    [2, 3],
  );
  t.is(new Set(out.map((r) => r.item.product_id)).size, 10);
  t.deepEqual(
    recommend(subject, list, 3).map((r) => r.item.id),
    [2, 3, 10],
  );
  t.deepEqual(recommend(subject, []), []);
  t.deepEqual(recommend(subject, [candidate(1, { product_id: subject.product_id })]), []);
});

test('recommend: a subject of unknown kind matches no kind', (t) => {
  const unknown = { ...subject, kind: null };
  t.is(score(unknown, candidate(1, { kind: null })), 0.45);
});
