/**
 * What every partner API shares (docs/partner-api.md): API-key authentication against the `partner_keys` read
 * model (one lookup by key hash), the per-key rate limit, security headers, cursor paging with a
 * `Link` header, and store selection for store-scoped endpoints.
 */
import type { Next } from 'koa';
import { z } from 'zod';
import { hashApiKey, isWellFormedApiKey } from '../../application/credentials.ts';
import { cartStatus } from '../../domain/cart.ts';
import type { PartnerKind } from '../../domain/partner.ts';
import { isoDateTime } from '../../domain/schemas.ts';
import type { Page } from '../../projections/read-models/paging.ts';
import type { PartnerKeyDoc } from '../../projections/read-models/partner-keys.ts';
import type { Collection, Doc } from '../../projections/read-store.ts';
import { type AppContext, HttpProblem } from '../http.ts';
import { bearerToken } from '../operator-auth.ts';
import { parseParams } from '../validation.ts';

/** The partner a request authenticated as. */
export interface PartnerPrincipal {
  partner_id: string;
  key_id: string;
  kind: PartnerKind;
  brand_ids: readonly number[];
  store_ids: readonly number[];
  all_brands: boolean;
  rate_limit_per_minute: number;
}

export function principal(ctx: AppContext): PartnerPrincipal {
  const p = (ctx.state as { partner?: PartnerPrincipal }).partner;
  if (!p) throw new Error('partner route reached without authentication');
  return p;
}

const unauthorized = (detail: string) =>
  new HttpProblem(401, {
    code: 'unauthorized',
    detail,
    headers: { 'WWW-Authenticate': 'Bearer realm="pds-partner"' },
  });

/** 401 without a valid key; 403 for a valid key of another partner kind. */
export function partnerAuth(keys: () => Collection<PartnerKeyDoc>, kinds: readonly PartnerKind[]) {
  return async function authenticatePartner(ctx: AppContext, next: Next): Promise<void> {
    const token = bearerToken(ctx);
    if (token === undefined) throw unauthorized('send your API key as Authorization: Bearer <api key>');
    if (!isWellFormedApiKey(token)) throw unauthorized('invalid API key');
    const [key] = await keys().findByIds([hashApiKey(token)]);
    if (!key) throw unauthorized('invalid or revoked API key');
    if (!kinds.includes(key.kind)) {
      throw new HttpProblem(403, {
        code: 'wrong_partner_kind',
        detail: `this API serves ${kinds.join(' and ')} partners; the key belongs to a ${key.kind} partner`,
      });
    }
    (ctx.state as { partner?: PartnerPrincipal }).partner = {
      partner_id: key.partner_id,
      key_id: key.key_id,
      kind: key.kind,
      brand_ids: key.brand_ids,
      store_ids: key.store_ids,
      all_brands: key.all_brands,
      rate_limit_per_minute: key.rate_limit_per_minute,
    };
    await next();
  };
}

/**
 * Per-key token bucket: capacity and refill of the partner's `rate_limit_per_minute`. Every answer
 * carries `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` and `RateLimit-Policy`; an empty
 * bucket answers 429 with `Retry-After`. Buckets live in the process (each API replica limits on its own).
 */
export function rateLimit(now: () => number = Date.now) {
  const buckets = new Map<string, { tokens: number; at: number; capacity: number }>();
  return async function limitRate(ctx: AppContext, next: Next): Promise<void> {
    const p = principal(ctx);
    const capacity = p.rate_limit_per_minute;
    const perMs = capacity / 60_000;
    const t = now();
    const b = buckets.get(p.key_id) ?? { tokens: capacity, at: t, capacity };
    b.tokens = Math.min(capacity, b.tokens + (t - b.at) * perMs);
    b.at = t;
    b.capacity = capacity;
    buckets.set(p.key_id, b);
    const resetSeconds = Math.ceil((capacity - Math.max(0, b.tokens - 1)) / perMs / 1000);
    const headers = {
      'RateLimit-Limit': String(capacity),
      'RateLimit-Policy': `${capacity};w=60`,
    };
    if (b.tokens < 1) {
      const retry = Math.max(1, Math.ceil((1 - b.tokens) / perMs / 1000));
      throw new HttpProblem(429, {
        code: 'rate_limited',
        detail: `rate limit of ${capacity} requests per minute exceeded; retry in ${retry} s`,
        headers: {
          ...headers,
          'RateLimit-Remaining': '0',
          'RateLimit-Reset': String(retry),
          'Retry-After': String(retry),
        },
      });
    }
    b.tokens -= 1;
    ctx.set({
      ...headers,
      'RateLimit-Remaining': String(Math.floor(b.tokens)),
      'RateLimit-Reset': String(resetSeconds),
    });
    await next();
  };
}

/** The partner APIs' answers are private JSON (`SECURITY_HEADERS`). */
export { securityHeaders } from '../http.ts';

// ---- paging -----------------------------------------------------------------------------------------

export const MAX_LIMIT = 500;
export const DEFAULT_LIMIT = 100;

export const pageQuery = {
  limit: z.coerce.number().int().min(1).max(MAX_LIMIT).default(DEFAULT_LIMIT),
  cursor: z.string().max(512).optional(),
};

/** Cursors are opaque to partners: the sort values of the last record, base64url-encoded JSON. */
export function encodeCursor(values: readonly unknown[]): string {
  return Buffer.from(JSON.stringify(values)).toString('base64url');
}

export function decodeCursor(cursor: string | undefined, shape: z.ZodType<unknown[]>): unknown[] | undefined {
  if (cursor === undefined) return undefined;
  try {
    return shape.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')));
  } catch {
    throw new HttpProblem(400, {
      code: 'invalid_cursor',
      detail: 'the cursor is not one this API gave out; start again without it',
      errors: [{ field: 'cursor', message: 'not a cursor of this list' }],
    });
  }
}

/** An optional ISO 8601 date-time parameter (`Z` or an offset), normalized to UTC with milliseconds as read models store times. */
export const timeParam = (description: string) =>
  isoDateTime
    .transform((t) => new Date(t).toISOString())
    .optional()
    .describe(description);

/** `updated_after`, for incremental sync of a list (docs/partner-api.md, "Lists"). */
export const updatedAfter = timeParam(
  'only records changed strictly after this time (ISO 8601), for incremental sync',
);

/** The filters of a carts list (docs/partner-api.md, "Lists"); bounds are exclusive. */
export const cartFilters = {
  created_after: timeParam('only carts created strictly after this time (ISO 8601)'),
  created_before: timeParam('only carts created strictly before this time (ISO 8601)'),
  updated_after: timeParam('only carts changed strictly after this time (ISO 8601)'),
  status: cartStatus.optional().describe('only carts in this status'),
  abandoned: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional()
    .describe(
      'true: only abandoned carts (≥1 item, not checked out, 6 h after the first item); false: only the others',
    ),
};

/** Cursor of an id-ordered list: the last record's id. */
const idCursor = z.tuple([z.number().int().positive().max(Number.MAX_SAFE_INTEGER)]);
/** Cursor of a carts list: the last cart's id and uuid. */
const cartCursor = z.tuple([z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER), z.uuid()]);

/** Where an id-ordered list resumes (undefined for the first page); a foreign cursor is a 400. */
export const idAfter = (cursor: string | undefined) => decodeCursor(cursor, idCursor) as [number] | undefined;

/** Where a carts list resumes (undefined for the first page); a foreign cursor is a 400. */
export const cartAfter = (cursor: string | undefined) =>
  decodeCursor(cursor, cartCursor) as [number, string] | undefined;

/** Answers one page of a read-model query, each document shown through `render` (by default its public fields). */
export function answerList<T extends Doc>(
  ctx: AppContext,
  plural: string,
  page: Page<T>,
  render: (docs: T[]) => unknown[] = (docs) => docs.map((d) => publicFields(d)),
): void {
  answerPage(ctx, plural, render(page.docs), page.next);
}

/** Answers a page: `{ <plural>: [...], next_cursor }` and a `Link: <…>; rel="next"` header. */
export function answerPage(
  ctx: AppContext,
  plural: string,
  items: unknown[],
  next: readonly unknown[] | null,
): void {
  const nextCursor = next ? encodeCursor(next) : null;
  if (nextCursor) {
    const params = new URLSearchParams(ctx.querystring);
    params.set('cursor', nextCursor);
    ctx.set('Link', `<${ctx.path}?${params.toString()}>; rel="next"`);
  }
  ctx.body = { [plural]: items, next_cursor: nextCursor };
}

/** Strips the private (`_`) fields and `_id` of a read-model document: what partners see. */
export function publicFields<T>(doc: Record<string, unknown>): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(doc)) if (!k.startsWith('_')) out[k] = v;
  return out as T;
}

/** A record that does not exist or is outside the key's scope: the same 404 either way. */
export function notFound(what: string, id: string | number): HttpProblem {
  return new HttpProblem(404, { code: `${what}_not_found`, detail: `no ${what.replaceAll('_', ' ')} ${id}` });
}

/**
 * The store a store-scoped request is about: `store_id` from the query, required when the key covers
 * several stores. A store outside the key's scope is a 404, never another store's data.
 */
const storeIdQuery = z.object({
  store_id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
});

export function selectStore(ctx: AppContext): number {
  const p = principal(ctx);
  // The schema is built once: building a zod schema costs more than the rest of a lookup request.
  const { store_id } = parseParams({ store_id: ctx.query.store_id }, storeIdQuery);
  if (store_id === undefined) {
    if (p.store_ids.length === 1) return p.store_ids[0];
    throw new HttpProblem(400, {
      code: 'store_id_required',
      detail: `this key covers ${p.store_ids.length} stores: choose one with ?store_id=`,
      errors: [{ field: 'store_id', message: 'required when the key covers several stores' }],
    });
  }
  if (!p.store_ids.includes(store_id)) throw notFound('store', store_id);
  return store_id;
}

/** The brand ids a brand or brand-feed key may read; `undefined` means every brand (all_brands). */
export function brandScope(p: PartnerPrincipal): readonly number[] | undefined {
  return p.all_brands ? undefined : p.brand_ids;
}
