/**
 * A real service for API tests: the composition root on a temporary embedded store, every default
 * component, an injectable clock, and the logs captured (to check that no secret is ever logged).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { ExecutionContext } from 'ava';
import { defaultComponents } from '../../cli/components.ts';
import { createService, type Role, type Service } from '../../cli/compose.ts';
import { loadConfig } from '../../cli/config.ts';
import { createLogger } from '../../cli/logger.ts';
import { type Clock, systemClock } from '../../domain/clock.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';

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
}

export async function startService(
  t: ExecutionContext,
  options: { clock?: Clock; env?: Record<string, string>; role?: Role; dataDir?: string } = {},
): Promise<TestService> {
  // A given data dir belongs to the caller (e.g. to restart on the same events); a new one is removed.
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(tmpdir(), 'pds-api-')));
  const config = await loadConfig({ PDS_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'debug', ...options.env });
  let logged = '';
  const sink = new Writable({
    write(chunk, _enc, done) {
      logged += chunk.toString();
      done();
    },
  });
  const service = createService(config, {
    role: options.role ?? 'all',
    components: defaultComponents(options.clock ?? systemClock),
    logger: createLogger('debug', sink),
    stopTimeoutMs: 1_000,
  });
  const port = await service.start();
  const base = `http://127.0.0.1:${port}`;
  const opened: EventStore[] = [];
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
  };
}
