/**
 * Trouble, judged where the figures are (docs/operations.md, "Health"): a webhook subscription is
 * `failing` when its recent attempts mostly fail or its oldest queued delivery has waited too long, a
 * projection `lagging` when its oldest event not applied is too old. The admin API answers the
 * judgement with its reasons, so the console, the CLI and anyone watching read the same marks.
 *
 * - `failed_attempts`: in the last `FAILURE_WINDOW_MINUTES` minutes, at least `MIN_FAILED_ATTEMPTS`
 *   attempts the receiver answered for ended without delivering (failed, gone, retry after), and they
 *   are at least half of those attempts; unless the queue is empty, its last such attempt delivered
 *   and none of its deliveries parked in those minutes, the receiver having taken all it was sent. An `interrupted` attempt (a dispatcher cut
 *   off mid-attempt) is the service's, not the receiver's, and counts neither way.
 * - `oldest_queued`: the delivery queued longest (pending, in flight or failed) has waited, since it
 *   was scheduled or last redelivered, longer than `PDS_ALERT_OLDEST_QUEUED` (15 minutes unless set).
 * - `lag`: the projection's oldest event not applied is older than `PDS_ALERT_PROJECTION_LAG` (1 minute
 *   unless set).
 */
import { z } from 'zod';
import { attemptOutcomes } from '../domain/webhook-delivery.ts';
import type { ProjectionStatus } from '../projections/projection.ts';
import {
  type AttemptCounts,
  noAttempts,
  type QueueNow,
  type WebhookHealthDoc,
} from '../projections/read-models/webhook-health.ts';

/** The minutes whose attempts the failure rate is read from. */
export const FAILURE_WINDOW_MINUTES = 15;
/** Fewer failed attempts than this in the window never make a subscription failing. */
export const MIN_FAILED_ATTEMPTS = 3;

/** What operators set (cli/config.ts): how old an oldest queued delivery, how old a projection's lag. */
export interface AlertThresholds {
  /** `PDS_ALERT_OLDEST_QUEUED`. */
  oldestQueuedMs: number;
  /** `PDS_ALERT_PROJECTION_LAG`. */
  projectionLagMs: number;
}

export const DEFAULT_ALERT_THRESHOLDS: AlertThresholds = {
  oldestQueuedMs: 15 * 60_000,
  projectionLagMs: 60_000,
};

export const subscriptionTroubleReason = z.enum(['failed_attempts', 'oldest_queued']);
export const projectionTroubleReason = z.enum(['lag']);

/** One reason for a mark, in the API's words and a sentence with the figures and the threshold. */
const troubleOf = <R extends z.ZodType>(reason: R) =>
  z.object({ reason, detail: z.string().describe('what was measured, against which threshold') });

export const subscriptionStatusFields = z.object({
  status: z.enum(['ok', 'failing']).describe('`failing` while any reason in `trouble` holds'),
  trouble: z.array(troubleOf(subscriptionTroubleReason)),
});
export const projectionStatusFields = z.object({
  status: z.enum(['ok', 'lagging']).describe('`lagging` while its lag passes `PDS_ALERT_PROJECTION_LAG`'),
  trouble: z.array(troubleOf(projectionTroubleReason)),
});
export type SubscriptionStatusFields = z.infer<typeof subscriptionStatusFields>;
export type ProjectionStatusFields = z.infer<typeof projectionStatusFields>;

/** A duration in seconds as the details say it: `960 s`, `43.4 s`, `3,660 s`. */
const seconds = (ms: number) => `${(Math.round(ms / 100) / 10).toLocaleString('en-US')} s`;

/** The attempts by outcome, and the deliveries parked, of some minutes. */
export type RecentCounts = AttemptCounts & { parked: number };

/** The attempts of the minutes at or after `fromIso`, by outcome, and the deliveries they parked. */
export function attemptsSince(minutes: readonly WebhookHealthDoc[], fromIso: string): RecentCounts {
  const counts = { ...noAttempts(), parked: 0 };
  for (const m of minutes) {
    if (m.minute < fromIso) continue;
    for (const o of attemptOutcomes) counts[o] += m.attempts[o] ?? 0;
    counts.parked += m.parked ?? 0;
  }
  return counts;
}

/** Where the failure rate's minutes start, for a judgement at `nowMs`. */
export const failureWindowStart = (nowMs: number) =>
  new Date(Math.floor(nowMs / 60_000) * 60_000 - (FAILURE_WINDOW_MINUTES - 1) * 60_000).toISOString();

/**
 * A subscription's marks from its recent attempts, its queue now (depth and last outcome) and its
 * delivery queued longest (its age in seconds).
 */
export function subscriptionTrouble(
  recent: RecentCounts,
  queue: QueueNow,
  oldest: { delivery_id: string; age_seconds: number } | null,
  thresholds: AlertThresholds,
): SubscriptionStatusFields {
  const trouble: SubscriptionStatusFields['trouble'] = [];
  const ended = attemptOutcomes.reduce((sum, o) => sum + recent[o], 0) - recent.interrupted;
  const failed = ended - recent.delivered;
  // A delivery parked in the window was not taken, whatever was delivered after it.
  const caughtUp = queue.depth === 0 && queue.last_outcome === 'delivered' && recent.parked === 0;
  if (!caughtUp && failed >= MIN_FAILED_ATTEMPTS && failed * 2 >= ended) {
    trouble.push({
      reason: 'failed_attempts',
      detail:
        `${failed} of the ${ended} attempts of the last ${FAILURE_WINDOW_MINUTES} minutes did not deliver` +
        (recent.interrupted > 0 ? ` (${recent.interrupted} interrupted not counted)` : ''),
    });
  }
  if (oldest && oldest.age_seconds * 1000 > thresholds.oldestQueuedMs) {
    trouble.push({
      reason: 'oldest_queued',
      detail:
        `delivery ${oldest.delivery_id} has been queued ${seconds(oldest.age_seconds * 1000)}, ` +
        `more than ${seconds(thresholds.oldestQueuedMs)} (PDS_ALERT_OLDEST_QUEUED)`,
    });
  }
  return { status: trouble.length > 0 ? 'failing' : 'ok', trouble };
}

/** A projection's status with its mark: `lagging` past the threshold. */
export function withProjectionTrouble(
  p: ProjectionStatus,
  thresholds: AlertThresholds,
): ProjectionStatus & ProjectionStatusFields {
  const lagging = p.lag_seconds * 1000 > thresholds.projectionLagMs;
  return {
    ...p,
    status: lagging ? 'lagging' : 'ok',
    trouble: lagging
      ? [
          {
            reason: 'lag',
            detail:
              `its oldest event not applied is ${seconds(p.lag_seconds * 1000)} old, ` +
              `more than ${seconds(thresholds.projectionLagMs)} (PDS_ALERT_PROJECTION_LAG)`,
          },
        ]
      : [],
  };
}
