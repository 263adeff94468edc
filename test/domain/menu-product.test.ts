import test from 'ava';
import {
  decider,
  events,
  type MenuProductCommand,
  menuProductFields,
  priceOf,
  streamId,
  toRecord,
} from '../../domain/menu-product.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-02T10:00:00.000Z';
const menuProduct = scenario(decider);

const body = { product_id: 11, prices: { 'eighth ounce': '35.00', gram: '12.00' } };
const list = (
  over: Partial<Extract<MenuProductCommand, { type: 'ListMenuProduct' }>> = {},
): MenuProductCommand => ({
  type: 'ListMenuProduct',
  menu_product_id: 501,
  store_id: 3,
  fields: menuProductFields.parse(body),
  store_exists: true,
  product: { product_id: 11, brand_id: 7 },
  at,
  ...over,
});
const delist = (store_id = 3): MenuProductCommand => ({
  type: 'DelistMenuProduct',
  menu_product_id: 501,
  store_id,
  at: later,
});
const listed = events.MenuProductListed({
  menu_product_id: 501,
  store_id: 3,
  product_id: 11,
  brand_id: 7,
  prices: { gram: '12.00', 'eighth ounce': '35.00' },
  in_stock: true,
  listed_at: at,
});
const delisted = events.MenuProductDelisted({ menu_product_id: 501, store_id: 3, delisted_at: later });

test('streamId', (t) => {
  t.is(streamId(501), 'menuproduct-501');
});

test('ListMenuProduct on a new id: MenuProductListed with the brand from the product, prices in weight order', (t) => {
  menuProduct.given([]).when(list()).thenEmits(t, [listed]);
  t.deepEqual(Object.keys(listed.data.prices), ['gram', 'eighth ounce']);
});

test('ListMenuProduct changing prices and stock: MenuProductListed with the full state', (t) => {
  menuProduct
    .given([listed])
    .when(
      list({
        fields: menuProductFields.parse({ product_id: 11, prices: { each: '9.99' }, in_stock: false }),
        at: later,
      }),
    )
    .thenEmits(t, [
      events.MenuProductListed({
        ...listed.data,
        prices: { each: '9.99' },
        in_stock: false,
        listed_at: later,
      }),
    ]);
});

test('ListMenuProduct with the same data: nothing', (t) => {
  menuProduct
    .given([listed])
    .when(list({ at: later }))
    .thenEmits(t, []);
});

test('ListMenuProduct with the same prices in another key order: nothing', (t) => {
  const fields = menuProductFields.parse({
    product_id: 11,
    prices: { gram: '12.00', 'eighth ounce': '35.00' },
  });
  menuProduct
    .given([listed])
    .when(list({ fields, at: later }))
    .thenEmits(t, []);
});

test('ListMenuProduct after delisting relists it, even with the same data', (t) => {
  menuProduct
    .given([listed, delisted])
    .when(list({ at: later }))
    .thenEmits(t, [events.MenuProductListed({ ...listed.data, listed_at: later })]);
});

test('ListMenuProduct at a missing store is refused', (t) => {
  menuProduct
    .given([])
    .when(list({ store_exists: false }))
    .thenRefused(t, 'store_not_found', 'not_found');
});

test('ListMenuProduct with an unknown product is refused', (t) => {
  menuProduct
    .given([])
    .when(list({ product: null }))
    .thenRefused(t, 'unknown_product_id', 'invalid');
});

test('ListMenuProduct of an id listed at another store is refused', (t) => {
  const err = menuProduct
    .given([listed])
    .when(list({ store_id: 4 }))
    .thenRefused(t, 'menu_product_store_mismatch', 'conflict');
  t.deepEqual(err?.details, { store_id: 3 });
});

test('ListMenuProduct of an id once listed at another store, now delisted, is refused', (t) => {
  menuProduct
    .given([listed, delisted])
    .when(list({ store_id: 4 }))
    .thenRefused(t, 'menu_product_store_mismatch', 'conflict');
});

test('ListMenuProduct without prices is refused', (t) => {
  menuProduct
    .given([])
    .when(list({ fields: { product_id: 11, prices: {}, in_stock: true } }))
    .thenRefused(t, 'no_prices', 'invalid');
});

test('DelistMenuProduct: MenuProductDelisted', (t) => {
  menuProduct.given([listed]).when(delist()).thenEmits(t, [delisted]);
});

test('DelistMenuProduct of an id never listed is refused', (t) => {
  menuProduct.given([]).when(delist()).thenRefused(t, 'menu_product_not_found', 'not_found');
});

test('DelistMenuProduct of an id already delisted is refused', (t) => {
  menuProduct.given([listed, delisted]).when(delist()).thenRefused(t, 'menu_product_not_found', 'not_found');
});

test('DelistMenuProduct at another store is refused', (t) => {
  menuProduct.given([listed]).when(delist(4)).thenRefused(t, 'menu_product_not_found', 'not_found');
});

test('priceOf: the unit price of a weight while listed', (t) => {
  const state = menuProduct.given([listed]).state;
  t.is(priceOf(state, 'gram'), '12.00');
  t.is(priceOf(state, 'eighth ounce'), '35.00');
  t.is(priceOf(state, 'ounce'), null);
  t.is(priceOf(menuProduct.given([listed, delisted]).state, 'gram'), null);
  t.is(priceOf(menuProduct.given([]).state, 'gram'), null);
});

test('toRecord: the menu product record while listed', (t) => {
  t.deepEqual(toRecord(menuProduct.given([listed]).state), {
    id: 501,
    product_id: 11,
    store_id: 3,
    brand_id: 7,
    available_weights: ['gram', 'eighth ounce'],
    price_each: null,
    price_half_gram: null,
    price_gram: '12.00',
    price_two_gram: null,
    price_eighth_ounce: '35.00',
    price_quarter_ounce: null,
    price_half_ounce: null,
    price_ounce: null,
    in_stock: true,
    updated_at: at,
  });
  t.is(toRecord(menuProduct.given([listed, delisted]).state), null);
  t.is(toRecord(menuProduct.given([]).state), null);
});

// --- request schema ----------------------------------------------------------------------------

const issuePaths = (r: { error?: { issues: { path: PropertyKey[] }[] } }) => [
  ...new Set(r.error?.issues.map((i) => i.path.join('.'))),
];

test('menuProductFields defaults in_stock to true', (t) => {
  t.true(menuProductFields.parse(body).in_stock);
});

test('menuProductFields refuses unknown fields', (t) => {
  t.is(menuProductFields.safeParse({ ...body, store_id: 3 }).error?.issues[0].code, 'unrecognized_keys');
});

test('menuProductFields refuses missing required fields, naming each', (t) => {
  t.deepEqual(issuePaths(menuProductFields.safeParse({})).sort(), ['prices', 'product_id']);
});

test('menuProductFields refuses wrong types', (t) => {
  t.deepEqual(issuePaths(menuProductFields.safeParse({ ...body, in_stock: 1 })), ['in_stock']);
  t.deepEqual(issuePaths(menuProductFields.safeParse({ ...body, prices: [] })), ['prices']);
  t.deepEqual(issuePaths(menuProductFields.safeParse({ ...body, prices: { gram: 12 } })), ['prices.gram']);
});

test('menuProductFields refuses empty prices, unknown weights and malformed amounts', (t) => {
  t.deepEqual(issuePaths(menuProductFields.safeParse({ ...body, prices: {} })), ['prices']);
  t.deepEqual(issuePaths(menuProductFields.safeParse({ ...body, prices: { kilo: '1.00' } })), ['prices']);
  t.deepEqual(issuePaths(menuProductFields.safeParse({ ...body, prices: { gram: '12' } })), ['prices.gram']);
  t.deepEqual(issuePaths(menuProductFields.safeParse({ ...body, prices: { gram: '-1.00' } })), [
    'prices.gram',
  ]);
  t.deepEqual(issuePaths(menuProductFields.safeParse({ ...body, product_id: -1 })), ['product_id']);
});
