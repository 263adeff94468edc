/**
 * Where a delivery stands in its queue (docs/webhooks.md, "Order, isolation, durability"): a cart's
 * deliveries to a subscription leave one by one in cart event order, so a pending delivery that is not
 * its queue's head waits behind that head (one the receiver keeps failing, say) whatever its own
 * `next_attempt_at` says. Answered as `waiting_behind` ({delivery_id, status, next_attempt_at} of the
 * head, or null) on every delivery the admin API shows; read from the `webhook_deliveries` read model
 * the records come from, with one query for the queues of an answer's pending deliveries.
 */
import { z } from 'zod';
import * as delivery from '../domain/webhook-delivery.ts';
import type {
  WebhookDeliveryDoc,
  WebhookDeliveryRecord,
} from '../projections/read-models/webhook-deliveries.ts';
import { queuedInQueues, queueKey } from '../projections/read-models/webhook-delivery-queues.ts';
import type { Collection } from '../projections/read-store.ts';

export const waitingBehind = z
  .object({
    delivery_id: z.uuid(),
    status: delivery.deliveryStatus,
    next_attempt_at: z.string().nullable(),
  })
  .nullable()
  .describe("the queue's head this delivery waits behind (null: none; it is the head, or not queued)");

export type WaitingBehind = z.infer<typeof waitingBehind>;

/** Each record with `waiting_behind`, from one query of the queued deliveries of its pending records' queues. */
export async function withQueuePlaces<
  T extends Pick<WebhookDeliveryRecord, 'delivery_id' | 'webhook_id' | 'cart_uuid' | 'status'>,
>(
  deliveries: Collection<WebhookDeliveryDoc>,
  records: readonly T[],
): Promise<(T & { waiting_behind: WaitingBehind })[]> {
  const pending = records.filter((r) => r.status === 'pending');
  const queues = await queuedInQueues(deliveries, pending);
  return records.map((r) => ({
    ...r,
    waiting_behind: r.status === 'pending' ? behind(queues.get(queueKey(r)) ?? [], r.delivery_id) : null,
  }));
}

/**
 * The head of a queue (its queued deliveries in queue order) when it is not `deliveryId`; null when
 * that one is the head, or no longer queued.
 */
function behind(queued: readonly WebhookDeliveryDoc[], deliveryId: string): WaitingBehind {
  const head = queued[0];
  if (!head || head.delivery_id === deliveryId || !queued.some((d) => d.delivery_id === deliveryId)) {
    return null;
  }
  return { delivery_id: head.delivery_id, status: head.status, next_attempt_at: head.next_attempt_at };
}
