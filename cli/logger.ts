/**
 * The service's logger: JSON lines (pino), or the same lines as text for a person at a terminal
 * (pino-pretty), with headers, tokens, secrets and keys censored (docs/operations.md, "Logs").
 */
import { createRequire } from 'node:module';
import { type DestinationStream, type Logger, pino } from 'pino';
import type { Config, LogFormat, LogLevel } from './config.ts';

const require = createRequire(import.meta.url);

/** Log paths whose values are replaced, wherever a log call puts a header, token or key. */
const REDACT_PATHS = [
  'authorization',
  'Authorization',
  'headers.authorization',
  '*.headers.authorization',
  'req.headers.authorization',
  'headers.cookie',
  '*.headers.cookie',
  'req.headers.cookie',
  // The console's session cookie, as a request carries it and as an answer sets it.
  'cookie',
  'Cookie',
  'headers["set-cookie"]',
  '*.headers["set-cookie"]',
  'res.headers["set-cookie"]',
  ...[
    'token',
    'operatorToken',
    'operator_token',
    'authToken',
    'auth_token',
    'secret',
    'secretKey',
    'secret_key',
    'signingSecret',
    'signing_secret',
    'apiKey',
    'api_key',
    'password',
    'sessionId',
    'session_id',
    'csrfToken',
    'csrf_token',
  ].flatMap((key) => [key, `*.${key}`]),
];

/** How the lines are written: `format` and, for pretty lines, whether in colour (cli/config.ts). */
export interface LogOutput {
  format: LogFormat;
  colors?: boolean;
}

/**
 * A logger at `level` writing to `destination` (stdout by default). Pretty lines are made from the
 * JSON line pino wrote, redacted already, so both forms censor the same fields.
 */
export function createLogger(
  level: LogLevel,
  destination?: DestinationStream,
  output: LogOutput = { format: 'json' },
): Logger {
  const options = {
    level,
    base: { service: 'pds' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  if (output.format === 'pretty')
    return pino(options, prettyLines(destination ?? pino.destination({ dest: 1, sync: true }), output));
  return destination ? pino(options, destination) : pino(options);
}

/**
 * Each line rewritten as text where it is written, in this thread: not pino-pretty's stream, whose
 * lines wait for the event loop (a `fatal` line before `process.exit` would be lost), nor a transport,
 * one more worker thread per thread. Loaded only here: a JSON start never loads pino-pretty.
 */
function prettyLines(destination: DestinationStream, output: LogOutput): DestinationStream {
  const { prettyFactory } = require('pino-pretty') as typeof import('pino-pretty');
  const prettify = prettyFactory({
    colorize: output.colors === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service',
  });
  return { write: (line: string) => destination.write(prettify(line)) };
}

/** The logger the configuration asks for, on stdout: a role thread's too, in the format its process decided. */
export function configuredLogger(config: Pick<Config, 'logLevel' | 'logFormat' | 'logColors'>): Logger {
  return createLogger(config.logLevel, undefined, { format: config.logFormat, colors: config.logColors });
}
