/**
 * Reading the admin API's answers in tests: a JSON answer with its status, an RFC 9457 problem with
 * its status and code, and a wait that runs the service's due timers (injected clock) meanwhile.
 */
import type { ExecutionContext } from 'ava';
import type { TestService } from './service.ts';

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
export type Json = Record<string, any>;

/** Asserts a JSON answer with this status; returns its body. */
export async function ok(t: ExecutionContext, res: Response, status = 200): Promise<Json> {
  const text = await res.text();
  t.is(res.status, status, text);
  t.true((res.headers.get('content-type') ?? '').startsWith('application/json'), text);
  return JSON.parse(text) as Json;
}

/** Asserts an RFC 9457 problem with this status (and code, when given); returns its body. */
export async function problem(
  t: ExecutionContext,
  res: Response,
  status: number,
  code?: string,
): Promise<Json> {
  const text = await res.text();
  t.is(res.status, status, text);
  t.true(
    (res.headers.get('content-type') ?? '').startsWith('application/problem+json'),
    `content-type of: ${text}`,
  );
  const body = JSON.parse(text) as Json;
  t.is(body.status, status);
  t.is(typeof body.title, 'string');
  t.is(typeof body.type, 'string');
  t.true(typeof body.detail === 'string' && body.detail.length > 0);
  if (code) t.is(body.code, code, text);
  t.false(/\bat .+\.ts:\d+/.test(text), 'no stack trace');
  return body;
}

/** Runs the service's due timers until `check` answers something, or fails after `timeoutMs`. */
export async function whileTicking<T>(
  s: TestService,
  check: () => Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await s.tick();
    await new Promise((r) => setTimeout(r, 20));
  }
}
