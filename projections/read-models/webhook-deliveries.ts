/**
 * Read model `webhook_deliveries` (docs/webhooks.md, "Operators"): one document per webhook delivery (`_id` = the
 * delivery id, the `X-Service-Webhook-Id` of its requests), with every attempt, for the operator views
 * of the admin API. Built from the `webhookdelivery-` streams (domain/webhook-delivery.ts).
 *
 * The rendered body is left out on purpose: it holds the customer's personal data, and the event store
 * keeps the exact bytes for an auditor. `status` means what the domain's `deliveryStatuses` mean
 * (`failed`: the last attempt failed and another is scheduled); an attempt in flight is listed with
 * `outcome: null` until its result is recorded.
 *
 * Deterministic (docs/read-side.md): every time comes from event data. Idempotent: a document records the
 * position of the last event applied to it (`_position`), and an event it already reflects is skipped,
 * so a batch replayed after a crash appends no attempt twice.
 *
 * Indexes: `[webhook_id, scheduled_at desc]` serves a subscription's deliveries newest first;
 * `[webhook_id, status, scheduled_at desc]` serves the same filtered by status, and "failed or parked
 * since T" (two equality prefixes, a range on `scheduled_at`) for recover; `[webhook_id, status,
 * queued_since, _id]` the oldest delivery still queued; `[webhook_id, cart_uuid, status, source_revision]`
 * the queued deliveries of some queues, for where a delivery stands in its queue
 * (`webhook-delivery-queues.ts`); `[cart_uuid, scheduled_at]` a cart's deliveries to every
 * subscription, for the cart audit.
 */

import { domainEventOf } from '../../application/read-state.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import * as retention from '../../domain/webhook-delivery-retention.ts';
import type { WebhookEventKind } from '../../domain/webhook-subscription.ts';
import type { Actor } from '../../eventstore/port.ts';
import type { Projection } from '../projection.ts';
import type { Collection, Doc, Filter, IndexSpec } from '../read-store.ts';
import {
  applyHealth,
  type HealthChange,
  minuteOf,
  WEBHOOK_HEALTH,
  WEBHOOK_QUEUES,
  webhookHealthIndexes,
} from './webhook-health.ts';
import { forgetPrunedQueue, PRUNED, pruneFinished, WEBHOOK_RETENTION } from './webhook-retention.ts';

export const WEBHOOK_DELIVERIES = 'webhook_deliveries';
/** The projection's name: the checkpoint the admin routes wait for after a write. */
export const WEBHOOK_DELIVERIES_PROJECTION = 'webhook_deliveries';

export interface DeliveryAttemptRecord {
  attempt: number;
  started_at: string;
  /** null while the attempt is in flight. */
  attempted_at: string | null;
  /** null while the attempt is in flight. */
  outcome: delivery.AttemptOutcome | null;
  /** HTTP status; null when no response arrived (or none yet). */
  status: number | null;
  /** null while the attempt is in flight. */
  duration_ms: number | null;
  response_excerpt: string;
  error_code: string | null;
  error: string | null;
}

export interface RedeliveryRecord {
  reason: delivery.RedeliveryReason;
  requested_at: string;
  /** Who asked: the person's id, as the event's actor (the admin API adds their name). */
  /** Who asked (`null` in a document of version 2, served until version 3 is built). */
  requested_by: Actor | null;
}

/** A delivery as the admin API shows it. */
export interface WebhookDeliveryRecord {
  delivery_id: string;
  webhook_id: string;
  event_kind: WebhookEventKind;
  cart_uuid: string;
  store_id: number;
  /** The cart event this webhook stands for. */
  source_event_id: string;
  status: delivery.DeliveryStatus;
  /** Every attempt, oldest first. */
  attempts: DeliveryAttemptRecord[];
  /** Attempts started, ever (the last `X-Service-Delivery-Attempt`). */
  attempt_count: number;
  scheduled_at: string;
  /**
   * Since when it waits in its queue: the last redelivery's `requested_at`, else `scheduled_at`. How
   * old the oldest queued delivery is (docs/operations.md, "Health") reads this, so a delivery
   * recovered or redelivered a month after it was scheduled is not a month old in the queue.
   */
  queued_since: string;
  /** When the next attempt is due (pending or failed), null otherwise. */
  next_attempt_at: string | null;
  delivered_at: string | null;
  parked_reason: delivery.ParkReason | null;
  parked_at: string | null;
  /** Operator requests to send it again (redeliver, recover), oldest first. */
  redeliveries: RedeliveryRecord[];
  /** Time of the last event applied. */
  updated_at: string;
}

/**
 * A delivery as stored: its record, when it finished (delivered or parked; null while it is not), by
 * which the projection prunes it (`webhook-retention.ts`), and its place in its queue: the revision
 * of the cart event it stands for (the dispatcher's order, `domain/webhook-delivery.ts`). A document
 * of version 6 (served until version 7 is built) has neither `queued_since` nor `source_revision`.
 */
export type WebhookDeliveryDoc = Doc &
  WebhookDeliveryRecord & { _id: string; finished_at?: string | null; source_revision?: number };

export const webhookDeliveryIndexes: readonly IndexSpec[] = [
  {
    keys: [
      ['webhook_id', 1],
      ['scheduled_at', -1],
    ],
  },
  {
    keys: [
      ['webhook_id', 1],
      ['status', 1],
      ['scheduled_at', -1],
    ],
  },
  {
    keys: [
      ['webhook_id', 1],
      ['status', 1],
      ['queued_since', 1],
      // The sort's last key: MongoDB then merges one scan per status in order, with no sort stage.
      ['_id', 1],
    ],
  },
  {
    keys: [
      ['webhook_id', 1],
      ['cart_uuid', 1],
      ['status', 1],
      ['source_revision', 1],
    ],
  },
  {
    keys: [
      ['cart_uuid', 1],
      ['scheduled_at', 1],
    ],
  },
  // The retention's pruning (webhook-retention.ts), read while applying
  // (docs/read-side.md, "How a build writes its shadows").
  { keys: [['finished_at', 1]], readWhileApplying: true },
];

const eventTypes = new Set<string>(Object.keys(delivery.events));
const PRUNED_QUEUE = 'WebhookDeliveryQueuePruned';

/** A hint for a retention record (raw data): the documents it deletes and the subscription's queue. */
function prunedQueueIds(data: unknown): [string, string][] {
  const { delivery_ids: ids, webhook_id: webhookId } = (data ?? {}) as Record<string, unknown>;
  if (!Array.isArray(ids) || typeof webhookId !== 'string') return [];
  return [
    ...ids
      .filter((id): id is string => typeof id === 'string')
      .map((id) => [WEBHOOK_DELIVERIES, id] as [string, string]),
    [WEBHOOK_QUEUES, webhookId],
  ];
}

/**
 * The document after one event (caused by `actor`); undefined when the event changes nothing. Mirrors
 * the domain's `evolve` for the status (a result without a next attempt leaves the status to the park
 * that follows it in the same append).
 */
export function evolveDelivery(
  doc: WebhookDeliveryDoc | undefined,
  event: delivery.WebhookDeliveryEvent,
  actor: Actor,
): WebhookDeliveryDoc | undefined {
  if (event.type === 'WebhookDeliveryScheduled') {
    if (doc) return undefined; // scheduled once; the decider never repeats it
    const d = event.data;
    return {
      _id: d.delivery_id,
      delivery_id: d.delivery_id,
      webhook_id: d.webhook_id,
      event_kind: d.event_kind,
      cart_uuid: d.cart_uuid,
      store_id: d.store_id,
      source_event_id: d.source_event_id,
      source_revision: d.source_revision,
      status: 'pending',
      attempts: [],
      attempt_count: 0,
      scheduled_at: d.scheduled_at,
      queued_since: d.scheduled_at,
      next_attempt_at: d.scheduled_at,
      delivered_at: null,
      parked_reason: null,
      parked_at: null,
      redeliveries: [],
      updated_at: d.scheduled_at,
      finished_at: null,
    };
  }
  if (!doc) return undefined; // every other event follows the scheduling in the same stream
  switch (event.type) {
    case 'WebhookDeliveryAttemptStarted': {
      const d = event.data;
      return {
        ...doc,
        status: 'in_flight',
        next_attempt_at: null,
        attempt_count: d.attempt,
        attempts: [
          ...doc.attempts,
          {
            attempt: d.attempt,
            started_at: d.started_at,
            attempted_at: null,
            outcome: null,
            status: null,
            duration_ms: null,
            response_excerpt: '',
            error_code: null,
            error: null,
          },
        ],
        updated_at: d.started_at,
      };
    }
    case 'WebhookDeliveryAttempted': {
      const d = event.data;
      const result = {
        attempted_at: d.attempted_at,
        outcome: d.outcome,
        status: d.status,
        duration_ms: d.duration_ms,
        response_excerpt: d.response_excerpt,
        error_code: d.error_code,
        error: d.error,
      };
      const known = doc.attempts.some((a) => a.attempt === d.attempt);
      const attempts = known
        ? doc.attempts.map((a) => (a.attempt === d.attempt ? { ...a, ...result } : a))
        : [...doc.attempts, { attempt: d.attempt, started_at: d.attempted_at, ...result }];
      const delivered = d.outcome === 'delivered';
      return {
        ...doc,
        status: delivered ? 'delivered' : d.next_attempt_at === null ? doc.status : 'failed',
        next_attempt_at: d.next_attempt_at,
        delivered_at: delivered ? d.attempted_at : doc.delivered_at,
        attempt_count: Math.max(doc.attempt_count, d.attempt),
        attempts,
        updated_at: d.attempted_at,
        finished_at: delivered ? d.attempted_at : (doc.finished_at ?? null),
      };
    }
    case 'WebhookDeliveryParked': {
      const d = event.data;
      return {
        ...doc,
        status: 'parked',
        next_attempt_at: null,
        parked_reason: d.reason,
        parked_at: d.parked_at,
        updated_at: d.parked_at,
        finished_at: d.parked_at,
      };
    }
    case 'WebhookRedeliveryRequested': {
      const d = event.data;
      return {
        ...doc,
        status: 'pending',
        // A failed delivery is still queued and keeps its age; a delivered or parked one is queued anew.
        queued_since:
          doc.status === 'delivered' || doc.status === 'parked' ? d.requested_at : queuedSince(doc),
        next_attempt_at: d.requested_at,
        parked_reason: null,
        parked_at: null,
        redeliveries: [
          ...doc.redeliveries,
          {
            reason: d.reason,
            requested_at: d.requested_at,
            requested_by: { type: actor.type, id: actor.id },
          },
        ],
        updated_at: d.requested_at,
        finished_at: null,
      };
    }
    default:
      return undefined;
  }
}

/** What a delivery event tells the health read models (`webhook-health.ts`), given the document before and after it. */
function healthChange(
  event: delivery.WebhookDeliveryEvent,
  before: WebhookDeliveryDoc | undefined,
  after: WebhookDeliveryDoc,
): HealthChange {
  const change = { webhook_id: after.webhook_id, before: before?.status, after: after.status };
  switch (event.type) {
    case 'WebhookDeliveryScheduled':
      return { ...change, at: event.data.scheduled_at, scheduled: true };
    case 'WebhookDeliveryAttemptStarted':
      return { ...change, at: event.data.started_at };
    case 'WebhookDeliveryAttempted':
      return {
        ...change,
        at: event.data.attempted_at,
        attempt: {
          outcome: event.data.outcome,
          duration_ms: event.data.duration_ms,
          answered: event.data.status !== null,
        },
      };
    case 'WebhookDeliveryParked':
      return { ...change, at: event.data.parked_at, parked: true };
    case 'WebhookRedeliveryRequested':
      return { ...change, at: event.data.requested_at };
  }
}

/**
 * The projection, pruning what finished `retentionMs` before each event's time
 * (`PDS_DELIVERY_LOG_RETENTION`, docs/operations.md, "Retention").
 */
export function webhookDeliveriesProjection(retentionMs: number): Projection {
  return {
    name: WEBHOOK_DELIVERIES_PROJECTION,
    // 2: the health read models (`webhook_health`, `webhook_queues`) and the deliveries' cart index.
    // 3: who asked for each redelivery (`requested_by`).
    // 4: retention: when each delivery finished (`finished_at`), the pruning's indexes and its hour.
    // 5: the retention job's records of the queues it deletes (`WebhookDeliveryQueuePruned`).
    // 6: the latency histogram counts only attempts that got an answer (no timeouts, no refused
    //    connections): the minutes counted before would differ from a rebuild's.
    // 7: since when each delivery is queued (`queued_since`) and its place in its queue
    //    (`source_revision`), with their indexes; each subscription's last attempt (`webhook_queues`).
    version: 7,
    collections: {
      [WEBHOOK_DELIVERIES]: webhookDeliveryIndexes,
      [WEBHOOK_HEALTH]: webhookHealthIndexes,
      [WEBHOOK_QUEUES]: [],
      [WEBHOOK_RETENTION]: [],
    },
    filter: { streamPrefixes: [delivery.STREAM_PREFIX, retention.STREAM_PREFIX] },
    prefetch(event) {
      if (event.type === PRUNED_QUEUE) return prunedQueueIds(event.data);
      // A hint only (a document not prefetched is fetched on demand), so the raw data will do.
      const data = event.data as Record<string, unknown> | null;
      const id = data?.delivery_id;
      const queue = delivery.parseStreamId(event.streamId);
      if (!eventTypes.has(event.type) || typeof id !== 'string' || !queue) return [];
      const at = [
        data?.scheduled_at,
        data?.started_at,
        data?.attempted_at,
        data?.parked_at,
        data?.requested_at,
      ].find((t): t is string => typeof t === 'string' && !Number.isNaN(Date.parse(t)));
      return [
        [WEBHOOK_DELIVERIES, id],
        [WEBHOOK_QUEUES, queue.webhook_id],
        [WEBHOOK_RETENTION, PRUNED],
        ...(at ? [[WEBHOOK_HEALTH, `${queue.webhook_id}/${minuteOf(at)}`] as [string, string]] : []),
      ];
    },
    apply(event, tx) {
      if (event.type === PRUNED_QUEUE && event.streamId.startsWith(retention.STREAM_PREFIX)) {
        const pruned = domainEventOf<retention.WebhookDeliveryRetentionEvent>(eventRegistry, event);
        forgetPrunedQueue(tx, WEBHOOK_DELIVERIES, pruned.data);
        return;
      }
      if (!event.streamId.startsWith(delivery.STREAM_PREFIX) || !eventTypes.has(event.type)) return;
      const domainEvent = domainEventOf<delivery.WebhookDeliveryEvent>(eventRegistry, event);
      // First, so that this event's own document is never among those pruned after it is written; nor
      // before (a redelivery of a delivery finished long ago would find nothing to apply to).
      const id = domainEvent.data.delivery_id;
      pruneFinished(tx, WEBHOOK_DELIVERIES, delivery.eventTime(domainEvent), retentionMs, id);
      const current = tx.get<WebhookDeliveryDoc>(WEBHOOK_DELIVERIES, id);
      if (current && typeof current._position === 'number' && current._position >= event.position) return;
      const next = evolveDelivery(current, domainEvent, event.metadata.actor);
      if (!next) return;
      tx.put(WEBHOOK_DELIVERIES, next);
      applyHealth(tx, healthChange(domainEvent, current, next));
    },
  };
}

// ---- queries --------------------------------------------------------------------------------------

/** Since when a delivery is queued; a document of version 6 has it from its redeliveries. */
export const queuedSince = (doc: WebhookDeliveryDoc): string =>
  doc.queued_since ?? doc.redeliveries.at(-1)?.requested_at ?? doc.scheduled_at;

export function toDeliveryRecord(doc: WebhookDeliveryDoc): WebhookDeliveryRecord {
  return {
    delivery_id: doc.delivery_id,
    webhook_id: doc.webhook_id,
    event_kind: doc.event_kind,
    cart_uuid: doc.cart_uuid,
    store_id: doc.store_id,
    source_event_id: doc.source_event_id,
    status: doc.status,
    attempts: doc.attempts.map((a) => ({ ...a })),
    attempt_count: doc.attempt_count,
    scheduled_at: doc.scheduled_at,
    queued_since: queuedSince(doc),
    next_attempt_at: doc.next_attempt_at,
    delivered_at: doc.delivered_at,
    parked_reason: doc.parked_reason,
    parked_at: doc.parked_at,
    // A document of version 2 (served while version 3 is built) has no `requested_by`.
    redeliveries: doc.redeliveries.map((r) => ({
      ...r,
      requested_by: r.requested_by ? { ...r.requested_by } : null,
    })),
    updated_at: doc.updated_at,
  };
}

/** Where a page of `listDeliveries` ends: the sort values of its last delivery. */
export interface DeliveryCursor {
  scheduled_at: string;
  delivery_id: string;
}

/**
 * A subscription's deliveries, newest first (`scheduled_at` descending, then delivery id), optionally
 * of some statuses only, strictly after `after`. An index walk that stops at `limit`: the `[webhook_id,
 * scheduled_at]` index, or with statuses one walk of `[webhook_id, status, scheduled_at]` per status,
 * merged in order.
 */
export async function listDeliveries(
  collection: Collection<WebhookDeliveryDoc>,
  webhookId: string,
  options: { statuses?: readonly delivery.DeliveryStatus[]; limit: number; after?: DeliveryCursor },
): Promise<WebhookDeliveryDoc[]> {
  const filter: Filter = { webhook_id: webhookId };
  if (options.statuses && options.statuses.length > 0) {
    filter.status = options.statuses.length === 1 ? options.statuses[0] : { $in: [...options.statuses] };
  }
  return collection.find(filter, {
    sort: [['scheduled_at', -1]],
    limit: options.limit,
    ...(options.after ? { after: [options.after.scheduled_at, options.after.delivery_id] } : {}),
  });
}

/**
 * A subscription's failed or parked deliveries scheduled at or after `since` (ISO 8601 UTC), oldest
 * first, at most `limit`: two ranges of the `[webhook_id, status, scheduled_at]` index.
 */
export async function failedOrParkedSince(
  collection: Collection<WebhookDeliveryDoc>,
  webhookId: string,
  since: string,
  limit: number,
): Promise<WebhookDeliveryDoc[]> {
  return collection.find(
    { webhook_id: webhookId, status: { $in: ['failed', 'parked'] }, scheduled_at: { $gte: since } },
    { sort: [['scheduled_at', 1]], limit },
  );
}

export async function deliveryById(
  collection: Collection<WebhookDeliveryDoc>,
  deliveryId: string,
): Promise<WebhookDeliveryDoc | null> {
  const [doc] = await collection.findByIds([deliveryId]);
  return doc ?? null;
}

/**
 * A cart's deliveries to every subscription, oldest first (`scheduled_at`, then delivery id), strictly
 * after `after`, at most `limit`: a walk of the `[cart_uuid, scheduled_at]` index.
 */
export function deliveriesOfCart(
  collection: Collection<WebhookDeliveryDoc>,
  cartUuid: string,
  options: { limit: number; after?: DeliveryCursor },
): Promise<WebhookDeliveryDoc[]> {
  return collection.find(
    { cart_uuid: cartUuid },
    {
      sort: [['scheduled_at', 1]],
      limit: options.limit,
      ...(options.after ? { after: [options.after.scheduled_at, options.after.delivery_id] } : {}),
    },
  );
}
