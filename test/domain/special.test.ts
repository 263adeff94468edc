import test from 'ava';
import {
  decider,
  events,
  type SpecialCommand,
  specialFields,
  streamId,
  toRecord,
} from '../../domain/special.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-02T10:00:00.000Z';
const special = scenario(decider);

const body = {
  store_id: 3,
  title: '20% off Kiva',
  special_type: 'product',
  discount_type: 'percent',
  discount_value: '20.00',
  brand_ids: [7],
  starts_at: '2026-03-01T00:00:00-07:00',
};
const upsert = (over: Partial<SpecialCommand> = {}): SpecialCommand => ({
  type: 'UpsertSpecial',
  special_id: 40,
  fields: specialFields.parse(body),
  store_exists: true,
  at,
  ...over,
});
const upserted = events.SpecialUpserted({
  special_id: 40,
  store_id: 3,
  title: '20% off Kiva',
  description: null,
  special_type: 'product',
  discount_type: 'percent',
  discount_value: '20.00',
  product_ids: [],
  brand_ids: [7],
  kinds: [],
  starts_at: '2026-03-01T07:00:00.000Z',
  ends_at: null,
  enabled: true,
  upserted_at: at,
});

test('streamId', (t) => {
  t.is(streamId(40), 'special-40');
});

test('UpsertSpecial on a new special: SpecialUpserted with the defaults filled in and times in UTC', (t) => {
  special.given([]).when(upsert()).thenEmits(t, [upserted]);
});

test('UpsertSpecial changing it, moving it to another store: SpecialUpserted with the full data', (t) => {
  const fields = specialFields.parse({
    ...body,
    store_id: 4,
    description: 'Weekend only',
    discount_type: 'dollar_amount',
    discount_value: '150.00',
    product_ids: [11, 12],
    kinds: ['edible'],
    ends_at: '2026-03-03T00:00:00Z',
    enabled: false,
  });
  special
    .given([upserted])
    .when(upsert({ fields, at: later }))
    .thenEmits(t, [
      events.SpecialUpserted({
        ...upserted.data,
        store_id: 4,
        description: 'Weekend only',
        discount_type: 'dollar_amount',
        discount_value: '150.00',
        product_ids: [11, 12],
        kinds: ['edible'],
        ends_at: '2026-03-03T00:00:00.000Z',
        enabled: false,
        upserted_at: later,
      }),
    ]);
});

test('UpsertSpecial with the same data: nothing', (t) => {
  special
    .given([upserted])
    .when(upsert({ at: later }))
    .thenEmits(t, []);
});

test('UpsertSpecial with the same times written in another offset: nothing', (t) => {
  const fields = specialFields.parse({ ...body, starts_at: '2026-03-01T07:00:00Z' });
  special
    .given([upserted])
    .when(upsert({ fields, at: later }))
    .thenEmits(t, []);
});

test('UpsertSpecial at an unknown store is refused', (t) => {
  const err = special
    .given([])
    .when(upsert({ store_exists: false }))
    .thenRefused(t, 'unknown_store_id', 'invalid');
  t.deepEqual(err?.details, { store_id: 3 });
});

test('UpsertSpecial with a percent over 100 is refused', (t) => {
  const fields = { ...specialFields.parse(body), discount_value: '100.01' };
  special.given([]).when(upsert({ fields })).thenRefused(t, 'invalid_discount_value', 'invalid');
});

test('UpsertSpecial ending before it starts is refused', (t) => {
  const fields = { ...specialFields.parse(body), ends_at: '2026-03-01T07:00:00Z' };
  special.given([]).when(upsert({ fields })).thenRefused(t, 'invalid_special_period', 'invalid');
});

test('toRecord: the special record', (t) => {
  t.is(toRecord(special.given([]).state), null);
  const { special_id, upserted_at, ...data } = upserted.data;
  t.deepEqual(toRecord(special.given([upserted]).state), {
    id: special_id,
    ...data,
    updated_at: upserted_at,
  });
});

// --- request schema ----------------------------------------------------------------------------

const issuePaths = (r: { error?: { issues: { path: PropertyKey[] }[] } }) => [
  ...new Set(r.error?.issues.map((i) => i.path.join('.'))),
];

test('specialFields fills the defaults', (t) => {
  t.deepEqual(specialFields.parse(body), {
    ...body,
    description: null,
    product_ids: [],
    kinds: [],
    ends_at: null,
    enabled: true,
  });
});

test('specialFields refuses unknown fields', (t) => {
  t.is(specialFields.safeParse({ ...body, id: 40 }).error?.issues[0].code, 'unrecognized_keys');
});

test('specialFields refuses missing required fields, naming each', (t) => {
  t.deepEqual(issuePaths(specialFields.safeParse({})).sort(), [
    'discount_type',
    'discount_value',
    'special_type',
    'starts_at',
    'store_id',
    'title',
  ]);
});

test('specialFields refuses wrong types', (t) => {
  t.deepEqual(issuePaths(specialFields.safeParse({ ...body, discount_value: 20 })), ['discount_value']);
  t.deepEqual(issuePaths(specialFields.safeParse({ ...body, enabled: 'no' })), ['enabled']);
  t.deepEqual(issuePaths(specialFields.safeParse({ ...body, product_ids: ['11'] })), ['product_ids.0']);
});

test('specialFields refuses out-of-range and malformed values', (t) => {
  for (const [field, value] of [
    ['special_type', 'bogo'],
    ['discount_type', 'percentage'],
    ['discount_value', '20'],
    ['discount_value', '100.01'],
    ['starts_at', '2026-03-01'],
    ['ends_at', '2026-03-01T07:00:00Z'],
    ['ends_at', '2026-02-28T00:00:00Z'],
    ['title', ''],
  ] as const) {
    t.deepEqual(
      issuePaths(specialFields.safeParse({ ...body, [field]: value })),
      [field],
      `${field}: ${value}`,
    );
  }
  t.deepEqual(issuePaths(specialFields.safeParse({ ...body, kinds: ['flowers'] })), ['kinds.0']);
  t.true(specialFields.safeParse({ ...body, discount_value: '100.00' }).success);
  t.true(
    specialFields.safeParse({ ...body, discount_type: 'target_price', discount_value: '250.00' }).success,
  );
});
