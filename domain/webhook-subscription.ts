/**
 * Webhook subscription aggregate (`webhooksub-<webhook_id>`), set up by the operator (docs/webhooks.md):
 * the receiving URL, the auth token sent as its bearer token, the stores it covers, the event kinds it
 * receives and the signing secret of its signatures.
 *
 * The auth token and the signing secret enter events only encrypted (`application/credentials.ts`, secret box
 * keyed by `PDS_SECRET_KEY`); to this aggregate they are opaque strings. Whether a URL may point at a
 * private address depends on configuration, so that check belongs to the handler and the dispatcher.
 */
import { z } from 'zod';
import { conflict, type Decider, invalid, notFound } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { id, isoDateTime, uuid } from './schemas.ts';

export const streamId = (webhookId: string) => `webhooksub-${webhookId}`;

export const webhookEventKinds = ['cart_status_updated', 'cart_abandoned'] as const;
export const webhookEventKind = z.enum(webhookEventKinds);
export type WebhookEventKind = z.infer<typeof webhookEventKind>;

/** Why a subscription stopped: the operator said so, or the receiver answered 410 Gone. */
export const disabledReasons = ['operator', 'receiver_gone'] as const;
export const disabledReason = z.enum(disabledReasons);
export type DisabledReason = z.infer<typeof disabledReason>;

export const MAX_URL_LENGTH = 2048;
export const MAX_STORE_IDS = 1000;

/** An absolute http(s) URL without user info, at most 2048 characters. */
export const webhookUrl = z
  .string()
  .max(MAX_URL_LENGTH)
  .refine(isWebhookUrl, 'expected an absolute http or https URL without user name or password');
/** Ciphertext of a secret, as the secret box writes it. */
const encrypted = z.string().min(1);

export const events = {
  WebhookSubscriptionCreated: defineEvent(
    'WebhookSubscriptionCreated',
    z.object({
      webhook_id: uuid,
      url: webhookUrl,
      auth_token_encrypted: encrypted,
      signing_secret_encrypted: encrypted,
      store_ids: z.array(id).min(1),
      events: z.array(webhookEventKind).min(1),
      created_at: isoDateTime,
    }),
  ),
  /** Carries only the fields that changed. */
  WebhookSubscriptionChanged: defineEvent(
    'WebhookSubscriptionChanged',
    z.object({
      webhook_id: uuid,
      url: webhookUrl.optional(),
      auth_token_encrypted: encrypted.optional(),
      store_ids: z.array(id).min(1).optional(),
      events: z.array(webhookEventKind).min(1).optional(),
      changed_at: isoDateTime,
    }),
  ),
  WebhookSubscriptionDisabled: defineEvent(
    'WebhookSubscriptionDisabled',
    z.object({ webhook_id: uuid, reason: disabledReason, disabled_at: isoDateTime }),
  ),
  WebhookSubscriptionEnabled: defineEvent(
    'WebhookSubscriptionEnabled',
    z.object({ webhook_id: uuid, enabled_at: isoDateTime }),
  ),
  WebhookSubscriptionRemoved: defineEvent(
    'WebhookSubscriptionRemoved',
    z.object({ webhook_id: uuid, removed_at: isoDateTime }),
  ),
  WebhookSigningSecretRotated: defineEvent(
    'WebhookSigningSecretRotated',
    z.object({ webhook_id: uuid, signing_secret_encrypted: encrypted, rotated_at: isoDateTime }),
  ),
};
export type WebhookSubscriptionEvent = EventOf<typeof events>;

export type WebhookSubscriptionCommand =
  | {
      type: 'CreateWebhookSubscription';
      webhook_id: string;
      url: string;
      auth_token_encrypted: string;
      signing_secret_encrypted: string;
      store_ids: number[];
      /** Default: every kind. */
      events?: WebhookEventKind[];
      /** Context from the handler: which of `store_ids` name no known store. */
      unknown_store_ids: number[];
      at: string;
    }
  | {
      type: 'ChangeWebhookSubscription';
      url?: string;
      auth_token_encrypted?: string;
      store_ids?: number[];
      events?: WebhookEventKind[];
      /** Context from the handler when `store_ids` is given: which of them name no known store. */
      unknown_store_ids?: number[];
      at: string;
    }
  | { type: 'DisableWebhookSubscription'; reason: DisabledReason; at: string }
  | { type: 'EnableWebhookSubscription'; at: string }
  | { type: 'RemoveWebhookSubscription'; at: string }
  | { type: 'RotateWebhookSigningSecret'; signing_secret_encrypted: string; at: string };

export type WebhookSubscription = {
  exists: true;
  removed: boolean;
  webhook_id: string;
  url: string;
  auth_token_encrypted: string;
  signing_secret_encrypted: string;
  /** Sorted, without duplicates. */
  store_ids: number[];
  /** In the order of `webhookEventKinds`. */
  events: WebhookEventKind[];
  enabled: boolean;
  disabled_reason: DisabledReason | null;
  created_at: string;
  updated_at: string;
  removed_at: string | null;
};
export type WebhookSubscriptionState = { exists: false } | WebhookSubscription;

export function isWebhookUrl(value: string): boolean {
  if (value.length > MAX_URL_LENGTH) return false;
  const url = URL.parse(value);
  if (!url) return false;
  return (
    (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '' && url.password === ''
  );
}

const idSet = (ids: number[]) => [...new Set(ids)].sort((a, b) => a - b);
const kindSet = (kinds: WebhookEventKind[]) => webhookEventKinds.filter((k) => kinds.includes(k));
const sameList = <T>(a: T[], b: T[]) => a.length === b.length && a.every((x, i) => x === b[i]);

function checkUrl(url: string): void {
  if (!isWebhookUrl(url)) {
    throw invalid(
      'invalid_url',
      `url must be an absolute http or https URL of at most ${MAX_URL_LENGTH} characters, without user name or password`,
      { field: 'url' },
    );
  }
}

function checkStoreIds(storeIds: number[], unknown: number[] | undefined): number[] {
  const ids = idSet(storeIds);
  if (ids.length === 0) {
    throw invalid('invalid_store_ids', 'a webhook subscription needs at least one store id', {
      field: 'store_ids',
    });
  }
  if (ids.length > MAX_STORE_IDS) {
    throw invalid('invalid_store_ids', `a webhook subscription covers at most ${MAX_STORE_IDS} stores`, {
      field: 'store_ids',
    });
  }
  if (unknown && unknown.length > 0) {
    const store_ids = idSet(unknown);
    throw invalid('unknown_store_id', `no store with id ${store_ids.join(', ')}`, {
      field: 'store_ids',
      store_ids,
    });
  }
  return ids;
}

function checkEvents(kinds: WebhookEventKind[]): WebhookEventKind[] {
  const unknown = kinds.filter((k) => !(webhookEventKinds as readonly string[]).includes(k));
  if (unknown.length > 0 || kinds.length === 0) {
    throw invalid('invalid_events', `events must be a non-empty subset of ${webhookEventKinds.join(', ')}`, {
      field: 'events',
      allowed: [...webhookEventKinds],
    });
  }
  return kindSet(kinds);
}

function checkEncrypted(field: string, value: string): void {
  if (value.length === 0) throw invalid(`invalid_${field}`, `${field} is empty`, { field });
}

export const decider: Decider<
  WebhookSubscriptionCommand,
  WebhookSubscriptionEvent,
  WebhookSubscriptionState
> = {
  initialState: { exists: false },
  decide(command, state) {
    if (command.type === 'CreateWebhookSubscription') {
      if (state.exists) {
        throw conflict('webhook_exists', `webhook subscription ${command.webhook_id} already exists`, {
          webhook_id: command.webhook_id,
        });
      }
      checkUrl(command.url);
      checkEncrypted('auth_token', command.auth_token_encrypted);
      checkEncrypted('signing_secret', command.signing_secret_encrypted);
      const eventKinds = checkEvents(command.events ?? [...webhookEventKinds]);
      const storeIds = checkStoreIds(command.store_ids, command.unknown_store_ids);
      return [
        events.WebhookSubscriptionCreated({
          webhook_id: command.webhook_id,
          url: command.url,
          auth_token_encrypted: command.auth_token_encrypted,
          signing_secret_encrypted: command.signing_secret_encrypted,
          store_ids: storeIds,
          events: eventKinds,
          created_at: command.at,
        }),
      ];
    }

    if (!state.exists || state.removed) throw notFound('webhook_not_found', 'no such webhook subscription');
    const webhook_id = state.webhook_id;
    switch (command.type) {
      case 'ChangeWebhookSubscription': {
        const change: {
          url?: string;
          auth_token_encrypted?: string;
          store_ids?: number[];
          events?: WebhookEventKind[];
        } = {};
        if (command.url !== undefined) {
          checkUrl(command.url);
          if (command.url !== state.url) change.url = command.url;
        }
        if (command.auth_token_encrypted !== undefined) {
          checkEncrypted('auth_token', command.auth_token_encrypted);
          if (command.auth_token_encrypted !== state.auth_token_encrypted) {
            change.auth_token_encrypted = command.auth_token_encrypted;
          }
        }
        if (command.store_ids !== undefined) {
          const storeIds = checkStoreIds(command.store_ids, command.unknown_store_ids);
          if (!sameList(storeIds, state.store_ids)) change.store_ids = storeIds;
        }
        if (command.events !== undefined) {
          const eventKinds = checkEvents(command.events);
          if (!sameList(eventKinds, state.events)) change.events = eventKinds;
        }
        // Nothing differs: nothing is appended, so retries are harmless.
        if (Object.keys(change).length === 0) return [];
        return [events.WebhookSubscriptionChanged({ webhook_id, ...change, changed_at: command.at })];
      }
      case 'DisableWebhookSubscription':
        if (!state.enabled) return [];
        return [
          events.WebhookSubscriptionDisabled({ webhook_id, reason: command.reason, disabled_at: command.at }),
        ];
      case 'EnableWebhookSubscription':
        if (state.enabled) return [];
        return [events.WebhookSubscriptionEnabled({ webhook_id, enabled_at: command.at })];
      case 'RemoveWebhookSubscription':
        return [events.WebhookSubscriptionRemoved({ webhook_id, removed_at: command.at })];
      case 'RotateWebhookSigningSecret':
        checkEncrypted('signing_secret', command.signing_secret_encrypted);
        return [
          events.WebhookSigningSecretRotated({
            webhook_id,
            signing_secret_encrypted: command.signing_secret_encrypted,
            rotated_at: command.at,
          }),
        ];
    }
  },
  evolve(state, event) {
    if (event.type === 'WebhookSubscriptionCreated') {
      const d = event.data;
      return {
        exists: true,
        removed: false,
        webhook_id: d.webhook_id,
        url: d.url,
        auth_token_encrypted: d.auth_token_encrypted,
        signing_secret_encrypted: d.signing_secret_encrypted,
        store_ids: d.store_ids,
        events: d.events,
        enabled: true,
        disabled_reason: null,
        created_at: d.created_at,
        updated_at: d.created_at,
        removed_at: null,
      };
    }
    if (!state.exists) return state;
    switch (event.type) {
      case 'WebhookSubscriptionChanged': {
        const d = event.data;
        return {
          ...state,
          url: d.url ?? state.url,
          auth_token_encrypted: d.auth_token_encrypted ?? state.auth_token_encrypted,
          store_ids: d.store_ids ?? state.store_ids,
          events: d.events ?? state.events,
          updated_at: d.changed_at,
        };
      }
      case 'WebhookSubscriptionDisabled':
        return {
          ...state,
          enabled: false,
          disabled_reason: event.data.reason,
          updated_at: event.data.disabled_at,
        };
      case 'WebhookSubscriptionEnabled':
        return { ...state, enabled: true, disabled_reason: null, updated_at: event.data.enabled_at };
      case 'WebhookSubscriptionRemoved':
        return {
          ...state,
          removed: true,
          enabled: false,
          removed_at: event.data.removed_at,
          updated_at: event.data.removed_at,
        };
      case 'WebhookSigningSecretRotated':
        return {
          ...state,
          signing_secret_encrypted: event.data.signing_secret_encrypted,
          updated_at: event.data.rotated_at,
        };
    }
  },
};

/**
 * A subscription as the admin API shows it, never the auth token or the signing secret: the one
 * declaration of its fields, for the admin answers and the read model's documents alike.
 */
export const webhookRecord = z.object({
  webhook_id: z.uuid(),
  url: z.string(),
  store_ids: z.array(z.number().int()),
  events: z.array(webhookEventKind),
  enabled: z.boolean(),
  disabled_reason: disabledReason.nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type WebhookRecord = z.infer<typeof webhookRecord>;
const recordKeys = Object.keys(webhookRecord.shape) as (keyof WebhookRecord)[];

/** The record of a subscription, or of anything holding its fields (a read-model document). */
export function toWebhookRecord(source: WebhookRecord): WebhookRecord {
  const record = Object.fromEntries(recordKeys.map((k) => [k, source[k]])) as WebhookRecord;
  return { ...record, store_ids: [...record.store_ids], events: [...record.events] };
}
