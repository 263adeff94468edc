import test from 'ava';
import { fold } from '../../domain/decider.ts';
import {
  decider,
  events,
  isWebhookUrl,
  streamId,
  toWebhookRecord,
  type WebhookSubscriptionCommand,
  type WebhookSubscriptionEvent,
} from '../../domain/webhook-subscription.ts';
import { scenario } from './gwt.ts';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-02T10:00:00.000Z';
const webhook_id = '4f1c2a3b-6d7e-4f80-9a1b-2c3d4e5f6071';
const url = 'https://hooks.example.com/pds';
const webhook = scenario(decider);

type Create = Extract<WebhookSubscriptionCommand, { type: 'CreateWebhookSubscription' }>;
const create = (over: Partial<Create> = {}): Create => ({
  type: 'CreateWebhookSubscription',
  webhook_id,
  url,
  auth_token_encrypted: 'v1.token-1',
  signing_secret_encrypted: 'v1.secret-1',
  store_ids: [3],
  unknown_store_ids: [],
  at,
  ...over,
});
const created = (over: Partial<Parameters<typeof events.WebhookSubscriptionCreated>[0]> = {}) =>
  events.WebhookSubscriptionCreated({
    webhook_id,
    url,
    auth_token_encrypted: 'v1.token-1',
    signing_secret_encrypted: 'v1.secret-1',
    store_ids: [3],
    events: ['cart_status_updated', 'cart_abandoned'],
    created_at: at,
    ...over,
  });
const history: WebhookSubscriptionEvent[] = [created()];
const disabled = (reason: 'operator' | 'receiver_gone' = 'operator') =>
  events.WebhookSubscriptionDisabled({ webhook_id, reason, disabled_at: at });
const removed = events.WebhookSubscriptionRemoved({ webhook_id, removed_at: at });

test('streamId is webhooksub-<id>', (t) => {
  t.is(streamId(webhook_id), `webhooksub-${webhook_id}`);
});

// CreateWebhookSubscription

test('CreateWebhookSubscription: WebhookSubscriptionCreated with both event kinds by default', (t) => {
  webhook.given([]).when(create()).thenEmits(t, history);
});

test('CreateWebhookSubscription keeps chosen events in canonical order, sorts and dedupes stores', (t) => {
  webhook
    .given([])
    .when(
      create({ store_ids: [5, 3, 5], events: ['cart_abandoned', 'cart_status_updated', 'cart_abandoned'] }),
    )
    .thenEmits(t, [created({ store_ids: [3, 5] })]);
  webhook
    .given([])
    .when(create({ events: ['cart_abandoned'] }))
    .thenEmits(t, [created({ events: ['cart_abandoned'] })]);
});

test('CreateWebhookSubscription on an existing subscription is refused', (t) => {
  webhook.given(history).when(create()).thenRefused(t, 'webhook_exists', 'conflict');
  webhook
    .given([...history, removed])
    .when(create())
    .thenRefused(t, 'webhook_exists', 'conflict');
});

test('CreateWebhookSubscription without store ids is refused', (t) => {
  webhook
    .given([])
    .when(create({ store_ids: [] }))
    .thenRefused(t, 'invalid_store_ids', 'invalid');
});

test('CreateWebhookSubscription with unknown store ids is refused, naming them', (t) => {
  const err = webhook
    .given([])
    .when(create({ store_ids: [3, 4, 5], unknown_store_ids: [5, 4] }))
    .thenRefused(t, 'unknown_store_id', 'invalid');
  t.deepEqual(err?.details?.store_ids, [4, 5]);
});

test('CreateWebhookSubscription with no or unknown event kinds is refused', (t) => {
  webhook
    .given([])
    .when(create({ events: [] }))
    .thenRefused(t, 'invalid_events', 'invalid');
  webhook
    .given([])
    .when(create({ events: ['cart_created' as 'cart_abandoned'] }))
    .thenRefused(t, 'invalid_events', 'invalid');
});

test('CreateWebhookSubscription with a bad URL is refused', (t) => {
  for (const bad of ['not a url', 'ftp://example.com/x', 'https://user:pass@example.com/', '/relative', '']) {
    webhook
      .given([])
      .when(create({ url: bad }))
      .thenRefused(t, 'invalid_url', 'invalid');
  }
});

test('CreateWebhookSubscription with an empty token or secret is refused', (t) => {
  webhook
    .given([])
    .when(create({ auth_token_encrypted: '' }))
    .thenRefused(t, 'invalid_auth_token', 'invalid');
  webhook
    .given([])
    .when(create({ signing_secret_encrypted: '' }))
    .thenRefused(t, 'invalid_signing_secret', 'invalid');
});

test('isWebhookUrl', (t) => {
  t.true(isWebhookUrl('https://example.com/hook?x=1'));
  t.true(isWebhookUrl('http://localhost:9000/hook'));
  t.false(isWebhookUrl('javascript:alert(1)'));
  t.false(isWebhookUrl(`https://example.com/${'a'.repeat(2048)}`));
});

// ChangeWebhookSubscription

test('ChangeWebhookSubscription: only the changed fields', (t) => {
  webhook
    .given(history)
    .when({
      type: 'ChangeWebhookSubscription',
      url: 'https://hooks.example.com/v2',
      store_ids: [3],
      events: ['cart_abandoned', 'cart_status_updated'],
      at: later,
    })
    .thenEmits(t, [
      events.WebhookSubscriptionChanged({
        webhook_id,
        url: 'https://hooks.example.com/v2',
        changed_at: later,
      }),
    ]);
});

test('ChangeWebhookSubscription of every field', (t) => {
  webhook
    .given(history)
    .when({
      type: 'ChangeWebhookSubscription',
      url: 'https://hooks.example.com/v2',
      auth_token_encrypted: 'v1.token-2',
      store_ids: [4, 3],
      unknown_store_ids: [],
      events: ['cart_abandoned'],
      at: later,
    })
    .thenEmits(t, [
      events.WebhookSubscriptionChanged({
        webhook_id,
        url: 'https://hooks.example.com/v2',
        auth_token_encrypted: 'v1.token-2',
        store_ids: [3, 4],
        events: ['cart_abandoned'],
        changed_at: later,
      }),
    ]);
});

test('ChangeWebhookSubscription changing nothing: nothing', (t) => {
  webhook.given(history).when({ type: 'ChangeWebhookSubscription', at }).thenEmits(t, []);
  webhook
    .given(history)
    .when({
      type: 'ChangeWebhookSubscription',
      url,
      auth_token_encrypted: 'v1.token-1',
      store_ids: [3, 3],
      events: ['cart_abandoned', 'cart_status_updated'],
      at,
    })
    .thenEmits(t, []);
});

test('ChangeWebhookSubscription refusals', (t) => {
  const change = (
    over: Partial<Extract<WebhookSubscriptionCommand, { type: 'ChangeWebhookSubscription' }>>,
  ) => webhook.given(history).when({ type: 'ChangeWebhookSubscription', at, ...over });
  change({ url: 'nope' }).thenRefused(t, 'invalid_url', 'invalid');
  change({ auth_token_encrypted: '' }).thenRefused(t, 'invalid_auth_token', 'invalid');
  change({ store_ids: [] }).thenRefused(t, 'invalid_store_ids', 'invalid');
  change({ store_ids: [3, 9], unknown_store_ids: [9] }).thenRefused(t, 'unknown_store_id', 'invalid');
  change({ events: [] }).thenRefused(t, 'invalid_events', 'invalid');
});

test('ChangeWebhookSubscription of a disabled subscription is allowed', (t) => {
  webhook
    .given([...history, disabled()])
    .when({ type: 'ChangeWebhookSubscription', events: ['cart_abandoned'], at: later })
    .thenEmits(t, [
      events.WebhookSubscriptionChanged({ webhook_id, events: ['cart_abandoned'], changed_at: later }),
    ]);
});

// Disable / Enable

test('DisableWebhookSubscription: WebhookSubscriptionDisabled with the reason', (t) => {
  for (const reason of ['operator', 'receiver_gone'] as const) {
    webhook
      .given(history)
      .when({ type: 'DisableWebhookSubscription', reason, at })
      .thenEmits(t, [disabled(reason)]);
  }
});

test('DisableWebhookSubscription of a disabled subscription: nothing', (t) => {
  webhook
    .given([...history, disabled('receiver_gone')])
    .when({ type: 'DisableWebhookSubscription', reason: 'operator', at })
    .thenEmits(t, []);
});

test('EnableWebhookSubscription: WebhookSubscriptionEnabled', (t) => {
  webhook
    .given([...history, disabled()])
    .when({ type: 'EnableWebhookSubscription', at: later })
    .thenEmits(t, [events.WebhookSubscriptionEnabled({ webhook_id, enabled_at: later })]);
});

test('EnableWebhookSubscription of an enabled subscription: nothing', (t) => {
  webhook.given(history).when({ type: 'EnableWebhookSubscription', at }).thenEmits(t, []);
});

// Rotate

test('RotateWebhookSigningSecret: WebhookSigningSecretRotated', (t) => {
  webhook
    .given(history)
    .when({ type: 'RotateWebhookSigningSecret', signing_secret_encrypted: 'v1.secret-2', at: later })
    .thenEmits(t, [
      events.WebhookSigningSecretRotated({
        webhook_id,
        signing_secret_encrypted: 'v1.secret-2',
        rotated_at: later,
      }),
    ]);
});

test('RotateWebhookSigningSecret with an empty secret is refused', (t) => {
  webhook
    .given(history)
    .when({ type: 'RotateWebhookSigningSecret', signing_secret_encrypted: '', at })
    .thenRefused(t, 'invalid_signing_secret', 'invalid');
});

// Remove, and what comes after

test('RemoveWebhookSubscription: WebhookSubscriptionRemoved', (t) => {
  webhook.given(history).when({ type: 'RemoveWebhookSubscription', at }).thenEmits(t, [removed]);
  webhook
    .given([...history, disabled()])
    .when({ type: 'RemoveWebhookSubscription', at })
    .thenEmits(t, [removed]);
});

const later_commands: WebhookSubscriptionCommand[] = [
  { type: 'ChangeWebhookSubscription', url: 'https://example.com/', at },
  { type: 'ChangeWebhookSubscription', at },
  { type: 'DisableWebhookSubscription', reason: 'operator', at },
  { type: 'EnableWebhookSubscription', at },
  { type: 'RemoveWebhookSubscription', at },
  { type: 'RotateWebhookSigningSecret', signing_secret_encrypted: 'v1.secret-2', at },
];

test('every command on a removed subscription is refused as not found', (t) => {
  for (const command of later_commands) {
    webhook
      .given([...history, removed])
      .when(command)
      .thenRefused(t, 'webhook_not_found', 'not_found');
  }
});

test('every command on a missing subscription is refused as not found', (t) => {
  for (const command of later_commands) {
    webhook.given([]).when(command).thenRefused(t, 'webhook_not_found', 'not_found');
  }
});

// State and record

test('state follows every event', (t) => {
  const state = fold(decider, [
    ...history,
    events.WebhookSubscriptionChanged({ webhook_id, store_ids: [3, 4], changed_at: at }),
    disabled('receiver_gone'),
    events.WebhookSigningSecretRotated({
      webhook_id,
      signing_secret_encrypted: 'v1.secret-2',
      rotated_at: later,
    }),
  ]);
  if (!state.exists) return t.fail();
  t.deepEqual(state.store_ids, [3, 4]);
  t.is(state.url, url);
  t.false(state.enabled);
  t.is(state.disabled_reason, 'receiver_gone');
  t.is(state.signing_secret_encrypted, 'v1.secret-2');
  t.is(state.updated_at, later);
  const enabled = decider.evolve(state, events.WebhookSubscriptionEnabled({ webhook_id, enabled_at: later }));
  if (!enabled.exists) return t.fail();
  t.true(enabled.enabled);
  t.is(enabled.disabled_reason, null);
  const gone = decider.evolve(enabled, removed);
  if (!gone.exists) return t.fail();
  t.true(gone.removed);
  t.false(gone.enabled);
});

test('toWebhookRecord: never the token or the secret', (t) => {
  const state = fold(decider, [...history, disabled('receiver_gone')]);
  if (!state.exists) return t.fail();
  const record = toWebhookRecord(state);
  t.deepEqual(record, {
    webhook_id,
    url,
    store_ids: [3],
    events: ['cart_status_updated', 'cart_abandoned'],
    enabled: false,
    disabled_reason: 'receiver_gone',
    created_at: at,
    updated_at: at,
  });
  const text = JSON.stringify(record);
  t.false(text.includes('token-1'));
  t.false(text.includes('secret-1'));
});
