import test from 'ava';
import fc from 'fast-check';
import {
  applySpecials,
  centsToNumber,
  discountedCents,
  fromCents,
  involves,
  isActive,
  moneyToNumber,
  type PricingSpecial,
  toCents,
} from '../../domain/pricing.ts';

const at = '2026-03-01T12:00:00.000Z';
const product = { unit_price: '20.00', product_id: 11, brand_id: 7, kind: 'edible' };

const special = (over: Partial<PricingSpecial> = {}): PricingSpecial => ({
  id: 1,
  title: '10% off',
  special_type: 'product',
  discount_type: 'percent',
  discount_value: '10',
  product_ids: [11],
  brand_ids: [],
  kinds: [],
  starts_at: '2026-03-01T00:00:00.000Z',
  ends_at: null,
  enabled: true,
  ...over,
});

const none = (unit: string) => ({ discounted_unit_price: unit, special_id: null, special_title: null });

test('money: cents ↔ string ↔ number', (t) => {
  t.is(toCents('12.50'), 1250);
  t.is(toCents('0.07'), 7);
  t.is(toCents('999999999.99'), 99999999999);
  t.is(fromCents(1250), '12.50');
  t.is(fromCents(7), '0.07');
  t.is(fromCents(0), '0.00');
  t.is(fromCents(99999999999), '999999999.99');
  t.is(centsToNumber(1999), 19.99);
  t.is(moneyToNumber('0.10'), 0.1);
  for (const bad of [
    '12.5',
    '12',
    '-1.00',
    '1,00',
    '',
    ' 1.00',
    '.00',
    '1.000',
    '1234567890.00',
    '1.0a',
    '1a.00',
    '１.00',
    '1.00 ',
  ])
    t.throws(() => toCents(bad), { instanceOf: RangeError });
  for (const bad of [-1, 1.5, Number.NaN]) t.throws(() => fromCents(bad), { instanceOf: RangeError });
});

test('toCents reads exactly what the money format allows, as the format itself says', (t) => {
  const format = /^(\d{1,9})\.(\d{2})$/;
  const reference = (amount: string) => {
    const m = format.exec(amount);
    return m ? Number(m[1]) * 100 + Number(m[2]) : 'refused';
  };
  const parsed = (amount: string) => {
    try {
      return toCents(amount);
    } catch {
      return 'refused';
    }
  };
  const digits = fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 0, maxLength: 11 });
  const amounts = fc.oneof(
    fc.tuple(digits, digits).map(([a, b]) => `${a}.${b}`),
    fc.string({ unit: fc.constantFrom(...'0123456789.-+ e,a'), maxLength: 14 }),
  );
  fc.assert(fc.property(amounts, (amount) => parsed(amount) === reference(amount)));
  t.pass();
});

test('involves: by product id, brand id or kind; empty lists involve nothing', (t) => {
  t.true(involves({ product_ids: [11], brand_ids: [], kinds: [] }, product));
  t.true(involves({ product_ids: [], brand_ids: [7], kinds: [] }, product));
  t.true(involves({ product_ids: [], brand_ids: [], kinds: ['edible'] }, product));
  t.false(involves({ product_ids: [12], brand_ids: [8], kinds: ['flower'] }, product));
  t.false(involves({ product_ids: [], brand_ids: [], kinds: [] }, product));
});

test('isActive: enabled and starts_at ≤ at < ends_at', (t) => {
  const s = special({ starts_at: at, ends_at: '2026-03-02T00:00:00.000Z' });
  t.true(isActive(s, at), 'starts exactly now');
  t.false(isActive(s, '2026-03-01T11:59:59.999Z'), 'not yet started');
  t.true(isActive(s, '2026-03-01T23:59:59.999Z'));
  t.false(isActive(s, '2026-03-02T00:00:00.000Z'), 'ended exactly now');
  t.false(isActive({ ...s, enabled: false }, at), 'disabled');
  t.true(isActive({ ...s, ends_at: null }, '2099-01-01T00:00:00.000Z'), 'open-ended');
  t.true(isActive({ ...s, starts_at: '2026-03-01T13:00:00+02:00' }, at), 'offsets compared as instants');
});

test('percent: price × (1 − v/100), rounded half-up to the cent', (t) => {
  t.is(discountedCents(2000, { discount_type: 'percent', discount_value: '10' }), 1800);
  // 9.99 × 0.85 = 8.4915 → 8.49
  t.is(discountedCents(999, { discount_type: 'percent', discount_value: '15' }), 849);
  // 0.05 × 0.5 = 0.025 → 0.03 (half-up, not banker's)
  t.is(discountedCents(5, { discount_type: 'percent', discount_value: '50' }), 3);
  // 0.15 × 0.5 = 0.075 → 0.08 (in binary floats 0.15 * 0.5 is just under 0.075 and would round to 0.07)
  t.is(discountedCents(15, { discount_type: 'percent', discount_value: '50' }), 8);
  // fractional percentages: 10.00 × (1 − 0.125) = 8.75
  t.is(discountedCents(1000, { discount_type: 'percent', discount_value: '12.5' }), 875);
  // 33.33% of 1.00 → 0.6667 → 0.67
  t.is(discountedCents(100, { discount_type: 'percent', discount_value: '33.33' }), 67);
  t.is(discountedCents(1000, { discount_type: 'percent', discount_value: '100' }), 0);
  t.is(discountedCents(1000, { discount_type: 'percent', discount_value: '150' }), 0, 'floor at zero');
  t.is(discountedCents(1000, { discount_type: 'percent', discount_value: '0' }), 1000);
  // huge prices stay exact (beyond 2^53 in intermediate products)
  t.is(discountedCents(99999999999, { discount_type: 'percent', discount_value: '33.333333' }), 66666666999);
});

test('dollar_amount: price − v, floored at 0.00', (t) => {
  t.is(discountedCents(2000, { discount_type: 'dollar_amount', discount_value: '5.00' }), 1500);
  t.is(discountedCents(2000, { discount_type: 'dollar_amount', discount_value: '5' }), 1500);
  t.is(discountedCents(2000, { discount_type: 'dollar_amount', discount_value: '25.00' }), 0);
  t.is(discountedCents(2000, { discount_type: 'dollar_amount', discount_value: '20.00' }), 0);
  // 10.00 − 0.005 = 9.995 → 10.00 (half-up of the exact result; never above the price)
  t.is(discountedCents(1000, { discount_type: 'dollar_amount', discount_value: '0.005' }), 1000);
  // 10.00 − 0.006 = 9.994 → 9.99
  t.is(discountedCents(1000, { discount_type: 'dollar_amount', discount_value: '0.006' }), 999);
});

test('target_price: v when lower, never raises the price', (t) => {
  t.is(discountedCents(2000, { discount_type: 'target_price', discount_value: '15.00' }), 1500);
  t.is(discountedCents(2000, { discount_type: 'target_price', discount_value: '25.00' }), 2000);
  t.is(discountedCents(2000, { discount_type: 'target_price', discount_value: '0' }), 0);
  t.is(
    discountedCents(2000, { discount_type: 'target_price', discount_value: '14.995' }),
    1500,
    'rounded half-up',
  );
});

test('unreadable discount values are ignored', (t) => {
  for (const v of ['', '-5', 'ten', '5%', '1e3', '1.2.3']) {
    t.is(discountedCents(2000, { discount_type: 'percent', discount_value: v }), null, v);
  }
  t.deepEqual(applySpecials(product, [special({ discount_value: '-5' })], at), none('20.00'));
});

test('applySpecials: one active product special', (t) => {
  t.deepEqual(applySpecials(product, [special()], at), {
    discounted_unit_price: '18.00',
    special_id: 1,
    special_title: '10% off',
  });
});

test('applySpecials: no specials, or none involving the product', (t) => {
  t.deepEqual(applySpecials(product, [], at), none('20.00'));
  t.deepEqual(
    applySpecials(product, [special({ product_ids: [99], brand_ids: [99], kinds: ['flower'] })], at),
    none('20.00'),
  );
});

test('applySpecials: inactive, disabled, expired and not-yet-started specials change nothing', (t) => {
  const specials = [
    special({ id: 1, enabled: false }),
    special({ id: 2, ends_at: at }),
    special({ id: 3, ends_at: '2026-02-01T00:00:00.000Z' }),
    special({ id: 4, starts_at: '2026-03-01T12:00:00.001Z' }),
  ];
  t.deepEqual(applySpecials(product, specials, at), none('20.00'));
});

test('applySpecials: only product specials change a unit price', (t) => {
  const specials = (['bulk_pricing', 'bundle', 'cart_total'] as const).map((special_type, i) =>
    special({ id: i + 1, special_type, discount_value: '50' }),
  );
  t.deepEqual(applySpecials(product, specials, at), none('20.00'));
});

test('applySpecials: the lowest price of several wins; brand and kind specials count', (t) => {
  const specials = [
    special({ id: 1, title: '10% off', discount_value: '10' }), // 18.00
    special({
      id: 2,
      title: '$3 off brand',
      discount_type: 'dollar_amount',
      discount_value: '3.00',
      product_ids: [],
      brand_ids: [7],
    }), // 17.00
    special({
      id: 3,
      title: 'Edibles at 17.50',
      discount_type: 'target_price',
      discount_value: '17.50',
      product_ids: [],
      kinds: ['edible'],
    }),
    special({ id: 4, title: 'Disabled 90%', discount_value: '90', enabled: false }),
  ];
  t.deepEqual(applySpecials(product, specials, at), {
    discounted_unit_price: '17.00',
    special_id: 2,
    special_title: '$3 off brand',
  });
});

test('applySpecials: ties go to the lowest special id, whatever the order', (t) => {
  const a = special({ id: 9, title: 'nine', discount_type: 'dollar_amount', discount_value: '2.00' });
  const b = special({ id: 4, title: 'four', discount_value: '10' });
  t.is(applySpecials(product, [a, b], at).special_id, 4);
  t.is(applySpecials(product, [b, a], at).special_id, 4);
});

test('applySpecials: a special that does not lower the price is not applied', (t) => {
  t.deepEqual(
    applySpecials(product, [special({ discount_type: 'target_price', discount_value: '30.00' })], at),
    none('20.00'),
  );
  t.deepEqual(applySpecials(product, [special({ discount_value: '0' })], at), none('20.00'));
});

test('applySpecials: price floored at zero', (t) => {
  t.deepEqual(
    applySpecials(
      product,
      [special({ discount_type: 'dollar_amount', discount_value: '50.00', title: 'free' })],
      at,
    ),
    {
      discounted_unit_price: '0.00',
      special_id: 1,
      special_title: 'free',
    },
  );
});
