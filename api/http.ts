/**
 * The Koa app every process serves: shared middleware (request id, access log, metrics, RFC 9457
 * problem responses) and the operational endpoints `/healthz`, `/readyz`, `/metrics` (or, with
 * `PDS_OPS_PORT`, those on an app of their own, `createOpsApp`). Partner, platform and admin routers
 * are mounted into the same app with `app.use(routesOf(router))`.
 */
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type Router from '@koa/router';
import type { RouterOptions } from '@koa/router';
import type Koa from 'koa';
import type compose from 'koa-compose';
import type { Logger } from 'pino';
import { collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { ReadStoreUnavailableError } from '../projections/read-store.ts';
import { accessLogLevel } from './access-log.ts';
import type { MetricsSources } from './metrics-sources.ts';
import type { Readiness } from './readiness.ts';

// Not `import … from 'node:http'`: as an ES module it loads undici for its WebSocket export, 38 ms of
// every start (docs/read-side.md, "Start-up and restart").
const { METHODS, STATUS_CODES } = process.getBuiltinModule('node:http');

/** What the shared middleware puts in `ctx.state` for every later handler. */
export interface AppState {
  requestId: string;
  /** `X-Correlation-Id` when the client sent a well-formed one, else the request id: the correlation of the events this request appends. */
  correlationId: string;
  /** Child logger carrying `request_id` and `correlation_id`. */
  log: Logger;
  /** The console's session cookie authenticated the request (`operator-auth.ts`): its reads are logged at debug. */
  consoleSession?: boolean;
}

/**
 * The request's state. Its logger is made when something logs: a child logger's bindings are
 * serialised (and redacted) as it is made, which each request paid when nothing of it was logged.
 * A class with the getter on its prototype: a getter defined on Koa's `{}` at each request took the
 * menu product bench's p99 from 6 to 13-16 ms (docs/benchmarks.md, "Memory under load, and a request's state").
 */
class RequestState implements AppState {
  #log: Logger | undefined;
  readonly #logger: Logger;
  readonly requestId: string;
  readonly correlationId: string;
  consoleSession = false;
  constructor(logger: Logger, requestId: string, correlationId: string) {
    this.#logger = logger;
    this.requestId = requestId;
    this.correlationId = correlationId;
  }
  get log(): Logger {
    this.#log ??= this.#logger.child({ request_id: this.requestId, correlation_id: this.correlationId });
    return this.#log;
  }
}

export type App = Koa<AppState>;
export type AppContext = Koa.ParameterizedContext<AppState>;

const require = createRequire(import.meta.url);

/**
 * Koa and its router are loaded when the first app or router is built, not with this module: a role
 * thread, which serves no HTTP, uses the problems and readiness here and never pays for them (about
 * 8 MB of resident memory each, docs/operations.md, "Threads"). Both from their CommonJS builds:
 * the router's ES module build imports `http` as an ES module, which makes Node load undici for
 * `http.WebSocket`, 15 ms of every start (docs/read-side.md, "Start-up and restart").
 */
let KoaRouter: typeof Router | undefined;

/**
 * A router of the service's request state: every route is mounted on one. Paths are matched with
 * their letter case: the router matches a `use` layer (authentication, roles) with case but its
 * routes without, so `/Admin/v1/…` reached a route past its router's authentication.
 */
export function createRouter(options?: RouterOptions): Router<AppState> {
  KoaRouter ??= require('@koa/router') as typeof Router;
  return new KoaRouter<AppState>({ ...options, sensitive: true });
}

/**
 * `router.routes()`, tried only for paths under the router's prefix. The router itself tests every
 * one of its routes' patterns against every request that reaches it, and a request passes up to ten
 * routers before its own: this makes the others one comparison each (docs/architecture.md).
 * The comparison keeps letter case, as the router's patterns do (`createRouter`).
 */
export function routesOf(router: Router<AppState>): Koa.Middleware<AppState> {
  const routes = router.routes() as Koa.Middleware<AppState>;
  const prefix = router.opts.prefix;
  if (!prefix) return routes;
  const prefixedRoutes: Koa.Middleware<AppState> = (ctx, next) => {
    const path = ctx.path;
    const under = path.startsWith(prefix) && (path.length === prefix.length || path[prefix.length] === '/');
    return under ? routes(ctx, next) : next();
  };
  // Names its router as `routes()` does, for what lists the app's routes (test/hostile/coverage.test.ts).
  return Object.assign(prefixedRoutes, { router });
}

/**
 * A router's shared middleware (authentication, body parsing, …) as one `router.use` layer. The
 * router tests every layer's pattern against each request under its prefix and composes the matched
 * layers anew for it, so four `use` layers cost four pattern tests and a four-deep chain per request;
 * composed here, once, they cost one (docs/architecture.md, "Where a change goes").
 */
export function useEach(router: Router<AppState>, ...middleware: Koa.Middleware<AppState>[]): void {
  const composeAll = require('koa-compose') as typeof compose;
  router.use(composeAll(middleware));
}

// ---------------------------------------------------------------------------------------------
// Problems (RFC 9457)

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** One invalid input, for the `errors` member of a 400/422 problem. */
export interface ProblemFieldError {
  /** The offending input, e.g. `limit` or `items[0].quantity`. */
  field: string;
  message: string;
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  errors?: ProblemFieldError[];
}

export interface HttpProblemOptions {
  /** Machine-readable code; defaults to one derived from the status (`not_found`, `conflict`, …). */
  code?: string;
  detail?: string;
  errors?: ProblemFieldError[];
  /** Problem type URI; `about:blank` means the status says it all. */
  type?: string;
  title?: string;
  /** Response headers such as `Retry-After` or `Allow`. */
  headers?: Record<string, string>;
  /** RFC 9457 extension members, e.g. `{ allowed: [...] }` for a refused status move. */
  extensions?: Record<string, unknown>;
}

const DEFAULT_CODES: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'validation_failed',
  429: 'rate_limited',
  500: 'internal_error',
  503: 'unavailable',
};

function defaultCode(status: number): string {
  return DEFAULT_CODES[status] ?? (STATUS_CODES[status] ?? 'error').toLowerCase().replace(/[^a-z0-9]+/g, '_');
}

/** Throw this from any handler to answer with a problem document. */
export class HttpProblem extends Error {
  override name = 'HttpProblem';
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly type: string;
  readonly detail: string;
  readonly errors: ProblemFieldError[] | undefined;
  readonly headers: Record<string, string>;
  readonly extensions: Record<string, unknown>;
  constructor(status: number, options: HttpProblemOptions = {}) {
    const title = options.title ?? STATUS_CODES[status] ?? 'Error';
    const detail = options.detail ?? title;
    super(detail);
    this.status = status;
    this.code = options.code ?? defaultCode(status);
    this.title = title;
    this.type = options.type ?? 'about:blank';
    this.detail = detail;
    this.errors = options.errors;
    this.headers = options.headers ?? {};
    this.extensions = options.extensions ?? {};
  }

  toJSON(): ProblemBody {
    const body: ProblemBody = {
      ...this.extensions,
      type: this.type,
      title: this.title,
      status: this.status,
      detail: this.detail,
      code: this.code,
    };
    if (this.errors) body.errors = this.errors;
    return body;
  }
}

/** Shorthand: `throw httpProblem(404, 'cart_not_found', 'No cart 1234')`. */
export function httpProblem(
  status: number,
  code?: string,
  detail?: string,
  options: Omit<HttpProblemOptions, 'code' | 'detail'> = {},
): HttpProblem {
  return new HttpProblem(status, { ...options, code, detail });
}

/**
 * How long a client is asked to wait when the read store can't be reached: a replica set elects a new
 * primary within about 12 s, and each read meanwhile fails after the 5 s server selection time.
 */
export const READ_STORE_RETRY_AFTER_SECONDS = 5;

/**
 * Maps anything thrown to a problem. The read store out of reach, whatever route read it, is a 503
 * `read_store_unavailable` with `Retry-After` (docs/operations.md, "MongoDB"). Errors carrying an HTTP
 * status (Koa's `ctx.throw`, http-errors) keep it; their message is shown when exposable (4xx by
 * default). Anything else is an opaque 500.
 */
function toProblem(error: unknown, requestId: string): HttpProblem {
  if (error instanceof HttpProblem) return error;
  if (error instanceof ReadStoreUnavailableError) {
    return new HttpProblem(503, {
      code: 'read_store_unavailable',
      detail: 'the read store is unavailable; retry after Retry-After seconds',
      headers: { 'Retry-After': String(READ_STORE_RETRY_AFTER_SECONDS) },
    });
  }
  const internal = `The request could not be completed because of an internal error (request id ${requestId}).`;
  const e = error as {
    status?: unknown;
    statusCode?: unknown;
    expose?: unknown;
    message?: unknown;
    headers?: unknown;
  };
  const status = typeof e?.status === 'number' ? e.status : e?.statusCode;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 400 || status > 599) {
    return new HttpProblem(500, { detail: internal });
  }
  const expose = typeof e.expose === 'boolean' ? e.expose : status < 500;
  const headers =
    e.headers && typeof e.headers === 'object' ? (e.headers as Record<string, string>) : undefined;
  const detail = expose && typeof e.message === 'string' ? e.message : status >= 500 ? internal : undefined;
  return new HttpProblem(status, { detail, headers });
}

/**
 * The headers of every answer that is private JSON (the partner APIs, `/admin`, `/platform`) and of
 * every problem: no sniffing, framing, caching or referrers. `no-store` matters most where an answer
 * carries a one-time secret (an API key, a signing secret) or a customer's personal data.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
  'Strict-Transport-Security': 'max-age=31536000',
});

/** A router's first middleware where every answer is private JSON (`SECURITY_HEADERS`). */
export async function securityHeaders(ctx: AppContext, next: Koa.Next): Promise<void> {
  ctx.set(SECURITY_HEADERS);
  await next();
}

function sendProblem(ctx: AppContext, problem: HttpProblem): void {
  // As Koa does for errors: drop headers a handler set before failing, keep only the request id.
  for (const name of ctx.response.headers ? Object.keys(ctx.response.headers) : []) {
    if (name !== 'x-request-id') ctx.remove(name);
  }
  // A problem is private JSON too, whatever route refused: an admin 401 carries no-store like its 201.
  ctx.set(SECURITY_HEADERS);
  ctx.set(problem.headers);
  ctx.status = problem.status;
  ctx.type = PROBLEM_CONTENT_TYPE;
  ctx.body = problem.toJSON();
}

// ---------------------------------------------------------------------------------------------
// Readiness (`readiness.ts`)

export {
  type CheckAnswer,
  type CheckImpact,
  type CheckOptions,
  createReadiness,
  type GroupCheck,
  type Readiness,
  type ReadinessCheck,
  type ReadinessReport,
} from './readiness.ts';

// ---------------------------------------------------------------------------------------------
// Metrics

/** A fresh registry with the default process metrics; one per app so tests can build several apps. */
export function createMetricsRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** The matched @koa/router pattern (bounded cardinality), or `unmatched`. */
function routeLabel(ctx: AppContext): string {
  const matched = (ctx as { _matchedRoute?: string | RegExp })._matchedRoute;
  return matched === undefined ? 'unmatched' : String(matched);
}

// ---------------------------------------------------------------------------------------------
// The app

const UUID_SEGMENT = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/**
 * The path as the access log and a 404 problem show it. A client that puts a credential in the path
 * (an API key, the operator token, a webhook's auth token or signing secret, all 32+ characters) must
 * not get it logged or quoted, so a segment of 24 characters or more is shown by its length only. No id of this API is
 * that long except a UUID (ids are numbers, UUIDs and 16-character key ids), which is kept.
 */
export function loggablePath(path: string): string {
  return path.replace(/[^/]{24,}/g, (segment) =>
    UUID_SEGMENT.test(segment) ? segment : `[${segment.length} characters]`,
  );
}

// A client-supplied id is echoed only if it cannot smuggle anything into headers or logs. It has no
// `:`, which keeps a partner's ids apart from everyone else's (write-support.ts, `requestIds`).
const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export interface HttpAppOptions {
  logger: Logger;
  registry: Registry;
  readiness: Readiness;
  /** Role of this process, shown by `/readyz`. */
  role: string;
  /** Other threads' metrics, merged into `/metrics`. */
  metricsSources?: MetricsSources;
  /**
   * False: the operational endpoints are not served by this app but by `createOpsApp`'s, on a port of
   * their own (`PDS_OPS_PORT`), and answer 404 here (docs/operations.md, "Health").
   */
  ops?: boolean;
}

/** The app of the service's port: every router is mounted on it, and (unless `ops` is false) the operational endpoints. */
export function createHttpApp(options: HttpAppOptions): App {
  const app = sharedApp(options);
  if (options.ops !== false) app.use(opsRouter(options).routes());
  app.use(methodNotAllowed());
  return app;
}

/** The operational endpoints alone, for the ops port (`PDS_OPS_PORT`): the same request ids, log, metrics and problems. */
export function createOpsApp(options: HttpAppOptions): App {
  const app = sharedApp(options);
  app.use(opsRouter(options).routes());
  app.use(methodNotAllowed());
  return app;
}

/**
 * After every router: a method a path does not serve answers 405 with the path's `Allow`, whatever
 * the method (`TRACE`, `PROPFIND`, …): the router's own default answers 501 for a method outside its
 * list, which says the server cannot do it rather than that this resource does not. A path no router
 * serves stays a 404 (docs/partner-api.md, "Errors and limits").
 */
function methodNotAllowed(): Koa.Middleware<AppState> {
  return createRouter({ methods: [...METHODS] }).allowedMethods() as Koa.Middleware<AppState>;
}

/** The middleware every app of the process shares: request id, access log and latency, problems. */
function sharedApp(options: HttpAppOptions): App {
  const { logger, registry } = options;
  const KoaApp = require('koa') as typeof Koa;
  const app: App = new KoaApp<AppState>();

  // One histogram for the process's apps (the service's port and the ops port).
  const duration =
    (registry.getSingleMetric('http_request_duration_seconds') as Histogram<'method' | 'route' | 'status'>) ??
    new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Duration of HTTP requests in seconds, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'] as const,
      registers: [registry],
    });

  // Errors Koa itself reports (e.g. a failing response stream); without a listener it prints to stderr.
  app.on('error', (error: unknown, ctx?: AppContext) => {
    (ctx?.state?.log ?? logger).error({ err: error }, 'unhandled error in HTTP response');
  });

  app.use(async (ctx, next) => {
    const incoming = ctx.get('X-Request-Id');
    const requestId = REQUEST_ID.test(incoming) ? incoming : randomUUID();
    const correlation = ctx.get('X-Correlation-Id');
    ctx.state = new RequestState(logger, requestId, REQUEST_ID.test(correlation) ? correlation : requestId);
    ctx.set('X-Request-Id', requestId);
    await next();
  });

  // Access log and latency histogram. Only the path is logged: query strings may carry secrets.
  app.use(async (ctx, next) => {
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = routeLabel(ctx);
      const status = ctx.status;
      duration.observe({ method: ctx.method, route, status: String(status) }, seconds);
      const level = accessLogLevel(ctx);
      if (logger.isLevelEnabled(level))
        ctx.state.log[level](
          {
            method: ctx.method,
            path: loggablePath(ctx.path),
            route,
            status,
            duration_ms: Math.round(seconds * 1e6) / 1e3,
          },
          'request',
        );
    }
  });

  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      const problem = toProblem(error, ctx.state.requestId);
      if (problem.status >= 500) ctx.state.log.error({ err: error }, 'request failed');
      if (ctx.headerSent || !ctx.writable) return;
      sendProblem(ctx, problem);
      return;
    }
    // Nothing answered (no route) or a router set an error status without a body (405).
    if (ctx.status >= 400 && ctx.body == null) {
      // The path as logged: a credential sent in it is not quoted back.
      const detail =
        ctx.status === 404 ? `Nothing is served at ${ctx.method} ${loggablePath(ctx.path)}.` : undefined;
      const headers: Record<string, string> = {};
      const allow = ctx.response.get('Allow');
      if (allow) headers['Allow'] = allow;
      sendProblem(ctx, new HttpProblem(ctx.status, { detail, headers }));
    }
  });
  return app;
}

/** `/healthz`, `/readyz` and `/metrics` (docs/operations.md, "Health"). */
function opsRouter(options: HttpAppOptions): Router<AppState> {
  const { registry, readiness, role, metricsSources } = options;
  // The probes answer with JSON text: Koa tests an object body against `Response`, `Blob` and
  // `ReadableStream`, and the first use of those globals loads undici (17 ms), which a start then paid
  // before its first /readyz. The first partner answer pays it, unless the warm-up below came first
  // (docs/read-side.md, "Start-up and restart").
  const json = (ctx: AppContext, value: unknown) => {
    ctx.type = 'application/json';
    ctx.body = JSON.stringify(value);
  };
  setTimeout(() => globalThis.Response, 1_000).unref();
  const ops = createRouter();
  ops.get('/healthz', (ctx) => json(ctx, { status: 'ok' }));
  ops.get('/readyz', async (ctx) => {
    const report = await readiness.check();
    if (Object.keys(report.errors).length > 0) {
      ctx.state.log.warn({ errors: report.errors }, 'readiness check failed');
    }
    ctx.status = report.ready ? 200 : 503;
    const degraded = report.degraded.length > 0;
    json(ctx, {
      status: report.ready ? (degraded ? 'degraded' : 'ready') : report.stopping ? 'stopping' : 'not_ready',
      role,
      checks: report.checks,
      // Every failing check, by what it means: `failing` keeps the process out of traffic, `degraded` not.
      ...(report.ready ? {} : { failing: report.failing }),
      ...(degraded ? { degraded: report.degraded } : {}),
    });
  });
  ops.get('/metrics', async (ctx) => {
    ctx.body = metricsSources ? await metricsSources.render(registry) : await registry.metrics();
    ctx.type = registry.contentType;
  });
  return ops;
}
