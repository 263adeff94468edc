/**
 * What every write route shares: the command metadata taken from the request, the answer carrying
 * the stream's revision and global position, and the mapping of refusals to problem documents.
 */
import type { Middleware, Next } from 'koa';
import {
  type CommandMetadata,
  ContentionError,
  PreconditionFailedError,
} from '../application/command-handler.ts';
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/decider.ts';
import { type Actor, EventStoreUnavailableError, InvalidEventError } from '../eventstore/port.ts';
import { type AppContext, HttpProblem } from './http.ts';

/** Largest JSON body a write accepts; larger ones are refused with 413 before parsing. */
export const MAX_BODY_BYTES = 64 * 1024;

let parser: Promise<Middleware> | undefined;
let warming = false;

/**
 * The body parser, loaded by the first write or a second after the routes are built, whichever comes
 * first: loading it cost 40 ms of every start (docs/read-side.md, "Start-up and restart").
 */
function jsonParser(): Promise<Middleware> {
  parser ??= import('@koa/bodyparser').then(({ default: bodyParser }) =>
    bodyParser({ enableTypes: ['json'], jsonLimit: MAX_BODY_BYTES, encoding: 'utf-8' }),
  );
  return parser;
}

/** JSON bodies only, capped in size; a malformed body is a 400 problem. */
export function jsonBody() {
  if (!warming) {
    warming = true;
    setTimeout(() => void jsonParser(), 1_000).unref();
  }
  return async function parseJsonBody(ctx: AppContext, next: Next): Promise<void> {
    const parse = await jsonParser();
    try {
      await parse(ctx as never, async () => undefined);
    } catch (err) {
      const e = err as { status?: number; type?: string; message?: string };
      if (e.status === 413 || e.type === 'entity.too.large') {
        throw new HttpProblem(413, {
          code: 'payload_too_large',
          detail: `request bodies are limited to ${MAX_BODY_BYTES} bytes`,
        });
      }
      if (e.status === 415)
        throw new HttpProblem(415, { code: 'unsupported_media_type', detail: 'send application/json' });
      throw new HttpProblem(400, { code: 'malformed_json', detail: 'the request body is not valid JSON' });
    }
    await next();
  };
}

/**
 * The problem a domain or store refusal is answered with; anything else is returned unchanged (and
 * becomes an opaque 500 further out). Used by `writeErrors` and by the idempotency middleware, which
 * must record a refusal's answer exactly as the client receives it.
 */
export function toWriteProblem(err: unknown): unknown {
  if (err instanceof DomainError) {
    const status = err.kind === 'not_found' ? 404 : err.kind === 'conflict' ? 409 : 422;
    return new HttpProblem(status, {
      code: err.code,
      detail: err.message,
      ...(err.details?.errors ? { errors: err.details.errors as never } : {}),
      ...(err.details ? { extensions: err.details } : {}),
    });
  }
  if (err instanceof PreconditionFailedError) {
    return new HttpProblem(412, {
      code: 'revision_mismatch',
      detail: `If-Match names revision ${err.expected}, but the resource is at revision ${err.actual}`,
      extensions: { current_revision: err.actual },
    });
  }
  if (err instanceof ContentionError) {
    return new HttpProblem(503, { code: 'contention', detail: err.message, headers: { 'Retry-After': '1' } });
  }
  if (err instanceof EventStoreUnavailableError) {
    return new HttpProblem(503, {
      code: 'event_store_unavailable',
      detail: 'the event store is unavailable; retry',
      headers: { 'Retry-After': '1' },
    });
  }
  if (err instanceof InvalidEventError)
    return new HttpProblem(422, { code: 'invalid_event', detail: err.message });
  return err;
}

/** Turns domain and store refusals into problem documents; nothing reaches the client as a 500 by accident. */
export async function writeErrors(_ctx: AppContext, next: Next): Promise<void> {
  try {
    await next();
  } catch (err) {
    throw toWriteProblem(err);
  }
}

/**
 * The correlation and causation ids of what a request appends: its `X-Correlation-Id` (else its
 * request id) and its request id (docs/write-side.md, "Streams and events"). A partner sets those
 * headers as it likes, so its ids are kept in a namespace of its own, `partner:<partner id>:<id>`: an
 * id a client sends has no `:` (api/http.ts), so a partner's can never equal the platform's, an
 * operator's or another partner's, in the events, the audit history or the deliveries they cause.
 */
export function requestIds(ctx: AppContext, actor: Actor): { correlationId: string; causationId: string } {
  const namespace = actor.type === 'partner' ? `partner:${actor.id}:` : '';
  return {
    correlationId: `${namespace}${ctx.state.correlationId}`,
    causationId: `${namespace}${ctx.state.requestId}`,
  };
}

export function commandMetadata(ctx: AppContext, actor: Actor, clock: Clock): CommandMetadata {
  return { ...requestIds(ctx, actor), actor, at: clock.now().toISOString() };
}

/** The answer to a write: the resource, its stream revision (also as ETag) and the global position. */
export function answerWrite(
  ctx: AppContext,
  status: number,
  body: Record<string, unknown>,
  result: { revision: number; position: number },
): void {
  ctx.status = status;
  ctx.set('ETag', `"${result.revision}"`);
  ctx.body = { ...body, revision: result.revision, position: result.position };
}
