/**
 * The queues in `webhook_deliveries` (docs/webhooks.md, "Order, isolation, durability"): a cart's
 * deliveries to a subscription leave one by one in cart event order (`source_revision`), so the
 * delivery the dispatcher works on next in a queue is its queued delivery of the lowest revision, and
 * the one queued longest in a subscription says how far behind its receiver is (docs/operations.md,
 * "Health").
 */
import type { DeliveryStatus } from '../../domain/webhook-delivery.ts';
import type { Collection } from '../read-store.ts';
import { queuedSince, type WebhookDeliveryDoc } from './webhook-deliveries.ts';

/** Statuses of a delivery still queued: scheduled, and neither delivered nor parked. */
export const QUEUED_STATUSES: readonly DeliveryStatus[] = ['pending', 'in_flight', 'failed'];

/**
 * The subscription's delivery queued longest (by `queued_since`: a delivered or parked delivery sent
 * again is queued anew), or null: one walk per queued status of the `[webhook_id, status,
 * queued_since, _id]` index, each stopping at its first.
 *
 * While version 7 is built, the version 6 copy serves (docs/read-side.md, "Upgrades of read models"): its documents
 * written before have no `queued_since` and sort first. Then the oldest of them by `scheduled_at` (the
 * version 6 `[webhook_id, status, scheduled_at]` index) and the oldest of those that have it are read,
 * and the older of the two answers.
 */
export async function oldestQueued(
  collection: Collection<WebhookDeliveryDoc>,
  webhookId: string,
): Promise<WebhookDeliveryDoc | null> {
  const queued = { webhook_id: webhookId, status: { $in: [...QUEUED_STATUSES] } };
  const [doc] = await collection.find(queued, { sort: [['queued_since', 1]], limit: 1 });
  if (doc === undefined || doc.queued_since !== undefined) return doc ?? null;
  const [[unmarked], [marked]] = await Promise.all([
    collection.find(
      { ...queued, queued_since: { $exists: false } },
      { sort: [['scheduled_at', 1]], limit: 1 },
    ),
    // Every `queued_since` is a time, a string: `$gte ''` is all of them, and bounds the walk.
    collection.find({ ...queued, queued_since: { $gte: '' } }, { sort: [['queued_since', 1]], limit: 1 }),
  ]);
  if (marked === undefined || unmarked === undefined) return marked ?? unmarked ?? null;
  return queuedSince(unmarked) <= queuedSince(marked) ? unmarked : marked;
}

/** A queue: one subscription's deliveries for one cart. */
export interface QueueKey {
  webhook_id: string;
  cart_uuid: string;
}

/** A queue's key in the map `queuedInQueues` answers. */
export const queueKey = (q: QueueKey) => `${q.webhook_id}/${q.cart_uuid}`;

/**
 * Queue order: the cart event's revision. A document of the version 6 copy written before version 7
 * served it (the copy serves until version 7 is built, and documents it writes meanwhile have one) has
 * none, and is ordered as it was scheduled.
 */
function inQueueOrder(a: WebhookDeliveryDoc, b: WebhookDeliveryDoc): number {
  if (a.source_revision !== undefined && b.source_revision !== undefined) {
    if (a.source_revision !== b.source_revision) return a.source_revision - b.source_revision;
  }
  if (a.scheduled_at !== b.scheduled_at) return a.scheduled_at < b.scheduled_at ? -1 : 1;
  return a.delivery_id < b.delivery_id ? -1 : a.delivery_id > b.delivery_id ? 1 : 0;
}

/**
 * The queued deliveries of each of `queues`, in queue order, by `webhook_id/cart_uuid`: one query of
 * the `[webhook_id, cart_uuid, status, source_revision]` index for them all (its matches are the
 * queued deliveries of the subscriptions and carts named, so their working set, not their history).
 */
export async function queuedInQueues(
  collection: Collection<WebhookDeliveryDoc>,
  queues: readonly QueueKey[],
): Promise<Map<string, WebhookDeliveryDoc[]>> {
  const wanted = new Set(queues.map(queueKey));
  const byQueue = new Map<string, WebhookDeliveryDoc[]>();
  if (wanted.size === 0) return byQueue;
  const values = (field: keyof QueueKey) => [...new Set(queues.map((q) => q[field]))];
  const found = await collection.find({
    webhook_id: { $in: values('webhook_id') },
    cart_uuid: { $in: values('cart_uuid') },
    status: { $in: [...QUEUED_STATUSES] },
  });
  for (const doc of found) {
    const key = queueKey(doc);
    // Several subscriptions and several carts name every pair of them: only the pairs asked for count.
    if (!wanted.has(key)) continue;
    const queue = byQueue.get(key);
    if (queue) queue.push(doc);
    else byQueue.set(key, [doc]);
  }
  for (const queue of byQueue.values()) queue.sort(inQueueOrder);
  return byQueue;
}
