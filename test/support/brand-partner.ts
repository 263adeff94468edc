/**
 * Helpers of the brand and brand feed partner API tests: catalog writes through /platform/v1, partners
 * and keys through /admin/v1, waiting for the read models, partner GETs, strict record checks, problem
 * documents, and walking every page of a list.
 */
import type { ExecutionContext } from 'ava';
import { z } from 'zod';
import type { TestService } from './service.ts';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
export type Json = Record<string, any>;

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  body: Json;
}

export const PLATFORM = '/platform/v1';
export const ADMIN = '/admin/v1';

/** A platform or admin write that must succeed (2xx). */
export async function write(
  t: ExecutionContext,
  svc: TestService,
  method: string,
  url: string,
  body?: unknown,
): Promise<Json> {
  const res = await svc.call(method, url, body);
  const text = await res.text();
  if (res.status >= 300) t.fail(`${method} ${url} answered ${res.status}: ${text}`);
  return text === '' ? {} : (JSON.parse(text) as Json);
}

export interface Partner {
  partner_id: string;
  api_key: string;
  key_id: string;
}

export async function registerPartner(t: ExecutionContext, svc: TestService, body: Json): Promise<Partner> {
  const out = await write(t, svc, 'POST', `${ADMIN}/partners`, body);
  return { partner_id: out.partner.partner_id, api_key: out.api_key, key_id: out.partner.keys[0].key_id };
}

/** Waits until every projection has applied every event (partner keys and the catalog included). */
export async function caughtUp(t: ExecutionContext, svc: TestService): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const res = await svc.call('GET', `${ADMIN}/projections`);
    const body = (await res.json()) as { projections: Array<{ name: string; lag_events: number }> };
    if (res.status === 200 && body.projections.every((p) => p.lag_events === 0)) return;
    if (Date.now() > deadline) t.fail(`projections never caught up: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The partner API a path belongs to. */
function apiBaseOf(path: string): string {
  const m = /^\/partner\/[a-z-]+\/v\d+/.exec(path);
  if (!m) throw new Error(`${path} is not a partner API path`);
  return m[0];
}

/**
 * GET with a partner key (a value with a space is sent as the whole Authorization header; `null` sends
 * none). Every answer, success or problem, is checked against the API's OpenAPI document.
 */
export async function get(svc: TestService, key: string | null, path: string): Promise<Reply> {
  const raw = key?.includes(' ') === true;
  const r = await svc.partnerCall<Json>(
    apiBaseOf(path),
    'GET',
    path,
    key === null || raw ? undefined : key,
    undefined,
    raw ? { authorization: key ?? '' } : {},
  );
  const body = (r.body ?? {}) as Json;
  return { status: r.status, headers: r.headers, text: JSON.stringify(r.body), body };
}

/** A 200 JSON answer. */
export async function ok(t: ExecutionContext, svc: TestService, key: string, path: string): Promise<Json> {
  const r = await get(svc, key, path);
  t.is(r.status, 200, `GET ${path}: ${r.text}`);
  t.regex(r.headers.get('content-type') ?? '', /^application\/json/);
  return r.body;
}

/** An RFC 9457 problem with this status (and code): never a stack trace, never 5xx. */
export async function problem(
  t: ExecutionContext,
  svc: TestService,
  key: string | null,
  path: string,
  status: number,
  code?: string,
  field?: string,
): Promise<Json> {
  const r = await get(svc, key, path);
  t.is(r.status, status, `GET ${path}: ${r.text}`);
  t.regex(r.headers.get('content-type') ?? '', /^application\/problem\+json/, path);
  t.is(r.body.status, status);
  for (const f of ['type', 'title', 'detail', 'code']) t.is(typeof r.body[f], 'string', `${f} of ${r.text}`);
  if (code !== undefined) t.is(r.body.code, code, `${path}: ${r.text}`);
  if (field !== undefined) {
    t.true(
      (r.body.errors ?? []).some((e: Json) => e.field === field),
      `${path}: errors name ${field}: ${r.text}`,
    );
  }
  t.false(/\bat .+\.ts:\d+/.test(r.text), 'no stack trace');
  return r.body;
}

/** The schema with every object strict, however deep: an extra field anywhere fails. */
export function deepStrict(schema: z.ZodType): z.ZodType {
  if (schema instanceof z.ZodObject) {
    const shape: Record<string, z.ZodType> = {};
    for (const [k, v] of Object.entries(schema.shape as Record<string, z.ZodType>)) shape[k] = deepStrict(v);
    return z.strictObject(shape);
  }
  if (schema instanceof z.ZodArray) return z.array(deepStrict(schema.element as z.ZodType));
  if (schema instanceof z.ZodNullable) return deepStrict(schema.unwrap() as z.ZodType).nullable();
  if (schema instanceof z.ZodOptional) return deepStrict(schema.unwrap() as z.ZodType).optional();
  return schema;
}

/** Every record of a page matches `record` strictly, and the page is `{ <plural>, next_cursor }`. */
export function assertPage(t: ExecutionContext, body: Json, plural: string, record: z.ZodType): void {
  t.deepEqual(Object.keys(body).sort(), [plural, 'next_cursor'].sort());
  t.true(Array.isArray(body[plural]));
  t.true(body.next_cursor === null || typeof body.next_cursor === 'string');
  const strict = deepStrict(record);
  for (const item of body[plural] as unknown[]) {
    const parsed = strict.safeParse(item);
    t.true(parsed.success, `${plural} record ${JSON.stringify(item)}: ${parsed.error?.message}`);
  }
  t.false(JSON.stringify(body).includes('"_'), 'no private field');
}

/**
 * Walks a list by its `Link: <…>; rel="next"` header, `limit` per page; `between(i)` runs after page i
 * (e.g. to add records). Checks Link ⇔ next_cursor and that the link keeps the query. Returns the pages.
 */
export async function walk(
  t: ExecutionContext,
  svc: TestService,
  key: string,
  path: string,
  plural: string,
  between: (page: number) => Promise<void> = async () => {},
): Promise<Json[][]> {
  const pages: Json[][] = [];
  let next: string | null = path;
  while (next !== null) {
    const r = await get(svc, key, next);
    t.is(r.status, 200, `GET ${next}: ${r.text}`);
    pages.push(r.body[plural]);
    const link = r.headers.get('link');
    if (r.body.next_cursor === null) {
      t.is(link, null, 'no Link on the last page');
      next = null;
    } else {
      const m = /^<([^>]+)>; rel="next"$/.exec(link ?? '');
      t.truthy(m, `Link header: ${link}`);
      next = m![1];
      const url = new URL(next, svc.base);
      t.is(url.searchParams.get('cursor'), r.body.next_cursor);
      for (const [k, v] of new URL(path, svc.base).searchParams) {
        if (k !== 'cursor') t.is(url.searchParams.get(k), v, `the link keeps ${k}`);
      }
    }
    if (pages.length > 1000) t.fail('too many pages');
    await between(pages.length);
  }
  return pages;
}

export const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
