/**
 * Signing in to the console as a browser does (`POST /admin/v1/session`), and calls that carry the
 * session cookie instead of a bearer token, for the session tests.
 */
import type { TestService } from './service.ts';

export interface SignedIn {
  /** The `Cookie` header a browser sends back: `pds_console_session=<id>`. */
  cookie: string;
  /** The `Set-Cookie` header as the service sent it. */
  setCookie: string;
  csrf: string;
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
  body: Record<string, any>;
}

/** Signs in with `token` (the service's operator token by default); throws unless it succeeds. */
export async function signIn(
  svc: TestService,
  token = svc.token,
  headers: Record<string, string> = {},
): Promise<SignedIn> {
  const res = await fetch(`${svc.base}/admin/v1/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ token }),
  });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`sign-in answered ${res.status}: ${text}`);
  const [setCookie] = res.headers.getSetCookie();
  const body = JSON.parse(text);
  return { cookie: setCookie.split(';')[0], setCookie, csrf: body.csrf_token, body };
}

/** A call with the session cookie (and `headers`, e.g. `x-csrf-token`), no `Authorization`. */
export function withCookie(
  svc: TestService,
  cookie: string,
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${svc.base}${url}`, {
    method,
    headers: {
      cookie,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** Who is signed in, as the session and `GET /admin/v1/me` show them. */
export interface Person {
  operator_id: string;
  name: string;
  role: string;
  token_id: string | null;
}

/** `GET /admin/v1/session` with `cookie`: the person signed in (null: nobody) and any `Set-Cookie`. */
export async function signedInAs(
  svc: TestService,
  cookie: string,
): Promise<{ operator: Person | null; setCookie: string | undefined }> {
  const res = await withCookie(svc, cookie, 'GET', '/admin/v1/session');
  if (res.status !== 200)
    throw new Error(`GET /admin/v1/session answered ${res.status}: ${await res.text()}`);
  const body = (await res.json()) as { operator: Person | null };
  return { operator: body.operator, setCookie: res.headers.getSetCookie()[0] };
}
