/**
 * How the hostile-input suite attacks a route and what it requires of every answer:
 *
 * - never a 5xx;
 * - every 4xx is an RFC 9457 `application/problem+json` document with `type`, `title`, `status` (the
 *   answer's), `detail` and `code`, and no stack trace;
 * - a refusal appends nothing to the event store (compared through a second connection to the store
 *   file: `headPosition()` before and after). Events of the service's own background workers (actor
 *   `system`: the webhook dispatcher, the abandonment timer) may land meanwhile and are not the request's;
 *   a refusal to a request that carried a valid `Idempotency-Key` may store its claim and then its
 *   release or its answer cut short (`idempotency-` streams, at most `MAX_KEYED_REFUSAL_BYTES` in all,
 *   docs/write-side.md, "Idempotency"), which is how a retry with the key gets the same refusal again;
 * - `Object.prototype` is never polluted (the service runs in the test's process);
 * - partner answers match their API's OpenAPI document (status documented, body shape).
 *
 * Requests are sent with `node:http`, not fetch: fetch normalizes `..` and `%2e%2e` away and refuses
 * some header values, and the point is to send what a hostile client sends.
 */
import http from 'node:http';
import fc from 'fast-check';
import type { EventStore, RecordedEvent } from '../../eventstore/port.ts';
import { matchPath, responseErrors } from '../support/openapi-validate.ts';
import type { TestService } from '../support/service.ts';
import { allRoutes, paramNames, type RouteSpec, validQueryValues } from './routes.ts';
import {
  hostileAuthorization,
  hostileBody,
  hostileContentType,
  hostileHeaderValue,
  hostileQueryKey,
  hostileQueryValue,
  hostileSegment,
  pct,
  RAW_BODIES,
} from './values.ts';
import { KINDS, type World } from './world.ts';

export interface HostileRequest {
  method: string;
  /** Path and query, already encoded (or deliberately not). */
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** How the body was made, for the failure report. */
  how: string;
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** Events appended while the request ran. */
  appended: RecordedEvent[];
}

export interface Harness {
  s: TestService;
  world: World;
  inspect: EventStore;
  agent: http.Agent;
}

/** Methods sent to a route that does not serve them: TRACE and PROPFIND too, which no route serves (405). */
const OTHER_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'PROPFIND'];

/** Sends one request as it is and reads the whole answer. */
export function send(
  base: string,
  agent: http.Agent | undefined,
  req: { method: string; url: string; headers: Record<string, string>; body?: string | Buffer },
  timeoutMs = 30_000,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const r = http.request(
      { host: hostname, port, method: req.method, path: req.url, headers: req.headers, agent },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    // Node's client frames no body of a GET or DELETE by itself: without a length the body bytes would
    // be read as the next request.
    if (req.body !== undefined && r.getHeader('content-length') === undefined) {
      r.setHeader('content-length', Buffer.byteLength(req.body));
    }
    r.setTimeout(timeoutMs, () => r.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    r.on('error', reject);
    r.end(req.body);
  });
}

/** Sends the request and notes what it appended. */
export async function exchange(h: Harness, req: HostileRequest): Promise<Answer> {
  const before = await h.inspect.headPosition();
  const res = await send(h.s.base, h.agent, req);
  const after = await h.inspect.headPosition();
  const appended = after > before ? await h.inspect.readAll({ after: before, maxCount: 1000 }) : [];
  return { ...res, appended };
}

const POLLUTION_KEYS = ['polluted', '$gt', '$where', 'a', 'x'];

/** What a keyed refusal may store: a claim, then a release or a problem document of at most 1 KiB. */
const MAX_KEYED_REFUSAL_BYTES = 3 * 1_024;

/** What is wrong with the answer; empty when it holds every invariant of this suite. */
export async function violations(
  h: Harness,
  spec: RouteSpec,
  req: HostileRequest,
  a: Answer,
): Promise<string[]> {
  const out: string[] = [];
  if (a.status >= 500) out.push(`answered ${a.status}: ${a.text.slice(0, 300)}`);
  if (a.status >= 400) {
    const type = String(a.headers['content-type'] ?? '');
    if (!type.startsWith('application/problem+json')) out.push(`${a.status} with content type ${type}`);
    if (req.method !== 'HEAD') {
      let body: Record<string, unknown> | undefined;
      try {
        body = JSON.parse(a.text) as Record<string, unknown>;
      } catch {
        out.push(`${a.status} body is not JSON: ${a.text.slice(0, 200)}`);
      }
      if (body) {
        if (body.status !== a.status) out.push(`problem status ${String(body.status)} ≠ ${a.status}`);
        for (const f of ['type', 'title', 'detail', 'code']) {
          if (typeof body[f] !== 'string') out.push(`problem without a string ${f}: ${a.text.slice(0, 200)}`);
        }
      }
    }
    if (/\bat .+:\d+:\d+|node_modules|\.ts:\d+/.test(a.text))
      out.push(`a stack trace: ${a.text.slice(0, 300)}`);
    const keyed = /^[\x21-\x7e]{1,255}$/.test(req.headers['idempotency-key'] ?? '');
    const isKeyRecord = (e: RecordedEvent) => keyed && e.streamId.startsWith('idempotency-');
    const own = a.appended.filter((e) => e.metadata.actor?.type !== 'system' && !isKeyRecord(e));
    if (own.length > 0) {
      out.push(`a ${a.status} refusal appended ${own.map((e) => `${e.type} to ${e.streamId}`).join(', ')}`);
    }
    const keyBytes = a.appended
      .filter(isKeyRecord)
      .reduce((sum, e) => sum + Buffer.byteLength(JSON.stringify([e.data, e.metadata])), 0);
    if (keyBytes > MAX_KEYED_REFUSAL_BYTES) {
      out.push(`a ${a.status} refusal stored ${keyBytes} bytes under its Idempotency-Key`);
    }
  }
  const proto = Object.prototype as Record<string, unknown>;
  const polluted = POLLUTION_KEYS.filter((k) => k in proto);
  if (polluted.length > 0) out.push(`Object.prototype polluted with ${polluted.join(', ')}`);

  if (spec.apiBase && req.method === spec.method && !req.url.includes('%ZZ')) {
    const document = (await h.s.openApiDocument(spec.apiBase)) as Record<string, unknown>;
    const template = safe(() => matchPath(document, req.url));
    const expected = spec.path.slice(spec.apiBase.length).replace(/:(\w+)/g, '{$1}');
    if (template === expected) {
      let parsed: unknown = a.text === '' ? null : a.text;
      try {
        parsed = JSON.parse(a.text);
      } catch {}
      const type = a.headers['content-type'] ?? null;
      const headers = new Headers();
      // Node gives `set-cookie` as a list, every other header as a string.
      for (const [k, v] of Object.entries(a.headers))
        for (const one of [v ?? []].flat()) headers.append(k, one);
      out.push(
        ...responseErrors(document, req.method, req.url, a.status, parsed, { contentType: type, headers }),
      );
    }
  }
  return out;
}

function safe<T>(f: () => T): T | undefined {
  try {
    return f();
  } catch {
    return undefined;
  }
}

/** The bearer token of the route's caller: the operator token or a partner's key (none: public, session). */
function bearerOf(spec: RouteSpec, h: Harness): string | undefined {
  if (spec.auth === 'operator') return h.s.token;
  return spec.auth === 'public' || spec.auth === 'session' ? undefined : h.world.keys[spec.auth];
}

/** The credentials a well-behaved caller of the route sends, as headers. */
function credentialsOf(spec: RouteSpec, h: Harness): Record<string, string> {
  if (spec.auth === 'session')
    return { cookie: h.world.session.cookie, 'x-csrf-token': h.world.session.csrf };
  const own = bearerOf(spec, h);
  return own === undefined ? {} : { authorization: `Bearer ${own}` };
}

/** The route's request as a well-behaved client sends it: the first valid value of every part. */
export function validRequest(spec: RouteSpec, h: Harness): HostileRequest {
  const valid = spec.params(h.world);
  const template = spec.body?.(h.world);
  const required = (spec.requiredQuery ?? []).map((k) => `${k}=${pct(validQueryValues(k)[0])}`);
  const requiredQuery = required.length > 0 ? `?${required.join('&')}` : '';
  return {
    method: spec.method,
    url: spec.path.replace(/:(\w+)/g, (_, name: string) => pct(valid[name][0])) + requiredQuery,
    headers: {
      ...credentialsOf(spec, h),
      ...(template ? { 'content-type': 'application/json' } : {}),
    },
    body: template ? JSON.stringify(template) : undefined,
    how: 'valid',
  };
}

type Part = 'method' | 'path' | 'query' | 'auth' | 'body' | 'headers';

/**
 * The hostile requests of one route. Most requests are valid but for one part (the method, a path
 * parameter, the query, the credentials, the body or another header), so that each hostile value
 * meets the code behind the checks before it; some are hostile in every part, some are valid.
 */
export function requestsOf(spec: RouteSpec, h: Harness): fc.Arbitrary<HostileRequest> {
  const w = h.world;
  // Methods the path does not serve: another route's method would be a valid request of that route
  // (a DELETE of the subscription the other routes need), which its own property attacks.
  const served = allRoutes.filter((r) => r.path === spec.path).map((r) => r.method as string);
  const method = fc.oneof(
    { weight: spec.method === 'GET' ? 1 : 0, arbitrary: fc.constant('HEAD') },
    { weight: 2, arbitrary: fc.constantFrom(...OTHER_METHODS.filter((m) => !served.includes(m))) },
  );

  const valid = spec.params(w);
  const validSegment = (name: string) => {
    const values = valid[name];
    if (!values?.length) throw new Error(`no valid values for :${name} of ${spec.path}`);
    return fc.constantFrom(...values.map(pct));
  };
  const names = paramNames(spec.path);
  const fill = (values: string[]) => {
    let i = 0;
    return spec.path.replace(/:(\w+)/g, () => values[i++]);
  };
  const validPath = fc.tuple(...names.map(validSegment)).map(fill);
  // One parameter hostile, the others valid (all of them hostile when every part is).
  const hostilePath = names.length
    ? fc
        .tuple(fc.tuple(...names.map(validSegment)), fc.nat(names.length - 1), hostileSegment)
        .map(([values, i, one]) => fill(values.map((v, j) => (j === i ? one : v))))
    : fc.constant(spec.path);

  const validPart = (name: string) =>
    fc.oneof(
      { weight: 1, arbitrary: fc.constant<string[]>([]) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(...validQueryValues(name).map(pct)).map((v) => [`${pct(name)}=${v}`]),
      },
    );
  const validQuery = fc.tuple(...spec.query.map(validPart)).map((parts) => parts.flat());
  const hostileQuery = fc.oneof(
    // One known parameter with a hostile value.
    ...(spec.query.length
      ? [
          fc
            .tuple(validQuery, fc.constantFrom(...spec.query), hostileQueryValue)
            .map(([parts, k, v]) => [...parts.filter((p) => !p.startsWith(`${pct(k)}=`)), `${pct(k)}=${v}`]),
          // A known parameter given twice: Node's query parser makes it an array.
          fc
            .tuple(validQuery, fc.constantFrom(...spec.query), hostileQueryValue, hostileQueryValue)
            .map(([parts, k, v1, v2]) => [...parts, `${pct(k)}=${v1}`, `${pct(k)}=${v2}`]),
        ]
      : []),
    // Parameters the route does not know.
    fc
      .tuple(
        validQuery,
        fc.array(
          fc.tuple(hostileQueryKey, hostileQueryValue).map(([k, v]) => `${pct(k)}=${v}`),
          { minLength: 1, maxLength: 3 },
        ),
      )
      .map(([parts, more]) => [...parts, ...more]),
  );
  const query = (parts: string[]) => (parts.length ? `?${parts.join('&')}` : '');

  const own = bearerOf(spec, h);
  const validAuth = fc.constant(credentialsOf(spec, h));
  const others = [h.s.token, ...KINDS.map((k) => h.world.keys[k])].filter((k) => k !== own);
  const bearer = (value: string): Record<string, string> => ({ authorization: value });
  const { cookie, csrf } = h.world.session;
  const hostileAuth: fc.Arbitrary<Record<string, string>> = fc.oneof(
    fc.constantFrom(...others).map((k) => bearer(`Bearer ${k}`)),
    hostileAuthorization.map(bearer),
    fc.constant({}),
    // The right credential in a wrong form.
    ...(own
      ? [
          fc
            .constantFrom(own, `bearer  ${own}`, `Bearer ${own}x`, `Token ${own}`, `Bearer ${own} ${own}`)
            .map(bearer),
        ]
      : []),
    // The session's cookie without its CSRF token or with a wrong one, a forged cookie, a mangled header.
    ...(spec.auth === 'session'
      ? [
          fc.constant({ cookie }),
          hostileHeaderValue.map((v) => ({ cookie, 'x-csrf-token': v })),
          hostileHeaderValue.map((v) => ({ cookie: `pds_console_session=${v}`, 'x-csrf-token': csrf })),
          hostileHeaderValue.map((v) => ({ cookie: v, 'x-csrf-token': csrf })),
        ]
      : []),
  );

  type Body = { text?: string; how: string; type?: string };
  const template = spec.body?.(w);
  const validBody: fc.Arbitrary<Body> = fc.constant(
    template
      ? { text: JSON.stringify(template), how: 'valid', type: 'application/json' }
      : { how: 'no body' },
  );
  const hostileBodies: fc.Arbitrary<Body> = template
    ? fc.oneof(
        { weight: 6, arbitrary: hostileBody(template).map((b) => ({ ...b, type: 'application/json' })) },
        {
          weight: 1,
          arbitrary: fc
            .tuple(hostileBody(template), fc.oneof(hostileContentType, fc.constant(undefined)))
            .map(([b, type]) => ({ ...b, type, how: `${b.how} as ${type ?? 'no content type'}` })),
        },
      )
    : fc
        .constantFrom(...RAW_BODIES, '{"__proto__":{"polluted":"yes"}}', '{"$where":"1"}')
        .map((text) => ({ text, how: 'unexpected body', type: 'application/json' }));

  const hostileHeaders = fc.record(
    {
      'x-request-id': hostileHeaderValue,
      'x-correlation-id': hostileHeaderValue,
      'if-match': fc.oneof(
        hostileHeaderValue,
        fc.constantFrom('"0"', '0', 'W/"1"', '*', '"-1"', '"99999999999999"'),
      ),
      accept: fc.constantFrom('application/xml', 'text/html', '*/*', 'application/json;q=0'),
      'idempotency-key': fc.oneof(hostileHeaderValue, fc.uuid()),
      'content-encoding': fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'x-unknown'),
    },
    { requiredKeys: [] },
  );

  const focus = fc.oneof(
    { weight: 1, arbitrary: fc.constant<Part | 'none' | 'all'>('none') },
    { weight: 1, arbitrary: fc.constant<Part | 'none' | 'all'>('method') },
    { weight: names.length ? 3 : 0, arbitrary: fc.constant<Part | 'none' | 'all'>('path') },
    { weight: spec.query.length ? 3 : 1, arbitrary: fc.constant<Part | 'none' | 'all'>('query') },
    { weight: 2, arbitrary: fc.constant<Part | 'none' | 'all'>('auth') },
    { weight: template ? 6 : 1, arbitrary: fc.constant<Part | 'none' | 'all'>('body') },
    { weight: 2, arbitrary: fc.constant<Part | 'none' | 'all'>('headers') },
    { weight: 2, arbitrary: fc.constant<Part | 'none' | 'all'>('all') },
  );
  return (
    focus
      .chain((f) => {
        const choose = <T>(part: Part, validOne: fc.Arbitrary<T>, hostileOne: fc.Arbitrary<T>) =>
          f === part || f === 'all' ? hostileOne : validOne;
        return fc.record({
          focus: fc.constant(f),
          method: choose('method', fc.constant<string>(spec.method), method),
          path: choose('path', validPath, hostilePath),
          query: choose('query', validQuery, hostileQuery).map(query),
          auth: choose('auth', validAuth, hostileAuth),
          body: choose('body', validBody, hostileBodies),
          headers: choose('headers', fc.constant({}), hostileHeaders),
        });
      })
      .map(({ focus: f, method: m, path: p, query: q, auth: a, body: b, headers: more }) => {
        const headers: Record<string, string> = { ...more, ...a };
        const withBody = b.text !== undefined && m !== 'GET' && m !== 'HEAD';
        if (withBody && b.type !== undefined) headers['content-type'] = b.type;
        return {
          method: m,
          url: `${p}${q}`,
          headers,
          body: withBody ? b.text : undefined,
          how: `hostile ${f}; body ${b.how}`,
        };
      })
      // Node refuses a request head over 16 KiB itself (a bare 431, before the app): oversized.test.ts
      // covers that; here every request reaches the app.
      .filter((r) => r.url.length + Object.values(r.headers).join('').length < MAX_HEAD_BYTES)
  );
}

const MAX_HEAD_BYTES = 12_000;

export interface RouteRun {
  route: string;
  runs: number;
  ms: number;
  statuses: Record<number, number>;
  /** Answers 2xx to the route's own method. */
  successes: number;
  /** The first request that got each status. */
  samples: Record<number, string>;
  failure?: string;
}

/**
 * Attacks each route with `numRuns` hostile requests (after the valid one) and returns, per route, the statuses seen and
 * fast-check's report of the first counterexample (shrunk) when an invariant broke.
 */
export async function attack(h: Harness, routes: readonly RouteSpec[], numRuns: number) {
  // HOSTILE_SEED replays a reported failure; HOSTILE_RUNS_FACTOR runs longer (or shorter) campaigns.
  const seed = process.env.HOSTILE_SEED ? Number(process.env.HOSTILE_SEED) : undefined;
  numRuns = Math.max(1, Math.round(numRuns * Number(process.env.HOSTILE_RUNS_FACTOR ?? 1)));
  const results: RouteRun[] = [];
  for (const spec of routes) {
    const statuses: Record<number, number> = {};
    const samples: Record<number, string> = {};
    let successes = 0;
    const started = performance.now();
    const details = await fc.check(
      fc.asyncProperty(requestsOf(spec, h), async (req) => {
        const a = await exchange(h, req);
        statuses[a.status] = (statuses[a.status] ?? 0) + 1;
        if (req.method === spec.method && a.status < 300) successes += 1;
        samples[a.status] ??= squeeze(
          `${req.method} ${req.url} (${req.how}) → ${a.text.slice(0, 160)}`,
        ).slice(0, 400);
        const wrong = await violations(h, spec, req, a);
        if (wrong.length > 0) {
          throw new Error(`${req.method} ${req.url.slice(0, 300)} (${req.how}): ${wrong.join('; ')}`);
        }
      }),
      {
        numRuns,
        ...(seed === undefined ? {} : { seed }),
        // The valid request first: it shows the route reachable with the data as the world built it.
        examples: [[validRequest(spec, h)]],
      },
    );
    results.push({
      route: `${spec.method} ${spec.path}`,
      runs: details.numRuns,
      ms: Math.round(performance.now() - started),
      statuses,
      successes,
      samples,
      failure: details.failed ? report(details) : undefined,
    });
  }
  return results;
}

/** Long runs of one character shown as `y×5000`, so a report stays readable. */
export const squeeze = (text: string) =>
  text.replace(/(.)\1{29,}/gsu, (run, ch: string) => `${ch}×${run.length}`);

function report(details: fc.RunDetails<HostileRequest[]>): string {
  const error =
    details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  return squeeze(
    `seed ${details.seed}, path ${details.counterexamplePath}, after ${details.numRuns} runs and ${details.numShrinks} shrinks:\n${error}\n${JSON.stringify(details.counterexample?.[0])}`,
  ).slice(0, 3000);
}

/** `Object.prototype` keys added by a test run, to undo a pollution before it poisons other tests. */
export function cleanPrototype(): string[] {
  const proto = Object.prototype as Record<string, unknown>;
  const found = POLLUTION_KEYS.filter((k) => k in proto);
  for (const k of found) delete proto[k];
  return found;
}

/** One line per route: runs, time, statuses (and, with HOSTILE_SAMPLES=1, the first request of each status). */
export function summary(results: readonly RouteRun[]): string {
  const samples = process.env.HOSTILE_SAMPLES === '1';
  return results
    .map(
      (r) =>
        `${r.route}: ${r.runs} runs, ${r.successes} accepted, ${r.ms} ms, ${JSON.stringify(r.statuses)}` +
        (samples
          ? `\n    ${Object.entries(r.samples)
              .map(([k, v]) => `${k}: ${v}`)
              .join('\n    ')}`
          : ''),
    )
    .join('\n');
}
