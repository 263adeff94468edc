/** The delivery queue's events (docs/webhooks.md): a schedule, an attempt's start and result, a park, a redelivery. */
import { z } from 'zod';
import { defineEvent, type EventOf } from '../events.ts';
import { id, isoDateTime, uuid } from '../schemas.ts';
import { webhookEventKind } from '../webhook-subscription.ts';
import { attemptOutcome, parkReason, redeliveryReasons } from './vocabulary.ts';

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

/** When the event happened, by its own data (never a clock's reading at replay): deterministic. */
export function eventTime(event: WebhookDeliveryEvent): string {
  switch (event.type) {
    case 'WebhookDeliveryScheduled':
      return event.data.scheduled_at;
    case 'WebhookDeliveryAttemptStarted':
      return event.data.started_at;
    case 'WebhookDeliveryAttempted':
      return event.data.attempted_at;
    case 'WebhookDeliveryParked':
      return event.data.parked_at;
    case 'WebhookRedeliveryRequested':
      return event.data.requested_at;
  }
}
