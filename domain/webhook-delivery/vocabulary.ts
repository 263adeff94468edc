/**
 * The delivery queue's names and words: its stream ids, the stable delivery id (the
 * `X-Service-Webhook-Id`), what an attempt can come to, why a delivery is parked, and the statuses an
 * operator sees (docs/webhooks.md).
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { uuid } from '../schemas.ts';

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
