import test from 'ava';
import * as webhooks from '../../domain/webhook-subscription.ts';
import {
  subscriptionById,
  subscriptionsForStore,
  WEBHOOK_SUBSCRIPTIONS,
  WEBHOOK_SUBSCRIPTIONS_REMOVED,
  type WebhookSubscriptionDoc,
  webhookSubscriptionsProjection,
} from '../../projections/read-models/webhook-subscriptions.ts';
import { openSqliteReadStore, type SqliteCollection } from '../../projections/sqlite/read-store.ts';
import { append, eventStoreFor, project, recording, resetCheckpoint, snapshot } from './support.ts';

const A = '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';
const B = '2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e';
const C = '3c4d5e6f-7a8b-4c9d-8e1f-2a3b4c5d6e7f';
const other = (n: number) => `4d5e6f7a-8b9c-4d0e-9f2a-${String(n).padStart(12, '0')}`;

const created = (webhook_id: string, store_ids: number[], created_at: string) =>
  webhooks.events.WebhookSubscriptionCreated({
    webhook_id,
    url: `https://hooks.example.com/${webhook_id}`,
    auth_token_encrypted: `v1.box.token.${webhook_id}`,
    signing_secret_encrypted: `v1.box.secret.${webhook_id}`,
    store_ids,
    events: ['cart_status_updated', 'cart_abandoned'],
    created_at,
  });

async function world(t: Parameters<typeof eventStoreFor>[0]) {
  const es = await eventStoreFor(t);
  await append(es, webhooks.streamId(A), [
    created(A, [1, 2], '2026-05-01T09:00:00.000Z'),
    webhooks.events.WebhookSubscriptionChanged({
      webhook_id: A,
      url: 'https://hooks.example.com/v2/pds',
      store_ids: [1, 3],
      changed_at: '2026-05-01T10:00:00.000Z',
    }),
    webhooks.events.WebhookSigningSecretRotated({
      webhook_id: A,
      signing_secret_encrypted: 'v1.box.secret.rotated',
      rotated_at: '2026-05-01T11:00:00.000Z',
    }),
  ]);
  await append(es, webhooks.streamId(B), [
    created(B, [2], '2026-05-01T09:00:00.000Z'),
    webhooks.events.WebhookSubscriptionDisabled({
      webhook_id: B,
      reason: 'receiver_gone',
      disabled_at: '2026-05-01T12:00:00.000Z',
    }),
  ]);
  await append(es, webhooks.streamId(C), [
    created(C, [2], '2026-05-01T09:00:00.000Z'),
    webhooks.events.WebhookSubscriptionRemoved({ webhook_id: C, removed_at: '2026-05-01T13:00:00.000Z' }),
  ]);
  // Many subscriptions of another store, which a store-2 lookup must not examine.
  for (let n = 1; n <= 50; n++)
    await append(es, webhooks.streamId(other(n)), [created(other(n), [9], '2026-05-01T09:00:00.000Z')]);
  return es;
}

const docA: WebhookSubscriptionDoc = {
  _id: A,
  webhook_id: A,
  url: 'https://hooks.example.com/v2/pds',
  store_ids: [1, 3],
  events: ['cart_status_updated', 'cart_abandoned'],
  enabled: true,
  disabled_reason: null,
  created_at: '2026-05-01T09:00:00.000Z',
  updated_at: '2026-05-01T11:00:00.000Z',
  auth_token_encrypted: `v1.box.token.${A}`,
  signing_secret_encrypted: 'v1.box.secret.rotated',
};
const docB: WebhookSubscriptionDoc = {
  _id: B,
  webhook_id: B,
  url: `https://hooks.example.com/${B}`,
  store_ids: [2],
  events: ['cart_status_updated', 'cart_abandoned'],
  enabled: false,
  disabled_reason: 'receiver_gone',
  created_at: '2026-05-01T09:00:00.000Z',
  updated_at: '2026-05-01T12:00:00.000Z',
  auth_token_encrypted: `v1.box.token.${B}`,
  signing_secret_encrypted: `v1.box.secret.${B}`,
};

test('one document per live subscription, secrets encrypted; removed ones are gone', async (t) => {
  const es = await world(t);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookSubscriptionsProjection);
  const docs = await snapshot(readStore, webhookSubscriptionsProjection);
  t.deepEqual(docs[WEBHOOK_SUBSCRIPTIONS].slice(0, 2), [docA, docB]);
  t.is(docs[WEBHOOK_SUBSCRIPTIONS].length, 52);
  t.deepEqual(docs[WEBHOOK_SUBSCRIPTIONS_REMOVED], [{ _id: C, removed_at: '2026-05-01T13:00:00.000Z' }]);

  const subs = (await readStore.collection<WebhookSubscriptionDoc>(
    WEBHOOK_SUBSCRIPTIONS,
    webhookSubscriptionsProjection.collections[WEBHOOK_SUBSCRIPTIONS],
  )) as SqliteCollection<WebhookSubscriptionDoc>;
  t.deepEqual(await subscriptionById(subs, A), docA);
  t.is(await subscriptionById(subs, C), null);

  // The dispatcher's lookup goes through the store_ids index.
  t.deepEqual(await subscriptionsForStore(subs, 2), []);
  t.is(subs.lastExamined(), 1);
  t.deepEqual(await subscriptionsForStore(subs, 2, { includeDisabled: true }), [docB]);
  t.deepEqual(await subscriptionsForStore(subs, 3, { event: 'cart_abandoned' }), [docA]);
  t.is(subs.lastExamined(), 1);
  t.deepEqual(await subscriptionsForStore(subs, 1), [docA]);
  t.is((await subscriptionsForStore(subs, 9)).length, 50);
});

test('re-enabling, and narrowing the event kinds, update the document', async (t) => {
  const es = await world(t);
  await append(es, webhooks.streamId(B), [
    webhooks.events.WebhookSubscriptionEnabled({ webhook_id: B, enabled_at: '2026-05-02T09:00:00.000Z' }),
    webhooks.events.WebhookSubscriptionChanged({
      webhook_id: B,
      events: ['cart_abandoned'],
      auth_token_encrypted: 'v1.box.token.new',
      changed_at: '2026-05-02T10:00:00.000Z',
    }),
  ]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookSubscriptionsProjection);
  const subs = await readStore.collection<WebhookSubscriptionDoc>(WEBHOOK_SUBSCRIPTIONS);
  t.deepEqual(await subscriptionById(subs, B), {
    ...docB,
    enabled: true,
    disabled_reason: null,
    events: ['cart_abandoned'],
    auth_token_encrypted: 'v1.box.token.new',
    updated_at: '2026-05-02T10:00:00.000Z',
  });
  t.deepEqual(await subscriptionsForStore(subs, 2, { event: 'cart_status_updated' }), []);
  t.is((await subscriptionsForStore(subs, 2, { event: 'cart_abandoned' })).length, 1);
});

test('applying the same events again changes nothing and never restores a removed subscription', async (t) => {
  const es = await world(t);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookSubscriptionsProjection);
  const first = await snapshot(readStore, webhookSubscriptionsProjection);
  for (const batchSize of [1, 1000]) {
    await resetCheckpoint(readStore, webhookSubscriptionsProjection.name);
    const { readStore: watched, writes } = recording(readStore);
    await project(es, watched, webhookSubscriptionsProjection, { batchSize });
    t.deepEqual(writes, []);
    t.deepEqual(await snapshot(readStore, webhookSubscriptionsProjection), first);
  }
  const fresh = openSqliteReadStore(':memory:');
  await project(es, fresh, webhookSubscriptionsProjection, { batchSize: 1 });
  t.deepEqual(await snapshot(fresh, webhookSubscriptionsProjection), first);
});

test('a crash that left the tombstone written and the subscription not deleted is repaired by the replay', async (t) => {
  const es = await eventStoreFor(t);
  await append(es, webhooks.streamId(C), [created(C, [2], '2026-05-01T09:00:00.000Z')]);
  const readStore = openSqliteReadStore(':memory:');
  await project(es, readStore, webhookSubscriptionsProjection);
  const subs = await readStore.collection<WebhookSubscriptionDoc>(WEBHOOK_SUBSCRIPTIONS);
  const before = await subs.find({});
  const checkpoint = await readStore.getCheckpoint(webhookSubscriptionsProjection.name);
  if (!checkpoint) throw new Error('no checkpoint');
  await append(es, webhooks.streamId(C), [
    webhooks.events.WebhookSubscriptionRemoved({ webhook_id: C, removed_at: '2026-05-01T13:00:00.000Z' }),
  ]);
  await project(es, readStore, webhookSubscriptionsProjection);
  const done = await snapshot(readStore, webhookSubscriptionsProjection);
  t.deepEqual(done[WEBHOOK_SUBSCRIPTIONS], []);

  await subs.bulkWrite(
    before.map((doc) => ({ replaceOne: { filter: { _id: doc._id }, replacement: doc, upsert: true } })),
  );
  await readStore.setCheckpoint(webhookSubscriptionsProjection.name, checkpoint);
  t.not(await subscriptionById(subs, C), null);
  await project(es, readStore, webhookSubscriptionsProjection);
  t.deepEqual(await snapshot(readStore, webhookSubscriptionsProjection), done);
});
