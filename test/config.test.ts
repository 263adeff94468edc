import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import {
  ConfigError,
  checkRole,
  type Env,
  formatDuration,
  loadConfig,
  OPERATOR_TOKEN_FILE,
  parseConfig,
  parseDuration,
  SECRET_KEY_FILE,
} from '../cli/config.ts';
import { describeConfig } from '../cli/config-describe.ts';
import { defaultDeliveryThreads } from '../cli/config-values.ts';

const KEY_BYTES = Buffer.alloc(32, 7);
const KEY_B64 = KEY_BYTES.toString('base64');
const KEY_HEX = KEY_BYTES.toString('hex');
const OPERATOR_TOKEN = 'operator-token-0123456789';
const ESDB = {
  PDS_EVENT_STORE: 'esdb://localhost:2113?tls=false',
  PDS_SECRET_KEY: KEY_B64,
  PDS_OPERATOR_TOKEN: OPERATOR_TOKEN,
};

async function tempDir(t: { teardown(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-config-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function keyBytes(config: { secretKey: { export(): Buffer } | null }): Buffer {
  return config.secretKey!.export();
}

// ---------------------------------------------------------------------------------------------
// Durations

for (const [text, ms] of [
  ['500ms', 500],
  ['0s', 0],
  ['45s', 45_000],
  ['30m', 1_800_000],
  ['6h', 21_600_000],
  ['1.5h', 5_400_000],
  [' 10 s ', 10_000],
] as const) {
  test(`parseDuration(${JSON.stringify(text)}) = ${ms}`, (t) => {
    t.is(parseDuration(text), ms);
  });
}

for (const text of ['soon', '6', '6d', '-1h', 'h', '1e3ms', '6 hours', '', '6H']) {
  test(`parseDuration refuses ${JSON.stringify(text)}`, (t) => {
    const error = t.throws(() => parseDuration(text), { instanceOf: RangeError });
    t.regex(error.message, /^expected a duration like 6h, 30m, 45s or 500ms, got ".*"$/);
  });
}

test('formatDuration writes the shortest exact form, which parseDuration reads back', (t) => {
  for (const [ms, text] of [
    [0, '0s'],
    [500, '500ms'],
    [1_500, '1500ms'],
    [5_000, '5s'],
    [300_000, '5m'],
    [21_600_000, '6h'],
    [5_400_000, '90m'],
  ] as const) {
    t.is(formatDuration(ms), text);
    t.is(parseDuration(text), ms);
  }
});

// ---------------------------------------------------------------------------------------------
// parseConfig: defaults

test('defaults: embedded mode with everything from README, "Configuration"', (t) => {
  const config = parseConfig({});
  t.deepEqual(config, {
    port: 8080,
    opsPort: null,
    dataDir: path.resolve('data'),
    eventStoreUrl: `sqlite:${path.resolve('data', 'events.db')}`,
    embedded: true,
    eventStoreSync: 'full',
    readStoreUrl: `sqlite:${path.resolve('data', 'read.db')}`,
    readStoreCacheMiB: 32,
    dispatcherStoreUrl: `sqlite:${path.resolve('data', 'dispatcher.db')}`,
    keyStoreUrl: `sqlite:${path.resolve('data', 'keys.db')}`,
    dispatcherThread: true,
    projectorThread: true,
    projectorLeaseMs: 15_000,
    operatorToken: null,
    consoleSessionMs: 8 * 3_600_000,
    consoleIdleMs: 30 * 60_000,
    abandonAfterMs: 6 * 3_600_000,
    webhookTimeoutMs: 15_000,
    webhookRetryScheduleMs: [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    webhookMaxInFlight: 256,
    webhookDeliveryThreads: Math.min(4, Math.max(1, availableParallelism() - 1)),
    webhookDeliveryShards: 16,
    webhookQueueWindow: 2_000,
    allowPrivateWebhookUrls: true,
    idempotencyTtlMs: 24 * 3_600_000,
    deliveryLogRetentionMs: 30 * 24 * 3_600_000,
    alertOldestQueuedMs: 15 * 60_000,
    alertProjectionLagMs: 60_000,
    secretKey: null,
    sandbox: true,
    sandboxSize: 50,
    backupDir: null,
    backupEveryMs: 24 * 3_600_000,
    backupKeep: 7,
    logLevel: 'info',
    logFormat: 'json',
    logColors: false,
  });
  t.true(Object.isFrozen(config));
});

test('the default event store lives in the data dir', (t) => {
  const config = parseConfig({ PDS_DATA_DIR: '/var/lib/pds' });
  t.is(config.dataDir, '/var/lib/pds');
  t.is(config.eventStoreUrl, 'sqlite:/var/lib/pds/events.db');
});

test('the event store syncs at each commit unless told normal (either case)', (t) => {
  t.is(parseConfig({}).eventStoreSync, 'full');
  t.is(parseConfig({ PDS_EVENT_STORE_SYNC: 'normal' }).eventStoreSync, 'normal');
  t.is(parseConfig({ PDS_EVENT_STORE_SYNC: 'NORMAL' }).eventStoreSync, 'normal');
  t.is(parseConfig({ PDS_EVENT_STORE_SYNC: 'Full' }).eventStoreSync, 'full');
  t.is(parseConfig({ PDS_EVENT_STORE_SYNC: '' }).eventStoreSync, 'full');
});

test('embedded mode keeps durable read models in their own file in the data dir; split processes default to memory', (t) => {
  t.is(parseConfig({ PDS_DATA_DIR: '/var/lib/pds' }).readStoreUrl, 'sqlite:/var/lib/pds/read.db');
  t.is(parseConfig(ESDB).readStoreUrl, 'memory');
  // Customers' keys: beside the events, or in the MongoDB read store every process shares.
  t.is(parseConfig({ PDS_DATA_DIR: '/var/lib/pds' }).keyStoreUrl, 'sqlite:/var/lib/pds/keys.db');
  const mongo = 'mongodb://mongo:27017/pds?replicaSet=rs0';
  t.is(parseConfig({ ...ESDB, PDS_READ_STORE: mongo }).keyStoreUrl, mongo);
  t.is(parseConfig({ PDS_KEY_STORE: 'sqlite:/keys/k.db' }).keyStoreUrl, 'sqlite:/keys/k.db');
  t.throws(() => parseConfig({ PDS_KEY_STORE: 'memory' }), { message: /PDS_KEY_STORE/ });
  t.is(parseConfig({ PDS_READ_STORE_CACHE_MIB: '128' }).readStoreCacheMiB, 128);
});

test('on EventStoreDB a process of a split role refuses a key store of its own file; role all owns one', (t) => {
  const own = parseConfig({ ...ESDB, PDS_DATA_DIR: '/var/lib/pds' });
  t.is(own.keyStoreUrl, 'sqlite:/var/lib/pds/keys.db');
  for (const role of ['api', 'projector', 'dispatcher']) {
    const refused = t.throws(() => checkRole(own, role), { instanceOf: ConfigError });
    t.deepEqual(
      refused?.issues.map((i) => i.variable),
      ['PDS_KEY_STORE'],
    );
    t.regex(refused?.message ?? '', new RegExp(`role ${role} .*mongodb://`));
  }
  t.notThrows(() => checkRole(own, 'all'));
  const shared = parseConfig({ ...ESDB, PDS_KEY_STORE: 'mongodb://mongo:27017/pds?replicaSet=rs0' });
  for (const role of ['all', 'api', 'projector', 'dispatcher']) t.notThrows(() => checkRole(shared, role));
  // Embedded: every process of the data dir shares its keys.db.
  const embedded = parseConfig({ PDS_DATA_DIR: '/var/lib/pds' });
  for (const role of ['all', 'api', 'projector', 'dispatcher']) t.notThrows(() => checkRole(embedded, role));
});

test('the dispatcher keeps its state in a file of its own beside a SQLite read store, else in the read store', (t) => {
  t.is(parseConfig({ PDS_DATA_DIR: '/var/lib/pds' }).dispatcherStoreUrl, 'sqlite:/var/lib/pds/dispatcher.db');
  t.is(
    parseConfig({ PDS_READ_STORE: 'sqlite:/srv/models/read.db' }).dispatcherStoreUrl,
    'sqlite:/srv/models/dispatcher.db',
  );
  t.is(parseConfig({ PDS_READ_STORE: 'memory' }).dispatcherStoreUrl, 'memory');
  t.is(parseConfig(ESDB).dispatcherStoreUrl, 'memory');
  const mongo = 'mongodb://mongo:27017/pds?replicaSet=rs0';
  t.is(parseConfig({ ...ESDB, PDS_READ_STORE: mongo }).dispatcherStoreUrl, mongo);
  t.is(parseConfig({ PDS_DISPATCHER_STORE: 'sqlite:/tmp/d.db' }).dispatcherStoreUrl, 'sqlite:/tmp/d.db');
});

test('role all runs the dispatcher on a thread of its own on embedded files, unless told not to', (t) => {
  t.true(parseConfig({}).dispatcherThread);
  t.false(parseConfig({ PDS_DISPATCHER_THREAD: '0' }).dispatcherThread);
  t.false(parseConfig(ESDB).dispatcherThread);
  t.false(parseConfig({ PDS_EVENT_STORE: 'sqlite::memory:' }).dispatcherThread);
  const error = t.throws(
    () => parseConfig({ PDS_EVENT_STORE: 'sqlite::memory:', PDS_DISPATCHER_THREAD: '1' }),
    {
      instanceOf: ConfigError,
    },
  );
  t.regex(error?.message ?? '', /PDS_DISPATCHER_THREAD.*sqlite::memory:/);
});

test('the delivery threads default to the cores less one, at least 1 and at most 4 (each costs memory)', (t) => {
  t.deepEqual(
    [1, 2, 3, 5, 6, 16, 128].map((cores) => defaultDeliveryThreads(cores)),
    [1, 1, 2, 4, 4, 4, 4],
  );
  t.is(parseConfig({}).webhookDeliveryThreads, defaultDeliveryThreads(availableParallelism()));
});

test('role all runs the projector on a thread of its own on embedded files, unless told not to', (t) => {
  t.true(parseConfig({}).projectorThread);
  t.true(parseConfig({ PDS_READ_STORE: 'sqlite:/tmp/elsewhere.db' }).projectorThread);
  t.false(parseConfig({ PDS_PROJECTOR_THREAD: '0' }).projectorThread);
  t.false(parseConfig(ESDB).projectorThread);
  t.false(parseConfig({ PDS_READ_STORE: 'memory' }).projectorThread);
  t.false(parseConfig({ PDS_EVENT_STORE: 'sqlite::memory:' }).projectorThread);
  t.false(parseConfig({ PDS_READ_STORE: 'sqlite::memory:' }).projectorThread);
  for (const env of [
    { PDS_READ_STORE: 'memory' },
    { PDS_READ_STORE: 'sqlite::memory:' },
    { PDS_EVENT_STORE: 'sqlite::memory:' },
  ]) {
    const error = t.throws(() => parseConfig({ ...env, PDS_PROJECTOR_THREAD: '1' }), {
      instanceOf: ConfigError,
    });
    t.regex(error?.message ?? '', /PDS_PROJECTOR_THREAD.*memory/);
  }
});

test('non-embedded mode: no sandbox, no private webhook URLs, unless configured', (t) => {
  const config = parseConfig(ESDB);
  t.false(config.embedded);
  t.false(config.sandbox);
  t.false(config.allowPrivateWebhookUrls);
  const overridden = parseConfig({ ...ESDB, PDS_SANDBOX: '1', PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'true' });
  t.true(overridden.sandbox);
  t.true(overridden.allowPrivateWebhookUrls);
});

test('embedded mode can turn the sandbox and private webhook URLs off', (t) => {
  const config = parseConfig({ PDS_SANDBOX: '0', PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'false' });
  t.false(config.sandbox);
  t.false(config.allowPrivateWebhookUrls);
});

test('an empty variable counts as unset', (t) => {
  t.deepEqual(parseConfig({ PORT: '', LOG_LEVEL: '  ', PDS_ABANDON_AFTER: '' }), parseConfig({}));
});

test('variables other than its own are ignored', (t) => {
  t.deepEqual(parseConfig({ HOME: '/root', PDS_URL: 'http://x' }), parseConfig({}));
});

// ---------------------------------------------------------------------------------------------
// parseConfig: valid forms of each variable

type Case = { env: Env; check: (config: ReturnType<typeof parseConfig>) => unknown; expected: unknown };
const valid: Record<string, Case[]> = {
  PORT: [
    { env: { PORT: '0' }, check: (c) => c.port, expected: 0 },
    { env: { PORT: '3000' }, check: (c) => c.port, expected: 3000 },
    { env: { PORT: '65535' }, check: (c) => c.port, expected: 65535 },
  ],
  PDS_OPS_PORT: [
    { env: { PDS_OPS_PORT: '9090' }, check: (c) => [c.port, c.opsPort], expected: [8080, 9090] },
    { env: { PDS_OPS_PORT: '0', PORT: '0' }, check: (c) => [c.port, c.opsPort], expected: [0, 0] },
    { env: { PDS_OPS_PORT: '8080', PORT: '3000' }, check: (c) => c.opsPort, expected: 8080 },
  ],
  PDS_DATA_DIR: [
    { env: { PDS_DATA_DIR: '/srv/pds' }, check: (c) => c.dataDir, expected: '/srv/pds' },
    { env: { PDS_DATA_DIR: 'rel/dir' }, check: (c) => c.dataDir, expected: path.resolve('rel/dir') },
  ],
  PDS_EVENT_STORE: [
    {
      env: { PDS_EVENT_STORE: 'sqlite:/tmp/e.db' },
      check: (c) => [c.eventStoreUrl, c.embedded],
      expected: ['sqlite:/tmp/e.db', true],
    },
    ...[
      'esdb://localhost:2113?tls=false',
      'esdb+discover://admin:changeit@node1:2113,node2:2113?tls=true',
      'kurrentdb://db.internal:2113',
    ].map((url) => ({
      env: { PDS_EVENT_STORE: url, PDS_SECRET_KEY: KEY_B64, PDS_OPERATOR_TOKEN: OPERATOR_TOKEN },
      check: (c: ReturnType<typeof parseConfig>) => [c.eventStoreUrl, c.embedded],
      expected: [url, false],
    })),
  ],
  PDS_READ_STORE: [
    'memory',
    'sqlite:/var/lib/pds/read.db',
    'mongodb://localhost:27017/pds',
    'mongodb+srv://u:p@cluster0.example.net/pds',
  ].map((url) => ({ env: { PDS_READ_STORE: url }, check: (c) => c.readStoreUrl, expected: url })),
  PDS_DISPATCHER_STORE: ['memory', 'sqlite:/var/lib/pds/dispatcher.db', 'mongodb://localhost:27017/pds'].map(
    (url) => ({ env: { PDS_DISPATCHER_STORE: url }, check: (c) => c.dispatcherStoreUrl, expected: url }),
  ),
  PDS_DISPATCHER_THREAD: (
    [
      ['true', true],
      ['0', false],
    ] as const
  ).map(([raw, value]) => ({
    env: { PDS_DISPATCHER_THREAD: raw },
    check: (c) => c.dispatcherThread,
    expected: value,
  })),
  PDS_PROJECTOR_THREAD: (
    [
      ['1', true],
      ['false', false],
    ] as const
  ).map(([raw, value]) => ({
    env: { PDS_PROJECTOR_THREAD: raw },
    check: (c) => c.projectorThread,
    expected: value,
  })),
  PDS_PROJECTOR_LEASE: [
    { env: { PDS_PROJECTOR_LEASE: '1s' }, check: (c) => c.projectorLeaseMs, expected: 1_000 },
    { env: { PDS_PROJECTOR_LEASE: '2m' }, check: (c) => c.projectorLeaseMs, expected: 120_000 },
  ],
  PDS_OPERATOR_TOKEN: [
    { env: { PDS_OPERATOR_TOKEN: 'a'.repeat(16) }, check: (c) => c.operatorToken, expected: 'a'.repeat(16) },
    {
      env: { PDS_OPERATOR_TOKEN: 'Abc-._~+/0123456789==' },
      check: (c) => c.operatorToken,
      expected: 'Abc-._~+/0123456789==',
    },
  ],
  PDS_CONSOLE_SESSION_LIFETIME: [
    { env: { PDS_CONSOLE_SESSION_LIFETIME: '12h' }, check: (c) => c.consoleSessionMs, expected: 43_200_000 },
  ],
  PDS_CONSOLE_SESSION_IDLE: [
    { env: { PDS_CONSOLE_SESSION_IDLE: '15m' }, check: (c) => c.consoleIdleMs, expected: 900_000 },
  ],
  PDS_ABANDON_AFTER: [
    { env: { PDS_ABANDON_AFTER: '90m' }, check: (c) => c.abandonAfterMs, expected: 5_400_000 },
    { env: { PDS_ABANDON_AFTER: '2s' }, check: (c) => c.abandonAfterMs, expected: 2_000 },
  ],
  PDS_WEBHOOK_TIMEOUT: [
    { env: { PDS_WEBHOOK_TIMEOUT: '500ms' }, check: (c) => c.webhookTimeoutMs, expected: 500 },
  ],
  PDS_WEBHOOK_RETRY_SCHEDULE: [
    {
      env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s, 1s ,2m' },
      check: (c) => c.webhookRetryScheduleMs,
      expected: [0, 1_000, 120_000],
    },
    { env: { PDS_WEBHOOK_RETRY_SCHEDULE: '10ms' }, check: (c) => c.webhookRetryScheduleMs, expected: [10] },
  ],
  PDS_IDEMPOTENCY_TTL: [
    { env: { PDS_IDEMPOTENCY_TTL: '2h' }, check: (c) => c.idempotencyTtlMs, expected: 7_200_000 },
    { env: { PDS_IDEMPOTENCY_TTL: '90s' }, check: (c) => c.idempotencyTtlMs, expected: 90_000 },
  ],
  PDS_DELIVERY_LOG_RETENTION: [
    {
      env: { PDS_DELIVERY_LOG_RETENTION: '168h' },
      check: (c) => c.deliveryLogRetentionMs,
      expected: 604_800_000,
    },
    {
      env: { PDS_DELIVERY_LOG_RETENTION: '24h' },
      check: (c) => c.deliveryLogRetentionMs,
      expected: 86_400_000,
    },
  ],
  PDS_ALERT_OLDEST_QUEUED: [
    { env: { PDS_ALERT_OLDEST_QUEUED: '1h' }, check: (c) => c.alertOldestQueuedMs, expected: 3_600_000 },
    { env: { PDS_ALERT_OLDEST_QUEUED: '90s' }, check: (c) => c.alertOldestQueuedMs, expected: 90_000 },
  ],
  PDS_ALERT_PROJECTION_LAG: [
    { env: { PDS_ALERT_PROJECTION_LAG: '5m' }, check: (c) => c.alertProjectionLagMs, expected: 300_000 },
    { env: { PDS_ALERT_PROJECTION_LAG: '500ms' }, check: (c) => c.alertProjectionLagMs, expected: 500 },
  ],
  PDS_ALLOW_PRIVATE_WEBHOOK_URLS: (
    [
      ['true', true],
      ['TRUE', true],
      ['1', true],
      ['false', false],
      ['0', false],
    ] as const
  ).map(([raw, value]) => ({
    env: { PDS_ALLOW_PRIVATE_WEBHOOK_URLS: raw },
    check: (c) => c.allowPrivateWebhookUrls,
    expected: value,
  })),
  PDS_SECRET_KEY: [KEY_B64, KEY_HEX, KEY_BYTES.toString('base64url'), KEY_B64.replace(/=$/, '')].map(
    (raw) => ({
      env: { PDS_SECRET_KEY: raw },
      check: (c) => keyBytes(c),
      expected: KEY_BYTES,
    }),
  ),
  PDS_SANDBOX: (
    [
      ['1', true],
      ['0', false],
      ['false', false],
    ] as const
  ).map(([raw, value]) => ({ env: { PDS_SANDBOX: raw }, check: (c) => c.sandbox, expected: value })),
  PDS_BACKUP_DIR: [
    { env: { PDS_BACKUP_DIR: '/var/backups/pds' }, check: (c) => c.backupDir, expected: '/var/backups/pds' },
    { env: { PDS_BACKUP_DIR: 'backups' }, check: (c) => c.backupDir, expected: path.resolve('backups') },
    // Beside the data dir, not in it.
    {
      env: { PDS_DATA_DIR: '/srv/pds', PDS_BACKUP_DIR: '/srv/pds-backups' },
      check: (c) => c.backupDir,
      expected: '/srv/pds-backups',
    },
  ],
  PDS_BACKUP_EVERY: [
    { env: { PDS_BACKUP_EVERY: '6h' }, check: (c) => c.backupEveryMs, expected: 6 * 3_600_000 },
    { env: { PDS_BACKUP_EVERY: '90m' }, check: (c) => c.backupEveryMs, expected: 90 * 60_000 },
  ],
  PDS_WEBHOOK_MAX_IN_FLIGHT: [1, 256, 4096, 65_536].map((max) => ({
    env: { PDS_WEBHOOK_MAX_IN_FLIGHT: String(max) },
    check: (c) => c.webhookMaxInFlight,
    expected: max,
  })),
  PDS_WEBHOOK_DELIVERY_THREADS: [1, 3, 64].map((threads) => ({
    env: { PDS_WEBHOOK_DELIVERY_THREADS: String(threads) },
    check: (c) => c.webhookDeliveryThreads,
    expected: threads,
  })),
  PDS_WEBHOOK_DELIVERY_SHARDS: [1, 16, 1024].map((shards) => ({
    env: { PDS_WEBHOOK_DELIVERY_SHARDS: String(shards) },
    check: (c) => c.webhookDeliveryShards,
    expected: shards,
  })),
  PDS_WEBHOOK_QUEUE_WINDOW: [1, 10_000, 10_000_000].map((window) => ({
    env: { PDS_WEBHOOK_QUEUE_WINDOW: String(window) },
    check: (c) => c.webhookQueueWindow,
    expected: window,
  })),
  PDS_BACKUP_KEEP: [1, 14, 1000].map((keep) => ({
    env: { PDS_BACKUP_KEEP: String(keep) },
    check: (c) => c.backupKeep,
    expected: keep,
  })),
  PDS_SANDBOX_SIZE: [1, 3, 500].map((size) => ({
    env: { PDS_SANDBOX_SIZE: String(size) },
    check: (c) => c.sandboxSize,
    expected: size,
  })),
  LOG_LEVEL: [
    ...['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => ({
      env: { LOG_LEVEL: level },
      check: (c: ReturnType<typeof parseConfig>) => c.logLevel,
      expected: level,
    })),
    { env: { LOG_LEVEL: 'DEBUG' }, check: (c) => c.logLevel, expected: 'debug' },
  ],
  PDS_LOG_FORMAT: [
    { env: { PDS_LOG_FORMAT: 'pretty' }, check: (c) => c.logFormat, expected: 'pretty' },
    { env: { PDS_LOG_FORMAT: 'JSON' }, check: (c) => c.logFormat, expected: 'json' },
  ],
};

for (const [variable, cases] of Object.entries(valid)) {
  test(`${variable}: valid forms`, (t) => {
    for (const { env, check, expected } of cases)
      t.deepEqual(check(parseConfig(env)), expected, JSON.stringify(env));
  });
}

// ---------------------------------------------------------------------------------------------
// parseConfig: bad values are refused with one line naming the variable

const bad: [string, string, Env?][] = [
  ['PDS_BACKUP_DIR', '/srv/pds', { PDS_DATA_DIR: '/srv/pds' }],
  ['PDS_BACKUP_DIR', '/srv/pds/backups', { PDS_DATA_DIR: '/srv/pds' }],
  // A key store outside the data dir would be left out of every scheduled backup.
  [
    'PDS_BACKUP_DIR',
    '/srv/pds-backups',
    { PDS_DATA_DIR: '/srv/pds', PDS_KEY_STORE: 'sqlite:/srv/keys/keys.db' },
  ],
  [
    'PDS_BACKUP_DIR',
    '/var/backups/pds',
    {
      PDS_EVENT_STORE: 'esdb://localhost:2113',
      PDS_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
      PDS_OPERATOR_TOKEN: 'operator-token-0123456789',
    },
  ],
  ['PDS_BACKUP_EVERY', '0s'],
  ['PDS_BACKUP_EVERY', 'daily'],
  ['PDS_WEBHOOK_MAX_IN_FLIGHT', '0'],
  ['PDS_WEBHOOK_MAX_IN_FLIGHT', '65537'],
  ['PDS_WEBHOOK_MAX_IN_FLIGHT', '2.5'],
  ['PDS_WEBHOOK_MAX_IN_FLIGHT', 'unlimited'],
  ['PDS_WEBHOOK_DELIVERY_THREADS', '0'],
  ['PDS_WEBHOOK_DELIVERY_THREADS', '65'],
  ['PDS_WEBHOOK_DELIVERY_THREADS', 'all'],
  ['PDS_WEBHOOK_DELIVERY_SHARDS', '0'],
  ['PDS_WEBHOOK_DELIVERY_SHARDS', '1025'],
  ['PDS_WEBHOOK_QUEUE_WINDOW', '0'],
  ['PDS_WEBHOOK_QUEUE_WINDOW', '10000001'],
  ['PDS_WEBHOOK_QUEUE_WINDOW', '1.5'],
  ['PDS_WEBHOOK_QUEUE_WINDOW', 'all'],
  ['PDS_BACKUP_KEEP', '0'],
  ['PDS_BACKUP_KEEP', '1001'],
  ['PDS_BACKUP_KEEP', 'all'],
  ['PORT', 'abc'],
  ['PORT', '-1'],
  ['PORT', '65536'],
  ['PORT', '80.5'],
  ['PORT', '0x50'],
  ['PDS_OPS_PORT', 'metrics'],
  ['PDS_OPS_PORT', '65536'],
  // The public port and the ops port cannot be one port.
  ['PDS_OPS_PORT', '8080'],
  ['PDS_OPS_PORT', '3000', { PORT: '3000' }],
  ['PDS_EVENT_STORE', 'postgres://localhost/pds'],
  ['PDS_EVENT_STORE', 'sqlite:'],
  ['PDS_EVENT_STORE', 'esdb://'],
  ['PDS_EVENT_STORE', 'events.db'],
  ['PDS_READ_STORE', 'redis://localhost'],
  ['PDS_READ_STORE', 'mongodb://'],
  ['PDS_READ_STORE', 'Memory'],
  ['PDS_READ_STORE', 'sqlite:'],
  ['PDS_DISPATCHER_STORE', 'redis://localhost'],
  ['PDS_DISPATCHER_THREAD', 'yes'],
  ['PDS_EVENT_STORE_SYNC', 'off'],
  ['PDS_EVENT_STORE_SYNC', 'extra'],
  ['PDS_EVENT_STORE_SYNC', '2'],
  ['PDS_READ_STORE_CACHE_MIB', '0'],
  ['PDS_READ_STORE_CACHE_MIB', '1.5'],
  ['PDS_READ_STORE_CACHE_MIB', 'lots'],
  ['PDS_OPERATOR_TOKEN', 'short'],
  ['PDS_OPERATOR_TOKEN', 'has spaces but is long enough'],
  ['PDS_OPERATOR_TOKEN', 'ünïcödé-token-that-is-long'],
  ['PDS_CONSOLE_SESSION_LIFETIME', '0s'],
  ['PDS_CONSOLE_SESSION_IDLE', 'a while'],
  ['PDS_ABANDON_AFTER', 'soon'],
  ['PDS_ABANDON_AFTER', '6'],
  ['PDS_ABANDON_AFTER', '0s'],
  ['PDS_ABANDON_AFTER', '1d'],
  ['PDS_IDEMPOTENCY_TTL', '0s'],
  ['PDS_IDEMPOTENCY_TTL', '1d'],
  ['PDS_DELIVERY_LOG_RETENTION', '23h'],
  ['PDS_DELIVERY_LOG_RETENTION', '30d'],
  ['PDS_DELIVERY_LOG_RETENTION', '0s'],
  ['PDS_ALERT_OLDEST_QUEUED', '0s'],
  ['PDS_ALERT_OLDEST_QUEUED', 'late'],
  ['PDS_ALERT_PROJECTION_LAG', '0ms'],
  ['PDS_ALERT_PROJECTION_LAG', '1d'],
  ['PDS_PROJECTOR_LEASE', '0s'],
  ['PDS_PROJECTOR_LEASE', '500ms'],
  ['PDS_PROJECTOR_LEASE', 'long'],
  ['PDS_WEBHOOK_TIMEOUT', '0ms'],
  ['PDS_WEBHOOK_TIMEOUT', 'fast'],
  ['PDS_WEBHOOK_RETRY_SCHEDULE', '0s,,5s'],
  ['PDS_WEBHOOK_RETRY_SCHEDULE', '5s,later'],
  ['PDS_WEBHOOK_RETRY_SCHEDULE', '5s;10s'],
  ['PDS_ALLOW_PRIVATE_WEBHOOK_URLS', 'yes'],
  ['PDS_ALLOW_PRIVATE_WEBHOOK_URLS', '2'],
  ['PDS_SECRET_KEY', 'not-a-key'],
  ['PDS_SECRET_KEY', KEY_HEX.slice(2)],
  ['PDS_SECRET_KEY', Buffer.alloc(16, 1).toString('base64')],
  ['PDS_SECRET_KEY', Buffer.alloc(48, 1).toString('base64')],
  ['PDS_SANDBOX', 'maybe'],
  ['PDS_SANDBOX_SIZE', '0'],
  ['PDS_SANDBOX_SIZE', '501'],
  ['PDS_SANDBOX_SIZE', 'small'],
  ['LOG_LEVEL', 'loud'],
  ['LOG_LEVEL', 'verbose'],
  ['PDS_LOG_FORMAT', 'text'],
  ['PDS_LOG_FORMAT', 'yaml'],
  // Required in non-embedded mode: a key generated per container would differ between processes.
  [
    'PDS_SECRET_KEY',
    '',
    { PDS_EVENT_STORE: 'esdb://localhost:2113', PDS_OPERATOR_TOKEN: 'operator-token-0123456789' },
  ],
  [
    'PDS_OPERATOR_TOKEN',
    '',
    { PDS_EVENT_STORE: 'esdb://localhost:2113', PDS_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') },
  ],
];
const SECRETS = new Set(['PDS_OPERATOR_TOKEN', 'PDS_SECRET_KEY']);

for (const [variable, value, extra] of bad) {
  test(`${variable}=${JSON.stringify(value)} is refused`, (t) => {
    const env = { ...extra, [variable]: value };
    const error = t.throws(() => parseConfig(env), { instanceOf: ConfigError });
    t.true(error.message.startsWith(`${variable}: `), error.message);
    t.false(error.message.includes('\n'));
    t.deepEqual(
      error.issues.map((issue) => issue.variable),
      [variable],
    );
    // Secrets are never echoed back, even wrong ones.
    if (SECRETS.has(variable) && value.length > 0) t.false(error.message.includes(value), error.message);
  });
}

test('a bad event store sync mode names the two there are', (t) => {
  const error = t.throws(() => parseConfig({ PDS_EVENT_STORE_SYNC: 'off' }), { instanceOf: ConfigError });
  t.is(error.message, 'PDS_EVENT_STORE_SYNC: expected full or normal, got "off"');
});

test('a message shows the bad value, as in the specification of the error line', (t) => {
  const error = t.throws(() => parseConfig({ PDS_ABANDON_AFTER: 'soon' }), { instanceOf: ConfigError });
  t.is(error.message, 'PDS_ABANDON_AFTER: expected a duration like 6h, 30m, 45s or 500ms, got "soon"');
});

test('several bad variables are all named, still on one line', (t) => {
  const error = t.throws(() => parseConfig({ PORT: 'abc', LOG_LEVEL: 'loud' }), { instanceOf: ConfigError });
  t.deepEqual(
    error.issues.map((issue) => issue.variable),
    ['PORT', 'LOG_LEVEL'],
  );
  t.false(error.message.includes('\n'));
});

test('a password in a bad connection string is not echoed', (t) => {
  const error = t.throws(() => parseConfig({ PDS_READ_STORE: 'mongo://user:hunter2@db/pds' }), {
    instanceOf: ConfigError,
  });
  t.false(error.message.includes('hunter2'));
});

// ---------------------------------------------------------------------------------------------
// loadConfig: the data dir and its secrets

test('loadConfig generates the operator token and secret key once (mode 0600) and reuses them', async (t) => {
  const dir = path.join(await tempDir(t), 'nested', 'data');
  const first = await loadConfig({ PDS_DATA_DIR: dir });
  t.regex(first.operatorToken, /^[A-Za-z0-9_-]{43}$/); // 32 bytes, base64url
  t.deepEqual(first.operatorTokenSource, { kind: 'generated', file: path.join(dir, OPERATOR_TOKEN_FILE) });
  t.deepEqual(first.secretKeySource, { kind: 'generated', file: path.join(dir, SECRET_KEY_FILE) });
  t.is(keyBytes(first).length, 32);
  for (const file of [OPERATOR_TOKEN_FILE, SECRET_KEY_FILE]) {
    t.is((await stat(path.join(dir, file))).mode & 0o777, 0o600, file);
  }
  t.is((await readFile(path.join(dir, OPERATOR_TOKEN_FILE), 'utf8')).trim(), first.operatorToken);

  const second = await loadConfig({ PDS_DATA_DIR: dir });
  t.is(second.operatorToken, first.operatorToken);
  t.deepEqual(keyBytes(second), keyBytes(first));
  t.deepEqual(second.operatorTokenSource, { kind: 'stored', file: path.join(dir, OPERATOR_TOKEN_FILE) });
  t.deepEqual(second.secretKeySource, { kind: 'stored', file: path.join(dir, SECRET_KEY_FILE) });
});

test('processes starting together on one data dir agree on the generated secrets', async (t) => {
  const dir = await tempDir(t);
  const configs = await Promise.all(Array.from({ length: 8 }, () => loadConfig({ PDS_DATA_DIR: dir })));
  t.is(new Set(configs.map((c) => c.operatorToken)).size, 1);
  t.is(new Set(configs.map((c) => keyBytes(c).toString('hex'))).size, 1);
  t.is(configs.filter((c) => c.operatorTokenSource.kind === 'generated').length, 1);
});

test('secrets from the environment win and nothing is written for them', async (t) => {
  const dir = await tempDir(t);
  const token = 'operator-token-from-env-0123456789';
  const config = await loadConfig({ PDS_DATA_DIR: dir, PDS_OPERATOR_TOKEN: token, PDS_SECRET_KEY: KEY_HEX });
  t.is(config.operatorToken, token);
  t.deepEqual(keyBytes(config), KEY_BYTES);
  t.deepEqual(config.operatorTokenSource, { kind: 'env', variable: 'PDS_OPERATOR_TOKEN' });
  t.deepEqual(config.secretKeySource, { kind: 'env', variable: 'PDS_SECRET_KEY' });
  await t.throwsAsync(stat(path.join(dir, OPERATOR_TOKEN_FILE)), { code: 'ENOENT' });
  await t.throwsAsync(stat(path.join(dir, SECRET_KEY_FILE)), { code: 'ENOENT' });
});

test('non-embedded mode takes both secrets from the environment and generates nothing', async (t) => {
  const dir = await tempDir(t);
  const config = await loadConfig({ ...ESDB, PDS_DATA_DIR: dir });
  t.deepEqual(config.operatorTokenSource, { kind: 'env', variable: 'PDS_OPERATOR_TOKEN' });
  t.deepEqual(config.secretKeySource, { kind: 'env', variable: 'PDS_SECRET_KEY' });
  await t.throwsAsync(stat(path.join(dir, SECRET_KEY_FILE)), { code: 'ENOENT' });
  await t.throwsAsync(stat(path.join(dir, OPERATOR_TOKEN_FILE)), { code: 'ENOENT' });
});

test('a damaged secret key file stops the start and is left alone', async (t) => {
  const dir = await tempDir(t);
  await writeFile(path.join(dir, SECRET_KEY_FILE), 'garbage\n');
  const error = await t.throwsAsync(loadConfig({ PDS_DATA_DIR: dir }), { instanceOf: ConfigError });
  t.true(error.message.startsWith('PDS_SECRET_KEY: '), error.message);
  t.is(await readFile(path.join(dir, SECRET_KEY_FILE), 'utf8'), 'garbage\n');
});

test('a damaged operator token file stops the start', async (t) => {
  const dir = await tempDir(t);
  await writeFile(path.join(dir, OPERATOR_TOKEN_FILE), 'x\n');
  const error = await t.throwsAsync(loadConfig({ PDS_DATA_DIR: dir }), { instanceOf: ConfigError });
  t.true(error.message.startsWith('PDS_OPERATOR_TOKEN: '), error.message);
});

test('a data dir that cannot be created is named', async (t) => {
  const dir = await tempDir(t);
  await writeFile(path.join(dir, 'file'), '');
  const error = await t.throwsAsync(loadConfig({ PDS_DATA_DIR: path.join(dir, 'file', 'data') }), {
    instanceOf: ConfigError,
  });
  t.true(error.message.startsWith('PDS_DATA_DIR: '), error.message);
  t.false(error.message.includes('\n'));
});

test('a TLS file a connection string names but this process cannot read stops the start, naming the variable', async (t) => {
  const dir = await tempDir(t);
  const missing = path.join(dir, 'certs', 'ca.crt');
  const error = await t.throwsAsync(
    loadConfig({
      ...ESDB,
      PDS_DATA_DIR: dir,
      PDS_EVENT_STORE: `esdb://admin:esdb-password@eventstore:2113?tls=true&tlsCAFile=${encodeURIComponent(missing)}`,
    }),
    { instanceOf: ConfigError },
  );
  t.is(error?.message, `PDS_EVENT_STORE: tlsCAFile names ${missing}, which does not exist`);
  t.false(error?.message.includes('esdb-password'));
  t.false(error?.message.includes('\n'));

  // The client's own spellings of the option; a directory; the read store's certificate files too.
  await writeFile(path.join(dir, 'ca.crt'), '-----BEGIN CERTIFICATE-----\n');
  for (const [env, message] of [
    [
      { PDS_EVENT_STORE: `esdb://eventstore:2113?tls=true&TLS_CA_FILE=${missing}` },
      `PDS_EVENT_STORE: tlsCAFile names ${missing}, which does not exist`,
    ],
    [
      { PDS_EVENT_STORE: `esdb://eventstore:2113?tls=true&tlsCAFile=${dir}` },
      `PDS_EVENT_STORE: tlsCAFile names ${dir}, which is not a file`,
    ],
    [
      { PDS_READ_STORE: `mongodb://mongo:27017/pds?replicaSet=rs0&tls=true&TLSCAFile=${missing}` },
      `PDS_READ_STORE: tlsCAFile names ${missing}, which does not exist`,
    ],
    [
      { PDS_DISPATCHER_STORE: `mongodb://mongo:27017/pds?tls=true&tlsCertificateKeyFile=${missing}` },
      `PDS_DISPATCHER_STORE: tlsCertificateKeyFile names ${missing}, which does not exist`,
    ],
  ] as const) {
    const e = await t.throwsAsync(loadConfig({ ...ESDB, PDS_DATA_DIR: dir, ...env }), {
      instanceOf: ConfigError,
    });
    t.is(e?.message, message);
  }
});

test('a TLS file that can be read passes, also as a path relative to the working directory', async (t) => {
  const dir = await tempDir(t);
  const ca = path.join(dir, 'ca.crt');
  await writeFile(ca, '-----BEGIN CERTIFICATE-----\n');
  const config = await loadConfig({
    ...ESDB,
    PDS_DATA_DIR: dir,
    PDS_EVENT_STORE: `esdb://eventstore:2113?tls=true&tlsCAFile=${path.relative(process.cwd(), ca)}`,
    PDS_READ_STORE: `mongodb://mongo:27017/pds?replicaSet=rs0&tls=true&tlsCAFile=${ca}`,
  });
  t.true(config.eventStoreUrl.endsWith('ca.crt'));
});

// ---------------------------------------------------------------------------------------------
// describeConfig

test('describeConfig shows settings and hides the token, the key and connection passwords', async (t) => {
  const dir = await tempDir(t);
  const config = await loadConfig({
    PDS_DATA_DIR: dir,
    PDS_EVENT_STORE: 'esdb://admin:esdb-password@db:2113?tls=false',
    PDS_READ_STORE: 'mongodb://pds:mongo-password@mongo:27017/pds?authSource=admin&sessionToken=tok123',
    PDS_SECRET_KEY: KEY_HEX,
    PDS_OPERATOR_TOKEN: OPERATOR_TOKEN,
  });
  const text = JSON.stringify(describeConfig(config));
  for (const secret of [
    config.operatorToken,
    KEY_HEX,
    KEY_B64,
    'esdb-password',
    'mongo-password',
    'tok123',
  ]) {
    t.false(text.includes(secret), secret);
  }
  const described = describeConfig(config);
  t.is(described.event_store, 'esdb://admin:[redacted]@db:2113?tls=false');
  t.is(
    described.read_store,
    'mongodb://pds:[redacted]@mongo:27017/pds?authSource=admin&sessionToken=[redacted]',
  );
  t.is(described.operator_token, '[redacted]');
  t.is(described.operator_token_source, 'from PDS_OPERATOR_TOKEN');
  t.is(described.secret_key_source, 'from PDS_SECRET_KEY');
  t.is(described.event_store_sync, 'full');
  t.is(described.abandon_after, '6h');
  t.is(described.webhook_retry_schedule, '0s,5s,5m,30m,2h,5h,10h,10h');
});

test('the key never shows when the whole config is printed', async (t) => {
  const dir = await tempDir(t);
  const config = await loadConfig({ PDS_DATA_DIR: dir });
  const b64 = keyBytes(config).toString('base64');
  const hex = keyBytes(config).toString('hex');
  const { inspect } = await import('node:util');
  for (const text of [JSON.stringify(config), inspect(config, { depth: 5 }), String(config.secretKey)]) {
    t.false(text.includes(b64));
    t.false(text.includes(hex));
  }
});
