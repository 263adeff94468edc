/**
 * Read model `webhook_subscriptions`: the subscriptions the dispatcher fans cart events out to, one
 * document per subscription, indexed by the stores it covers. Secrets stay encrypted here (the
 * dispatcher decrypts them when it signs and sends); a removed subscription has no document.
 *
 * A removal is final (the decider refuses every later command), so the projection keeps a private
 * tombstone per removed subscription: replaying a batch after a crash then cannot bring a removed
 * subscription back, even for the moment between its replayed creation and its replayed removal.
 * (If the crash left the deletion written and the tombstone not, a replayed creation normally falls in
 * the same replayed batch as the removal, and both land in one ordered bulk write.)
 */

import { domainEventOf } from '../../application/read-state.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as webhooks from '../../domain/webhook-subscription.ts';
import type { Projection } from '../projection.ts';
import type { Collection, Doc, Filter } from '../read-store.ts';

export const WEBHOOK_SUBSCRIPTIONS = 'webhook_subscriptions';
/** Private: `_id` = webhook id of a removed subscription, with `removed_at`. */
export const WEBHOOK_SUBSCRIPTIONS_REMOVED = 'webhook_subscriptions_removed';

export type WebhookSubscriptionDoc = Doc &
  webhooks.WebhookRecord & {
    /** The webhook id. */
    _id: string;
    auth_token_encrypted: string;
    signing_secret_encrypted: string;
  };

const PREFIX = 'webhooksub-';
const eventTypes = new Set<string>(Object.keys(webhooks.events));

function render(state: webhooks.WebhookSubscription): WebhookSubscriptionDoc {
  return {
    _id: state.webhook_id,
    webhook_id: state.webhook_id,
    url: state.url,
    store_ids: [...state.store_ids],
    events: [...state.events],
    enabled: state.enabled,
    disabled_reason: state.disabled_reason,
    created_at: state.created_at,
    updated_at: state.updated_at,
    auth_token_encrypted: state.auth_token_encrypted,
    signing_secret_encrypted: state.signing_secret_encrypted,
  };
}

/** The domain state a document stands for (a document exists only while the subscription does). */
function stateOf(doc: WebhookSubscriptionDoc): webhooks.WebhookSubscription {
  return {
    exists: true,
    removed: false,
    webhook_id: doc.webhook_id,
    url: doc.url,
    auth_token_encrypted: doc.auth_token_encrypted,
    signing_secret_encrypted: doc.signing_secret_encrypted,
    store_ids: [...doc.store_ids],
    events: [...doc.events],
    enabled: doc.enabled,
    disabled_reason: doc.disabled_reason,
    created_at: doc.created_at,
    updated_at: doc.updated_at,
    removed_at: null,
  };
}

export const webhookSubscriptionsProjection: Projection = {
  name: 'webhook_subscriptions',
  version: 1,
  collections: {
    [WEBHOOK_SUBSCRIPTIONS]: [{ keys: [['store_ids', 1]] }],
    [WEBHOOK_SUBSCRIPTIONS_REMOVED]: [],
  },
  filter: { streamPrefixes: [PREFIX] },
  prefetch(event) {
    if (!event.streamId.startsWith(PREFIX)) return [];
    const id = event.streamId.slice(PREFIX.length);
    return [
      [WEBHOOK_SUBSCRIPTIONS, id],
      [WEBHOOK_SUBSCRIPTIONS_REMOVED, id],
    ];
  },
  apply(event, tx) {
    if (!event.streamId.startsWith(PREFIX) || !eventTypes.has(event.type)) return;
    const id = event.streamId.slice(PREFIX.length);
    const current = tx.get<WebhookSubscriptionDoc>(WEBHOOK_SUBSCRIPTIONS, id);
    if (tx.get(WEBHOOK_SUBSCRIPTIONS_REMOVED, id)) {
      // Removed: no later event exists and no earlier one matters. Each collection gets its own bulk
      // write, so a crash may have left the tombstone written and the document not yet deleted.
      if (current) tx.delete(WEBHOOK_SUBSCRIPTIONS, id);
      return;
    }
    if (current && typeof current._position === 'number' && current._position >= event.position) return;
    const before: webhooks.WebhookSubscriptionState = current ? stateOf(current) : { exists: false };
    const after = webhooks.decider.evolve(
      before,
      domainEventOf<webhooks.WebhookSubscriptionEvent>(eventRegistry, event),
    );
    if (!after.exists) return;
    if (after.removed) {
      tx.put(WEBHOOK_SUBSCRIPTIONS_REMOVED, { _id: id, removed_at: after.removed_at });
      tx.delete(WEBHOOK_SUBSCRIPTIONS, id);
      return;
    }
    tx.put(WEBHOOK_SUBSCRIPTIONS, render(after));
  },
};

// ---- queries --------------------------------------------------------------------------------------

const withoutPosition = (doc: WebhookSubscriptionDoc): WebhookSubscriptionDoc => {
  const { _position: _, ...rest } = doc;
  return rest as WebhookSubscriptionDoc;
};

/**
 * The subscriptions covering a store (through the `store_ids` index), in webhook id order: by default
 * only enabled ones that receive `event` when given.
 */
export async function subscriptionsForStore(
  collection: Collection<WebhookSubscriptionDoc>,
  storeId: number,
  options: { event?: webhooks.WebhookEventKind; includeDisabled?: boolean } = {},
): Promise<WebhookSubscriptionDoc[]> {
  const filter: Filter = { store_ids: storeId };
  if (!options.includeDisabled) filter.enabled = true;
  if (options.event !== undefined) filter.events = options.event;
  return (await collection.find(filter)).map(withoutPosition);
}

export async function subscriptionById(
  collection: Collection<WebhookSubscriptionDoc>,
  webhookId: string,
): Promise<WebhookSubscriptionDoc | null> {
  const [doc] = await collection.findByIds([webhookId]);
  return doc ? withoutPosition(doc) : null;
}
