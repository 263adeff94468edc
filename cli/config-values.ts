/**
 * The value of each configuration variable, parsed (cli/config.ts): one zod schema per kind of value,
 * whose transform reports a problem in words that name the expected form.
 */
import { createSecretKey, type KeyObject } from 'node:crypto';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { parseDuration, quote } from './durations.ts';
import { MAX_SANDBOX_SIZE } from './sandbox/sizes.ts';
import { plural } from './terminal.ts';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** How log lines are written: JSON lines, or pino-pretty's text for a person at a terminal. */
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
export const EVENT_STORE_SYNC_MODES = ['full', 'normal'] as const;
export type EventStoreSync = (typeof EVENT_STORE_SYNC_MODES)[number];

/** What is wrong with one variable, in words naming the form expected. */
export interface ConfigIssue {
  variable: string;
  problem: string;
}

/** Every problem found, one line naming each variable (cli/config.ts). */
export class ConfigError extends Error {
  override name = 'ConfigError';
  readonly issues: readonly ConfigIssue[];
  constructor(issues: readonly ConfigIssue[]) {
    super(issues.map((issue) => `${issue.variable}: ${issue.problem}`).join('; '));
    this.issues = issues;
  }
}

/** Hides the password in a connection string and the values of secret-looking query parameters. */
export function redactUrl(url: string): string {
  return url
    .replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/?#]*):[^@/?#]*@/i, '$1:[redacted]@')
    .replace(/([?&][^=&#]*(?:pass|secret|token|key|credential)[^=&#]*=)[^&#]*/gi, '$1[redacted]');
}

export function parsed<T>(parse: (raw: string) => T) {
  return z.string().transform((raw, ctx) => {
    try {
      return parse(raw);
    } catch (error) {
      ctx.addIssue(error instanceof Error ? error.message : String(error));
      return z.NEVER;
    }
  });
}

export function problem(message: string): never {
  throw new Error(message);
}

export const port = parsed((raw) => {
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return n >= 0 && n <= 65535 ? n : problem(`expected an integer from 0 to 65535, got ${quote(raw)}`);
});

export const positiveDuration = parsed((raw) => {
  const ms = parseDuration(raw);
  return ms > 0 ? ms : problem(`expected a duration greater than zero, got ${quote(raw)}`);
});

/**
 * How long finished webhook deliveries are kept (docs/operations.md, "Retention"): at least a day, the
 * longest window of a subscription's health (docs/webhooks.md, "Health"), whose figures go with them.
 */
export const deliveryLogRetention = parsed((raw) => {
  const ms = parseDuration(raw);
  return ms >= 86_400_000 ? ms : problem(`expected a duration of at least 24h, got ${quote(raw)}`);
});

/** A lease renewed every third of it: shorter than a second, renewals would be most of its work. */
export const leaseDuration = parsed((raw) => {
  const ms = parseDuration(raw);
  return ms >= 1_000 ? ms : problem(`expected a duration of at least 1s, got ${quote(raw)}`);
});

export const retrySchedule = parsed((raw) =>
  raw.split(',').map((entry, i) => {
    try {
      return parseDuration(entry);
    } catch (error) {
      return problem(`entry ${i + 1} of the comma-separated list: ${(error as Error).message}`);
    }
  }),
);

export const flag = parsed((raw) => {
  const value = raw.toLowerCase();
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  return problem(`expected true, false, 1 or 0, got ${quote(raw)}`);
});

export const ESDB_URL =
  /^(esdb|esdb\+discover|kurrentdb|kurrentdb\+discover|kurrent|kurrent\+discover):\/\/[^\s/?#]+/;
export const eventStoreUrl = parsed((raw) => {
  if (/^sqlite:.+/.test(raw) || ESDB_URL.test(raw)) return raw;
  return problem(
    `expected sqlite:<file> or an EventStoreDB connection string (esdb://, esdb+discover://, kurrentdb://), got ${quote(redactUrl(raw))}`,
  );
});

export const eventStoreSync = parsed((raw) =>
  (EVENT_STORE_SYNC_MODES as readonly string[]).includes(raw.toLowerCase())
    ? (raw.toLowerCase() as EventStoreSync)
    : problem(`expected ${EVENT_STORE_SYNC_MODES.join(' or ')}, got ${quote(raw)}`),
);

export const readStoreUrl = parsed((raw) => {
  if (raw === 'memory' || /^sqlite:.+/.test(raw) || /^mongodb(\+srv)?:\/\/[^\s/?#]+/.test(raw)) return raw;
  return problem(
    `expected sqlite:<file>, memory or a mongodb:// or mongodb+srv:// URL, got ${quote(redactUrl(raw))}`,
  );
});

export const dispatcherStoreUrl = readStoreUrl;

export const keyStoreUrl = parsed((raw) => {
  if (/^sqlite:.+/.test(raw) || /^mongodb(\+srv)?:\/\/[^\s/?#]+/.test(raw)) return raw;
  return problem(
    `expected sqlite:<file> or a mongodb:// or mongodb+srv:// URL, got ${quote(redactUrl(raw))}`,
  );
});

export const cacheMiB = parsed((raw) => {
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return n >= 1 && n <= 65_536
    ? n
    : problem(`expected a whole number of MiB from 1 to 65536, got ${quote(raw)}`);
});

export const dataDir = parsed((raw) => path.resolve(raw));

// RFC 6750 token68, so the token fits an `Authorization: Bearer` header as is. Never echoed back.
export const TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
export const MIN_TOKEN_LENGTH = 16;
export function checkToken(raw: string): string {
  if (raw.length < MIN_TOKEN_LENGTH) {
    return problem(`expected at least ${MIN_TOKEN_LENGTH} characters, got ${raw.length}`);
  }
  if (!TOKEN.test(raw)) {
    return problem(
      'expected only the characters A-Z a-z 0-9 - . _ ~ + / (a bearer token), trailing = allowed',
    );
  }
  return raw;
}
export const operatorToken = parsed(checkToken);

/** Decodes a 32-byte key written as 64 hex digits or as base64 (standard or URL-safe). Never echoed back. */
export function parseSecretKey(raw: string): KeyObject {
  const text = raw.trim();
  let bytes: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(text)) bytes = Buffer.from(text, 'hex');
  else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) bytes = Buffer.from(text, 'base64');
  if (bytes?.length !== 32) {
    return problem(
      `expected a 32-byte key written as 64 hex digits or as base64, got ${plural(text.length, 'character')}`,
    );
  }
  return createSecretKey(bytes);
}
export const secretKey = parsed(parseSecretKey);

export const sandboxSize = parsed((raw) => {
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return n >= 1 && n <= MAX_SANDBOX_SIZE
    ? n
    : problem(`expected a number of stores from 1 to ${MAX_SANDBOX_SIZE}, got ${quote(raw)}`);
});

/** `PDS_WEBHOOK_QUEUE_WINDOW`: at least one queue held, or no webhook would ever leave. */
export const QUEUE_WINDOW_LIMIT = 10_000_000;
export const queueWindow = parsed((raw) => {
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return n >= 1 && n <= QUEUE_WINDOW_LIMIT
    ? n
    : problem(`expected a whole number of queues from 1 to ${QUEUE_WINDOW_LIMIT}, got ${quote(raw)}`);
});

/** `PDS_WEBHOOK_MAX_IN_FLIGHT`: at least one request, or no webhook would ever leave. */
export const MAX_IN_FLIGHT_LIMIT = 65_536;
export const maxInFlight = parsed((raw) => {
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return n >= 1 && n <= MAX_IN_FLIGHT_LIMIT
    ? n
    : problem(`expected a whole number of requests from 1 to ${MAX_IN_FLIGHT_LIMIT}, got ${quote(raw)}`);
});

/** `PDS_WEBHOOK_DELIVERY_THREADS`: delivery worker threads of role `all`, each a share of the subscriptions. */
export const MAX_DELIVERY_THREADS = 64;
/**
 * Its default: the cores less one, at least 1 and at most 4. Each thread costs memory whatever its
 * share (docs/operations.md, "Threads"), so a machine with many cores does not pay for them unasked.
 */
export const defaultDeliveryThreads = (cores = availableParallelism()): number =>
  Math.min(4, Math.max(1, cores - 1));
export const deliveryThreads = parsed((raw) => {
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return n >= 1 && n <= MAX_DELIVERY_THREADS
    ? n
    : problem(`expected a whole number of threads from 1 to ${MAX_DELIVERY_THREADS}, got ${quote(raw)}`);
});

/** `PDS_WEBHOOK_DELIVERY_SHARDS`: the shards the split deployment's dispatcher processes lease. */
export const MAX_DELIVERY_SHARDS = 1_024;
export const deliveryShards = parsed((raw) => {
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return n >= 1 && n <= MAX_DELIVERY_SHARDS
    ? n
    : problem(`expected a whole number of shards from 1 to ${MAX_DELIVERY_SHARDS}, got ${quote(raw)}`);
});

export const backupKeep = parsed((raw) => {
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return n >= 1 && n <= 1_000 ? n : problem(`expected a number of backups from 1 to 1000, got ${quote(raw)}`);
});

export const logLevel = parsed((raw) =>
  (LOG_LEVELS as readonly string[]).includes(raw.toLowerCase())
    ? (raw.toLowerCase() as LogLevel)
    : problem(`expected one of ${LOG_LEVELS.join(', ')}, got ${quote(raw)}`),
);

export const logFormat = parsed((raw) =>
  (LOG_FORMATS as readonly string[]).includes(raw.toLowerCase())
    ? (raw.toLowerCase() as LogFormat)
    : problem(`expected json or pretty, got ${quote(raw)}`),
);
