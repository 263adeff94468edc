/**
 * Where a delivery stands in its queue (docs/webhooks.md, "Order, isolation, durability"): a cart's
 * deliveries to a subscription leave one by one in cart event order, so a pending delivery that is not
 * its queue's head waits behind that head (one the receiver keeps failing, say) whatever its own
 * `next_attempt_at` says. Answered as `waiting_behind` ({delivery_id, status, next_attempt_at} of the
 * head, or null) on every delivery the admin API shows; read from the queue's stream, the order the
 * dispatcher follows, once per queue among the pending deliveries of an answer.
 */
import { z } from 'zod';
import { readState } from '../application/read-state.ts';
import { eventRegistry } from '../domain/index.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { WebhookDeliveryRecord } from '../projections/read-models/webhook-deliveries.ts';

export const waitingBehind = z
  .object({
    delivery_id: z.uuid(),
    status: delivery.deliveryStatus,
    next_attempt_at: z.string().nullable(),
  })
  .nullable()
  .describe("the queue's head this delivery waits behind (null: none; it is the head, or not queued)");

export type WaitingBehind = z.infer<typeof waitingBehind>;

/** Each record with `waiting_behind`, reading the stream of every queue with a pending record once. */
export async function withQueuePlaces<
  T extends Pick<WebhookDeliveryRecord, 'delivery_id' | 'webhook_id' | 'cart_uuid' | 'status'>,
>(store: EventStore, records: readonly T[]): Promise<(T & { waiting_behind: WaitingBehind })[]> {
  const queues = new Map<string, Promise<delivery.DeliveryQueueState>>();
  const stateOf = (r: T) => {
    const id = delivery.streamId(r.webhook_id, r.cart_uuid);
    let state = queues.get(id);
    if (!state) {
      state = readState(store, eventRegistry, id, delivery.decider).then((s) => s.state);
      queues.set(id, state);
    }
    return state;
  };
  return Promise.all(
    records.map(async (r) => ({
      ...r,
      waiting_behind: r.status === 'pending' ? behind(await stateOf(r), r.delivery_id) : null,
    })),
  );
}

/** The head of the queue when it comes before `deliveryId` (null when that one is the head or settled). */
function behind(state: delivery.DeliveryQueueState, deliveryId: string): WaitingBehind {
  const head = delivery.head(state);
  if (!state.exists || !head || head.delivery_id === deliveryId) return null;
  const order = state.deliveries.map((d) => d.delivery_id);
  if (order.indexOf(head.delivery_id) > order.indexOf(deliveryId)) return null;
  return { delivery_id: head.delivery_id, status: head.status, next_attempt_at: head.next_attempt_at };
}
