/**
 * The end-to-end suite's view of a deployment: plain `fetch` with the operator token or a partner key,
 * problem-document checks and polling with a deadline. Nothing here imports the service: the suite
 * must run against any deployment, as a partner or an operator would call it.
 */
import type { ExecutionContext } from 'ava';

/** Where the suite runs: a base URL, the operator token, and the host name the service calls back. */
export interface Target {
  url: string;
  operatorToken: string;
  /** Host name in webhook URLs: how the service (maybe in a container) reaches the suite's receiver. */
  receiverHost: string;
}

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
export type Json = Record<string, any>;

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  body: Json;
}

export const PLATFORM = '/platform/v1';
export const ADMIN = '/admin/v1';
export const BRAND = '/partner/brand/v1';
export const STORE = '/partner/store/v1';
export const MENU_FEED = '/partner/store-menu-feed/v1';

/** Each request gets this long: a hung service fails the step that hung, not the whole run. */
const REQUEST_TIMEOUT_MS = 20_000;

export interface Client {
  target: Target;
  /** Any request; `auth` is the bearer token (null: none), `body` an object (JSON) or a raw string. */
  call(
    method: string,
    path: string,
    options?: { auth?: string | null; body?: unknown; headers?: Record<string, string> },
  ): Promise<Reply>;
  /** An operator write (platform or admin) that must succeed. */
  write(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Json>;
  /** A partner GET. */
  get(key: string | null, path: string): Promise<Reply>;
}

export function client(target: Target): Client {
  const base = target.url.replace(/\/+$/, '');
  const call: Client['call'] = async (method, path, options = {}) => {
    const auth = options.auth === undefined ? target.operatorToken : options.auth;
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    if (auth !== null) headers.authorization = `Bearer ${auth}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${base}${path}`, {
      method,
      headers,
      body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    }).catch((error: Error) => {
      // fetch says only "fetch failed"; the cause says why (refused, reset, timed out).
      const cause = (error.cause as Error | undefined)?.message ?? error.message;
      throw new Error(`${method} ${base}${path}: ${cause}`);
    });
    const text = await res.text();
    let parsed: Json = {};
    if (/json/.test(res.headers.get('content-type') ?? '') && text !== '') parsed = JSON.parse(text) as Json;
    return { status: res.status, headers: res.headers, text, body: parsed };
  };
  return {
    target,
    call,
    async write(method, path, body, headers) {
      const r = await call(method, path, { body, headers });
      if (r.status < 200 || r.status >= 300) {
        throw new Error(`${method} ${path} answered ${r.status}: ${r.text.slice(0, 1_000)}`);
      }
      return r.body;
    },
    get: (key, path) => call('GET', path, { auth: key }),
  };
}

/**
 * An RFC 9457 problem with this status (docs/partner-api.md, "Errors and limits"): the problem media
 * type, `{type, title, status, detail, code}`, the field named in `errors` when given, no stack trace.
 */
export function assertProblem(
  t: ExecutionContext,
  what: string,
  r: Reply,
  status: number,
  code?: string,
  field?: string,
): void {
  t.is(r.status, status, `${what}: ${r.text.slice(0, 500)}`);
  t.regex(r.headers.get('content-type') ?? '', /^application\/problem\+json/, what);
  t.is(r.body.status, status, what);
  for (const f of ['type', 'title', 'detail', 'code']) t.is(typeof r.body[f], 'string', `${what}: ${f}`);
  if (code !== undefined) t.is(r.body.code, code, `${what}: ${r.text.slice(0, 500)}`);
  if (field !== undefined) {
    const named = ((r.body.errors ?? []) as Json[]).some((e) => e.field === field);
    t.true(named, `${what}: errors name ${field}: ${r.text.slice(0, 500)}`);
  }
  t.notRegex(r.text, /\bat .+\.[jt]s:\d+/, `${what}: no stack trace`);
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `probe` until it returns something other than undefined: read models and webhooks are
 * eventually consistent, so the suite waits for them with a deadline instead of a fixed sleep. The
 * error names `what` and the last thing seen.
 */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (let wait = 25; ; wait = Math.min(wait * 2, 500)) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
      last = 'nothing yet';
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      const seen = last instanceof Error ? last.message : String(last);
      throw new Error(`${what}: not within ${timeoutMs / 1000} s (last: ${seen.slice(0, 1_000)})`);
    }
    await sleep(wait);
  }
}

/** The records of one page of a partner list (`{"<plural>": [...], "next_cursor": …}`), or a thrown error. */
export function page(r: Reply, plural: string): Json[] {
  if (r.status !== 200 || !Array.isArray(r.body[plural])) {
    throw new Error(`expected a page of ${plural}, got ${r.status}: ${r.text.slice(0, 500)}`);
  }
  return r.body[plural] as Json[];
}

/** Polls `probe` until its answer equals `expected` (as JSON); the error shows the last answer. */
export function settles<T>(
  what: string,
  probe: () => Promise<T>,
  expected: T,
  timeoutMs = 30_000,
): Promise<T> {
  return eventually(
    what,
    async () => {
      const value = await probe();
      if (JSON.stringify(value) !== JSON.stringify(expected)) throw new Error(`got ${JSON.stringify(value)}`);
      return value;
    },
    timeoutMs,
  );
}

/**
 * The target the environment names: `PDS_E2E_URL`, `PDS_E2E_OPERATOR_TOKEN`, and
 * `PDS_E2E_RECEIVER_HOST` (default 127.0.0.1), the host name the service calls for webhooks.
 */
export function targetFromEnv(env: NodeJS.ProcessEnv = process.env): Target {
  const url = env.PDS_E2E_URL?.trim();
  const operatorToken = env.PDS_E2E_OPERATOR_TOKEN?.trim();
  if (!url || !operatorToken) {
    throw new Error('set PDS_E2E_URL (the base URL) and PDS_E2E_OPERATOR_TOKEN (the operator token)');
  }
  return { url, operatorToken, receiverHost: env.PDS_E2E_RECEIVER_HOST?.trim() || '127.0.0.1' };
}
