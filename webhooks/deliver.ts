/**
 * One webhook delivery attempt, and the retry schedule around it (docs/webhooks.md).
 *
 * `deliverOnce` checks the URL (url-guard.ts), pins the connection to the checked addresses, POSTs the
 * body with the given headers through `got`, and classifies the answer:
 *
 * - 2xx within the timeout → `delivered` (the status is what counts: the body is only read for the log);
 * - 410 → `gone` (the caller disables the subscription);
 * - 429 or 503 with a usable `Retry-After` (seconds or HTTP date) → `retry_after` with the wait;
 * - anything else → `failed`: 3xx (redirects are never followed: a receiver could otherwise point us at
 *   an internal address), other statuses, 429/503 without `Retry-After`, timeouts, resets, refused
 *   connections, DNS failures and URLs refused by the guard. The caller retries on the schedule.
 *
 * It never throws for anything the receiver or the network does. The whole attempt, DNS included, is
 * bounded by `timeoutMs`. At most ~1 KB of the response body is read, so a receiver answering with a
 * huge body costs nothing.
 */
import { performance } from 'node:perf_hooks';
import type { Response } from 'got';
import type { Clock } from '../domain/clock.ts';
import { checkWebhookUrl, pinnedLookup, type Resolver, withoutResolvedAddresses } from './url-guard.ts';

// Not `import … from 'node:http'`: as an ES module it loads undici for its WebSocket export, 38 ms of
// every start (docs/read-side.md, "Start-up and restart").
const { Agent: HttpAgent } = process.getBuiltinModule('node:http');
const { Agent: HttpsAgent } = process.getBuiltinModule('node:https');

type HttpClient = typeof import('got');
let httpClient: Promise<HttpClient> | undefined;

/**
 * got, loaded by the first attempt or ahead of it (the delivery worker calls this once it is ready):
 * importing it cost 60 ms of every start, and most starts send nothing for a while
 * (docs/read-side.md, "Start-up and restart").
 */
export function loadHttpClient(): Promise<HttpClient> {
  httpClient ??= import('got');
  return httpClient;
}

export type DeliveryOutcome = 'delivered' | 'gone' | 'retry_after' | 'failed';

/** Why an attempt did not deliver, stable for logs, metrics and tests. */
export type DeliveryErrorCode =
  | 'http_status' // the receiver answered with a non-2xx status (other than a redirect)
  | 'redirect' // 3xx, not followed
  | 'timeout'
  | 'connection_refused'
  | 'connection_reset'
  | 'dns'
  | 'tls'
  | 'url_refused' // the URL guard refused the URL or one of its addresses
  | 'network'; // any other transport error

export interface DeliveryResult {
  outcome: DeliveryOutcome;
  /** HTTP status, `null` when no response arrived. */
  status: number | null;
  /** From the start of the attempt (DNS check included) to the classification. */
  durationMs: number;
  /** The start of the response body, at most `EXCERPT_BYTES` of UTF-8, never a split character. */
  responseExcerpt: string;
  errorCode: DeliveryErrorCode | null;
  /** One line for the attempt log; `null` when delivered. */
  error: string | null;
  /** The wait the receiver asked for (429/503 with `Retry-After`); the caller should clamp it. */
  retryAfterMs: number | null;
}

/** A result as attempts are recorded and shown (the attempt log, the test-send answer). */
export function attemptFields(result: DeliveryResult) {
  return {
    outcome: result.outcome,
    status: result.status,
    duration_ms: result.durationMs,
    response_excerpt: result.responseExcerpt,
    error_code: result.errorCode,
    error: result.error,
  };
}

export interface DeliverInput {
  url: string;
  /** The exact JSON text that was signed; sent as UTF-8. */
  body: string;
  /** From `webhookHeaders` (signing.ts), built for this attempt. */
  headers: Readonly<Record<string, string>>;
  /** `PDS_WEBHOOK_TIMEOUT`. */
  timeoutMs: number;
  /** `PDS_ALLOW_PRIVATE_WEBHOOK_URLS`. */
  allowPrivate: boolean;
  /** Host resolution for the URL check (tests inject one); the connection is pinned to its answer. */
  resolve?: Resolver;
  /** For `Retry-After` given as an HTTP date. */
  clock?: Clock;
}

export const EXCERPT_BYTES = 1024;
export const USER_AGENT = 'PartnerDataService-Webhooks/1.0';

// Own agents without keep-alive: every attempt opens a connection through the pinned lookup, and no
// pooled socket (possibly half-closed by the receiver) can turn a good attempt into a spurious failure.
// They also keep Node's env-proxy support of the global agents out of the way of the pinning.
const AGENTS = { http: new HttpAgent({ keepAlive: false }), https: new HttpsAgent({ keepAlive: false }) };

/** Cuts bytes to at most `maxBytes` of UTF-8 text without splitting a character. */
export function utf8Excerpt(bytes: Uint8Array, maxBytes: number = EXCERPT_BYTES): string {
  // `stream: true` holds back an incomplete sequence at the end instead of emitting U+FFFD for it.
  const text = new TextDecoder('utf-8').decode(bytes.subarray(0, maxBytes), { stream: true });
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  // Invalid bytes became U+FFFD (3 bytes each), which can exceed the budget: drop whole code points.
  let out = '';
  let size = 0;
  for (const char of text) {
    size += Buffer.byteLength(char, 'utf8');
    if (size > maxBytes) break;
    out += char;
  }
  return out;
}

const HTTP_DATE = /^(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,? /i;

/**
 * `Retry-After` in milliseconds: delay-seconds or an HTTP date (RFC 9110 §10.2.3), a past date giving 0.
 * `null` when absent or unusable, so that the schedule applies instead.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  const text = value?.trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) {
    const ms = Number(text) * 1000;
    return Number.isSafeInteger(ms) ? ms : null;
  }
  // Date.parse alone would also take ISO and other loose forms; HTTP dates start with the day name.
  if (!HTTP_DATE.test(text)) return null;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

function classifyTransportError(
  error: unknown,
  timeoutMs: number,
  { RequestError }: HttpClient,
): { code: DeliveryErrorCode; message: string } {
  const raw = (error as { code?: unknown } | null)?.code;
  const code = typeof raw === 'string' ? raw : undefined;
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof RequestError && error.name === 'TimeoutError') {
    return { code: 'timeout', message: `no complete response within ${timeoutMs} ms` };
  }
  switch (code) {
    case 'ETIMEDOUT':
      return { code: 'timeout', message: `no complete response within ${timeoutMs} ms` };
    case 'ECONNREFUSED':
      return { code: 'connection_refused', message: `connection refused (${message})` };
    case 'ECONNRESET':
    case 'EPIPE':
      return { code: 'connection_reset', message: `connection reset by the receiver (${message})` };
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return { code: 'dns', message: `host lookup failed (${message})` };
  }
  if (
    code &&
    (/^ERR_TLS|^ERR_SSL|CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code) || /ssl|tls/i.test(message))
  ) {
    return { code: 'tls', message: `TLS failure (${code}: ${message})` };
  }
  return { code: 'network', message: code ? `${code}: ${message}` : message };
}

/** A single line for logs: a hostile receiver must not be able to inject log lines or huge values. */
function oneLine(text: string, max = 200): string {
  const flat = text.replace(/[\r\n\t]+/g, ' ');
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** Makes one delivery attempt. Never throws for receiver or network behaviour. */
export async function deliverOnce(input: DeliverInput): Promise<DeliveryResult> {
  const http = await loadHttpClient();
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const result = (
    outcome: DeliveryOutcome,
    fields: Partial<Omit<DeliveryResult, 'outcome' | 'durationMs'>>,
  ): DeliveryResult => ({
    outcome,
    status: fields.status ?? null,
    durationMs: elapsed(),
    responseExcerpt: fields.responseExcerpt ?? '',
    errorCode: fields.errorCode ?? null,
    error: fields.error ?? null,
    retryAfterMs: fields.retryAfterMs ?? null,
  });
  const timeoutError = {
    errorCode: 'timeout',
    error: `no complete response within ${input.timeoutMs} ms`,
  } as const;

  // The DNS check counts against the timeout too: getaddrinfo cannot be cancelled, so race it.
  let timer: NodeJS.Timeout | undefined;
  const check = await Promise.race([
    checkWebhookUrl(input.url, { allowPrivate: input.allowPrivate, resolve: input.resolve }),
    new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), input.timeoutMs);
    }),
  ]).finally(() => clearTimeout(timer));
  if (check === 'timeout') return result('failed', timeoutError);
  if (!check.ok) {
    return result('failed', { errorCode: 'url_refused', error: `${check.reason}: ${check.message}` });
  }
  const remainingMs = Math.floor(input.timeoutMs - (performance.now() - started));
  if (remainingMs <= 0) return result('failed', timeoutError);

  const request = http.default.stream.post(check.url, {
    body: input.body,
    headers: { 'user-agent': USER_AGENT, ...input.headers },
    followRedirect: false,
    throwHttpErrors: false,
    retry: { limit: 0 },
    // `request` spans lookup, connect, TLS, upload and the response: the whole attempt.
    timeout: { request: remainingMs },
    dnsLookup: pinnedLookup(check),
    agent: AGENTS,
    http2: false,
  });
  // Errors can also come after the response (a body cut short, our own destroy): a stream without an
  // 'error' listener would crash the process, and the outcome is decided by the status by then anyway.
  request.on('error', () => {});

  let response: Response;
  try {
    response = await new Promise<Response>((resolve, reject) => {
      request.once('response', resolve);
      request.once('error', reject);
    });
  } catch (error) {
    request.destroy();
    const { code, message } = classifyTransportError(error, input.timeoutMs, http);
    return result('failed', { errorCode: code, error: withoutResolvedAddresses(message, check) });
  }

  const status = response.statusCode;
  const responseExcerpt = await readExcerpt(request);
  request.destroy();

  if (status >= 200 && status < 300) return result('delivered', { status, responseExcerpt });
  if (status === 410) {
    return result('gone', { status, responseExcerpt, errorCode: 'http_status', error: 'HTTP 410 Gone' });
  }
  if (status === 429 || status === 503) {
    const nowMs = input.clock ? input.clock.now().getTime() : Date.now();
    const retryAfterMs = parseRetryAfter(headerValue(response.headers['retry-after']), nowMs);
    if (retryAfterMs !== null) {
      return result('retry_after', {
        status,
        responseExcerpt,
        retryAfterMs,
        errorCode: 'http_status',
        error: `HTTP ${status}, Retry-After ${retryAfterMs} ms`,
      });
    }
  }
  if (status >= 300 && status < 400) {
    const location = headerValue(response.headers.location);
    return result('failed', {
      status,
      responseExcerpt,
      errorCode: 'redirect',
      error: `HTTP ${status} redirect not followed${location ? ` (Location: ${oneLine(location)})` : ''}`,
    });
  }
  return result('failed', { status, responseExcerpt, errorCode: 'http_status', error: `HTTP ${status}` });
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Reads up to `EXCERPT_BYTES` (plus the rest of the chunk) of the body; stops at an error or the deadline. */
async function readExcerpt(stream: AsyncIterable<unknown>): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
      chunks.push(bytes);
      size += bytes.length;
      if (size >= EXCERPT_BYTES) break;
    }
  } catch {
    // The status already arrived; a body cut short (reset, timeout) only shortens the excerpt.
  }
  return utf8Excerpt(Buffer.concat(chunks));
}

// ---------------------------------------------------------------------------------------------
// Retry schedule (PDS_WEBHOOK_RETRY_SCHEDULE, default 0s,5s,5m,30m,2h,5h,10h,10h)

/** ±10 % around each entry of the schedule. */
export const JITTER_FRACTION = 0.1;

/**
 * The wait before the next attempt, after `attemptsMade` attempts (0: the event has just happened).
 * Entry `n` of the schedule is the delay between attempt `n` and attempt `n + 1`, so the schedule's
 * length is the number of attempts.
 *
 * Jitter is ±10 % (`random()` in [0, 1) maps to [0.9, 1.1) × the entry) rather than "full" jitter
 * (uniform in [0, entry]): the schedule is documented to partners as approximate times, and ±10 % still
 * spreads the burst of retries that follows a receiver's outage. A zero entry stays zero.
 * Throws a RangeError once the schedule is exhausted: check `isLastAttempt` first.
 */
export function nextAttemptDelay(
  attemptsMade: number,
  scheduleMs: readonly number[],
  random: () => number = Math.random,
): number {
  if (!Number.isSafeInteger(attemptsMade) || attemptsMade < 0) {
    throw new RangeError(`attemptsMade must be a non-negative integer, got ${attemptsMade}`);
  }
  if (attemptsMade >= scheduleMs.length) {
    throw new RangeError(`no attempt after attempt ${attemptsMade}: the schedule has ${scheduleMs.length}`);
  }
  const base = scheduleMs[attemptsMade];
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.max(0, Math.round(base * (1 + JITTER_FRACTION * (2 * r - 1))));
}

/** Whether attempt number `attempt` (from 1) was the last the schedule allows: park it if it failed. */
export function isLastAttempt(attempt: number, scheduleMs: readonly number[]): boolean {
  return attempt >= scheduleMs.length;
}
