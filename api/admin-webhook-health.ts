/**
 * `GET /admin/v1/webhooks/{id}/health?window=1h|24h` (docs/webhooks.md, "Health"): how a webhook
 * subscription's deliveries fared over the last hour (60 intervals of a minute) or day (96 of 15
 * minutes), for the console's charts and for anyone watching a receiver:
 *
 * - per interval and in total: deliveries scheduled, attempts by outcome, deliveries parked, and the
 *   duration p50 and p99 of the attempts that got an answer (from a histogram: within about 1.5× of
 *   the exact value; null without such attempts); per interval, the queue depth at its end;
 * - the queue now: its depth and its oldest delivery still queued (pending, in flight or failed).
 *
 * - `status` (`ok` or `failing`) and `trouble`, the reasons it is failing (`admin-trouble.ts`).
 *
 * Served by the `webhook_health` and `webhook_queues` read models and one index walk of
 * `webhook_deliveries`: its cost follows the window (at most 1,440 minutes), not the traffic. The
 * window ends with the current interval, on the service's clock. 404 `webhook_not_found` for an
 * unknown or removed subscription; 400 for another window or an unknown parameter.
 *
 * `GET /admin/v1/webhook-health`: every subscription's `status` and `trouble` with its queue, and how
 * many are failing, for the console's overview and webhooks list and `pds webhooks list`: the last
 * 15 minutes of each, its queue depth and its oldest queued delivery, so a cost of the subscriptions
 * (at most `MAX_SUBSCRIPTIONS` of them, in webhook id order, and `truncated` when there are more), not of
 * the traffic.
 */
import { z } from 'zod';
import { attemptOutcomes } from '../domain/webhook-delivery.ts';
import {
  queuedSince,
  WEBHOOK_DELIVERIES,
  type WebhookDeliveryDoc,
} from '../projections/read-models/webhook-deliveries.ts';
import { oldestQueued } from '../projections/read-models/webhook-delivery-queues.ts';
import {
  type AttemptCounts,
  emptyHistogram,
  lastMinuteBefore,
  latencyQuantile,
  minutesBetween,
  noAttempts,
  type QueueNow,
  queueOf,
  WEBHOOK_HEALTH,
  WEBHOOK_QUEUES,
  type WebhookHealthDoc,
  type WebhookQueueDoc,
} from '../projections/read-models/webhook-health.ts';
import {
  WEBHOOK_SUBSCRIPTIONS,
  type WebhookSubscriptionDoc,
} from '../projections/read-models/webhook-subscriptions.ts';
import type { Collection } from '../projections/read-store.ts';
import { webhookHealth, webhookHealthList } from './admin-records.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import {
  type AlertThresholds,
  attemptsSince,
  DEFAULT_ALERT_THRESHOLDS,
  FAILURE_WINDOW_MINUTES,
  failureWindowStart,
  subscriptionTrouble,
} from './admin-trouble.ts';
import type { WebhookAdminDeps } from './admin-webhooks.ts';
import { pathUuid } from './validation.ts';

/** The windows the health view offers: their length and their intervals' (minutes). */
const WINDOWS = { '1h': { minutes: 60, interval: 1 }, '24h': { minutes: 1_440, interval: 15 } } as const;
const healthQuery = z.strictObject({ window: z.enum(['1h', '24h']).default('1h') });

/** What happened in an interval (or the whole window). */
interface Tally {
  scheduled: number;
  attempts: AttemptCounts;
  parked: number;
  latency: number[];
}

const emptyTally = (): Tally => ({
  scheduled: 0,
  attempts: noAttempts(),
  parked: 0,
  latency: emptyHistogram(),
});

function add(tally: Tally, minute: WebhookHealthDoc): void {
  tally.scheduled += minute.scheduled;
  tally.parked += minute.parked;
  for (const o of attemptOutcomes) tally.attempts[o] += minute.attempts[o] ?? 0;
  minute.latency_ms.forEach((n, i) => {
    tally.latency[i] += n;
  });
}

function shown(tally: Tally) {
  const p50 = latencyQuantile(tally.latency, 0.5);
  return {
    scheduled: tally.scheduled,
    attempts: tally.attempts,
    parked: tally.parked,
    latency_ms: p50 === null ? null : { p50, p99: latencyQuantile(tally.latency, 0.99) },
  };
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The window's intervals from the minutes that had events, oldest first. The queue depth carries over
 * the minutes without events, from the last minute before the window (or 0).
 */
export function healthSeries(
  minutes: readonly WebhookHealthDoc[],
  depthBefore: number,
  fromMs: number,
  intervals: number,
  intervalMinutes: number,
) {
  const total = emptyTally();
  let depth = depthBefore;
  let next = 0;
  const series = [];
  for (let i = 0; i < intervals; i++) {
    const start = fromMs + i * intervalMinutes * 60_000;
    const end = start + intervalMinutes * 60_000;
    const tally = emptyTally();
    for (; next < minutes.length && Date.parse(minutes[next].minute) < end; next++) {
      add(tally, minutes[next]);
      add(total, minutes[next]);
      depth = minutes[next].depth;
    }
    series.push({ from: iso(start), ...shown(tally), queue_depth: depth });
  }
  return { totals: shown(total), intervals: series };
}

/** The answer of `GET /webhooks/{id}/health` from what the read models hold for the window. */
function healthAnswer(a: {
  id: string;
  window: keyof typeof WINDOWS;
  fromMs: number;
  toMs: number;
  now: number;
  inWindow: readonly WebhookHealthDoc[];
  depthBefore: number;
  queue: QueueNow;
  oldest: WebhookDeliveryDoc | null;
  thresholds: AlertThresholds;
}) {
  const { minutes, interval } = WINDOWS[a.window];
  const queue = queueNow(a.queue.depth, a.oldest, a.now);
  return {
    health: {
      webhook_id: a.id,
      window: a.window,
      from: iso(a.fromMs),
      to: iso(a.toMs),
      interval_seconds: interval * 60,
      ...subscriptionTrouble(
        attemptsSince(a.inWindow, failureWindowStart(a.now)),
        a.queue,
        queue.oldest,
        a.thresholds,
      ),
      ...healthSeries(a.inWindow, a.depthBefore, a.fromMs, minutes / interval, interval),
      queue,
    },
  };
}

/** The queue now: its depth and its oldest delivery still queued, with its age at `now`. */
function queueNow(depth: number, oldest: WebhookDeliveryDoc | null, now: number) {
  return {
    depth,
    oldest: oldest && {
      delivery_id: oldest.delivery_id,
      cart_uuid: oldest.cart_uuid,
      status: oldest.status,
      scheduled_at: oldest.scheduled_at,
      queued_since: queuedSince(oldest),
      // From when it was queued last: a delivered or parked delivery sent again is queued anew.
      age_seconds: Math.max(0, Math.round((now - Date.parse(queuedSince(oldest))) / 1000)),
    },
  };
}

/** Most subscriptions `GET /webhook-health` judges (the subscription list's largest page). */
export const MAX_SUBSCRIPTIONS = 500;

/** What `GET /webhooks/{id}/health` answers (the CLI prints it). */
export type WebhookHealthAnswer = ReturnType<typeof healthAnswer>;

/** The health routes; `subscription` is how the delivery routes find the subscription. */
export function webhookHealthRoutes(
  deps: WebhookAdminDeps,
  subscription: { loadWebhook(id: string): Promise<unknown> },
): AdminRoute[] {
  const { readStore, clock } = deps;
  // Read at each request: the admin API's document builds the tables without the configuration.
  const thresholdsOf = () => deps.webhooks.alerts ?? DEFAULT_ALERT_THRESHOLDS;
  let collections:
    | {
        health: Collection<WebhookHealthDoc>;
        queues: Collection<WebhookQueueDoc>;
        deliveries: Collection<WebhookDeliveryDoc>;
        subscriptions: Collection<WebhookSubscriptionDoc>;
      }
    | undefined;
  const open = async () => {
    // The projector's collections, read as they are: an api process never builds their indexes
    // (docs/read-side.md, "Upgrades of read models").
    collections ??= {
      health: await readStore.collection<WebhookHealthDoc>(WEBHOOK_HEALTH),
      queues: await readStore.collection<WebhookQueueDoc>(WEBHOOK_QUEUES),
      deliveries: await readStore.collection<WebhookDeliveryDoc>(WEBHOOK_DELIVERIES),
      subscriptions: await readStore.collection<WebhookSubscriptionDoc>(WEBHOOK_SUBSCRIPTIONS),
    };
    return collections;
  };

  const health = adminRoute({
    method: 'get',
    path: '/webhooks/{id}/health',
    operationId: 'getWebhookHealth',
    summary: "How a subscription's deliveries fared over the last hour or day",
    description:
      'Per interval (a minute over `1h`, 15 minutes over `24h`) and in total: deliveries scheduled, ' +
      "attempts by outcome, deliveries parked and the attempts' duration p50 and p99; per interval the " +
      'queue depth at its end; the queue now, with its oldest delivery still queued; and whether the ' +
      'subscription is `failing`, with why (`trouble`).',
    params: z.object({ id: pathUuid }),
    query: healthQuery,
    response: { status: 200, description: "The subscription's health.", schema: webhookHealth },
    problems: [404],
    async handler(ctx, { params, query }) {
      const { id } = params;
      const { window } = query;
      await subscription.loadWebhook(id);
      const { minutes, interval } = WINDOWS[window];
      const now = clock.now().getTime();
      const step = interval * 60_000;
      const toMs = Math.floor(now / step) * step + step;
      const fromMs = toMs - minutes * 60_000;
      const { health: minutesOf, queues, deliveries } = await open();
      const [inWindow, before, queue, oldest] = await Promise.all([
        minutesBetween(minutesOf, id, iso(fromMs), iso(toMs)),
        lastMinuteBefore(minutesOf, id, iso(fromMs)),
        queueOf(queues, id),
        oldestQueued(deliveries, id),
      ]);
      ctx.body = healthAnswer({
        id,
        window,
        fromMs,
        toMs,
        now,
        inWindow,
        depthBefore: before?.depth ?? 0,
        queue,
        oldest,
        thresholds: thresholdsOf(),
      });
    },
  });

  const all = adminRoute({
    method: 'get',
    path: '/webhook-health',
    operationId: 'listWebhookHealth',
    summary: 'Every subscription judged: failing or ok, with why, and its queue',
    description:
      `From the last ${FAILURE_WINDOW_MINUTES} minutes of each subscription, its queue depth and its ` +
      `oldest queued delivery (at most ${MAX_SUBSCRIPTIONS} subscriptions, in id order; \`truncated\` ` +
      'when there are more), and how many of them are failing; the thresholds as configured.',
    // Strict: any parameter is a 400.
    query: z.strictObject({}),
    response: { status: 200, description: 'The subscriptions, judged.', schema: webhookHealthList },
    problems: [],
    async handler(ctx) {
      const thresholds = thresholdsOf();
      const now = clock.now().getTime();
      const from = failureWindowStart(now);
      const to = iso(Math.floor(now / 60_000) * 60_000 + 60_000);
      const { health, queues, deliveries, subscriptions } = await open();
      // One more than judged: whether the list is whole.
      const found = await subscriptions.find({}, { sort: [['_id', 1]], limit: MAX_SUBSCRIPTIONS + 1 });
      const docs = found.slice(0, MAX_SUBSCRIPTIONS);
      const judged = await Promise.all(
        docs.map(async (w) => {
          const [recent, current, oldest] = await Promise.all([
            minutesBetween(health, w.webhook_id, from, to),
            queueOf(queues, w.webhook_id),
            oldestQueued(deliveries, w.webhook_id),
          ]);
          const queue = queueNow(current.depth, oldest, now);
          return {
            webhook_id: w.webhook_id,
            url: w.url,
            enabled: w.enabled,
            ...subscriptionTrouble(attemptsSince(recent, from), current, queue.oldest, thresholds),
            queue,
          };
        }),
      );
      ctx.body = {
        subscriptions: judged,
        failing: judged.filter((w) => w.status === 'failing').length,
        truncated: found.length > MAX_SUBSCRIPTIONS,
        thresholds: { oldest_queued_seconds: thresholds.oldestQueuedMs / 1000 },
      };
    },
  });
  return [health, all];
}
