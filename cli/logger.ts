/** The service's logger: JSON lines (pino) with headers, tokens, secrets and keys censored. */
import { type DestinationStream, type Logger, pino } from 'pino';
import type { LogLevel } from './config.ts';

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

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'pds' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}
