/**
 * The `webhook_deliveries` projection's retention (docs/operations.md, "Retention"): documents of
 * deliveries finished (delivered or parked) `PDS_DELIVERY_LOG_RETENTION` before the time of the event
 * being applied, and subscriptions' health minutes as old, are deleted as the projection goes.
 *
 * By event time, an hour later than the retention (`PRUNE_MARGIN_MS`), and never the delivery of the
 * event being applied.
 *
 * Deterministic (docs/read-side.md): what goes depends on the events' own times only, never on the
 * projector's clock, so a rebuild of the same events deletes the same documents at the same events.
 * The retention job deletes the same deliveries from the log by the same rule against the clock
 * (application/delivery-retention.ts): a rebuild after that never sees them, and the live documents of
 * those deliveries go at the next event after their time at the latest.
 *
 * The retention job records each queue it deletes from the log before deleting it
 * (`WebhookDeliveryQueuePruned`): at that record the documents of the queue's deliveries go, and the
 * subscription's queue depth loses those still counted. So a rebuild that read a queue in part before
 * the job deleted it (a delivery left `in_flight`, its later events gone) keeps nothing of it.
 *
 * Cost: once per hour of event time (the hour reached is kept in `webhook_retention`), one walk of the
 * `[finished_at]` and `[minute]` indexes up to that hour, at most `PRUNE_BATCH` documents of each per
 * event, so a backlog (after an upgrade, or a shorter retention) drains over the next events.
 */

import type { DeliveryStatus } from '../../domain/webhook-delivery.ts';
import type * as retention from '../../domain/webhook-delivery-retention.ts';
import type { ProjectionTx } from '../projection.ts';
import type { Doc } from '../read-store.ts';
import { WEBHOOK_HEALTH, WEBHOOK_QUEUES, type WebhookQueueDoc } from './webhook-health.ts';

export const WEBHOOK_RETENTION = 'webhook_retention';
/** `_id` of the one document of `webhook_retention`. */
export const PRUNED = 'pruned';

/** `PDS_DELIVERY_LOG_RETENTION`'s default (cli/config.ts): 30 days. */
export const DEFAULT_DELIVERY_LOG_RETENTION_MS = 30 * 86_400_000;

/** Documents of each collection deleted at one event, at most. */
const PRUNE_BATCH = 500;

const HOUR = 3_600_000;

/**
 * How much longer than the retention a document stays, by event time: the admin API stops showing a
 * delivery once it finished before `pruned_before` (a retention before its clock), so one it showed
 * and was asked to redeliver is still here when the redelivery arrives, even after another process's
 * event timed a little later (its clock ahead, or the write slower) was applied first.
 */
const PRUNE_MARGIN_MS = HOUR;

interface PrunedDoc extends Doc {
  _id: typeof PRUNED;
  /** Everything finished before this hour (ISO 8601) is deleted. */
  through: string;
}

/**
 * Deletes the documents of `deliveries` finished, and the health minutes, before `retentionMs` ahead of
 * `at` (the event's own time) and an hour, once per hour of `at`: at the first delivery event whose
 * time, less the retention, falls in a later hour than the last pruning's.
 */
export function pruneFinished(
  tx: ProjectionTx,
  deliveries: string,
  at: string,
  retentionMs: number,
  /** The delivery of the event being applied: never pruned by its own event (a redelivery's). */
  keep: string,
): void {
  const through = new Date(
    Math.floor((Date.parse(at) - retentionMs) / HOUR) * HOUR - PRUNE_MARGIN_MS,
  ).toISOString();
  const done = tx.get<PrunedDoc>(WEBHOOK_RETENTION, PRUNED);
  if (done && done.through >= through) return;
  const finished = tx.find<Doc>(
    deliveries,
    { finished_at: { $lt: through } },
    { sort: [['finished_at', 1]], limit: PRUNE_BATCH },
  );
  for (const doc of finished) if (doc._id !== keep) tx.delete(deliveries, doc._id);
  const minutes = tx.find<Doc>(
    WEBHOOK_HEALTH,
    { minute: { $lt: through } },
    { sort: [['minute', 1]], limit: PRUNE_BATCH },
  );
  for (const doc of minutes) tx.delete(WEBHOOK_HEALTH, doc._id);
  // A full batch may leave more: the next event goes on.
  if (finished.length < PRUNE_BATCH && minutes.length < PRUNE_BATCH) {
    tx.put(WEBHOOK_RETENTION, { _id: PRUNED, through } satisfies PrunedDoc);
  }
}

/**
 * Before when a delivery must have finished to be pruned by now, as answers tell operators (ISO 8601):
 * `retentionMs` before `now`.
 */
export const prunedBefore = (now: Date, retentionMs = DEFAULT_DELIVERY_LOG_RETENTION_MS): string =>
  new Date(now.getTime() - retentionMs).toISOString();

/**
 * The retention job deleted a queue from the log (`WebhookDeliveryQueuePruned`): its deliveries'
 * documents go, and the queue depth loses those that still counted (read in part by a rebuild).
 */
export function forgetPrunedQueue(
  tx: ProjectionTx,
  deliveries: string,
  data: retention.WebhookDeliveryRetentionEvent['data'],
): void {
  let queued = 0;
  for (const id of data.delivery_ids) {
    const doc = tx.get<Doc & { status: DeliveryStatus }>(deliveries, id);
    if (!doc) continue;
    if (doc.status === 'pending' || doc.status === 'in_flight' || doc.status === 'failed') queued += 1;
    tx.delete(deliveries, id);
  }
  const queue = tx.get<WebhookQueueDoc>(WEBHOOK_QUEUES, data.webhook_id);
  if (queued > 0 && queue) tx.put(WEBHOOK_QUEUES, { ...queue, depth: Math.max(0, queue.depth - queued) });
}

/**
 * Whether a delivery finished before `prunedBefore` (ISO 8601): pruned, or about to be (the projection
 * prunes once per hour of its events' time, the job once an hour), so the admin API answers as if it
 * were gone, whatever is left of it (docs/operations.md, "Retention").
 */
export const finishedBefore = (doc: { finished_at?: string | null }, prunedBefore: string): boolean =>
  typeof doc.finished_at === 'string' && doc.finished_at < prunedBefore;
