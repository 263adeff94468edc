/**
 * The trouble rules themselves (api/admin-trouble.ts; docs/operations.md, "Health"), at their edges:
 * the failure rate's floor and half, interrupted attempts, an empty queue whose last attempt delivered,
 * the window of 15 minutes, the oldest queued delivery's threshold, a projection's lag threshold.
 */
import test from 'ava';
import {
  attemptsSince,
  DEFAULT_ALERT_THRESHOLDS,
  failureWindowStart,
  type RecentCounts,
  subscriptionTrouble,
  withProjectionTrouble,
} from '../../api/admin-trouble.ts';
import type { ProjectionStatus } from '../../projections/projection.ts';
import { noAttempts, type WebhookHealthDoc } from '../../projections/read-models/webhook-health.ts';

const attempts = (delivered: number, failed: number, others: Partial<RecentCounts> = {}): RecentCounts => ({
  ...noAttempts(),
  parked: 0,
  delivered,
  failed,
  ...others,
});
/** A queue still holding deliveries, its last attempt failed. */
const backlog = { depth: 2, last_outcome: 'failed' } as const;
const reasons = (r: ReturnType<typeof subscriptionTrouble>) => r.trouble.map((x) => x.reason);

test('failing by attempts: at least 3 did not deliver, and at least half of those that ended', (t) => {
  const judge = (a: ReturnType<typeof attempts>) =>
    subscriptionTrouble(a, backlog, null, DEFAULT_ALERT_THRESHOLDS);
  t.deepEqual(judge(attempts(0, 2)), { status: 'ok', trouble: [] }, 'two failures are too few');
  t.deepEqual(reasons(judge(attempts(0, 3))), ['failed_attempts']);
  t.deepEqual(reasons(judge(attempts(3, 3))), ['failed_attempts'], 'half');
  t.is(judge(attempts(4, 3)).status, 'ok', 'fewer than half');
  // Every outcome the receiver answered for that did not deliver counts: failed, gone, retry after.
  const mixed = judge(attempts(1, 1, { gone: 1, retry_after: 1 }));
  t.deepEqual(mixed.trouble, [
    { reason: 'failed_attempts', detail: '3 of the 4 attempts of the last 15 minutes did not deliver' },
  ]);
});

test('an interrupted attempt is the dispatcher cut off, not the receiver failing: it counts neither way', (t) => {
  const judge = (a: ReturnType<typeof attempts>) =>
    subscriptionTrouble(a, backlog, null, DEFAULT_ALERT_THRESHOLDS);
  t.is(judge(attempts(0, 2, { interrupted: 5 })).status, 'ok', 'two failures and five interruptions');
  t.is(judge(attempts(3, 2, { interrupted: 1 })).status, 'ok', 'two of five, not three of six');
  t.deepEqual(judge(attempts(3, 3, { interrupted: 2 })).trouble, [
    {
      reason: 'failed_attempts',
      detail: '3 of the 6 attempts of the last 15 minutes did not deliver (2 interrupted not counted)',
    },
  ]);
});

test('an empty queue whose last attempt delivered is not failing by attempts: the receiver took its queue', (t) => {
  const recent = attempts(1, 3);
  const judge = (queue: Parameters<typeof subscriptionTrouble>[1]) =>
    subscriptionTrouble(recent, queue, null, DEFAULT_ALERT_THRESHOLDS).status;
  t.is(judge({ depth: 0, last_outcome: 'delivered' }), 'ok', '3 failures, then the last one delivered');
  t.is(judge({ depth: 1, last_outcome: 'delivered' }), 'failing', 'a delivery still queued');
  t.is(judge({ depth: 0, last_outcome: 'failed' }), 'failing', 'the last attempt failed (and parked)');
  t.is(judge({ depth: 0, last_outcome: null }), 'failing', 'no attempt on record (a version 6 document)');
  const parkedOne = attempts(1, 3, { parked: 1 });
  t.is(
    subscriptionTrouble(parkedOne, { depth: 0, last_outcome: 'delivered' }, null, DEFAULT_ALERT_THRESHOLDS)
      .status,
    'failing',
    'a delivery parked in the window was not taken, though a later one delivered',
  );
});

test('failing by the oldest queued delivery: only past the threshold', (t) => {
  const oldest = (age_seconds: number) => ({ delivery_id: 'd-1', age_seconds });
  const thresholds = { ...DEFAULT_ALERT_THRESHOLDS, oldestQueuedMs: 900_000 };
  t.is(
    subscriptionTrouble(attempts(0, 0), backlog, oldest(900), thresholds).status,
    'ok',
    'at the threshold',
  );
  t.deepEqual(subscriptionTrouble(attempts(0, 0), backlog, oldest(901), thresholds), {
    status: 'failing',
    trouble: [
      {
        reason: 'oldest_queued',
        detail: 'delivery d-1 has been queued 901 s, more than 900 s (PDS_ALERT_OLDEST_QUEUED)',
      },
    ],
  });
  t.deepEqual(reasons(subscriptionTrouble(attempts(0, 3), backlog, oldest(3_600), thresholds)), [
    'failed_attempts',
    'oldest_queued',
  ]);
});

test('the failure window is the current minute and the 14 before it', (t) => {
  const now = Date.parse('2026-11-27T10:20:30.000Z');
  t.is(failureWindowStart(now), '2026-11-27T10:06:00.000Z');
  const minute = (at: string, failed: number): WebhookHealthDoc => ({
    _id: at,
    webhook_id: 'w',
    minute: at,
    scheduled: 0,
    attempts: attempts(0, failed),
    parked: 0,
    latency_ms: [],
    depth: 0,
  });
  const counted = attemptsSince(
    [
      minute('2026-11-27T10:05:00.000Z', 5),
      minute('2026-11-27T10:06:00.000Z', 2),
      { ...minute('2026-11-27T10:20:00.000Z', 1), parked: 2 },
      { ...minute('2026-11-27T10:04:00.000Z', 0), parked: 1 },
    ],
    failureWindowStart(now),
  );
  t.is(counted.failed, 3);
  t.is(counted.parked, 2, 'the parks of the window only');
});

test('lagging: a lag past the threshold, with its age to a tenth of a second', (t) => {
  const status = (lag_seconds: number): ProjectionStatus => ({
    name: 'carts',
    state: 'live',
    checkpoint: 1,
    events_applied: 1,
    lag_events: 1,
    lag_seconds,
    error: null,
    progress: null,
    rebuild_failure: null,
  });
  t.like(withProjectionTrouble(status(60), DEFAULT_ALERT_THRESHOLDS), { status: 'ok', trouble: [] });
  t.deepEqual(withProjectionTrouble(status(61.26), DEFAULT_ALERT_THRESHOLDS).trouble, [
    {
      reason: 'lag',
      detail: 'its oldest event not applied is 61.3 s old, more than 60 s (PDS_ALERT_PROJECTION_LAG)',
    },
  ]);
  t.is(withProjectionTrouble(status(61.26), DEFAULT_ALERT_THRESHOLDS).status, 'lagging');
});
