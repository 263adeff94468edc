/**
 * A webhook subscription's URL, checked before it is stored (docs/webhooks.md, "Subscriptions") with
 * `checkWebhookUrl` of `webhooks/url-guard.ts`, the check the dispatcher repeats before every delivery:
 * refusals are 422 problems naming `url`, with the guard's `reason`; they name the host, never the
 * address it resolved to.
 */
import * as webhooks from '../domain/webhook-subscription.ts';
import {
  checkWebhookUrl,
  defaultResolver,
  type Resolver,
  type UrlRefusalReason,
} from '../webhooks/url-guard.ts';
import { HttpProblem } from './http.ts';

/** Bound on resolving a webhook URL's host while a request waits. */
const RESOLVE_TIMEOUT_MS = 5_000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`no answer within ${ms} ms`), { code: 'ETIMEOUT' })),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The problem code a URL refusal is answered with (the guard's own reason is in `reason`). */
function refusalCode(reason: UrlRefusalReason): string {
  switch (reason) {
    case 'invalid_url':
    case 'unsupported_scheme':
    case 'credentials_in_url':
      return 'invalid_url';
    case 'https_required':
      return 'https_required';
    case 'unresolvable':
      return 'unresolvable_url';
    default:
      return 'private_url';
  }
}

/** 422 unless the URL may receive webhooks (the dispatcher's own check). */
export async function checkSubscriptionUrl(
  value: string,
  settings: { allowPrivateWebhookUrls: boolean; resolve?: Resolver },
): Promise<void> {
  const refuse = (code: string, reason: string, message: string): never => {
    throw new HttpProblem(422, {
      code,
      detail: `url: ${message}`,
      errors: [{ field: 'url', message }],
      extensions: { reason },
    });
  };
  if (!webhooks.isWebhookUrl(value)) {
    refuse(
      'invalid_url',
      'invalid_url',
      `expected an absolute http or https URL of at most ${webhooks.MAX_URL_LENGTH} characters, without user name or password`,
    );
  }
  const check = await checkWebhookUrl(value, {
    allowPrivate: settings.allowPrivateWebhookUrls,
    resolve: (host) => withTimeout((settings.resolve ?? defaultResolver)(host), RESOLVE_TIMEOUT_MS),
  });
  if (!check.ok) refuse(refusalCode(check.reason), check.reason, check.message);
}
