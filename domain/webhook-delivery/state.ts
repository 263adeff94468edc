/** A delivery queue as its events make it (`evolve`), and which delivery is next and when. */
import type { WebhookEventKind } from '../webhook-subscription.ts';
import type { WebhookDeliveryEvent } from './events.ts';
import type { AttemptOutcome, DeliveryStatus, ParkReason } from './vocabulary.ts';

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
  /**
   * When it was last put in the queue: its last redelivery's request, else `scheduled_at`. Optional
   * because a dispatcher store written before it holds deliveries without it (read `scheduled_at`).
   */
  queued_since?: string;
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

export function evolve(state: DeliveryQueueState, event: WebhookDeliveryEvent): DeliveryQueueState {
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
        queued_since: d.scheduled_at,
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
        // A failed delivery is still queued and keeps its age; a delivered or parked one is queued anew.
        queued_since: x.status === 'delivered' || x.status === 'parked' ? d.requested_at : x.queued_since,
        parked_reason: null,
        parked_at: null,
      }));
    }
    default:
      return state;
  }
}
