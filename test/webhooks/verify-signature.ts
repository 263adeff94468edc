/**
 * A receiver's check of a webhook request, written from docs/webhooks.md alone and sharing no code with
 * dispatcher/signing.ts, so that the tests compare two implementations rather than one with itself.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** docs/webhooks.md: a timestamp older than 5 minutes is refused (a future one too, by symmetry). */
export const REPLAY_WINDOW_SECONDS = 5 * 60;

export type Verdict =
  | { valid: true }
  | { valid: false; reason: 'missing_headers' | 'bad_timestamp' | 'stale' | 'bad_signature' };

/** Header names in lower case, as node:http gives them. `raw` is the body as received, untouched. */
export function verifyWebhook(
  headers: Record<string, string | string[] | undefined>,
  raw: Buffer,
  secret: string,
  nowSeconds: number,
): Verdict {
  const timestamp = headers['x-service-request-timestamp'];
  const signature = headers['x-service-signature'];
  if (typeof timestamp !== 'string' || typeof signature !== 'string') {
    return { valid: false, reason: 'missing_headers' };
  }
  if (!/^\d{1,12}$/.test(timestamp)) return { valid: false, reason: 'bad_timestamp' };
  if (Math.abs(nowSeconds - Number(timestamp)) > REPLAY_WINDOW_SECONDS)
    return { valid: false, reason: 'stale' };
  // "<timestamp>:<raw_body>", assembled as bytes so that the body is never decoded and re-encoded.
  const signed = Buffer.concat([Buffer.from(timestamp + ':', 'ascii'), raw]);
  const expected = createHmac('sha256', secret).update(signed).digest();
  if (!/^[0-9a-f]{64}$/i.test(signature)) return { valid: false, reason: 'bad_signature' };
  const given = Buffer.from(signature, 'hex');
  // Constant-time comparison (docs/webhooks.md item 4); the lengths are equal by the format check above.
  return timingSafeEqual(given, expected) ? { valid: true } : { valid: false, reason: 'bad_signature' };
}
