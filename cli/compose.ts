/**
 * Composition root: the one place that picks adapters and wires the service together.
 *
 * A process runs one role. It opens the event store, then starts the components of its role in
 * order (each gets the shared `ServiceContext`), and stops them in reverse. The HTTP listener is
 * always the last component: every router is mounted before the first request arrives, and on stop
 * it is the first to go, draining requests while the rest is still up. Every role serves the
 * operational endpoints, so each process can carry a container healthcheck: on its port, or with
 * `PDS_OPS_PORT` on that port only, whose listener starts just before the service's and stops after it.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import {
  type App,
  createHttpApp,
  createMetricsRegistry,
  createOpsApp,
  createReadiness,
  type Readiness,
  SECURITY_HEADERS,
} from '../api/http.ts';
import { MetricsSources } from '../api/metrics-sources.ts';
import { type CustomerData, createCustomerData } from '../application/customer-data.ts';
import type { CustomerKeyStore } from '../application/customer-keys.ts';
import { tightenDataDir } from '../application/private-files.ts';
import { protectCustomerData } from '../application/protected-event-store.ts';
import type { Supervisor } from '../application/supervisor.ts';
import { type EventStoreOptions, openEventStore } from '../eventstore/index.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { OpenReadStoreOptions } from '../projections/index.ts';
import type { ReadStore } from '../projections/read-store.ts';
import type { ResolvedConfig } from './config.ts';
import { describeConfig } from './config-describe.ts';
import { finishErasures, openKeyStore, withErasureLedger } from './customer-keys.ts';
import { configuredLogger } from './logger.ts';
import type { ComponentRole, Role } from './roles.ts';
import { createSupervisor } from './supervision.ts';

// Not `import … from 'node:http'`: as an ES module it loads undici for its WebSocket export, 38 ms of
// every start (docs/read-side.md, "Start-up and restart").
const { createServer } = process.getBuiltinModule('node:http');

export { type ComponentRole, ROLES, type Role } from './roles.ts';

export interface ServiceContext {
  config: ResolvedConfig;
  role: Role;
  logger: Logger;
  registry: Registry;
  /** Other threads' metrics, shown with this one's at `/metrics`. */
  metricsSources: MetricsSources;
  readiness: Readiness;
  /** The Koa app; API components mount their routers here (a role thread has none: reading it throws). */
  readonly app: App;
  /** The log as every component reads and writes it: customers' personal data sealed and opened. */
  eventStore: EventStore;
  /** Seals, opens and erases customers' personal data (docs/operations.md, "Customer data"). */
  customerData: CustomerData;
  /** Opens the read store a URL names (`PDS_READ_STORE`, `PDS_DISPATCHER_STORE`). */
  openReadStore(url: string, options: OpenReadStoreOptions): Promise<ReadStore>;
  /** Keeps the process's log subscriptions alive and reports their health (`supervision.ts`). */
  supervisor: Supervisor;
}

export interface Component {
  /** For logs. */
  name: string;
  roles: readonly ComponentRole[];
  start(ctx: ServiceContext): Promise<void> | void;
  stop(): Promise<void> | void;
}

export interface Service {
  readonly role: Role;
  readonly logger: Logger;
  readonly app: App;
  readonly registry: Registry;
  readonly readiness: Readiness;
  /** Names of the components this process runs, in start order. */
  readonly components: readonly string[];
  /** Opens the event store, starts the components; resolves with the port the HTTP server is bound to (0: none). */
  start(): Promise<number>;
  /** The port the operational endpoints are bound to when they have one of their own (`PDS_OPS_PORT`), once started; else 0. */
  opsPort(): number;
  /** Graceful and idempotent: drains HTTP requests (up to a deadline), stops components, closes the store. */
  stop(): Promise<void>;
}

export interface ServiceOptions {
  role?: Role;
  /** Components of the roles, in start order; the HTTP listener is appended after them. */
  components?: readonly Component[];
  /** Defaults to a logger on stdout at the configured level and format (`logger.ts`). */
  logger?: Logger;
  /** How long `stop()` waits for in-flight requests before closing their connections. */
  stopTimeoutMs?: number;
  /** False: no HTTP listener (a role thread, which reports through its parent's). */
  listen?: boolean;
  /**
   * How this process (or thread) connects to the embedded store: who checkpoints its WAL, which appends
   * share a commit; its commits reach the disk as `PDS_EVENT_STORE_SYNC` says unless this says otherwise.
   */
  eventStoreOptions?: EventStoreOptions;
  /** Opens the event store `PDS_EVENT_STORE` names (tests wrap it to inject faults). */
  openEventStore?: (url: string, options: EventStoreOptions) => Promise<EventStore>;
  /** Opens the read stores `PDS_READ_STORE` and `PDS_DISPATCHER_STORE` name (tests wrap them to inject faults). */
  openReadStore?: (url: string, options: OpenReadStoreOptions) => Promise<ReadStore>;
  /** Opens the customer key store `PDS_KEY_STORE` names (tests wrap it to inject faults). */
  openKeyStore?: (url: string) => Promise<CustomerKeyStore>;
}

/** `projections/index.ts`'s, loaded by the first component that opens a read store. */
async function openReadStore(url: string, options: OpenReadStoreOptions): Promise<ReadStore> {
  return (await import('../projections/index.ts')).openReadStore(url, options);
}

/**
 * An HTTP server as a component: the service's port (`app` is the context's), or the ops port's.
 * `stop()` stops accepting connections, closes idle keep-alive connections as they become idle, and
 * after the deadline closes whatever is still open.
 */
function httpListener(
  name: string,
  port: number,
  stopTimeoutMs: number,
  appOf: (ctx: ServiceContext) => App,
): Component & { port(): number } {
  let server: Server | undefined;
  return {
    name,
    roles: ['api', 'projector', 'dispatcher'],
    async start(ctx) {
      // Slow clients are cut off: headers within 8 s, the whole request within 12 s (Node's defaults,
      // 60 s and 300 s checked every 30 s, let a half-sent body hold a connection for minutes).
      // requestTimeout bounds receiving the request only, not a slow handler. headersTimeout stays
      // above keepAliveTimeout (5 s): at or below it, the check can close an idle keep-alive
      // connection just as a client reuses it, and that request fails.
      const s = createServer(
        {
          headersTimeout: 8_000,
          requestTimeout: 12_000,
          keepAliveTimeout: 5_000,
          connectionsCheckingInterval: 1_000,
        },
        appOf(ctx).callback(),
      );
      s.on('clientError', answerClientError);
      // Node hands a CONNECT to no request handler and, without this, closes the connection unanswered.
      s.on('connect', (_req, socket: Duplex) => answerRaw(socket, 405, METHOD_REFUSAL));
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.listen(port, () => {
          s.off('error', reject);
          resolve();
        });
      });
      server = s;
    },
    async stop() {
      const s = server;
      if (!s?.listening) return;
      const closed = new Promise<void>((resolve) => s.close(() => resolve()));
      s.closeIdleConnections();
      const sweep = setInterval(() => s.closeIdleConnections(), 50);
      const deadline = setTimeout(() => s.closeAllConnections(), stopTimeoutMs);
      try {
        await closed;
      } finally {
        clearInterval(sweep);
        clearTimeout(deadline);
      }
    },
    port() {
      return (server?.address() as AddressInfo | null)?.port ?? port;
    },
  };
}

/**
 * A request Node refuses before the app sees it (headers too large, a malformed request line, a
 * timeout) gets a problem document like every other refusal, instead of Node's bare answer. A method
 * Node's parser does not know (`TRACK`) is a 405, as a method a path does not serve is in the app.
 */
function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  if (!socket.writable || (err.code === 'ECONNRESET' && !socket.readable)) {
    socket.destroy();
    return;
  }
  if (err.code === 'HPE_INVALID_METHOD') {
    answerRaw(socket, 405, METHOD_REFUSAL);
    return;
  }
  const [status, title, code] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'headers_too_large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'request_timeout']
        : [400, 'Bad Request', 'malformed_request'];
  answerRaw(socket, status, {
    title,
    code,
    detail: `the request was refused before it was read: ${title.toLowerCase()}`,
  });
}

/**
 * A method no route serves, on a request whose target Node did not read (CONNECT names a host, not a
 * path): its `Allow` names the methods the service's routes serve.
 */
const METHOD_REFUSAL = {
  title: 'Method Not Allowed',
  code: 'method_not_allowed',
  detail: 'this service serves GET, HEAD, OPTIONS, POST, PUT, PATCH and DELETE only; it is no proxy',
  headers: { Allow: 'GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE' },
};

/** A problem document written on the socket, which then closes: with the security headers of every problem. */
function answerRaw(
  socket: Duplex,
  status: number,
  problem: { title: string; code: string; detail: string; headers?: Record<string, string> },
): void {
  const body = JSON.stringify({
    type: 'about:blank',
    title: problem.title,
    status,
    detail: problem.detail,
    code: problem.code,
  });
  const headers = { ...SECURITY_HEADERS, ...problem.headers };
  socket.end(
    `HTTP/1.1 ${status} ${problem.title}\r\nContent-Type: application/problem+json\r\n` +
      Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('') +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * The data dir holds customers' data, key hashes and the secrets (docs/operations.md, "Secrets"): one
 * that other users can read (made before, by hand, or by an image) loses their access at start, and
 * the log says what changed. A failure to change it is said, and the start goes on.
 */
async function keepDataDirPrivate(dir: string, logger: Logger): Promise<void> {
  try {
    const { dirModeWas, files } = await tightenDataDir(dir);
    if (dirModeWas === null && files.length === 0) return;
    logger.warn(
      { data_dir: dir, dir_mode_was: dirModeWas === null ? null : dirModeWas.toString(8), files },
      'the data dir was open to other users: their access is taken away (directory 0700, files 0600)',
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    logger.warn({ err: error, data_dir: dir }, "cannot take other users' access away from the data dir");
  }
}

export function createService(config: ResolvedConfig, options: ServiceOptions = {}): Service {
  const role = options.role ?? 'all';
  const logger = (options.logger ?? configuredLogger(config)).child({ role });
  const registry = createMetricsRegistry();
  const readiness = createReadiness();
  const metricsSources = new MetricsSources();
  const serves = options.listen !== false;
  // A role thread serves no HTTP: it builds no app, and so never loads Koa.
  // With PDS_OPS_PORT the operational endpoints are served on their port only (docs/operations.md, "Health").
  const opsApart = serves && config.opsPort !== null;
  const app = serves
    ? createHttpApp({ logger, registry, readiness, role, metricsSources, ops: !opsApart })
    : undefined;
  const opsApp = opsApart ? createOpsApp({ logger, registry, readiness, role, metricsSources }) : undefined;
  const appOf = (): App => {
    if (!app) throw new Error(`this ${role} service serves no HTTP: none of its components may mount routes`);
    return app;
  };
  const supervisor = createSupervisor(logger, readiness, registry, role);
  const stopTimeoutMs = options.stopTimeoutMs ?? 8_000;
  const listener = serves ? httpListener('http', config.port, stopTimeoutMs, (ctx) => ctx.app) : undefined;
  // Started before the service's port and stopped after it: probes see the whole drain.
  const opsListener = opsApp
    ? httpListener('ops-http', config.opsPort ?? 0, stopTimeoutMs, () => opsApp)
    : undefined;
  const listeners = [...(opsListener ? [opsListener] : []), ...(listener ? [listener] : [])];
  const components = [...(options.components ?? []), ...listeners].filter(
    (component) => role === 'all' || component.roles.includes(role),
  );

  let eventStore: EventStore | undefined;
  let keyStore: CustomerKeyStore | undefined;
  let storeOpen = false;
  const started: Component[] = [];
  let starting: Promise<number> | undefined;
  let stopping: Promise<void> | undefined;

  async function shutdown(): Promise<void> {
    readiness.markStopping();
    for (const component of started.splice(0).reverse()) {
      try {
        await component.stop();
        logger.debug({ component: component.name }, 'component stopped');
      } catch (error) {
        logger.error({ err: error, component: component.name }, 'component failed to stop');
      }
    }
    await keyStore?.close().catch((error) => logger.error({ err: error }, 'key store failed to close'));
    keyStore = undefined;
    if (eventStore && storeOpen) {
      storeOpen = false;
      try {
        await eventStore.close();
      } catch (error) {
        logger.error({ err: error }, 'event store failed to close');
      }
    }
  }

  async function run(): Promise<number> {
    // The configuration once, by the process that read it: a role thread runs on the same one.
    if (serves)
      logger.info(
        { config: describeConfig(config), components: components.map((c) => c.name) },
        `starting pds (role ${role})`,
      );
    else logger.info({ components: components.map((c) => c.name) }, `starting the ${role} thread`);
    // The main thread's: a role thread shares its process and its data dir.
    if (serves) await keepDataDirPrivate(config.dataDir, logger);
    try {
      const log = await (options.openEventStore ?? openEventStore)(config.eventStoreUrl, {
        synchronous: config.eventStoreSync,
        ...options.eventStoreOptions,
      });
      eventStore = log;
      storeOpen = true;
      const keys = await (options.openKeyStore ?? openKeyStore)(config.keyStoreUrl);
      keyStore = keys;
      // The ledger below the key ring's cache, so that the ring's destroy forgets keys it has recorded.
      const customerData = createCustomerData(await withErasureLedger(config, keyStore), config.secretKey);
      eventStore = protectCustomerData(log, customerData, { retryDelay: (n) => supervisor.delay(n) });
      // The process that serves the erase route finishes what an interrupted one began.
      if (serves && (role === 'all' || role === 'api'))
        await finishErasures(customerData, eventStore, logger);
      readiness.add('event_store', () => storeOpen);
      // Sealing is on the append path and opening on every read of customer data: one indexed read.
      readiness.add('key_store', async () => {
        await keys.key('ck_readiness');
        return true;
      });
      const ctx: ServiceContext = {
        config,
        role,
        logger,
        registry,
        metricsSources,
        readiness,
        get app() {
          return appOf();
        },
        eventStore,
        customerData,
        openReadStore: options.openReadStore ?? openReadStore,
        supervisor,
      };
      for (const component of components) {
        if (stopping) break;
        await component.start(ctx);
        started.push(component);
        logger.debug({ component: component.name }, 'component started');
      }
    } catch (error) {
      await shutdown();
      throw error;
    }
    return listener?.port() ?? 0;
  }

  return {
    role,
    logger,
    get app() {
      return appOf();
    },
    registry,
    readiness,
    components: components.map((c) => c.name),
    opsPort: () => opsListener?.port() ?? 0,
    start() {
      if (starting) throw new Error('service already started');
      starting = run();
      return starting;
    },
    stop() {
      stopping ??= (async () => {
        // A stop during start waits for the start to settle, then undoes whatever it did.
        await starting?.catch(() => undefined);
        await shutdown();
        logger.info('pds stopped');
      })();
      return stopping;
    },
  };
}
