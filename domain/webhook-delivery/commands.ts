/** What the dispatcher and operators ask of a delivery queue; the retry time comes in the command, so the decider stays pure. */
import type { WebhookEventKind } from '../webhook-subscription.ts';
import type { AttemptOutcome, ParkReason, RedeliveryReason } from './vocabulary.ts';

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
