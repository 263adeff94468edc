/**
 * Webhook request signing (docs/webhooks.md, "Requests").
 *
 * `X-Service-Signature` is the lowercase hex HMAC-SHA256 of `<timestamp>:<raw body>`, keyed by the
 * subscription's signing secret: the whole `whsec_…` string as UTF-8 (application/credentials.ts), so that a
 * receiver can paste the secret it was shown into any HMAC library without decoding it first.
 * `X-Service-Request-Timestamp` is whole unix seconds, the value that was signed, so receivers can
 * enforce the 5-minute replay window of docs/webhooks.md.
 *
 * The headers are built afresh for every attempt: a retry hours later gets a new timestamp, hence a new
 * signature, and is not refused by the receiver as a replay.
 */
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

export const HEADER_SIGNATURE = 'X-Service-Signature';
export const HEADER_TIMESTAMP = 'X-Service-Request-Timestamp';
export const HEADER_WEBHOOK_ID = 'X-Service-Webhook-Id';
export const HEADER_DELIVERY_ATTEMPT = 'X-Service-Delivery-Attempt';

/**
 * The HMAC key of a signing secret (its UTF-8 bytes), made once for many signatures: from the
 * string, each `createHmac` makes the key again, which took 12 µs of a signature's 15 here.
 */
export function signingKey(secret: string): KeyObject {
  if (secret.length === 0) throw new TypeError('the signing secret is empty');
  return createSecretKey(Buffer.from(secret, 'utf8'));
}

/**
 * Hex HMAC-SHA256 of `<timestampSeconds>:<rawBody>` under `secret` (UTF-8), or under its `signingKey`.
 * Strings are signed as UTF-8.
 */
export function signPayload(
  secret: string | KeyObject,
  timestampSeconds: number,
  rawBody: Buffer | string,
): string {
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new RangeError(`the timestamp must be whole unix seconds, got ${timestampSeconds}`);
  }
  const key = typeof secret === 'string' ? signingKey(secret) : secret;
  // Two updates rather than one concatenated string, so a Buffer body is signed byte for byte.
  return createHmac('sha256', key)
    .update(`${timestampSeconds}:`, 'utf8')
    .update(typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody)
    .digest('hex');
}

/** Whole unix seconds of an instant (what `X-Service-Request-Timestamp` carries). */
export function unixSeconds(at: Date): number {
  return Math.floor(at.getTime() / 1000);
}

export interface WebhookHeaderInput {
  /** The subscription's auth token, sent as `Authorization: Bearer <token>` (docs/webhooks.md, "Requests"). */
  authToken: string;
  /** The subscription's signing secret (`whsec_…`), decrypted, or its `signingKey`. */
  secret: string | KeyObject;
  /** Stable id of this event for this subscription: the same on every retry and redelivery. */
  webhookId: string;
  /** 1 for the first attempt. */
  attempt: number;
  /** The exact body that will be sent: the signature covers these bytes. */
  body: Buffer | string;
  /** The time of this attempt (from the injected clock). */
  now: Date;
}

/** Every header of one webhook request (docs/webhooks.md). Call it once per attempt, just before sending. */
export function webhookHeaders(input: WebhookHeaderInput): Record<string, string> {
  if (!Number.isSafeInteger(input.attempt) || input.attempt < 1) {
    throw new RangeError(`the delivery attempt must be an integer from 1, got ${input.attempt}`);
  }
  const timestamp = unixSeconds(input.now);
  return {
    'Content-Type': 'application/json',
    Authorization: `Bearer ${input.authToken}`,
    [HEADER_TIMESTAMP]: String(timestamp),
    [HEADER_SIGNATURE]: signPayload(input.secret, timestamp, input.body),
    [HEADER_WEBHOOK_ID]: input.webhookId,
    [HEADER_DELIVERY_ATTEMPT]: String(input.attempt),
  };
}
