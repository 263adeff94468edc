/**
 * Webhook delivery queue (`webhookdelivery-<webhook_id>_<cart_uuid>`): every webhook one subscription
 * owes for one cart, with every attempt to send it. One stream per (subscription, cart) is what makes
 * per-cart order cheap and durable: the dispatcher sends the stream's deliveries in the order of the
 * cart events they stand for, the next one waiting until the previous is delivered or parked, while
 * other streams (other carts, other subscriptions) proceed independently.
 *
 * A delivery's id is derived from the subscription and the cart event (`deliveryId`, a name-based
 * UUID), so a fan-out repeated after a crash finds it already scheduled; it is the
 * `X-Service-Webhook-Id` of every attempt and redelivery. The body is rendered once, when the delivery
 * is scheduled, and stored here: every attempt sends the same bytes (signed afresh), and an auditor
 * can read exactly what was sent.
 *
 * An attempt is two events: `WebhookDeliveryAttemptStarted` (appended with the expected revision
 * before the request leaves, so of two dispatchers only one sends it) and `WebhookDeliveryAttempted`
 * (its result). A start without a result means the dispatcher died mid-attempt; once its lease has
 * run out another dispatcher (or the same one, restarted) records it as `interrupted` and goes on.
 * The retry time (with its jitter) is chosen by the dispatcher and carried in the command, so this
 * module stays pure. Its parts are in `domain/webhook-delivery/`: the vocabulary, the events and
 * commands, the state and `evolve`, and `decide` (one named function per command).
 */
import type { Decider } from './decider.ts';
import type { WebhookDeliveryCommand } from './webhook-delivery/commands.ts';
import { decide } from './webhook-delivery/decide.ts';
import type { WebhookDeliveryEvent } from './webhook-delivery/events.ts';
import { type DeliveryQueueState, evolve } from './webhook-delivery/state.ts';

export * from './webhook-delivery/commands.ts';
export * from './webhook-delivery/events.ts';
export * from './webhook-delivery/state.ts';
export * from './webhook-delivery/vocabulary.ts';

export const decider: Decider<WebhookDeliveryCommand, WebhookDeliveryEvent, DeliveryQueueState> = {
  initialState: { exists: false },
  decide,
  evolve,
};
