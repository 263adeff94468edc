import test from 'ava';
import { eventRegistry } from '../../domain/index.ts';

test('every event type of docs/write-side.md is registered with a schema version', (t) => {
  for (const type of [
    'CartCreated',
    'CartItemAdded',
    'CartItemRemoved',
    'CartItemQuantityChanged',
    'CartCustomerIdentified',
    'CartCheckedOut',
    'CartStatusChanged',
    'CartAbandoned',
    'CurbsideArrivalPosted',
    'CartCustomerErased',
    'StoreUpserted',
    'CurbsidePickupSettingChanged',
    'ProductUpserted',
    'MenuProductListed',
    'MenuProductDelisted',
    'ReviewPosted',
    'SpecialUpserted',
    'BrandUpserted',
    'PartnerRegistered',
    'PartnerKeyIssued',
    'PartnerKeyRevoked',
    'PartnerKeyRotated',
    'WebhookSubscriptionCreated',
    'WebhookSigningSecretRotated',
  ]) {
    t.true(eventRegistry.has(type), type);
    // The two that hold customers' personal data gained the cart's user id at version 2.
    const version = ['CartCustomerIdentified', 'CurbsideArrivalPosted'].includes(type) ? 2 : 1;
    t.is(eventRegistry.versionOf(type), version, type);
  }
});

test('event type names are PascalCase past tense and unique', (t) => {
  const types = eventRegistry.types();
  t.is(new Set(types).size, types.length);
  for (const type of types) t.regex(type, /^([A-Z][a-z]+)+(ed|Out)$/);
});

test('stored data is validated on read', (t) => {
  t.throws(() => eventRegistry.parse('BrandUpserted', { brand_id: 'x' }, 1));
  t.deepEqual(
    eventRegistry.parse(
      'BrandUpserted',
      { brand_id: 1, name: 'A', upserted_at: '2026-01-01T00:00:00.000Z' },
      1,
    ).data,
    {
      brand_id: 1,
      name: 'A',
      upserted_at: '2026-01-01T00:00:00.000Z',
    },
  );
});
