/** The configuration as it may be logged: no secret, no connection password (cli/config.ts). */
import path from 'node:path';
import {
  type Config,
  OPERATOR_TOKEN_FILE,
  type ResolvedConfig,
  redactUrl,
  SECRET_KEY_FILE,
  type SecretSource,
} from './config.ts';
import { formatDuration } from './durations.ts';

function describeSource(source: SecretSource | undefined, fallback: string): string {
  if (!source) return fallback;
  return source.kind === 'env' ? `from ${source.variable}` : `${source.kind} in ${source.file}`;
}

/**
 * The configuration as it may be logged: secrets replaced by `[redacted]` and where they come from
 * (the logger would censor `operator_token` and `secret_key` anyway, hence separate `_source` keys).
 */
export function describeConfig(config: Config | ResolvedConfig): Record<string, unknown> {
  const sources = 'operatorTokenSource' in config ? config : undefined;
  const inDataDir = (file: string) => `in ${path.join(config.dataDir, file)}`;
  return {
    port: config.port,
    ops_port: config.opsPort,
    data_dir: config.dataDir,
    event_store: redactUrl(config.eventStoreUrl),
    embedded: config.embedded,
    event_store_sync: config.eventStoreSync,
    read_store: redactUrl(config.readStoreUrl),
    dispatcher_store: redactUrl(config.dispatcherStoreUrl),
    key_store: redactUrl(config.keyStoreUrl),
    dispatcher_thread: config.dispatcherThread,
    projector_thread: config.projectorThread,
    projector_lease: formatDuration(config.projectorLeaseMs),
    operator_token: '[redacted]',
    operator_token_source: describeSource(
      sources?.operatorTokenSource,
      config.operatorToken ? 'from PDS_OPERATOR_TOKEN' : inDataDir(OPERATOR_TOKEN_FILE),
    ),
    secret_key: '[redacted]',
    secret_key_source: describeSource(
      sources?.secretKeySource,
      config.secretKey ? 'from PDS_SECRET_KEY' : inDataDir(SECRET_KEY_FILE),
    ),
    console_session_lifetime: formatDuration(config.consoleSessionMs),
    console_session_idle: formatDuration(config.consoleIdleMs),
    abandon_after: formatDuration(config.abandonAfterMs),
    webhook_timeout: formatDuration(config.webhookTimeoutMs),
    webhook_retry_schedule: config.webhookRetryScheduleMs.map(formatDuration).join(','),
    allow_private_webhook_urls: config.allowPrivateWebhookUrls,
    idempotency_ttl: formatDuration(config.idempotencyTtlMs),
    delivery_log_retention: formatDuration(config.deliveryLogRetentionMs),
    alert_oldest_queued: formatDuration(config.alertOldestQueuedMs),
    alert_projection_lag: formatDuration(config.alertProjectionLagMs),
    sandbox: config.sandbox,
    sandbox_size: config.sandboxSize,
    backup_dir: config.backupDir,
    backup_every: formatDuration(config.backupEveryMs),
    backup_keep: config.backupKeep,
    log_level: config.logLevel,
    log_format: config.logFormat,
  };
}
