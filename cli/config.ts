/**
 * Service configuration (README, "Configuration"), read from the environment.
 *
 * `parseConfig` is pure: it validates every variable and fills the defaults, leaving the secrets that
 * live in the data dir (operator token, and the secret key in embedded mode) as `null`.
 * `loadConfig` then creates the data dir and reads those secrets from it, generating them on first start.
 * Any problem becomes one `ConfigError` whose message is a single line naming the variable.
 */
import { type KeyObject, randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { storesOutsideDataDir } from './config-stores.ts';
import {
  backupKeep,
  ConfigError,
  cacheMiB,
  checkToken,
  dataDir,
  defaultDeliveryThreads,
  deliveryLogRetention,
  deliveryShards,
  deliveryThreads,
  dispatcherStoreUrl,
  type EventStoreSync,
  eventStoreSync,
  eventStoreUrl,
  flag,
  keyStoreUrl,
  type LogFormat,
  type LogLevel,
  leaseDuration,
  logFormat,
  logLevel,
  maxInFlight,
  operatorToken,
  parseSecretKey,
  port,
  positiveDuration,
  queueWindow,
  readStoreUrl,
  retrySchedule,
  sandboxSize,
  secretKey,
} from './config-values.ts';
import { connectionFileIssues } from './connection-files.ts';
import { formatDuration, parseDuration } from './durations.ts';
import { DEFAULT_SANDBOX_SIZE } from './sandbox/sizes.ts';
import { readOrCreateSecret } from './secret-file.ts';

export const OPERATOR_TOKEN_FILE = 'operator-token';
export const SECRET_KEY_FILE = 'secret-key';

/** Configuration as the environment states it; secrets kept in the data dir are still `null`. */
export interface Config {
  port: number;
  /**
   * `PDS_OPS_PORT`: when set, `/healthz`, `/readyz` and `/metrics` are served on this port only (and
   * answer 404 on `port`), so the public port shows no internals (docs/operations.md, "Health").
   */
  opsPort: number | null;
  /** Absolute path. */
  dataDir: string;
  /** `sqlite:<file>` or an EventStoreDB/KurrentDB connection string. */
  eventStoreUrl: string;
  /** True when the event store is the embedded SQLite one (single machine, development, sandbox, CI). */
  embedded: boolean;
  /**
   * When the embedded store's commits reach the disk: `full` (an acknowledged append survives a power
   * cut) or `normal` (a killed process); docs/operations.md, "Durability of the embedded event store".
   */
  eventStoreSync: EventStoreSync;
  /**
   * `sqlite:<file>` (the embedded default, `<dataDir>/read.db`), `memory`, or a `mongodb://` /
   * `mongodb+srv://` URL.
   */
  readStoreUrl: string;
  /** SQLite's page cache for the read store file, in MiB: the read side's memory knob. */
  readStoreCacheMiB: number;
  /**
   * Where the dispatcher keeps its working state (pending deliveries, abandonment deadlines): a file of
   * its own beside a SQLite read store (`<dataDir>/dispatcher.db`), so that a projector's long commits
   * never make a delivery wait for the read store's write lock; otherwise the read store itself.
   */
  dispatcherStoreUrl: string;
  /**
   * Where customers' data keys are kept (docs/operations.md, "Customer data"): `sqlite:<file>`
   * (`<dataDir>/keys.db` by default), or a `mongodb://` URL, the default beside a MongoDB read store.
   */
  keyStoreUrl: string;
  /**
   * Role `all` runs the dispatcher (webhooks, abandonment timers) on a thread of its own, with its own
   * connections to the embedded files, so that API load or a rebuild does not stall deliveries.
   */
  dispatcherThread: boolean;
  /**
   * Role `all` runs the projector on a thread of its own, with its own connections to the event store
   * and the read store file, so that projecting an append or a rebuild does not take the APIs' core.
   */
  projectorThread: boolean;
  /** How long the projector's lease holds unrenewed (docs/read-side.md, "One projector at a time"). */
  projectorLeaseMs: number;
  /** `null`: kept in `<dataDir>/operator-token`, generated on first start. */
  operatorToken: string | null;
  /** Console sessions: absolute lifetime and idle timeout (docs/operations.md, "The console"). */
  consoleSessionMs: number;
  consoleIdleMs: number;
  abandonAfterMs: number;
  webhookTimeoutMs: number;
  webhookRetryScheduleMs: readonly number[];
  /** Webhook requests a delivery worker has open at once (docs/webhooks.md, "Scale"). */
  webhookMaxInFlight: number;
  /** Delivery workers: role `all`'s threads, dispatchers' leased shards (docs/webhooks.md, "Scale"). */
  webhookDeliveryThreads: number;
  webhookDeliveryShards: number;
  /** `PDS_WEBHOOK_QUEUE_WINDOW`: delivery queues the worker holds in memory (docs/webhooks.md, "Scale"). */
  webhookQueueWindow: number;
  allowPrivateWebhookUrls: boolean;
  /** How long an `Idempotency-Key` binds its request and answer (docs/operations.md, "Retention"). */
  idempotencyTtlMs: number;
  /** How long finished webhook deliveries are kept (docs/operations.md, "Retention"). */
  deliveryLogRetentionMs: number;
  /**
   * When the admin API marks a subscription failing (its oldest queued delivery older) and a projection
   * lagging (its lag longer): docs/operations.md, "Health".
   */
  alertOldestQueuedMs: number;
  alertProjectionLagMs: number;
  /** AES-256-GCM key. `null` (embedded mode only): kept in `<dataDir>/secret-key`, generated on first start. */
  secretKey: KeyObject | null;
  sandbox: boolean;
  /** Stores in the sandbox (the rest of its data scales with them). */
  sandboxSize: number;
  /** Scheduled backups of the embedded store (docs/operations.md, "Backups"): where, `null` for none. */
  backupDir: string | null;
  backupEveryMs: number;
  /** How many of the newest scheduled backups are kept. */
  backupKeep: number;
  logLevel: LogLevel;
  /**
   * `PDS_LOG_FORMAT`, else pretty when the process's stdout is a terminal and JSON lines otherwise:
   * decided once, by the process that reads the environment, for its role threads too, whose stdout is
   * never a terminal (docs/operations.md, "Logs").
   */
  logFormat: LogFormat;
  /** Pretty logs in colour: on a terminal, unless `NO_COLOR` is set. */
  logColors: boolean;
}

/** What the process's stdout is: a terminal (`process.stdout.isTTY`), or a pipe, a file, a container log. */
export type Terminal = { isTTY?: boolean };

/** Where a secret came from, so the start banner can say so without showing it. */
export type SecretSource =
  | { kind: 'env'; variable: string }
  | { kind: 'generated'; file: string }
  | { kind: 'stored'; file: string };

/** Configuration with every secret present: what the service runs on. */
export interface ResolvedConfig extends Omit<Config, 'operatorToken' | 'secretKey'> {
  operatorToken: string;
  operatorTokenSource: SecretSource;
  /** A KeyObject rather than bytes, so that printing the config cannot reveal it. */
  secretKey: KeyObject;
  secretKeySource: SecretSource;
}

export type Env = Readonly<Record<string, string | undefined>>;

export {
  ConfigError,
  type ConfigIssue,
  EVENT_STORE_SYNC_MODES,
  type EventStoreSync,
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFormat,
  type LogLevel,
  parseSecretKey,
  redactUrl,
} from './config-values.ts';
export { formatDuration, parseDuration };

const envSchema = z.object({
  PORT: port.optional(),
  PDS_OPS_PORT: port.optional(),
  PDS_DATA_DIR: dataDir.optional(),
  PDS_EVENT_STORE: eventStoreUrl.optional(),
  PDS_EVENT_STORE_SYNC: eventStoreSync.optional(),
  PDS_READ_STORE: readStoreUrl.optional(),
  PDS_READ_STORE_CACHE_MIB: cacheMiB.optional(),
  PDS_DISPATCHER_STORE: dispatcherStoreUrl.optional(),
  PDS_KEY_STORE: keyStoreUrl.optional(),
  PDS_DISPATCHER_THREAD: flag.optional(),
  PDS_PROJECTOR_THREAD: flag.optional(),
  PDS_PROJECTOR_LEASE: leaseDuration.optional(),
  PDS_OPERATOR_TOKEN: operatorToken.optional(),
  PDS_CONSOLE_SESSION_LIFETIME: positiveDuration.optional(),
  PDS_CONSOLE_SESSION_IDLE: positiveDuration.optional(),
  PDS_ABANDON_AFTER: positiveDuration.optional(),
  PDS_WEBHOOK_TIMEOUT: positiveDuration.optional(),
  PDS_WEBHOOK_RETRY_SCHEDULE: retrySchedule.optional(),
  PDS_WEBHOOK_MAX_IN_FLIGHT: maxInFlight.optional(),
  PDS_WEBHOOK_DELIVERY_THREADS: deliveryThreads.optional(),
  PDS_WEBHOOK_DELIVERY_SHARDS: deliveryShards.optional(),
  PDS_WEBHOOK_QUEUE_WINDOW: queueWindow.optional(),
  PDS_ALLOW_PRIVATE_WEBHOOK_URLS: flag.optional(),
  PDS_IDEMPOTENCY_TTL: positiveDuration.optional(),
  PDS_DELIVERY_LOG_RETENTION: deliveryLogRetention.optional(),
  PDS_ALERT_OLDEST_QUEUED: positiveDuration.optional(),
  PDS_ALERT_PROJECTION_LAG: positiveDuration.optional(),
  PDS_SECRET_KEY: secretKey.optional(),
  PDS_SANDBOX: flag.optional(),
  PDS_SANDBOX_SIZE: sandboxSize.optional(),
  PDS_BACKUP_DIR: dataDir.optional(),
  PDS_BACKUP_EVERY: positiveDuration.optional(),
  PDS_BACKUP_KEEP: backupKeep.optional(),
  LOG_LEVEL: logLevel.optional(),
  PDS_LOG_FORMAT: logFormat.optional(),
});

/** The variables this module reads, in the order of the README's configuration table. */
export const CONFIG_VARIABLES = Object.keys(envSchema.shape) as readonly (keyof typeof envSchema.shape)[];

export const DEFAULTS = {
  port: 8080,
  dataDir: './data',
  /** Without an embedded event store (several processes), each process keeps its own copy. */
  readStoreUrl: 'memory',
  readStoreFile: 'read.db',
  dispatcherStoreFile: 'dispatcher.db',
  keyStoreFile: 'keys.db',
  eventStoreSync: 'full',
  readStoreCacheMiB: 32,
  projectorLease: '15s',
  consoleSessionLifetime: '8h',
  consoleSessionIdle: '30m',
  abandonAfter: '6h',
  webhookTimeout: '15s',
  webhookRetrySchedule: '0s,5s,5m,30m,2h,5h,10h,10h',
  webhookMaxInFlight: 256,
  webhookDeliveryShards: 16,
  webhookQueueWindow: 2_000,
  idempotencyTtl: '24h',
  deliveryLogRetention: '720h',
  alertOldestQueued: '15m',
  alertProjectionLag: '1m',
  backupEvery: '24h',
  backupKeep: 7,
  logLevel: 'info',
} as const;

/**
 * Validates the environment and fills the defaults. Pure: reads no file; the log format's default
 * follows `terminal` (none: not a terminal). Throws `ConfigError`.
 */
export function parseConfig(env: Env, terminal: Terminal = {}): Config {
  // An empty variable counts as unset, as `PORT=` in a compose file or a shell usually means.
  const present: Record<string, string> = {};
  for (const name of CONFIG_VARIABLES) {
    const value = env[name]?.trim();
    if (value) present[name] = value;
  }
  const result = envSchema.safeParse(present);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((issue) => ({ variable: String(issue.path[0]), problem: issue.message })),
    );
  }
  const v = result.data;
  const dir = v.PDS_DATA_DIR ?? path.resolve(DEFAULTS.dataDir);
  const eventStore = v.PDS_EVENT_STORE ?? `sqlite:${path.join(dir, 'events.db')}`;
  const embedded = eventStore.startsWith('sqlite:');
  // Several processes would each generate secrets of their own: a split deployment gives both.
  const missing = [];
  if (!embedded && !v.PDS_SECRET_KEY) {
    missing.push({
      variable: 'PDS_SECRET_KEY',
      problem:
        'required when PDS_EVENT_STORE is not embedded SQLite: 32 bytes as base64 or hex (e.g. `openssl rand -base64 32`)',
    });
  }
  if (!embedded && !v.PDS_OPERATOR_TOKEN) {
    missing.push({
      variable: 'PDS_OPERATOR_TOKEN',
      problem: 'required when PDS_EVENT_STORE is not embedded SQLite: at least 16 bearer-token characters',
    });
  }
  if (embedded && eventStore === 'sqlite::memory:' && v.PDS_DISPATCHER_THREAD === true) {
    missing.push({
      variable: 'PDS_DISPATCHER_THREAD',
      problem: 'a dispatcher thread needs an event store file it can open too, not sqlite::memory:',
    });
  }
  const readStore =
    v.PDS_READ_STORE ??
    (embedded ? `sqlite:${path.join(dir, DEFAULTS.readStoreFile)}` : DEFAULTS.readStoreUrl);
  // A thread opens the files itself: an in-memory database is its opener's alone.
  const sharedReadStore = readStore !== 'memory' && readStore !== 'sqlite::memory:';
  if (v.PDS_PROJECTOR_THREAD === true && (!sharedReadStore || eventStore === 'sqlite::memory:')) {
    missing.push({
      variable: 'PDS_PROJECTOR_THREAD',
      problem:
        'a projector thread needs an event store and a read store it can open too, not memory or sqlite::memory:',
    });
  }
  const servicePort = v.PORT ?? DEFAULTS.port;
  if (v.PDS_OPS_PORT !== undefined && v.PDS_OPS_PORT !== 0 && v.PDS_OPS_PORT === servicePort) {
    missing.push({
      variable: 'PDS_OPS_PORT',
      problem: `must differ from PORT (${servicePort}): the operational endpoints get a port of their own`,
    });
  }
  if (v.PDS_BACKUP_DIR && (!embedded || `${v.PDS_BACKUP_DIR}${path.sep}`.startsWith(`${dir}${path.sep}`))) {
    missing.push({
      variable: 'PDS_BACKUP_DIR',
      problem: embedded
        ? `must be outside the data dir ${dir}: a backup beside what it copies is lost with it`
        : 'backs up the embedded store only: back up EventStoreDB and MongoDB with their own tools',
    });
  }
  if (missing.length > 0) throw new ConfigError(missing);
  const config: Config = Object.freeze({
    port: servicePort,
    opsPort: v.PDS_OPS_PORT ?? null,
    dataDir: dir,
    eventStoreUrl: eventStore,
    embedded,
    eventStoreSync: v.PDS_EVENT_STORE_SYNC ?? DEFAULTS.eventStoreSync,
    // Embedded: durable read models beside the events (a separate file, so projector writes never
    // hold the event store's write lock).
    readStoreUrl: readStore,
    readStoreCacheMiB: v.PDS_READ_STORE_CACHE_MIB ?? DEFAULTS.readStoreCacheMiB,
    dispatcherStoreUrl:
      v.PDS_DISPATCHER_STORE ??
      (readStore.startsWith('sqlite:') && readStore !== 'sqlite::memory:'
        ? `sqlite:${path.join(path.dirname(readStore.slice('sqlite:'.length)), DEFAULTS.dispatcherStoreFile)}`
        : readStore),
    keyStoreUrl:
      v.PDS_KEY_STORE ??
      (readStore.startsWith('mongodb')
        ? readStore
        : eventStore === 'sqlite::memory:'
          ? 'sqlite::memory:'
          : `sqlite:${path.join(dir, DEFAULTS.keyStoreFile)}`),
    dispatcherThread: v.PDS_DISPATCHER_THREAD ?? (embedded && eventStore !== 'sqlite::memory:'),
    projectorThread:
      v.PDS_PROJECTOR_THREAD ??
      (embedded && eventStore !== 'sqlite::memory:' && sharedReadStore && readStore.startsWith('sqlite:')),
    projectorLeaseMs: v.PDS_PROJECTOR_LEASE ?? parseDuration(DEFAULTS.projectorLease),
    operatorToken: v.PDS_OPERATOR_TOKEN ?? null,
    consoleSessionMs: v.PDS_CONSOLE_SESSION_LIFETIME ?? parseDuration(DEFAULTS.consoleSessionLifetime),
    consoleIdleMs: v.PDS_CONSOLE_SESSION_IDLE ?? parseDuration(DEFAULTS.consoleSessionIdle),
    abandonAfterMs: v.PDS_ABANDON_AFTER ?? parseDuration(DEFAULTS.abandonAfter),
    webhookTimeoutMs: v.PDS_WEBHOOK_TIMEOUT ?? parseDuration(DEFAULTS.webhookTimeout),
    webhookRetryScheduleMs: Object.freeze(
      v.PDS_WEBHOOK_RETRY_SCHEDULE ?? DEFAULTS.webhookRetrySchedule.split(',').map(parseDuration),
    ),
    webhookMaxInFlight: v.PDS_WEBHOOK_MAX_IN_FLIGHT ?? DEFAULTS.webhookMaxInFlight,
    webhookDeliveryThreads: v.PDS_WEBHOOK_DELIVERY_THREADS ?? defaultDeliveryThreads(),
    webhookDeliveryShards: v.PDS_WEBHOOK_DELIVERY_SHARDS ?? DEFAULTS.webhookDeliveryShards,
    webhookQueueWindow: v.PDS_WEBHOOK_QUEUE_WINDOW ?? DEFAULTS.webhookQueueWindow,
    allowPrivateWebhookUrls: v.PDS_ALLOW_PRIVATE_WEBHOOK_URLS ?? embedded,
    idempotencyTtlMs: v.PDS_IDEMPOTENCY_TTL ?? parseDuration(DEFAULTS.idempotencyTtl),
    deliveryLogRetentionMs: v.PDS_DELIVERY_LOG_RETENTION ?? parseDuration(DEFAULTS.deliveryLogRetention),
    alertOldestQueuedMs: v.PDS_ALERT_OLDEST_QUEUED ?? parseDuration(DEFAULTS.alertOldestQueued),
    alertProjectionLagMs: v.PDS_ALERT_PROJECTION_LAG ?? parseDuration(DEFAULTS.alertProjectionLag),
    secretKey: v.PDS_SECRET_KEY ?? null,
    sandbox: v.PDS_SANDBOX ?? embedded,
    sandboxSize: v.PDS_SANDBOX_SIZE ?? DEFAULT_SANDBOX_SIZE,
    backupDir: v.PDS_BACKUP_DIR ?? null,
    backupEveryMs: v.PDS_BACKUP_EVERY ?? parseDuration(DEFAULTS.backupEvery),
    backupKeep: v.PDS_BACKUP_KEEP ?? DEFAULTS.backupKeep,
    logLevel: v.LOG_LEVEL ?? DEFAULTS.logLevel,
    logFormat: v.PDS_LOG_FORMAT ?? (terminal.isTTY ? 'pretty' : 'json'),
    logColors: terminal.isTTY === true && !env.NO_COLOR,
  });
  const outside = storesOutsideDataDir(config);
  if (config.backupDir !== null && outside.length > 0) {
    throw new ConfigError([
      {
        variable: 'PDS_BACKUP_DIR',
        problem: `backs up the data dir ${dir}, and ${outside.join(', ')} names a store outside it`,
      },
    ]);
  }
  return config;
}

/**
 * What a process of `role` refuses to run with: on EventStoreDB, a key store that is a file of this
 * process (`sqlite:`) unless the process runs every role. Processes of a split deployment each read
 * the sealed events of one log, so they must share one key store: with a file each, one would find
 * no key of what another sealed, nor see its erasures (docs/operations.md, "Customer data"). A
 * process of role `all` is the deployment's one process and owns its file, as on embedded files.
 * Throws `ConfigError`.
 */
export function checkRole(config: Pick<ResolvedConfig, 'embedded' | 'keyStoreUrl'>, role: string): void {
  if (config.embedded || role === 'all' || !config.keyStoreUrl.startsWith('sqlite:')) return;
  throw new ConfigError([
    {
      variable: 'PDS_KEY_STORE',
      problem: `a process of role ${role} on EventStoreDB needs the key store every process shares (a mongodb:// URL), not a file of its own`,
    },
  ]);
}

// ---------------------------------------------------------------------------------------------
// Secrets kept in the data dir

function fileIssue(variable: string, file: string, error: unknown): ConfigError {
  return new ConfigError([
    { variable, problem: `cannot read or create ${file}: ${(error as Error).message}` },
  ]);
}

/**
 * Parses the environment, checks the files the connection strings name (TLS certificates), creates
 * the data dir, and reads (or generates on first start) the operator token and, in embedded mode
 * without `PDS_SECRET_KEY`, the secret key. `terminal`: as `parseConfig`'s. Throws `ConfigError`.
 */
export async function loadConfig(env: Env, terminal: Terminal = {}): Promise<ResolvedConfig> {
  const config = parseConfig(env, terminal);
  const unreadable = [
    ...(await connectionFileIssues('PDS_EVENT_STORE', config.eventStoreUrl)),
    ...(await connectionFileIssues('PDS_READ_STORE', config.readStoreUrl)),
    ...(config.dispatcherStoreUrl === config.readStoreUrl
      ? []
      : await connectionFileIssues('PDS_DISPATCHER_STORE', config.dispatcherStoreUrl)),
  ];
  if (unreadable.length > 0) throw new ConfigError(unreadable);
  try {
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new ConfigError([
      { variable: 'PDS_DATA_DIR', problem: `cannot create ${config.dataDir}: ${(error as Error).message}` },
    ]);
  }

  let operatorToken = config.operatorToken;
  let operatorTokenSource: SecretSource = { kind: 'env', variable: 'PDS_OPERATOR_TOKEN' };
  if (operatorToken === null) {
    const file = path.join(config.dataDir, OPERATOR_TOKEN_FILE);
    const stored = await readOrCreateSecret(file, () => randomBytes(32).toString('base64url')).catch(
      (error: unknown) => {
        throw fileIssue('PDS_OPERATOR_TOKEN', file, error);
      },
    );
    try {
      operatorToken = checkToken(stored.text);
    } catch (error) {
      throw new ConfigError([
        {
          variable: 'PDS_OPERATOR_TOKEN',
          problem: `${file} does not hold a valid token (${(error as Error).message}); delete it to generate a new one`,
        },
      ]);
    }
    operatorTokenSource = { kind: stored.generated ? 'generated' : 'stored', file };
  }

  let secretKey = config.secretKey;
  let secretKeySource: SecretSource = { kind: 'env', variable: 'PDS_SECRET_KEY' };
  if (secretKey === null) {
    const file = path.join(config.dataDir, SECRET_KEY_FILE);
    const stored = await readOrCreateSecret(file, () => randomBytes(32).toString('base64')).catch(
      (error: unknown) => {
        throw fileIssue('PDS_SECRET_KEY', file, error);
      },
    );
    try {
      secretKey = parseSecretKey(stored.text);
    } catch (error) {
      // Never replaced automatically: a new key could not decrypt the secrets already in events.
      throw new ConfigError([
        {
          variable: 'PDS_SECRET_KEY',
          problem: `${file} does not hold a valid key (${(error as Error).message}); restore it from a backup`,
        },
      ]);
    }
    secretKeySource = { kind: stored.generated ? 'generated' : 'stored', file };
  }

  return Object.freeze({ ...config, operatorToken, operatorTokenSource, secretKey, secretKeySource });
}
