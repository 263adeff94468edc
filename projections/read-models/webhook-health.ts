/**
 * Read models `webhook_health` and `webhook_queues` (docs/webhooks.md, "Health"): how each webhook
 * subscription's deliveries fare, minute by minute, for the admin API's health view and the console's
 * charts. Built by the `webhook_deliveries` projection (`webhook-deliveries.ts`), which knows each
 * delivery's status before and after an event.
 *
 * - `webhook_health`: one document per subscription and minute in which something happened
 *   (`<webhook_id>/<minute>`): deliveries scheduled, attempts by outcome, deliveries parked, a
 *   histogram of the attempts' durations, and the queue depth after the minute's last event. A window
 *   of a day reads at most 1,440 of them, however many deliveries there were.
 * - `webhook_queues`: one document per subscription, its queue depth now (deliveries scheduled and
 *   not yet delivered or parked) and the outcome of its last attempt that the receiver answered for
 *   (every outcome but `interrupted`, a dispatcher cut off mid-attempt).
 *
 * Deterministic (docs/read-side.md): a minute is that of the event's own time (scheduled, attempted,
 * parked, redelivery requested), never the projector's clock.
 */
import { type AttemptOutcome, attemptOutcomes, type DeliveryStatus } from '../../domain/webhook-delivery.ts';
import type { ProjectionTx } from '../projection.ts';
import type { Collection, Doc, IndexSpec } from '../read-store.ts';

export const WEBHOOK_HEALTH = 'webhook_health';
export const WEBHOOK_QUEUES = 'webhook_queues';

/**
 * Upper bounds (ms) of the duration histogram's buckets; the last bucket holds everything above 15 s.
 * Spaced about 1.5× apart, so a quantile read from it is within that factor.
 */
export const LATENCY_BOUNDS_MS = [
  5, 10, 25, 50, 75, 100, 150, 250, 400, 600, 1_000, 1_500, 2_500, 4_000, 6_000, 10_000, 15_000,
] as const;

export type AttemptCounts = Record<AttemptOutcome, number>;

export interface WebhookHealthDoc extends Doc {
  _id: string;
  webhook_id: string;
  /** The minute's start, ISO 8601 UTC. */
  minute: string;
  scheduled: number;
  attempts: AttemptCounts;
  parked: number;
  /**
   * Attempts that got an answer (an HTTP status, whatever it was) per duration bucket of
   * `LATENCY_BOUNDS_MS`, plus one above the last bound: a timeout or a refused connection measures the
   * dispatcher's limit or the network, not the receiver, and would drag the quantiles to either end.
   */
  latency_ms: number[];
  /** Deliveries scheduled and not yet delivered or parked, after the minute's last event. */
  depth: number;
}

export interface WebhookQueueDoc extends Doc {
  _id: string;
  webhook_id: string;
  depth: number;
  /** The outcome of the last attempt not `interrupted`; null before one (absent in version 6). */
  last_outcome?: AttemptOutcome | null;
}

export const webhookHealthIndexes: readonly IndexSpec[] = [
  {
    keys: [
      ['webhook_id', 1],
      ['minute', 1],
    ],
  },
  // The retention's pruning of old minutes, whatever the subscription (webhook-retention.ts), read
  // while applying (docs/read-side.md, "How a build writes its shadows").
  { keys: [['minute', 1]], readWhileApplying: true },
];

/** No attempt of any outcome. */
export const noAttempts = (): AttemptCounts =>
  Object.fromEntries(attemptOutcomes.map((o) => [o, 0])) as AttemptCounts;

/** A duration histogram with no attempt: a bucket per bound and one above the last. */
export const emptyHistogram = (): number[] => new Array(LATENCY_BOUNDS_MS.length + 1).fill(0);

/** The minute an ISO time falls in, as the ISO time of its start. */
export const minuteOf = (iso: string): string =>
  new Date(Math.floor(Date.parse(iso) / 60_000) * 60_000).toISOString();

/** The histogram bucket of a duration. */
export function latencyBucket(durationMs: number): number {
  const i = LATENCY_BOUNDS_MS.findIndex((bound) => durationMs <= bound);
  return i === -1 ? LATENCY_BOUNDS_MS.length : i;
}

/** Counted as a delivery queued: scheduled, and neither delivered nor parked. */
const queued = (status: DeliveryStatus | undefined): boolean =>
  status === 'pending' || status === 'in_flight' || status === 'failed';

/** What one delivery event tells the health read models. */
export interface HealthChange {
  webhook_id: string;
  /** The event's own time. */
  at: string;
  /** The delivery's status before and after the event (undefined before it was scheduled). */
  before: DeliveryStatus | undefined;
  after: DeliveryStatus;
  scheduled?: boolean;
  /** `answered`: an HTTP response arrived (a status), so its duration is the receiver's latency. */
  attempt?: { outcome: AttemptOutcome; duration_ms: number; answered: boolean };
  parked?: boolean;
}

/** Counts one delivery event into its subscription's minute and queue (part of the `webhook_deliveries` projection). */
export function applyHealth(tx: ProjectionTx, change: HealthChange): void {
  const queue = tx.get<WebhookQueueDoc>(WEBHOOK_QUEUES, change.webhook_id);
  const depth = (queue?.depth ?? 0) + (queued(change.after) ? 1 : 0) - (queued(change.before) ? 1 : 0);
  const outcome = change.attempt?.outcome;
  const lastOutcome = outcome && outcome !== 'interrupted' ? outcome : (queue?.last_outcome ?? null);
  if (!queue || depth !== queue.depth || lastOutcome !== (queue.last_outcome ?? null)) {
    tx.put(WEBHOOK_QUEUES, {
      _id: change.webhook_id,
      webhook_id: change.webhook_id,
      depth,
      last_outcome: lastOutcome,
    });
  }
  const minute = minuteOf(change.at);
  const id = `${change.webhook_id}/${minute}`;
  const current = tx.get<WebhookHealthDoc>(WEBHOOK_HEALTH, id);
  const next: WebhookHealthDoc = current
    ? { ...current, attempts: { ...current.attempts }, latency_ms: [...current.latency_ms] }
    : {
        _id: id,
        webhook_id: change.webhook_id,
        minute,
        scheduled: 0,
        attempts: noAttempts(),
        parked: 0,
        latency_ms: emptyHistogram(),
        depth,
      };
  if (change.scheduled) next.scheduled += 1;
  if (change.parked) next.parked += 1;
  if (change.attempt) {
    next.attempts[change.attempt.outcome] += 1;
    if (change.attempt.answered) next.latency_ms[latencyBucket(change.attempt.duration_ms)] += 1;
  }
  next.depth = depth;
  tx.put(WEBHOOK_HEALTH, next);
}

// ---- queries --------------------------------------------------------------------------------------

/** A subscription's minutes in `[from, to)`, oldest first: one range of the `[webhook_id, minute]` index. */
export function minutesBetween(
  collection: Collection<WebhookHealthDoc>,
  webhookId: string,
  from: string,
  to: string,
): Promise<WebhookHealthDoc[]> {
  return collection.find(
    { webhook_id: webhookId, minute: { $gte: from, $lt: to } },
    { sort: [['minute', 1]] },
  );
}

/** The subscription's last minute before `at` (its queue depth then), or null: the same index, backwards. */
export async function lastMinuteBefore(
  collection: Collection<WebhookHealthDoc>,
  webhookId: string,
  at: string,
): Promise<WebhookHealthDoc | null> {
  const [doc] = await collection.find(
    { webhook_id: webhookId, minute: { $lt: at } },
    { sort: [['minute', -1]], limit: 1 },
  );
  return doc ?? null;
}

/** A subscription's queue now: its depth, and the outcome of its last attempt not interrupted. */
export interface QueueNow {
  depth: number;
  last_outcome: AttemptOutcome | null;
}

/** The subscription's queue now (empty, without an attempt, before its first delivery). */
export async function queueOf(collection: Collection<WebhookQueueDoc>, webhookId: string): Promise<QueueNow> {
  const [doc] = await collection.findByIds([webhookId]);
  return { depth: doc?.depth ?? 0, last_outcome: doc?.last_outcome ?? null };
}

/**
 * The `q` quantile (0–1) of a duration histogram, interpolated within its bucket (the bucket above the
 * last bound counts as that bound); null when it holds no attempt.
 */
export function latencyQuantile(histogram: readonly number[], q: number): number | null {
  const total = histogram.reduce((sum, n) => sum + n, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < histogram.length; i++) {
    const n = histogram[i];
    if (n > 0 && seen + n >= rank) {
      if (i === LATENCY_BOUNDS_MS.length) return LATENCY_BOUNDS_MS[i - 1];
      const low = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1];
      const high = LATENCY_BOUNDS_MS[i];
      return Math.round((low + ((rank - seen) / n) * (high - low)) * 10) / 10;
    }
    seen += n;
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1];
}
