import test from 'ava';
import { decider, events } from '../../domain/brand.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const brand = scenario(decider);

test('UpsertBrand on a new brand: BrandUpserted', (t) => {
  brand
    .given([])
    .when({ type: 'UpsertBrand', brand_id: 7, fields: { name: 'Kiva' }, at })
    .thenEmits(t, [events.BrandUpserted({ brand_id: 7, name: 'Kiva', upserted_at: at })]);
});

test('UpsertBrand renaming: BrandUpserted with the new name', (t) => {
  brand
    .given([events.BrandUpserted({ brand_id: 7, name: 'Kiva', upserted_at: at })])
    .when({ type: 'UpsertBrand', brand_id: 7, fields: { name: 'Kiva Confections' }, at })
    .thenEmits(t, [events.BrandUpserted({ brand_id: 7, name: 'Kiva Confections', upserted_at: at })]);
});

test('UpsertBrand with the same name: nothing', (t) => {
  brand
    .given([events.BrandUpserted({ brand_id: 7, name: 'Kiva', upserted_at: at })])
    .when({ type: 'UpsertBrand', brand_id: 7, fields: { name: 'Kiva' }, at })
    .thenEmits(t, []);
});

test('UpsertBrand with an empty name is refused', (t) => {
  brand
    .given([])
    .when({ type: 'UpsertBrand', brand_id: 7, fields: { name: '' }, at })
    .thenRefused(t, 'invalid_name', 'invalid');
});
