import { createHash } from 'node:crypto';
import test from 'ava';
import { fold } from '../../domain/decider.ts';
import * as partner from '../../domain/partner.ts';
import * as webhooks from '../../domain/webhook-subscription.ts';
import {
  keyByHash,
  PARTNER_KEYS,
  PARTNERS,
  type PartnerDoc,
  type PartnerKeyDoc,
  partnerById,
  partnerKeysProjection,
} from '../../projections/read-models/partner-keys.ts';
import type { Collection, Doc } from '../../projections/read-store.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { append, eventStoreFor, project, recording, resetCheckpoint, snapshot } from './support.ts';

const BRAND_PARTNER = '5b0e6f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b';
const STORE_PARTNER = '9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d';
const hash = (key: string) => createHash('sha256').update(key).digest('hex');
const key = (n: number) => ({
  key_id: `key_${n}`,
  key_hash: hash(`pds_live_secret_${n}`),
  key_prefix: `pds_live_${n}`,
});

const registered = (
  partner_id: string,
  kind: partner.PartnerKind,
  scope: { brand_ids?: number[]; store_ids?: number[] },
  at: string,
) =>
  partner.events.PartnerRegistered({
    partner_id,
    name: kind === 'brand' ? 'Kiva Marketing' : 'Green Leaf Storefront',
    kind,
    brand_ids: scope.brand_ids ?? [],
    store_ids: scope.store_ids ?? [],
    all_brands: false,
    rate_limit_per_minute: 600,
    registered_at: at,
  });

const issued = (partner_id: string, n: number, issued_at: string) =>
  partner.events.PartnerKeyIssued({ partner_id, ...key(n), issued_at });

/** Registration with key 1, a second key: both active. */
const firstEvents = () => [
  registered(BRAND_PARTNER, 'brand', { brand_ids: [10, 11] }, '2026-05-01T09:00:00.000Z'),
  issued(BRAND_PARTNER, 1, '2026-05-01T09:00:00.000Z'),
  issued(BRAND_PARTNER, 2, '2026-05-01T09:30:00.000Z'),
];
/** Key 1 rotated to key 3, key 2 revoked, the limit raised. */
const laterEvents = () => [
  partner.events.PartnerKeyRotated({
    partner_id: BRAND_PARTNER,
    old_key_id: 'key_1',
    ...key(3),
    rotated_at: '2026-05-02T09:00:00.000Z',
  }),
  partner.events.PartnerKeyRevoked({
    partner_id: BRAND_PARTNER,
    key_id: 'key_2',
    revoked_at: '2026-05-02T10:00:00.000Z',
  }),
  partner.events.PartnerRateLimitChanged({
    partner_id: BRAND_PARTNER,
    rate_limit_per_minute: 1200,
    changed_at: '2026-05-02T11:00:00.000Z',
  }),
];
const storePartnerEvents = () => [
  registered(STORE_PARTNER, 'store_operator', { store_ids: [1, 2] }, '2026-05-01T12:00:00.000Z'),
  issued(STORE_PARTNER, 4, '2026-05-01T12:00:00.000Z'),
];

function brandKeyDoc(n: number, rate: number): PartnerKeyDoc {
  return {
    _id: hash(`pds_live_secret_${n}`),
    partner_id: BRAND_PARTNER,
    key_id: `key_${n}`,
    kind: 'brand',
    brand_ids: [10, 11],
    store_ids: [],
    all_brands: false,
    rate_limit_per_minute: rate,
  };
}
const storeKeyDoc: PartnerKeyDoc = {
  _id: hash('pds_live_secret_4'),
  partner_id: STORE_PARTNER,
  key_id: 'key_4',
  kind: 'store_operator',
  brand_ids: [],
  store_ids: [1, 2],
  all_brands: false,
  rate_limit_per_minute: 600,
};

function partnerDoc(events: partner.PartnerEvent[]): PartnerDoc {
  const state = fold(partner.decider, events);
  if (!state.exists) throw new Error('no partner');
  return { _id: state.partner_id, ...partner.toPartnerRecord(state), _state: state };
}

const byId = <T extends { _id: unknown }>(docs: T[]) =>
  [...docs].sort((a, b) => (String(a._id) < String(b._id) ? -1 : 1));

test('active keys are looked up by hash; rotation and revocation remove keys; limit changes reach the keys', async (t) => {
  const es = await eventStoreFor(t);
  await append(es, partner.streamId(BRAND_PARTNER), firstEvents(), '2026-05-01T09:00:00.000Z');
  await append(es, partner.streamId(STORE_PARTNER), storePartnerEvents(), '2026-05-01T12:00:00.000Z');
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, partnerKeysProjection);

  let docs = await snapshot(readStore, partnerKeysProjection);
  t.deepEqual(docs[PARTNER_KEYS], byId([brandKeyDoc(1, 600), brandKeyDoc(2, 600), storeKeyDoc]));
  t.deepEqual(docs[PARTNERS], byId([partnerDoc(firstEvents()), partnerDoc(storePartnerEvents())]));

  await append(es, partner.streamId(BRAND_PARTNER), laterEvents(), '2026-05-02T09:00:00.000Z');
  await project(es, readStore, partnerKeysProjection);
  docs = await snapshot(readStore, partnerKeysProjection);
  t.deepEqual(docs[PARTNER_KEYS], byId([brandKeyDoc(3, 1200), storeKeyDoc]));
  t.deepEqual(
    docs[PARTNERS],
    byId([partnerDoc([...firstEvents(), ...laterEvents()]), partnerDoc(storePartnerEvents())]),
  );

  const keys = await readStore.collection<PartnerKeyDoc>(PARTNER_KEYS);
  t.deepEqual(await keyByHash(keys, hash('pds_live_secret_3')), brandKeyDoc(3, 1200));
  t.is(await keyByHash(keys, hash('pds_live_secret_1')), null, 'rotated away');
  t.is(await keyByHash(keys, hash('pds_live_secret_2')), null, 'revoked');
  t.is(await keyByHash(keys, hash('never issued')), null);

  // The admin record: no key hash, no private field.
  const record = await partnerById(await readStore.collection<PartnerDoc>(PARTNERS), BRAND_PARTNER);
  const state = fold(partner.decider, [...firstEvents(), ...laterEvents()]);
  if (!state.exists) throw new Error('no partner');
  t.deepEqual(record, partner.toPartnerRecord(state));
  t.false(JSON.stringify(record).includes(hash('pds_live_secret_3')));
});

test('applying the same events again changes nothing and never brings back a revoked key', async (t) => {
  const es = await eventStoreFor(t);
  await append(es, partner.streamId(BRAND_PARTNER), firstEvents());
  await append(es, partner.streamId(STORE_PARTNER), storePartnerEvents());
  await append(es, partner.streamId(BRAND_PARTNER), laterEvents());
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, partnerKeysProjection);
  const first = await snapshot(readStore, partnerKeysProjection);

  for (const batchSize of [1, 2, 1000]) {
    await resetCheckpoint(readStore, partnerKeysProjection.name);
    const { readStore: watched, writes } = recording(readStore);
    await project(es, watched, partnerKeysProjection, { batchSize });
    // Not one write: a replayed PartnerKeyIssued of a revoked key does not even briefly restore it.
    t.deepEqual(writes, []);
    t.deepEqual(await snapshot(readStore, partnerKeysProjection), first);
  }
  for (const batchSize of [1, 3]) {
    const fresh = openSqliteReadStore(':memory:');
    await project(es, fresh, partnerKeysProjection, { batchSize });
    t.deepEqual(await snapshot(fresh, partnerKeysProjection), first);
  }
});

test('a crash that left the partner written and its key documents not is repaired by the replay', async (t) => {
  const es = await eventStoreFor(t);
  await append(es, partner.streamId(BRAND_PARTNER), firstEvents());
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, partnerKeysProjection);
  const keys = await readStore.collection<PartnerKeyDoc>(PARTNER_KEYS);
  const partners = await readStore.collection<PartnerDoc>(PARTNERS);
  const keysBefore = await keys.find({});
  const partnersBefore = await partners.find({});
  const checkpoint = await readStore.getCheckpoint(partnerKeysProjection.name);
  if (!checkpoint) throw new Error('no checkpoint');
  await append(es, partner.streamId(BRAND_PARTNER), laterEvents());
  await project(es, readStore, partnerKeysProjection);
  const done = await snapshot(readStore, partnerKeysProjection);

  /** Puts a collection back as it was: the writes of one bulk write lost in a crash. */
  async function restore<T extends Doc>(c: Collection<T>, docs: T[]): Promise<void> {
    await c.bulkWrite([{ deleteMany: { filter: {} } }]);
    await c.bulkWrite(
      docs.map((doc) => ({ replaceOne: { filter: { _id: doc._id }, replacement: doc, upsert: true } })),
    );
  }

  // The partner's bulk write landed, the keys' did not: revoked and rotated-away keys still there.
  await restore(keys, keysBefore);
  await readStore.setCheckpoint(partnerKeysProjection.name, checkpoint);
  t.not(await keyByHash(keys, hash('pds_live_secret_2')), null);
  await project(es, readStore, partnerKeysProjection);
  t.deepEqual(await snapshot(readStore, partnerKeysProjection), done);

  // The other way round: the keys landed, the partner did not.
  await restore(partners, partnersBefore);
  await readStore.setCheckpoint(partnerKeysProjection.name, checkpoint);
  await project(es, readStore, partnerKeysProjection);
  t.deepEqual(await snapshot(readStore, partnerKeysProjection), done);
});

test('events of other streams are ignored', async (t) => {
  const es = await eventStoreFor(t);
  await append(es, partner.streamId(STORE_PARTNER), storePartnerEvents());
  await append(es, webhooks.streamId('0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0'), [
    webhooks.events.WebhookSubscriptionCreated({
      webhook_id: '0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0',
      url: 'https://hooks.example.com/pds',
      auth_token_encrypted: 'v1.box.token',
      signing_secret_encrypted: 'v1.box.secret',
      store_ids: [1],
      events: ['cart_status_updated'],
      created_at: '2026-05-01T12:00:00.000Z',
    }),
  ]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, partnerKeysProjection);
  const docs = await snapshot(readStore, partnerKeysProjection);
  t.deepEqual(docs[PARTNER_KEYS], [storeKeyDoc]);
  t.deepEqual(docs[PARTNERS], [partnerDoc(storePartnerEvents())]);
  t.deepEqual(partnerKeysProjection.prefetch?.({ streamId: 'webhooksub-x' } as never), []);
});
