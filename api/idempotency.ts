/**
 * `Idempotency-Key` for POST requests (as Stripe does it): the first request with a key runs and its
 * answer is recorded; a retry with the same key and the same request gets that first answer again
 * (with `Idempotent-Replayed: true`); the same key with another request is refused with 422.
 *
 * Records are events in the service's own streams (`idempotency-<sha256(scope, key)>`), so they are
 * as durable as the writes they protect and need no other database. A key is claimed (expected
 * revision `no_stream`) before the command runs, so two concurrent requests with one key never both
 * run: the second is told to retry (409). A claim left by a crashed process expires after a minute.
 * A key itself expires `ttlMs` after its claim (`PDS_IDEMPOTENCY_TTL`, 24 hours): a request with it then
 * runs afresh, and its stream is marked to be dropped from the log (docs/operations.md, "Retention").
 *
 * Only what a retry needs is kept, and only for a request that began executing (docs/write-side.md,
 * "Idempotency"): the middleware runs after authentication and body parsing (and on the partner APIs
 * after validation and the resource's visibility check), so those refusals store nothing; a request
 * the route refuses as invalid releases its claim, leaving the key free; a refusal by the command is
 * recorded as its problem document, cut to its status, type, title, code and detail when long.
 */
import { createHash } from 'node:crypto';
import type { Next } from 'koa';
import type { Clock } from '../domain/clock.ts';
import {
  type Actor,
  type EventStore,
  type NewEvent,
  type RecordedEvent,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from '../eventstore/port.ts';
import { type AppContext, HttpProblem, loggablePath, PROBLEM_CONTENT_TYPE } from './http.ts';
import { InvalidRequestProblem } from './validation.ts';
import { requestIds, toWriteProblem } from './write-support.ts';

const CLAIM_EXPIRES_MS = 60_000;
/** How long a key is kept when the configuration does not say (docs/operations.md, "Retention"). */
export const DEFAULT_IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/** A refusal's problem document is recorded whole up to this size (UTF-8 bytes of its JSON)… */
export const MAX_RECORDED_PROBLEM_BYTES = 1_024;
/** …and beyond it as status, type, title, code and this much of its detail (characters). */
export const MAX_RECORDED_DETAIL_LENGTH = 300;
/** The path a claim names (for the `idempotency_key_reused` detail): its start, as the log shows it. */
const MAX_CLAIMED_PATH_LENGTH = 200;

interface Claimed {
  request_hash: string;
  method: string;
  path: string;
  claimed_at: string;
}
interface Recorded {
  status: number;
  content_type: string;
  body: unknown;
  headers: Record<string, string>;
}
/**
 * Why a claim was let go: `invalid_request` (the route refused the request before running it: the key
 * is free for any request) or `not_completed` (a 5xx or 429: the key stays bound to its request, to be
 * retried). Releases recorded without a reason are `not_completed`.
 */
interface Released {
  released_at: string;
  reason?: 'invalid_request' | 'not_completed';
}

/**
 * JSON with sorted keys, so `{a,b}` and `{b,a}` are the same request. Iterative, not recursive: a
 * body of 64 KiB can nest 30,000 levels deep, which would overflow the stack (a 500) before the
 * route's validation refuses it.
 */
export function canonical(value: unknown): string {
  let out = '';
  // A stack of what is left to write, last first: text as it is, or a value to write canonically.
  const work: ({ text: string } | { value: unknown })[] = [{ value }];
  for (let item = work.pop(); item !== undefined; item = work.pop()) {
    if ('text' in item) {
      out += item.text;
      continue;
    }
    const v = item.value;
    const parts: ({ text: string } | { value: unknown })[] = [];
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) parts.push({ text: i === 0 ? '[' : ',' }, { value: v[i] });
      parts.push({ text: v.length === 0 ? '[]' : ']' });
    } else if (v && typeof v === 'object') {
      const entries = Object.entries(v as Record<string, unknown>)
        .filter(([, x]) => x !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      for (const [i, [k, x]] of entries.entries()) {
        parts.push({ text: `${i === 0 ? '{' : ','}${JSON.stringify(k)}:` }, { value: x });
      }
      parts.push({ text: entries.length === 0 ? '{}' : '}' });
    } else {
      out += JSON.stringify(v) ?? 'null';
      continue;
    }
    for (let i = parts.length - 1; i >= 0; i--) work.push(parts[i]);
  }
  return out;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** Response headers worth replaying: the ones that describe the result, not the connection. */
const REPLAYED_HEADERS = ['etag', 'location', 'x-stream-revision', 'x-global-position'];

export interface IdempotencyOptions {
  store: EventStore;
  clock: Clock;
  /** Whose key space a request uses (keys of different partners never collide). */
  scopeOf: (ctx: AppContext) => string;
  actorOf: (ctx: AppContext) => Actor;
  /**
   * Top-level answer fields that are shown once (an API key): recorded as `null`, so the secret never
   * enters an event, and a replay answers `null` for them.
   */
  oneTimeSecrets?: readonly string[];
  /**
   * Request paths whose answers are never kept, by the reason: a replay could show nothing of them,
   * so a request there with a key is refused (422) before the key is claimed.
   */
  unkept?: Readonly<Record<string, string>>;
  /** How long a key binds its request and answer (`PDS_IDEMPOTENCY_TTL`); 24 hours when left out. */
  ttlMs?: number;
}

function withoutSecrets(body: unknown, fields: readonly string[]): unknown {
  if (fields.length === 0 || !body || typeof body !== 'object' || Array.isArray(body)) return body;
  const copy = { ...(body as Record<string, unknown>) };
  for (const field of fields) if (field in copy) copy[field] = null;
  return copy;
}

/**
 * A refusal as it is recorded: the problem document as sent when it is short; a long one (a list of
 * thousands of field errors) as what a retry needs to act on, its status, type, title, code and the
 * start of its detail.
 */
export function recordedProblem(problem: HttpProblem): Recorded {
  const whole = problem.toJSON();
  const short = Buffer.byteLength(JSON.stringify(whole)) <= MAX_RECORDED_PROBLEM_BYTES;
  const detail =
    problem.detail.length > MAX_RECORDED_DETAIL_LENGTH
      ? `${problem.detail.slice(0, MAX_RECORDED_DETAIL_LENGTH - 1)}…`
      : problem.detail;
  return {
    status: problem.status,
    content_type: PROBLEM_CONTENT_TYPE,
    body: short
      ? whole
      : { type: problem.type, title: problem.title, status: problem.status, detail, code: problem.code },
    headers: problem.headers,
  };
}

export function idempotency(options: IdempotencyOptions) {
  const { store, clock } = options;
  const ttlMs = options.ttlMs ?? DEFAULT_IDEMPOTENCY_TTL_MS;

  function metadata(ctx: AppContext) {
    const actor = options.actorOf(ctx);
    const ids = requestIds(ctx, actor);
    return {
      correlation_id: ids.correlationId,
      causation_id: ids.causationId,
      actor,
      occurred_at: clock.now().toISOString(),
      schema_version: 1,
    };
  }

  return async function idempotencyMiddleware(ctx: AppContext, next: Next): Promise<void> {
    const key = ctx.get('Idempotency-Key');
    if (ctx.method !== 'POST' || key === '') return next();
    const unkept = options.unkept?.[ctx.path];
    if (unkept !== undefined) {
      throw new HttpProblem(422, {
        code: 'idempotency_key_not_allowed',
        detail: `Idempotency-Key is not taken here: ${unkept}`,
        errors: [{ field: 'Idempotency-Key', message: unkept }],
      });
    }
    if (!KEY_PATTERN.test(key)) {
      throw new HttpProblem(400, {
        code: 'invalid_idempotency_key',
        detail: 'Idempotency-Key must be 1 to 255 printable ASCII characters',
        errors: [{ field: 'Idempotency-Key', message: 'expected 1 to 255 printable ASCII characters' }],
      });
    }
    const streamId = `idempotency-${sha256(`${options.scopeOf(ctx)}\n${key}`)}`;
    const requestHash = sha256(
      `${ctx.method} ${ctx.path}\n${canonical((ctx.request as { body?: unknown }).body ?? null)}`,
    );

    const events = await recordsOf(store, streamId);
    let revision = events.length > 0 ? events[events.length - 1].revision : -1;
    const claim = [...events].reverse().find((e) => e.type === 'IdempotencyKeyClaimed')?.data as
      | Claimed
      | undefined;
    // A key expires `ttlMs` after its claim: it is free again for any request, and its records may be
    // dropped from the log (docs/operations.md, "Retention"). A claim already dropped has expired too.
    if (claim && clock.now().getTime() - Date.parse(claim.claimed_at) < ttlMs) {
      const last = events[events.length - 1];
      const free =
        last.type === 'IdempotencyKeyReleased' && (last.data as Released).reason === 'invalid_request';
      if (!free && claim.request_hash !== requestHash) {
        throw new HttpProblem(422, {
          code: 'idempotency_key_reused',
          detail: `Idempotency-Key ${key} was used for a different request (${claim.method} ${claim.path} with another body)`,
        });
      }
      if (last.type === 'IdempotentResponseRecorded') {
        const recorded = last.data as Recorded;
        ctx.status = recorded.status;
        ctx.set(recorded.headers);
        ctx.set('Idempotent-Replayed', 'true');
        ctx.type = recorded.content_type;
        ctx.body = recorded.body;
        return;
      }
      const claimedFor = clock.now().getTime() - Date.parse(claim.claimed_at);
      if (last.type === 'IdempotencyKeyClaimed' && claimedFor < CLAIM_EXPIRES_MS) {
        throw inProgress(key);
      }
    }

    const claimed: Claimed = {
      request_hash: requestHash,
      method: ctx.method,
      path: loggablePath(ctx.path).slice(0, MAX_CLAIMED_PATH_LENGTH),
      claimed_at: clock.now().toISOString(),
    };
    const claimEvent = { type: 'IdempotencyKeyClaimed', data: claimed, metadata: metadata(ctx) };
    revision = await claimKey(store, streamId, revision, key, claimEvent, ttlMs);

    const record = async (recorded: Recorded) => {
      await store.append(
        streamId,
        [{ type: 'IdempotentResponseRecorded', data: recorded, metadata: metadata(ctx) }],
        {
          expectedRevision: revision,
          maxAgeMs: ttlMs,
        },
      );
    };
    const release = (reason: Released['reason']) =>
      store
        .append(
          streamId,
          [
            {
              type: 'IdempotencyKeyReleased',
              data: { released_at: clock.now().toISOString(), reason } satisfies Released,
              metadata: metadata(ctx),
            },
          ],
          {
            expectedRevision: revision,
            maxAgeMs: ttlMs,
          },
        )
        .catch(() => undefined); // an unreleased claim expires by itself

    try {
      await next();
    } catch (err) {
      const answer = toWriteProblem(err);
      if (answer instanceof InvalidRequestProblem) await release('invalid_request');
      else if (answer instanceof HttpProblem && answer.status < 500 && answer.status !== 429) {
        await record(recordedProblem(answer));
      } else {
        await release('not_completed');
      }
      throw answer;
    }
    if (ctx.status >= 500) {
      await release('not_completed');
      return;
    }
    const headers: Record<string, string> = {};
    for (const name of REPLAYED_HEADERS) {
      const value = ctx.response.get(name);
      if (value) headers[name] = String(value);
    }
    await record({
      status: ctx.status,
      content_type: ctx.response.type || 'application/json',
      body: withoutSecrets(ctx.body ?? null, options.oneTimeSecrets ?? []),
      headers,
    });
  };
}

/** A key's records as the store returns them: none when its stream is absent. */
async function recordsOf(store: EventStore, streamId: string): Promise<RecordedEvent[]> {
  try {
    return await store.readStream(streamId);
  } catch (err) {
    if (err instanceof StreamNotFoundError) return [];
    throw err;
  }
}

/**
 * Appends a key's claim after `revision` (-1: none read), with the key's TTL as its stream's max age,
 * and answers the stream's revision after it. A concurrent claim is a 409.
 */
async function claimKey(
  store: EventStore,
  streamId: string,
  revision: number,
  key: string,
  claim: NewEvent,
  ttlMs: number,
): Promise<number> {
  const append = async (expected: number) =>
    (
      await store.append(streamId, [claim], {
        expectedRevision: expected === -1 ? 'no_stream' : expected,
        maxAgeMs: ttlMs,
      })
    ).nextExpectedRevision;
  try {
    return await append(revision);
  } catch (err) {
    if (!(err instanceof WrongExpectedVersionError)) throw err;
    // A stream whose events all expired reads as empty on EventStoreDB and keeps its revision: the
    // claim goes after it, unless another request claimed the key meanwhile.
    if (revision !== -1 || typeof err.actual !== 'number') throw inProgress(key);
    if ((await recordsOf(store, streamId)).length > 0) throw inProgress(key);
    try {
      return await append(err.actual);
    } catch (retried) {
      if (retried instanceof WrongExpectedVersionError) throw inProgress(key);
      throw retried;
    }
  }
}

function inProgress(key: string): HttpProblem {
  return new HttpProblem(409, {
    code: 'idempotency_request_in_progress',
    detail: `A request with Idempotency-Key ${key} is still being processed; retry it shortly`,
    headers: { 'Retry-After': '1' },
  });
}
