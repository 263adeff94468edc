/**
 * The delivery queue's decisions (docs/webhooks.md, "Outcomes and retries"): each command is handled by a small
 * named function that refuses it with a `DomainError` or answers the events it leads to.
 */
import type { z } from 'zod';
import { conflict, invalid, notFound } from '../decider.ts';
import type { WebhookDeliveryCommand } from './commands.ts';
import { events, type WebhookDeliveryEvent } from './events.ts';
import { type Delivery, type DeliveryQueueState, findDelivery, head } from './state.ts';
import type { ParkReason } from './vocabulary.ts';

type Command<T extends WebhookDeliveryCommand['type']> = Extract<WebhookDeliveryCommand, { type: T }>;

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

export function decide(command: WebhookDeliveryCommand, state: DeliveryQueueState): WebhookDeliveryEvent[] {
  const at = time(command.at);
  switch (command.type) {
    case 'ScheduleDelivery':
      return scheduleDelivery(command, state, at);
    case 'StartAttempt':
      return startAttempt(command, state, at);
    case 'RecordAttempt':
      return recordAttempt(command, state, at);
    case 'RecordInterruption':
      return recordInterruption(command, state, at);
    case 'ParkDelivery':
      return parkDelivery(command, state, at);
    case 'RequestRedelivery':
      return requestRedelivery(command, state, at);
  }
}

function scheduleDelivery(
  command: Command<'ScheduleDelivery'>,
  state: DeliveryQueueState,
  at: string,
): WebhookDeliveryEvent[] {
  // Scheduled already (a fan-out repeated after a crash or a redelivered message): nothing to do.
  if (findDelivery(state, command.delivery_id)) return [];
  const { type: _, at: __, ...fields } = command;
  return [events.WebhookDeliveryScheduled({ ...fields, scheduled_at: at })];
}

function startAttempt(
  command: Command<'StartAttempt'>,
  state: DeliveryQueueState,
  at: string,
): WebhookDeliveryEvent[] {
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

function recordAttempt(
  command: Command<'RecordAttempt'>,
  state: DeliveryQueueState,
  at: string,
): WebhookDeliveryEvent[] {
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

function recordInterruption(
  command: Command<'RecordInterruption'>,
  state: DeliveryQueueState,
  at: string,
): WebhookDeliveryEvent[] {
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

function parkDelivery(
  command: Command<'ParkDelivery'>,
  state: DeliveryQueueState,
  at: string,
): WebhookDeliveryEvent[] {
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

function requestRedelivery(
  command: Command<'RequestRedelivery'>,
  state: DeliveryQueueState,
  at: string,
): WebhookDeliveryEvent[] {
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
