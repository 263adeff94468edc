/**
 * The one way a webhook leaves the service (docs/webhooks.md), for the delivery worker and for the
 * admin test-send alike: the subscription's auth token and signing secret are decrypted, the exact body
 * is signed and sent (`deliverOnce`), and both secrets are struck from what the receiver answered
 * before anything records or shows it (a receiver may echo `401 … Bearer <token>`, also escaped or
 * encoded: `redact.ts`). So are the customer's values the body showed (its email, phone number,
 * names, date of birth, arrival answers): an echo of them would otherwise outlive their erasure in
 * the attempt's record (docs/operations.md, "Customer data").
 */
import type { KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { createSecretBox, secretContext } from '../application/credentials.ts';
import { customerValues } from '../application/customer-data.ts';
import type { Clock } from '../domain/clock.ts';
import { type DeliveryResult, deliverOnce } from './deliver.ts';
import { createRedactor } from './redact.ts';
import { signingKey, webhookHeaders } from './signing.ts';
import type { Resolver } from './url-guard.ts';

/** What a webhook is sent to: a subscription as the dispatcher and the admin API hold it. */
export interface WebhookTarget {
  webhook_id: string;
  url: string;
  auth_token_encrypted: string;
  signing_secret_encrypted: string;
}

export interface WebhookSenderOptions {
  /** `PDS_SECRET_KEY`: decrypts the auth token and the signing secret. */
  secretKey: Buffer | KeyObject;
  /** `PDS_WEBHOOK_TIMEOUT`. */
  timeoutMs: number;
  /** `PDS_ALLOW_PRIVATE_WEBHOOK_URLS`. */
  allowPrivate: boolean;
  /** Host resolution for the URL check (tests inject one). */
  resolve?: Resolver;
  /** The time the signature's timestamp is taken from. */
  clock: Clock;
  /**
   * Opens a body whose customer is sealed (`application/customer-data.ts`), at each attempt: once the
   * customer is erased, the body goes out without them (docs/operations.md, "Customer data").
   */
  openBody?: (body: string) => Promise<string>;
}

export interface WebhookRequest {
  /** `X-Service-Webhook-Id`: the same on every attempt and redelivery of one event to one subscription. */
  webhookId: string;
  /** `X-Service-Delivery-Attempt`, from 1. */
  attempt: number;
  /** The exact JSON text: the signature covers these bytes. */
  body: string;
  /** Added to the signed headers (the test-send marks its requests). */
  headers?: Readonly<Record<string, string>>;
}

/** A subscription's secrets, decrypted once, and the way to send it requests. */
export interface WebhookChannel {
  send(request: WebhookRequest): Promise<DeliveryResult>;
}

export interface WebhookSender {
  /** Decrypts the target's secrets (throws for secrets this key cannot open, before anything is sent). */
  open(target: WebhookTarget): WebhookChannel;
}

/**
 * Channels kept open, one per subscription: a delivery worker sends to few subscriptions many times,
 * and opening one decrypts two secrets and makes the HMAC key. Bounded (the least recently used is
 * dropped), and a channel is opened again when the target's URL or encrypted secrets change (an
 * update, a rotation). The decrypted secrets live only in this process's memory, as they did during
 * each send.
 */
const OPEN_CHANNELS = 1_024;

/** A body as JSON, or null (a test-send may carry any text). */
function parsed(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return null;
  }
}

export function createWebhookSender(options: WebhookSenderOptions): WebhookSender {
  const box = createSecretBox(options.secretKey);
  const channels = new LRUCache<string, { target: WebhookTarget; channel: WebhookChannel }>({
    max: OPEN_CHANNELS,
  });

  function openChannel(target: WebhookTarget): WebhookChannel {
    const authToken = box.decrypt(
      target.auth_token_encrypted,
      secretContext(target.webhook_id, 'auth_token'),
    );
    const secret = box.decrypt(
      target.signing_secret_encrypted,
      secretContext(target.webhook_id, 'signing_secret'),
    );
    const key = signingKey(secret);
    const redactSecrets = createRedactor([authToken, secret]);
    return {
      async send(request) {
        const body = options.openBody ? await options.openBody(request.body) : request.body;
        const personal = customerValues(parsed(body));
        const redact =
          personal.length === 0 ? redactSecrets : createRedactor([authToken, secret, ...personal]);
        const headers = {
          ...webhookHeaders({
            authToken,
            secret: key,
            webhookId: request.webhookId,
            attempt: request.attempt,
            body,
            now: options.clock.now(),
          }),
          ...request.headers,
        };
        const result = await deliverOnce({
          url: target.url,
          body,
          headers,
          timeoutMs: options.timeoutMs,
          allowPrivate: options.allowPrivate,
          resolve: options.resolve,
          clock: options.clock,
        });
        return {
          ...result,
          responseExcerpt: redact(result.responseExcerpt),
          error: result.error === null ? null : redact(result.error),
        };
      },
    };
  }

  return {
    open(target) {
      const kept = channels.get(target.webhook_id);
      const same =
        kept !== undefined &&
        kept.target.url === target.url &&
        kept.target.auth_token_encrypted === target.auth_token_encrypted &&
        kept.target.signing_secret_encrypted === target.signing_secret_encrypted;
      if (same) return kept.channel;
      const channel = openChannel(target);
      channels.set(target.webhook_id, { target: { ...target }, channel });
      return channel;
    },
  };
}
