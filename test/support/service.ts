/**
 * A real service for API tests: the composition root on a temporary embedded store, every default
 * component, an injectable clock, and the logs captured (to check that no secret is ever logged).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { ExecutionContext } from 'ava';
import type { OperatorAuthenticator } from '../../application/operator-principal.ts';
import {
  createTimers,
  defaultComponents,
  type Threads,
  threadedComponents,
  tickTimers,
} from '../../cli/components.ts';
import { createService, type Role, type Service } from '../../cli/compose.ts';
import { loadConfig } from '../../cli/config.ts';
import { createLogger } from '../../cli/logger.ts';
import { eventStoreOptionsOf } from '../../cli/store-options.ts';
import { type Clock, systemClock } from '../../domain/clock.ts';
import type { EventStoreOptions } from '../../eventstore/index.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import type { OpenReadStoreOptions } from '../../projections/index.ts';
import type { ReadStore } from '../../projections/read-store.ts';
import { validateResponse } from './openapi-validate.ts';

/** A partner API answer: its status, headers and body (parsed JSON; null when empty). */
export interface PartnerReply<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

export interface TestService {
  base: string;
  token: string;
  service: Service;
  dataDir: string;
  /** Every log line written so far, as text. */
  logs(): string;
  /** Opens a second connection to the same event store file, to inspect what was written. */
  openStore(): Promise<EventStore>;
  /** fetch against the service, with the operator token and JSON by default. */
  call(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  /**
   * A partner API request, its answer checked against that API's OpenAPI document (fetched once from
   * `<apiBase>/openapi.json`): the status must be documented for the operation, and the body, media type
   * and required headers must match it, for success and problem answers alike; otherwise it throws.
   * `url` is relative to `apiBase` (`/stores?limit=2`) or absolute (`/partner/brand/v1/stores`); `key`
   * is sent as `Authorization: Bearer <key>` (none when undefined); a body is sent as JSON.
   */
  partnerCall<T = unknown>(
    apiBase: string,
    method: string,
    url: string,
    key: string | undefined,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<PartnerReply<T>>;
  /** The OpenAPI document the service serves at `<apiBase>/openapi.json`. */
  openApiDocument(apiBase: string): Promise<object>;
  /** Runs the timers (abandonment, webhook retries) due on the service's clock; call after moving it. */
  tick(): Promise<number>;
}

export async function startService(
  t: ExecutionContext,
  options: {
    clock?: Clock;
    env?: Record<string, string>;
    role?: Role;
    dataDir?: string;
    /** Wraps the service's event store (e.g. to inject faults: `faulty-store.ts`). */
    wrapStore?: (store: EventStore) => EventStore;
    /** Wraps each read store the service opens, by its URL (e.g. `unreachable-read-store.ts`). */
    wrapReadStore?: (store: ReadStore, url: string) => ReadStore | Promise<ReadStore>;
    /**
     * Role `all` with the dispatcher, the projector or both on these threads of their own (as
     * `npm start` runs them): real time only, and the threads log to stdout at warn
     * (`PDS_TEST_THREAD_LOG=debug` to see more), not into `logs()`.
     */
    threads?: Threads;
    /** Who operator tokens stand for (people of every role); the bootstrap token alone by default. */
    operators?: OperatorAuthenticator;
  } = {},
): Promise<TestService> {
  // A given data dir belongs to the caller (e.g. to restart on the same events); a new one is removed.
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(tmpdir(), 'pds-api-')));
  const logLevel = options.threads ? (process.env.PDS_TEST_THREAD_LOG ?? 'warn') : 'debug';
  const config = await loadConfig({ PDS_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: logLevel, ...options.env });
  if (options.threads && options.clock) throw new Error('a thread runs on real time');
  let logged = '';
  const timers = createTimers();
  const sink = new Writable({
    write(chunk, _enc, done) {
      logged += chunk.toString();
      done();
    },
  });
  const service = createService(config, {
    role: options.role ?? 'all',
    components: options.threads
      ? threadedComponents(options.threads)
      : defaultComponents(options.clock ?? systemClock, timers, options.operators),
    logger: createLogger('debug', sink),
    stopTimeoutMs: 1_000,
    eventStoreOptions: eventStoreOptionsOf(
      { role: options.role ?? 'all' },
      options.threads?.projector !== undefined,
    ),
    ...(options.wrapStore && {
      openEventStore: async (url: string, storeOptions: EventStoreOptions) => {
        const { openEventStore } = await import('../../eventstore/index.ts');
        return (options.wrapStore as (s: EventStore) => EventStore)(await openEventStore(url, storeOptions));
      },
    }),
    ...(options.wrapReadStore && {
      openReadStore: async (url: string, storeOptions: OpenReadStoreOptions) => {
        const { openReadStore } = await import('../../projections/index.ts');
        const wrap = options.wrapReadStore as (s: ReadStore, url: string) => ReadStore | Promise<ReadStore>;
        return wrap(await openReadStore(url, storeOptions), url);
      },
    }),
  });
  const port = await service.start();
  const base = `http://127.0.0.1:${port}`;
  const opened: EventStore[] = [];
  const documents = new Map<string, Promise<object>>();
  const openApiDocument = (apiBase: string): Promise<object> => {
    let document = documents.get(apiBase);
    if (!document) {
      document = fetch(`${base}${apiBase}/openapi.json`).then(async (r) => {
        if (r.status !== 200) throw new Error(`GET ${apiBase}/openapi.json answered ${r.status}`);
        return (await r.json()) as object;
      });
      documents.set(apiBase, document);
    }
    return document;
  };
  t.teardown(async () => {
    await service.stop();
    for (const s of opened) await s.close();
    if (!options.dataDir) await rm(dataDir, { recursive: true, force: true });
  });
  return {
    base,
    token: config.operatorToken,
    service,
    dataDir,
    logs: () => logged,
    async openStore() {
      const s = await openSqliteEventStore(path.join(dataDir, 'events.db'));
      opened.push(s);
      return s;
    },
    call(method, url, body, headers = {}) {
      return fetch(`${base}${url}`, {
        method,
        headers: {
          authorization: `Bearer ${config.operatorToken}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
    },
    openApiDocument,
    tick: () => tickTimers(timers),
    async partnerCall<T>(
      apiBase: string,
      method: string,
      url: string,
      key: string | undefined,
      body?: unknown,
      headers: Record<string, string> = {},
    ): Promise<PartnerReply<T>> {
      const document = await openApiDocument(apiBase);
      const path = url === apiBase || url.startsWith(`${apiBase}/`) ? url : `${apiBase}${url}`;
      const r = await fetch(`${base}${path}`, {
        method,
        headers: {
          ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await r.text();
      const contentType = r.headers.get('content-type');
      let parsed: unknown = text === '' ? null : text;
      if (text !== '' && /[/+]json\b/i.test(contentType ?? '')) {
        try {
          parsed = JSON.parse(text);
        } catch {
          throw new Error(
            `${method} ${path} answered ${r.status} with malformed JSON: ${text.slice(0, 500)}`,
          );
        }
      }
      validateResponse(document, method, path, r.status, parsed, { contentType, headers: r.headers });
      return { status: r.status, headers: r.headers, body: parsed as T };
    },
  };
}
