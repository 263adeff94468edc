/**
 * What the admin API answers about partners, webhook subscriptions and their deliveries, a cart's
 * audit, the webhook fan-out and projections, as zod schemas: the admin API's OpenAPI document
 * publishes them (`admin-openapi.ts`) and the tests check every answer against it. Each is tied to the
 * type its module renders (`satisfies z.ZodType<…>`), so a field added there without its schema here
 * fails the type check, and a field the schema does not name fails the answer's validation.
 */
import { z } from 'zod';
import { abandonedCart, type CartChange, cartRecord, webhookCustomer } from '../domain/cart.ts';
import type { PartnerRecord } from '../domain/partner.ts';
import { partnerKind } from '../domain/partner.ts';
import { attemptOutcome, deliveryStatus, parkReason, redeliveryReasons } from '../domain/webhook-delivery.ts';
import { webhookEventKind, webhookRecord } from '../domain/webhook-subscription.ts';
import type { ProjectionStatus } from '../projections/projection.ts';
import type { DeliveryAttemptRecord } from '../projections/read-models/webhook-deliveries.ts';
import type { FanOutProgress } from '../webhooks/fan-out-group.ts';
import { namedActor } from './admin-cart-views.ts';
import { waitingBehind } from './admin-delivery-queue.ts';
import { projectionStatusFields, subscriptionStatusFields } from './admin-trouble.ts';

const time = z.string().describe('ISO 8601 date-time (UTC)');
const written = {
  revision: z.int().describe("The stream's revision after the write (also the `ETag`)."),
  position: z.int().describe("The write's global position in the event store."),
};
const nextCursor = z
  .string()
  .nullable()
  .describe('Pass it back as `cursor` for the next page (also in `Link: rel="next"`); null on the last.');
const oneTimeSecret = (what: string) =>
  z
    .string()
    .nullable()
    .describe(`The ${what}, shown this once (null in an idempotent replay: rotate it if it was lost).`);

// ---- partners and their keys --------------------------------------------------------------------

export const partnerKeyRecord = z
  .object({
    key_id: z.string(),
    key_prefix: z.string().describe('The start of the key, to tell keys apart; never the key.'),
    status: z.enum(['active', 'revoked']),
    issued_at: time,
    revoked_at: time.nullable(),
  })
  .meta({ id: 'PartnerKey' });

export const partnerRecord = z
  .object({
    partner_id: z.uuid(),
    name: z.string(),
    kind: partnerKind,
    brand_ids: z.array(z.int()),
    store_ids: z.array(z.int()),
    all_brands: z.boolean(),
    rate_limit_per_minute: z.int(),
    keys: z.array(partnerKeyRecord),
    created_at: time,
    updated_at: time,
  })
  .meta({ id: 'Partner' }) satisfies z.ZodType<PartnerRecord>;

export const partnerCreated = z
  .object({ partner: partnerRecord, api_key: oneTimeSecret('API key'), ...written })
  .meta({ id: 'PartnerCreated' });
export const partnerPage = z
  .object({ partners: z.array(partnerRecord), next_cursor: nextCursor })
  .meta({ id: 'PartnerPage' });
export const partnerShown = z
  .object({ partner: partnerRecord, revision: z.int() })
  .meta({ id: 'PartnerShown' });
export const partnerWritten = z.object({ partner: partnerRecord, ...written }).meta({ id: 'PartnerWritten' });
export const partnerKeyIssued = z
  .object({
    key: partnerKeyRecord,
    revoked_key_id: z.string().optional().describe('On a rotation: the key revoked at the same instant.'),
    api_key: oneTimeSecret('API key'),
    ...written,
  })
  .meta({ id: 'PartnerKeyIssued' });
export const partnerKeyRevoked = z
  .object({ key: partnerKeyRecord, ...written })
  .meta({ id: 'PartnerKeyRevoked' });

// ---- webhook subscriptions ----------------------------------------------------------------------

const webhook = webhookRecord.meta({ id: 'Webhook' });
export const webhookCreated = z
  .object({ webhook, signing_secret: oneTimeSecret('signing secret'), ...written })
  .meta({ id: 'WebhookCreated' });
export const webhookPage = z
  .object({ webhooks: z.array(webhook), next_cursor: nextCursor })
  .meta({ id: 'WebhookPage' });
export const webhookShown = z.object({ webhook, revision: z.int() }).meta({ id: 'WebhookShown' });
export const webhookWritten = z.object({ webhook, ...written }).meta({ id: 'WebhookWritten' });
export const webhookSecretRotated = z
  .object({ webhook, signing_secret: oneTimeSecret('signing secret'), ...written })
  .meta({ id: 'WebhookSecretRotated' });
export const webhookRemoved = z
  .object({ webhook_id: z.uuid(), removed: z.literal(true), removed_at: time.nullable(), ...written })
  .meta({ id: 'WebhookRemoved' });

// ---- deliveries ---------------------------------------------------------------------------------

const deliveryAttempt = z
  .object({
    attempt: z.int(),
    started_at: time,
    attempted_at: time.nullable().describe('null while the attempt is in flight.'),
    outcome: attemptOutcome.nullable().describe('null while the attempt is in flight.'),
    status: z.int().nullable().describe('HTTP status; null when no response arrived (or none yet).'),
    duration_ms: z.number().nullable(),
    response_excerpt: z.string(),
    error_code: z.string().nullable(),
    error: z.string().nullable(),
  })
  .meta({ id: 'DeliveryAttempt' }) satisfies z.ZodType<DeliveryAttemptRecord>;

export const deliveryRecord = z
  .object({
    delivery_id: z.uuid(),
    webhook_id: z.uuid(),
    event_kind: webhookEventKind,
    cart_uuid: z.uuid(),
    store_id: z.int(),
    source_event_id: z.string().describe('The cart event this webhook stands for.'),
    status: deliveryStatus,
    attempts: z.array(deliveryAttempt).describe('Every attempt, oldest first.'),
    attempt_count: z.int().describe('Attempts started, ever (the last `X-Service-Delivery-Attempt`).'),
    scheduled_at: time,
    queued_since: time.describe(
      'Since when it waits in its queue: the `requested_at` of its last redelivery after it was delivered or parked (a failed one keeps its age), else `scheduled_at`.',
    ),
    next_attempt_at: time.nullable().describe('When the next attempt is due (pending or failed).'),
    delivered_at: time.nullable(),
    parked_reason: parkReason.nullable(),
    parked_at: time.nullable(),
    redeliveries: z
      .array(
        z.object({
          reason: z.enum(redeliveryReasons),
          requested_at: time,
          requested_by: namedActor.nullable(),
        }),
      )
      .describe('Operator requests to send it again (redeliver, recover), oldest first.'),
    updated_at: time,
    waiting_behind: waitingBehind,
  })
  .meta({ id: 'Delivery' });

export const deliveryPage = z
  .object({ deliveries: z.array(deliveryRecord), next_cursor: nextCursor })
  .meta({ id: 'DeliveryPage' });
export const deliveryShown = z.object({ delivery: deliveryRecord }).meta({ id: 'DeliveryShown' });
export const deliveryRedelivered = z
  .object({ delivery: deliveryRecord, ...written })
  .meta({ id: 'DeliveryRedelivered' });
export const recovery = z
  .object({
    webhook_id: z.uuid(),
    since: time,
    recovered: z.int(),
    delivery_ids: z.array(z.uuid()).describe('The deliveries pending again, oldest scheduled first.'),
    truncated: z.boolean().describe('More remain: call again.'),
    limit: z.int().describe('The most one call redelivers.'),
  })
  .meta({ id: 'Recovery' });

const webhookBody = z.union([
  z.object({ webhook_event: z.literal('cart_status_updated'), cart: cartRecord }),
  z.object({
    webhook_event: z.literal('cart_abandoned'),
    customer: webhookCustomer,
    store: z.object({
      id: z.int(),
      name: z.string(),
      display_name: z.string().nullable(),
      store_url: z.string().nullable(),
    }),
    cart: abandonedCart,
  }),
]);
export const webhookTest = z
  .object({
    webhook_id: z.uuid(),
    result: z.object({
      outcome: z.enum(['delivered', 'gone', 'retry_after', 'failed']),
      status: z.int().nullable(),
      duration_ms: z.number(),
      response_excerpt: z.string(),
      error_code: z.string().nullable(),
      error: z.string().nullable(),
    }),
    sample: z.object({
      event: webhookEventKind,
      webhook_id: z.uuid().describe('The `X-Service-Webhook-Id` the request carried.'),
      body: webhookBody.describe('The body sent, exactly as a real delivery of its kind.'),
    }),
  })
  .meta({ id: 'WebhookTest' });

// ---- health -------------------------------------------------------------------------------------

const tally = {
  scheduled: z.int(),
  attempts: z.object(Object.fromEntries(attemptOutcome.options.map((o) => [o, z.int()]))),
  parked: z.int(),
  latency_ms: z
    .object({ p50: z.number(), p99: z.number().nullable() })
    .nullable()
    .describe("The attempts' duration quantiles (within about 1.5×); null without attempts."),
};
/** The queue now: its depth and its oldest delivery still queued (pending, in flight or failed). */
const queueNow = z
  .object({
    depth: z.int(),
    oldest: z
      .object({
        delivery_id: z.uuid(),
        cart_uuid: z.uuid(),
        status: deliveryStatus,
        scheduled_at: time,
        queued_since: time.describe(
          "Its last redelivery's `requested_at` after it was delivered or parked, else `scheduled_at`.",
        ),
        age_seconds: z.int().describe('Seconds since `queued_since`.'),
      })
      .nullable()
      .describe('The delivery queued longest (by `queued_since`).'),
  })
  .meta({ id: 'DeliveryQueue' });

export const webhookHealth = z
  .object({
    health: z.object({
      webhook_id: z.uuid(),
      window: z.enum(['1h', '24h']),
      from: time,
      to: time,
      interval_seconds: z.int(),
      ...subscriptionStatusFields.shape,
      totals: z.object(tally),
      intervals: z.array(z.object({ from: time, ...tally, queue_depth: z.int() })),
      queue: queueNow,
    }),
  })
  .meta({ id: 'WebhookHealth' });

export const webhookHealthList = z
  .object({
    subscriptions: z.array(
      z.object({
        webhook_id: z.uuid(),
        url: z.string(),
        enabled: z.boolean(),
        ...subscriptionStatusFields.shape,
        queue: queueNow,
      }),
    ),
    failing: z.int().describe('How many of them are failing.'),
    truncated: z
      .boolean()
      .describe('Whether there are more subscriptions than the first 500 (in id order) judged here.'),
    thresholds: z.object({ oldest_queued_seconds: z.number().describe('`PDS_ALERT_OLDEST_QUEUED`.') }),
  })
  .meta({ id: 'WebhookHealthList' });

// ---- a cart's audit -----------------------------------------------------------------------------

const cartChange = z.object({
  field: z.string().describe('`status`, `customer.email`, `lines[42]`, `lines[42].count`, `amount`, …'),
  before: z.unknown().describe('null where the field did not exist yet.'),
  after: z.unknown().describe('null where it no longer exists.'),
}) satisfies z.ZodType<CartChange>;

export const cartHistory = z
  .object({
    cart_uuid: z.uuid(),
    events: z.array(
      z
        .object({
          revision: z.int(),
          position: z.int(),
          type: z.string(),
          event_id: z.string(),
          occurred_at: time,
          recorded_at: time,
          actor: namedActor,
          correlation_id: z.string(),
          causation_id: z.string().nullable(),
          schema_version: z.int(),
          data: z.unknown().describe("The event's data, as stored."),
          changes: z.array(cartChange).describe('What the event changed in the cart.'),
        })
        .meta({ id: 'CartHistoryEvent' }),
    ),
  })
  .meta({ id: 'CartHistory' });

export const cartDeliveries = z
  .object({
    cart_uuid: z.uuid(),
    deliveries: z.array(deliveryRecord),
    next_cursor: nextCursor,
    pruned_before: time.describe(
      'Deliveries finished before it are pruned (PDS_DELIVERY_LOG_RETENTION): the list is whole from then.',
    ),
  })
  .meta({ id: 'CartDeliveries' });

// ---- the fan-out and projections ----------------------------------------------------------------

export const fanOut = z
  .object({
    fan_out: z.object({
      group: z.string(),
      state: z.enum(['current', 'behind', 'absent']),
      checkpoint: z.int().nullable(),
      oldest_pending: z
        .object({
          event_id: z.string(),
          stream_id: z.string(),
          type: z.string(),
          position: z.int(),
          recorded_at: time,
          age_seconds: z.number(),
        })
        .nullable(),
      parked: z.int(),
      consumers: z.int(),
      behind_after_seconds: z.number(),
    }) satisfies z.ZodType<FanOutProgress>,
  })
  .meta({ id: 'FanOut' });

const projectionStatus = z
  .object({
    name: z.string(),
    state: z.enum(['starting', 'live', 'rebuilding', 'failed', 'standby']),
    checkpoint: z.int(),
    events_applied: z.int(),
    lag_events: z.int(),
    lag_seconds: z.number(),
    error: z.string().nullable(),
    progress: z
      .object({
        started_at: time,
        events_done: z.int(),
        target_position: z.int(),
        position: z.int(),
        percent: z.number(),
        rate_per_second: z.number(),
        eta_seconds: z.number().nullable(),
      })
      .nullable(),
    rebuild_failure: z.object({ error: z.string(), at: time }).nullable(),
    ...projectionStatusFields.shape,
  })
  .meta({ id: 'Projection' }) satisfies z.ZodType<ProjectionStatus>;

export const projections = z
  .object({
    projections: z.array(projectionStatus),
    lagging: z.int().describe('How many of them are lagging.'),
    thresholds: z.object({ projection_lag_seconds: z.number().describe('`PDS_ALERT_PROJECTION_LAG`.') }),
  })
  .meta({ id: 'Projections' });
export const rebuildStarted = z
  .object({ projection: z.string(), state: z.literal('rebuilding'), already_running: z.boolean() })
  .meta({ id: 'RebuildStarted' });
