/**
 * `pds customers protect [--batch <events>] [--vacuum] [--json]`: seals, in place, the personal data
 * the embedded event store holds in plain text from before sealing existed (docs/operations.md,
 * "Customer data"). It opens the data dir's files itself, beside the running service or with it
 * stopped, and resumes where a stopped run left off. It is finished (exit 0) only once `events.db` was
 * rebuilt after the last event it sealed (`--vacuum`, the service stopped) and its WAL truncated:
 * before that the old values may remain in the file's free space, and it exits `unfinished` (7). A
 * split deployment is refused: EventStoreDB never rewrites an event (the docs give its procedure).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { createCustomerData } from '../../application/customer-data.ts';
import {
  type ProtectionReport,
  protectStoredCustomerData,
} from '../../application/customer-data-protection.ts';
import { openEventDataRewrite } from '../../eventstore/sqlite/rewrite.ts';
import { openDeliveryBodies } from '../../projections/sqlite/delivery-bodies.ts';
import { openRebuiltFile } from '../../projections/sqlite/rebuild.ts';
import { CliError, EXIT, table } from '../client.ts';
import { type Config, loadConfig, SECRET_KEY_FILE } from '../config.ts';
import { openKeyStore } from '../customer-keys.ts';
import { commandConfig, positiveInteger, printJson } from '../options.ts';
import { runClientCommand } from './run.ts';

/** The progress of this rewrite is kept under this name in `events.db` (`event_rewrites`). */
export const PROTECT_REWRITE = 'customers-protect';

function embeddedConfig(env: NodeJS.ProcessEnv): Config {
  const config = commandConfig(env);
  if (!config.embedded || !config.eventStoreUrl.startsWith('sqlite:')) {
    throw new CliError(
      'PDS_EVENT_STORE is EventStoreDB, whose events are never rewritten: protect its streams as docs/operations.md, "Customer data" says',
      EXIT.usage,
    );
  }
  return config;
}

/** A key wrapped by another secret than the service's would open nothing: never make one up here. */
function checkSecretKey(config: Config): void {
  if (config.secretKey === null && !existsSync(path.join(config.dataDir, SECRET_KEY_FILE))) {
    throw new CliError(
      `neither PDS_SECRET_KEY nor ${path.join(config.dataDir, SECRET_KEY_FILE)}: run protect with the service's PDS_SECRET_KEY`,
      EXIT.usage,
    );
  }
}

function describe(r: ProtectionReport): string {
  const total = Object.values(r.sealed).reduce((a, b) => a + b, 0);
  if (r.from >= r.through && total === 0 && r.deliveries_sealed === 0 && !r.vacuumed && r.finished) {
    const when = r.finished_before ? ` (finished ${r.finished_before})` : '';
    return `nothing to do: the log is protected up to position ${r.through}${when}\n`;
  }
  const rows = Object.entries(r.sealed).map(([type, n]) => [type, n]);
  const erased =
    r.sealed_erased > 0 ? `, ${r.sealed_erased} of customers erased before (read as erased)` : '';
  const pending =
    r.deliveries_sealed > 0
      ? `${r.deliveries_sealed} pending webhook bod(ies) sealed in dispatcher.db\n`
      : '';
  const wal = r.wal_truncated
    ? ''
    : 'the WAL could not be truncated while another process read it: run again once reads are quiet, or stop the service\n';
  const vacuum = r.vacuumed
    ? 'events.db rebuilt: no space of it holds what it held before\n'
    : r.finished
      ? ''
      : 'not finished: the space the old values took in events.db may still hold them in plain text: run again with --vacuum, the service stopped\n';
  return (
    `positions ${r.from + 1}–${r.through}: ${r.scanned} event(s) of customer data read in ${r.batches} batch(es), ` +
    `${total} sealed${erased}\n${rows.length > 0 ? `${table(['event type', 'sealed'], rows)}\n` : ''}${pending}${wal}${vacuum}`
  );
}

export function registerProtect(customers: Command): void {
  customers
    .command('protect')
    .description(
      'seal, in place, the personal data the embedded event store holds in plain text from before sealing (resumable)',
    )
    .option('--batch <events>', 'events per transaction', '500')
    .option(
      '--vacuum',
      'then rebuild events.db, so no plain text is left in the space earlier writes freed (appends wait: stop the service first)',
    )
    .option('--json', 'print the report as JSON')
    .action((options: { batch: string; vacuum?: boolean; json?: boolean }) =>
      runClientCommand(async () => {
        const batchSize = positiveInteger('--batch', options.batch, 10_000);
        const parsed = embeddedConfig(process.env);
        const file = parsed.eventStoreUrl.slice('sqlite:'.length);
        if (!existsSync(file)) throw new CliError(`${file} does not exist`, EXIT.notFound);
        checkSecretKey(parsed);
        const config = await loadConfig(process.env);
        const rewrite = openEventDataRewrite(file, PROTECT_REWRITE);
        const keys = await openKeyStore(config.keyStoreUrl);
        const dispatcher = config.dispatcherStoreUrl.startsWith('sqlite:')
          ? openDeliveryBodies(config.dispatcherStoreUrl.slice('sqlite:'.length))
          : null;
        const readStore =
          config.readStoreUrl.startsWith('sqlite:') && config.readStoreUrl !== config.dispatcherStoreUrl
            ? openRebuiltFile(config.readStoreUrl.slice('sqlite:'.length))
            : null;
        try {
          const started = performance.now();
          const report = await protectStoredCustomerData({
            rewrite,
            data: createCustomerData(keys, config.secretKey),
            scratch: (scratchKeys) => createCustomerData(scratchKeys, config.secretKey),
            batchSize,
            vacuum: options.vacuum === true,
            deliveries: dispatcher,
            readStore,
          });
          const ms = Math.round(performance.now() - started);
          if (!report.finished) process.exitCode = EXIT.unfinished;
          if (options.json) return printJson({ ...report, ms });
          return describe(report);
        } finally {
          await readStore?.close();
          await dispatcher?.close();
          await keys.close();
          await rewrite.close();
        }
      }),
    );
}
