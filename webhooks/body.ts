/**
 * The two webhook bodies (docs/webhooks.md, "Events and bodies"), rendered from the events: the cart folded up to the
 * revision of the event the webhook stands for, and the store as it was at that event's position. A
 * webhook sent hours later (a retry) or rebuilt after a crash therefore says what was true when the
 * event happened, not what is true when it leaves.
 */

import { createStatesAsOf, readState } from '../application/read-state.ts';
import * as cart from '../domain/cart.ts';
import type { EventRegistry } from '../domain/events.ts';
import { eventRegistry } from '../domain/index.ts';
import * as store from '../domain/store.ts';
import type { WebhookEventKind } from '../domain/webhook-subscription.ts';
import type { EventStore, RecordedEvent } from '../eventstore/port.ts';

/** The store object of the `cart_abandoned` body (docs/webhooks.md). */
export interface WebhookStore {
  id: number;
  name: string;
  display_name: string | null;
  store_url: string | null;
}

export interface CartStatusUpdatedBody {
  webhook_event: 'cart_status_updated';
  cart: cart.CartRecord;
}

export interface CartAbandonedBody {
  webhook_event: 'cart_abandoned';
  customer: cart.CartCustomer | null;
  store: WebhookStore;
  cart: cart.AbandonedCart;
}

export type WebhookBody = CartStatusUpdatedBody | CartAbandonedBody;

/** The webhook a cart event leads to, or null for events that lead to none. */
export function webhookKindOf(eventType: string): WebhookEventKind | null {
  if (eventType === 'CartStatusChanged') return 'cart_status_updated';
  if (eventType === 'CartAbandoned') return 'cart_abandoned';
  return null;
}

/** `cart_status_updated` (docs/webhooks.md). `cartId` is the global position of the cart's first event (the cart's numeric id). */
export function cartStatusUpdatedBody(
  state: cart.Cart,
  cartId: number,
  storeName: string,
): CartStatusUpdatedBody {
  return {
    webhook_event: 'cart_status_updated',
    cart: cart.toCartRecord(state, { id: cartId, store_name: storeName }),
  };
}

/** `cart_abandoned` (docs/webhooks.md). */
export function cartAbandonedBody(state: cart.Cart, storeAtThen: WebhookStore): CartAbandonedBody {
  return {
    webhook_event: 'cart_abandoned',
    customer: cart.toWebhookCustomer(state),
    store: storeAtThen,
    cart: cart.toAbandonedCart(state),
  };
}

export interface RenderedWebhook {
  kind: WebhookEventKind;
  cart_uuid: string;
  store_id: number;
  body: WebhookBody;
}

/** The store as a webhook shows it; a store never written gives its id only. */
function webhookStore(storeId: number, state: store.StoreState): WebhookStore {
  if (!state.exists) return { id: storeId, name: '', display_name: null, store_url: null };
  return { id: storeId, name: state.name, display_name: state.display_name, store_url: state.store_url };
}

/**
 * Renders the webhooks of recorded cart events (`CartStatusChanged` or `CartAbandoned`). Each store's
 * last state is kept (`createStatesAsOf`), so a body reads only the store events written since the
 * last one it rendered, not the store's whole stream.
 */
export function createWebhookRenderer(eventStore: EventStore, registry: EventRegistry = eventRegistry) {
  const stores = createStatesAsOf(eventStore, registry, store.decider);
  /** Throws when the event is not one of the two, or the cart stream does not hold it. */
  return async function renderWebhook(event: RecordedEvent): Promise<RenderedWebhook> {
    const kind = webhookKindOf(event.type);
    if (!kind || !event.streamId.startsWith('cart-')) {
      throw new Error(`${event.type} in ${event.streamId} leads to no webhook`);
    }
    const { state, events: recorded } = await readState(eventStore, registry, event.streamId, cart.decider, {
      upTo: { revision: event.revision },
    });
    const last = recorded[recorded.length - 1];
    if (!last || last.id !== event.id) {
      throw new Error(`${event.streamId} does not hold event ${event.id} at revision ${event.revision}`);
    }
    if (!state.exists) throw new Error(`${event.streamId} holds no cart`);
    // The store as of the event's position (its events up to and including it).
    const storeState = await stores.asOf(store.streamId(state.store_id), event.position);
    const storeAtThen = webhookStore(state.store_id, storeState);
    const body =
      kind === 'cart_status_updated'
        ? cartStatusUpdatedBody(state, recorded[0].position, storeAtThen.name)
        : cartAbandonedBody(state, storeAtThen);
    return { kind, cart_uuid: state.uuid, store_id: state.store_id, body };
  };
}
