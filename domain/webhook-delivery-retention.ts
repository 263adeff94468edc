/**
 * The retention's record of the delivery queues it deletes (docs/operations.md, "Retention"):
 * before the retention job deletes a finished queue from the log, it appends one
 * `WebhookDeliveryQueuePruned` naming the queue and its deliveries to a stream of the day
 * (`webhookretention-<yyyy-mm-dd>`), kept as long as the deliveries were and then dropped like the
 * idempotency records. A projection that read the queue in part before its deletion (a rebuild under
 * way) meets the record after what it read, and deletes those deliveries' documents: whatever the
 * order of the rebuild and the job, no document is left of a deleted queue.
 */
import { z } from 'zod';
import { defineEvent, type EventOf } from './events.ts';
import { isoDateTime, uuid } from './schemas.ts';

export const STREAM_PREFIX = 'webhookretention-';

/** The stream of the records of one UTC day. */
export const streamId = (at: Date): string => `${STREAM_PREFIX}${at.toISOString().slice(0, 10)}`;

export const events = {
  WebhookDeliveryQueuePruned: defineEvent(
    'WebhookDeliveryQueuePruned',
    z.object({
      /** The queue's stream (`webhookdelivery-<webhook_id>_<cart_uuid>`). */
      queue: z.string().min(1),
      webhook_id: uuid,
      cart_uuid: uuid,
      /** Every delivery the queue held. */
      delivery_ids: z.array(uuid),
      /** The queue's last revision, as the job read it and deleted it at. */
      revision: z.number().int().nonnegative(),
      pruned_at: isoDateTime,
    }),
  ),
};
export type WebhookDeliveryRetentionEvent = EventOf<typeof events>;
