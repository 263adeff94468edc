/**
 * Webhook delivery queue (`webhookdelivery-<webhook_id>_<cart_uuid>`): every webhook one subscription
 * owes for one cart, with every attempt to send it. One stream per (subscription, cart) is what makes
 * per-cart order cheap and durable: the dispatcher sends the stream's deliveries in the order of the
 * cart events they stand for, the next one waiting until the previous is delivered or parked, while
 * other streams (other carts, other subscriptions) proceed independently.
 *
 * A delivery's id is derived from the subscription and the cart event (`deliveryId`, a name-based
 * UUID), so a fan-out repeated after a crash finds it already scheduled; it is the
 * `X-Service-Webhook-Id` of every attempt and redelivery. The body is rendered once, when the delivery
 * is scheduled, and stored here: every attempt sends the same bytes (signed afresh), and an auditor
 * can read exactly what was sent.
 *
 * An attempt is two events: `WebhookDeliveryAttemptStarted` (appended with the expected revision
 * before the request leaves, so of two dispatchers only one sends it) and `WebhookDeliveryAttempted`
 * (its result). A start without a result means the dispatcher died mid-attempt; once its lease has
 * run out another dispatcher (or the same one, restarted) records it as `interrupted` and goes on.
 * The retry time (with its jitter) is chosen by the dispatcher and carried in the command, so this
 * module stays pure.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { conflict, type Decider, invalid, notFound } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { id, isoDateTime, uuid } from './schemas.ts';
import { type WebhookEventKind, webhookEventKind } from './webhook-subscription.ts';

export const STREAM_PREFIX = 'webhookdelivery-';
export const streamId = (webhookId: string, cartUuid: string) => `${STREAM_PREFIX}${webhookId}_${cartUuid}`;

/** The subscription and cart of a delivery stream id, or null when it is not one. */
export function parseStreamId(stream: string): { webhook_id: string; cart_uuid: string } | null {
  if (!stream.startsWith(STREAM_PREFIX)) return null;
  const [webhook_id, cart_uuid, ...rest] = stream.slice(STREAM_PREFIX.length).split('_');
  if (rest.length > 0 || !uuid.safeParse(webhook_id).success || !uuid.safeParse(cart_uuid).success) {
    return null;
  }
  return { webhook_id, cart_uuid };
}

/** RFC 9562 name-based UUID (version 5, SHA-1) of `name` in `namespace`. */
function uuidV5(namespace: string, name: string): string {
  const ns = Buffer.from(namespace.replaceAll('-', ''), 'hex');
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Namespace of delivery ids (a fixed random UUID: ids stay stable across releases). */
const DELIVERY_NAMESPACE = '5b0e8f43-2f0c-4d1b-9a8e-6c1f0d7a2e19';

/** The stable id of one cart event's webhook to one subscription (`X-Service-Webhook-Id`). */
export const deliveryId = (webhookId: string, sourceEventId: string): string =>
  uuidV5(DELIVERY_NAMESPACE, `${webhookId}:${sourceEventId}`);

/** What an attempt came to (the outcomes of `deliverOnce`, plus a start whose result never came). */
export const attemptOutcomes = ['delivered', 'gone', 'retry_after', 'failed', 'interrupted'] as const;
export const attemptOutcome = z.enum(attemptOutcomes);
export type AttemptOutcome = z.infer<typeof attemptOutcome>;

/** Why a delivery stopped being retried. */
export const parkReasons = [
  'attempts_exhausted',
  'receiver_gone',
  'subscription_disabled',
  'subscription_removed',
] as const;
export const parkReason = z.enum(parkReasons);
export type ParkReason = z.infer<typeof parkReason>;

export const redeliveryReasons = ['redeliver', 'recover'] as const;
export type RedeliveryReason = (typeof redeliveryReasons)[number];

/** Operator-facing status: `failed` = the last attempt failed and another is scheduled. */
export const deliveryStatuses = ['pending', 'in_flight', 'failed', 'delivered', 'parked'] as const;
export const deliveryStatus = z.enum(deliveryStatuses);
export type DeliveryStatus = z.infer<typeof deliveryStatus>;

const attemptResult = {
  delivery_id: uuid,
  attempt: z.number().int().positive(),
  outcome: attemptOutcome,
  /** HTTP status, null when no response arrived. */
  status: z.number().int().min(100).max(599).nullable(),
  duration_ms: z.number().int().nonnegative(),
  /** At most 1 KB of the response body. */
  response_excerpt: z.string().max(4096),
  error_code: z.string().max(100).nullable(),
  error: z.string().max(1000).nullable(),
};

export const events = {
  WebhookDeliveryScheduled: defineEvent(
    'WebhookDeliveryScheduled',
    z.object({
      delivery_id: uuid,
      webhook_id: uuid,
      event_kind: webhookEventKind,
      cart_uuid: uuid,
      store_id: id,
      /** The cart event this webhook stands for. */
      source_event_id: z.string().min(1),
      source_revision: z.number().int().nonnegative(),
      source_position: z.number().int().nonnegative(),
      /** The exact JSON text every attempt sends. */
      body: z.string().min(2),
      scheduled_at: isoDateTime,
    }),
  ),
  WebhookDeliveryAttemptStarted: defineEvent(
    'WebhookDeliveryAttemptStarted',
    z.object({
      delivery_id: uuid,
      attempt: z.number().int().positive(),
      started_at: isoDateTime,
      /** After this time the attempt counts as interrupted (its dispatcher died). */
      lease_until: isoDateTime,
      dispatcher_id: z.string().min(1).max(200),
    }),
  ),
  WebhookDeliveryAttempted: defineEvent(
    'WebhookDeliveryAttempted',
    z.object({
      ...attemptResult,
      attempted_at: isoDateTime,
      /** When the next attempt is due; null when none follows (delivered or parked). */
      next_attempt_at: isoDateTime.nullable(),
    }),
  ),
  WebhookDeliveryParked: defineEvent(
    'WebhookDeliveryParked',
    z.object({ delivery_id: uuid, reason: parkReason, parked_at: isoDateTime }),
  ),
  WebhookRedeliveryRequested: defineEvent(
    'WebhookRedeliveryRequested',
    z.object({ delivery_id: uuid, reason: z.enum(redeliveryReasons), requested_at: isoDateTime }),
  ),
};
export type WebhookDeliveryEvent = EventOf<typeof events>;

export interface AttemptRecord {
  attempt: number;
  outcome: AttemptOutcome;
  status: number | null;
  duration_ms: number;
  response_excerpt: string;
  error_code: string | null;
  error: string | null;
  started_at: string;
  attempted_at: string;
}

export interface Delivery {
  delivery_id: string;
  webhook_id: string;
  event_kind: WebhookEventKind;
  cart_uuid: string;
  store_id: number;
  source_event_id: string;
  source_revision: number;
  source_position: number;
  body: string;
  scheduled_at: string;
  status: DeliveryStatus;
  /** Attempts started, ever (the `X-Service-Delivery-Attempt` of the next is this + 1). */
  attempts: number;
  /** Attempts since it was scheduled or last redelivered: the position in the retry schedule. */
  cycle_attempts: number;
  /** When the next attempt is due (pending or failed), null otherwise. */
  next_attempt_at: string | null;
  in_flight: { attempt: number; started_at: string; lease_until: string; dispatcher_id: string } | null;
  last_attempt: AttemptRecord | null;
  delivered_at: string | null;
  parked_reason: ParkReason | null;
  parked_at: string | null;
}

export type DeliveryQueue = {
  exists: true;
  /** In the order of the cart events they stand for. */
  deliveries: Delivery[];
};
export type DeliveryQueueState = { exists: false } | DeliveryQueue;

export type WebhookDeliveryCommand =
  | {
      type: 'ScheduleDelivery';
      delivery_id: string;
      webhook_id: string;
      event_kind: WebhookEventKind;
      cart_uuid: string;
      store_id: number;
      source_event_id: string;
      source_revision: number;
      source_position: number;
      body: string;
      at: string;
    }
  | { type: 'StartAttempt'; delivery_id: string; lease_ms: number; dispatcher_id: string; at: string }
  | {
      type: 'RecordAttempt';
      delivery_id: string;
      attempt: number;
      outcome: Exclude<AttemptOutcome, 'interrupted'>;
      status: number | null;
      duration_ms: number;
      response_excerpt: string;
      error_code: string | null;
      error: string | null;
      /** The next attempt's time when the outcome is not final; ignored when `park` is given. */
      retry_at: string | null;
      /** Parks the delivery with this reason after recording the attempt. */
      park: ParkReason | null;
      at: string;
    }
  | {
      /** Records a started attempt whose lease ran out without a result. */
      type: 'RecordInterruption';
      delivery_id: string;
      retry_at: string | null;
      park: ParkReason | null;
      at: string;
    }
  | { type: 'ParkDelivery'; delivery_id: string; reason: ParkReason; at: string }
  | { type: 'RequestRedelivery'; delivery_id: string; reason: RedeliveryReason; at: string };

/** The delivery the dispatcher works on next: the first, in cart event order, neither delivered nor parked. */
export function head(state: DeliveryQueueState): Delivery | undefined {
  if (!state.exists) return undefined;
  return state.deliveries.find((d) => d.status !== 'delivered' && d.status !== 'parked');
}

/** When the head needs the dispatcher: its next attempt, or the end of the lease of an attempt in flight. */
export function headDueAt(state: DeliveryQueueState): string | null {
  const next = head(state);
  if (!next) return null;
  return next.in_flight ? next.in_flight.lease_until : next.next_attempt_at;
}

export const findDelivery = (state: DeliveryQueueState, deliveryId: string): Delivery | undefined =>
  state.exists ? state.deliveries.find((d) => d.delivery_id === deliveryId) : undefined;

function existing(state: DeliveryQueueState, deliveryId: string): Delivery {
  const delivery = findDelivery(state, deliveryId);
  if (!delivery) throw notFound('delivery_not_found', `no webhook delivery ${deliveryId}`);
  return delivery;
}

const time = (at: string): string => {
  const t = Date.parse(at);
  if (Number.isNaN(t)) throw invalid('invalid_time', `not a date-time: ${at}`);
  return new Date(t).toISOString();
};

function inFlight(delivery: Delivery, attempt?: number) {
  const current = delivery.in_flight;
  if (!current || (attempt !== undefined && current.attempt !== attempt)) {
    throw conflict(
      'attempt_not_in_flight',
      `delivery ${delivery.delivery_id} has no such attempt in flight`,
      {
        attempt: attempt ?? null,
      },
    );
  }
  return current;
}

/** The events that end an attempt: its result, then the park when it was the last. */
function attemptEnd(
  delivery: Delivery,
  fields: Omit<z.input<typeof events.WebhookDeliveryAttempted.schema>, 'delivery_id' | 'next_attempt_at'>,
  retryAt: string | null,
  park: ParkReason | null,
  at: string,
) {
  const final = fields.outcome === 'delivered' || park !== null;
  if (!final && retryAt === null) {
    throw invalid('retry_time_required', 'an attempt that is neither delivered nor parked needs retry_at');
  }
  const out: WebhookDeliveryEvent[] = [
    events.WebhookDeliveryAttempted({
      delivery_id: delivery.delivery_id,
      ...fields,
      next_attempt_at: final ? null : time(retryAt as string),
    }),
  ];
  if (park !== null && fields.outcome !== 'delivered') {
    out.push(
      events.WebhookDeliveryParked({ delivery_id: delivery.delivery_id, reason: park, parked_at: at }),
    );
  }
  return out;
}

function updateDelivery(
  state: DeliveryQueueState,
  deliveryId: string,
  change: (d: Delivery) => Delivery,
): DeliveryQueueState {
  if (!state.exists) return state;
  return {
    ...state,
    deliveries: state.deliveries.map((d) => (d.delivery_id === deliveryId ? change(d) : d)),
  };
}

export const decider: Decider<WebhookDeliveryCommand, WebhookDeliveryEvent, DeliveryQueueState> = {
  initialState: { exists: false },

  decide(command, state) {
    const at = time(command.at);
    switch (command.type) {
      case 'ScheduleDelivery': {
        // Scheduled already (a fan-out repeated after a crash or a redelivered message): nothing to do.
        if (findDelivery(state, command.delivery_id)) return [];
        const { type: _, at: __, ...fields } = command;
        return [events.WebhookDeliveryScheduled({ ...fields, scheduled_at: at })];
      }
      case 'StartAttempt': {
        const delivery = existing(state, command.delivery_id);
        if (delivery.status === 'delivered' || delivery.status === 'parked') {
          throw conflict('delivery_settled', `delivery ${delivery.delivery_id} is ${delivery.status}`);
        }
        if (delivery.in_flight) {
          throw conflict('attempt_in_flight', `delivery ${delivery.delivery_id} has an attempt in flight`);
        }
        if (head(state)?.delivery_id !== delivery.delivery_id) {
          throw conflict('delivery_not_next', 'an earlier delivery of this cart is still pending');
        }
        if (delivery.next_attempt_at !== null && Date.parse(delivery.next_attempt_at) > Date.parse(at)) {
          throw conflict('attempt_not_due', `the next attempt is due at ${delivery.next_attempt_at}`, {
            due_at: delivery.next_attempt_at,
          });
        }
        if (!Number.isSafeInteger(command.lease_ms) || command.lease_ms <= 0) {
          throw invalid('invalid_lease', 'lease_ms must be a positive integer');
        }
        return [
          events.WebhookDeliveryAttemptStarted({
            delivery_id: delivery.delivery_id,
            attempt: delivery.attempts + 1,
            started_at: at,
            lease_until: new Date(Date.parse(at) + command.lease_ms).toISOString(),
            dispatcher_id: command.dispatcher_id,
          }),
        ];
      }
      case 'RecordAttempt': {
        const delivery = existing(state, command.delivery_id);
        inFlight(delivery, command.attempt);
        return attemptEnd(
          delivery,
          {
            attempt: command.attempt,
            outcome: command.outcome,
            status: command.status,
            duration_ms: Math.max(0, Math.round(command.duration_ms)),
            response_excerpt: command.response_excerpt,
            error_code: command.error_code,
            error: command.error,
            attempted_at: at,
          },
          command.retry_at,
          command.park,
          at,
        );
      }
      case 'RecordInterruption': {
        const delivery = existing(state, command.delivery_id);
        const current = inFlight(delivery);
        if (Date.parse(current.lease_until) > Date.parse(at)) {
          throw conflict('lease_not_expired', `attempt ${current.attempt} may still be running`, {
            lease_until: current.lease_until,
          });
        }
        return attemptEnd(
          delivery,
          {
            attempt: current.attempt,
            outcome: 'interrupted',
            status: null,
            duration_ms: Math.max(0, Date.parse(at) - Date.parse(current.started_at)),
            response_excerpt: '',
            error_code: 'interrupted',
            error: 'the dispatcher stopped during the attempt; its result is unknown',
            attempted_at: at,
          },
          command.retry_at,
          command.park,
          at,
        );
      }
      case 'ParkDelivery': {
        const delivery = existing(state, command.delivery_id);
        if (delivery.status === 'delivered' || delivery.status === 'parked') return [];
        if (delivery.in_flight) {
          throw conflict('attempt_in_flight', `delivery ${delivery.delivery_id} has an attempt in flight`);
        }
        return [
          events.WebhookDeliveryParked({
            delivery_id: delivery.delivery_id,
            reason: command.reason,
            parked_at: at,
          }),
        ];
      }
      case 'RequestRedelivery': {
        const delivery = existing(state, command.delivery_id);
        if (delivery.status === 'pending' || delivery.status === 'in_flight') {
          throw conflict(
            'delivery_in_progress',
            `delivery ${delivery.delivery_id} is ${delivery.status}: it is being sent already`,
            { status: delivery.status },
          );
        }
        return [
          events.WebhookRedeliveryRequested({
            delivery_id: delivery.delivery_id,
            reason: command.reason,
            requested_at: at,
          }),
        ];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'WebhookDeliveryScheduled': {
        const d = event.data;
        // Written at most once (its event id is the delivery id), but a store whose idempotence is
        // best effort could hold it twice: the second changes nothing.
        if (findDelivery(state, d.delivery_id)) return state;
        const delivery: Delivery = {
          ...d,
          status: 'pending',
          attempts: 0,
          cycle_attempts: 0,
          next_attempt_at: d.scheduled_at,
          in_flight: null,
          last_attempt: null,
          delivered_at: null,
          parked_reason: null,
          parked_at: null,
        };
        const deliveries = state.exists ? [...state.deliveries, delivery] : [delivery];
        // Cart event order, whatever order the fan-out wrote them in.
        deliveries.sort((a, b) => a.source_revision - b.source_revision);
        return { exists: true, deliveries };
      }
      case 'WebhookDeliveryAttemptStarted': {
        const d = event.data;
        return updateDelivery(state, d.delivery_id, (x) => ({
          ...x,
          status: 'in_flight',
          attempts: d.attempt,
          cycle_attempts: x.cycle_attempts + 1,
          next_attempt_at: null,
          in_flight: {
            attempt: d.attempt,
            started_at: d.started_at,
            lease_until: d.lease_until,
            dispatcher_id: d.dispatcher_id,
          },
        }));
      }
      case 'WebhookDeliveryAttempted': {
        const d = event.data;
        return updateDelivery(state, d.delivery_id, (x) => ({
          ...x,
          status: d.outcome === 'delivered' ? 'delivered' : d.next_attempt_at === null ? x.status : 'failed',
          next_attempt_at: d.next_attempt_at,
          in_flight: null,
          delivered_at: d.outcome === 'delivered' ? d.attempted_at : x.delivered_at,
          last_attempt: {
            attempt: d.attempt,
            outcome: d.outcome,
            status: d.status,
            duration_ms: d.duration_ms,
            response_excerpt: d.response_excerpt,
            error_code: d.error_code,
            error: d.error,
            started_at: x.in_flight?.started_at ?? d.attempted_at,
            attempted_at: d.attempted_at,
          },
        }));
      }
      case 'WebhookDeliveryParked': {
        const d = event.data;
        return updateDelivery(state, d.delivery_id, (x) => ({
          ...x,
          status: 'parked',
          next_attempt_at: null,
          in_flight: null,
          parked_reason: d.reason,
          parked_at: d.parked_at,
        }));
      }
      case 'WebhookRedeliveryRequested': {
        const d = event.data;
        return updateDelivery(state, d.delivery_id, (x) => ({
          ...x,
          status: 'pending',
          cycle_attempts: 0,
          next_attempt_at: d.requested_at,
          parked_reason: null,
          parked_at: null,
        }));
      }
      default:
        return state;
    }
  },
};
