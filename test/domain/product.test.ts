import test from 'ava';
import { decider, events, productFields, streamId, toRecord } from '../../domain/product.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-02T10:00:00.000Z';
const product = scenario(decider);

const body = { name: 'Blue Dream 3.5g', brand_id: 7, kind: 'flower' };
const fields = productFields.parse(body);
const upserted = events.ProductUpserted({
  product_id: 11,
  name: 'Blue Dream 3.5g',
  brand_id: 7,
  kind: 'flower',
  kind_subtype: null,
  lineage: null,
  description: null,
  percent_thc: null,
  percent_cbd: null,
  image_urls: [],
  upserted_at: at,
});

test('streamId', (t) => {
  t.is(streamId(11), 'product-11');
});

test('UpsertProduct on a new product: ProductUpserted with the defaults filled in', (t) => {
  product
    .given([])
    .when({ type: 'UpsertProduct', product_id: 11, fields, brand_exists: true, at })
    .thenEmits(t, [upserted]);
});

test('UpsertProduct changing fields: ProductUpserted with the full data', (t) => {
  const changed = productFields.parse({
    ...body,
    kind_subtype: 'buds',
    lineage: 'hybrid',
    description: 'Sweet berry aroma.',
    percent_thc: 21.5,
    percent_cbd: 0.1,
    image_urls: ['https://cdn.example.com/blue-dream.jpg'],
  });
  product
    .given([upserted])
    .when({ type: 'UpsertProduct', product_id: 11, fields: changed, brand_exists: true, at: later })
    .thenEmits(t, [
      events.ProductUpserted({
        ...upserted.data,
        kind_subtype: 'buds',
        lineage: 'hybrid',
        description: 'Sweet berry aroma.',
        percent_thc: 21.5,
        percent_cbd: 0.1,
        image_urls: ['https://cdn.example.com/blue-dream.jpg'],
        upserted_at: later,
      }),
    ]);
});

test('UpsertProduct with the same data: nothing', (t) => {
  product
    .given([upserted])
    .when({ type: 'UpsertProduct', product_id: 11, fields, brand_exists: true, at: later })
    .thenEmits(t, []);
});

test('UpsertProduct with an unknown brand is refused', (t) => {
  const err = product
    .given([])
    .when({ type: 'UpsertProduct', product_id: 11, fields, brand_exists: false, at })
    .thenRefused(t, 'unknown_brand_id', 'invalid');
  t.deepEqual(err?.details, { brand_id: 7 });
});

test('toRecord: the product record without the read side fields', (t) => {
  t.is(toRecord(product.given([]).state), null);
  const { upserted_at, ...data } = upserted.data;
  t.deepEqual(toRecord(product.given([upserted]).state), { ...data, updated_at: upserted_at });
});

// --- request schema ----------------------------------------------------------------------------

const issuePaths = (r: { error?: { issues: { path: PropertyKey[] }[] } }) => [
  ...new Set(r.error?.issues.map((i) => i.path.join('.'))),
];

test('productFields refuses unknown fields', (t) => {
  t.is(productFields.safeParse({ ...body, brand: 'Kiva' }).error?.issues[0].code, 'unrecognized_keys');
});

test('productFields refuses missing required fields, naming each', (t) => {
  t.deepEqual(issuePaths(productFields.safeParse({})).sort(), ['brand_id', 'kind', 'name']);
});

test('productFields refuses wrong types', (t) => {
  t.deepEqual(issuePaths(productFields.safeParse({ ...body, brand_id: '7' })), ['brand_id']);
  t.deepEqual(issuePaths(productFields.safeParse({ ...body, image_urls: 'https://cdn.example.com/a.jpg' })), [
    'image_urls',
  ]);
  t.deepEqual(issuePaths(productFields.safeParse({ ...body, percent_thc: '20' })), ['percent_thc']);
});

test('productFields refuses out-of-range values', (t) => {
  for (const [field, value] of [
    ['brand_id', 0],
    ['brand_id', 1.5],
    ['kind', 'flowers'],
    ['lineage', 'ruderalis'],
    ['percent_thc', 100.1],
    ['percent_cbd', -1],
    ['name', ''],
    ['description', 'x'.repeat(10_001)],
  ] as const) {
    t.deepEqual(
      issuePaths(productFields.safeParse({ ...body, [field]: value })),
      [field],
      `${field}: ${value}`,
    );
  }
  t.deepEqual(issuePaths(productFields.safeParse({ ...body, image_urls: ['javascript:alert(1)'] })), [
    'image_urls.0',
  ]);
  t.deepEqual(issuePaths(productFields.safeParse({ ...body, image_urls: ['/relative.jpg'] })), [
    'image_urls.0',
  ]);
  const tooMany = Array.from({ length: 21 }, (_, i) => `https://cdn.example.com/${i}.jpg`);
  t.deepEqual(issuePaths(productFields.safeParse({ ...body, image_urls: tooMany })), ['image_urls']);
});
