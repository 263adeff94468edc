/**
 * `pds backup <dir>`, `pds backup verify <backup>` and `pds restore <backup> [data dir]`: backups of the
 * embedded deployment (docs/operations.md, "Backups"). They open the data dir's files themselves, on the
 * machine the service runs on and beside it while it serves (SQLite's WAL lets a reader copy while the
 * service writes): no token, no route, and they work as well with the service stopped. A split deployment
 * (EventStoreDB, MongoDB) is backed up with those engines' own tools.
 */
import path from 'node:path';
import type { Command } from 'commander';
import pkg from '../../package.json' with { type: 'json' };
import {
  ERASURE_LEDGER_FILE,
  ErasureLedgerMissing,
  ErasureLedgerUnreadable,
} from '../backup/erasure-ledger.ts';
import type { BackupFile, Manifest } from '../backup/manifest.ts';
import { ledgerBeside, RestoreRefused, restoreBackup } from '../backup/restore.ts';
import { takeBackup } from '../backup/take.ts';
import { BackupNotFound, verifyBackup } from '../backup/verify.ts';
import { CliError, EXIT, table } from '../client.ts';
import { storesOutsideDataDir } from '../config-stores.ts';
import { commandConfig, printJson } from '../options.ts';
import { plural } from '../terminal.ts';
import { runClientCommand } from './run.ts';

/**
 * The data dir the environment names (`PDS_DATA_DIR`), refused when the service's stores are not all
 * files in it: a backup copies the data dir, and a store elsewhere would be left out.
 */
export function embeddedDataDir(env: NodeJS.ProcessEnv): string {
  const config = commandConfig(env);
  if (!config.embedded) {
    throw new CliError(
      'PDS_EVENT_STORE is not the embedded store: back up EventStoreDB and MongoDB with their own tools',
      EXIT.usage,
    );
  }
  const outside = storesOutsideDataDir(config);
  if (outside.length > 0) {
    throw new CliError(
      `${outside.join(', ')} names a file outside the data dir ${config.dataDir}: a backup copies the data dir`,
      EXIT.usage,
    );
  }
  return config.dataDir;
}

function filesTable(files: readonly BackupFile[]): string {
  return table(
    ['file', 'kind', 'bytes', 'sha256'],
    files.map((f) => [f.name, f.kind, f.bytes, f.sha256]),
  );
}

const summary = (m: Manifest) =>
  `${plural(m.log.events, 'event')} in ${plural(m.log.streams, 'stream')} up to position ${m.log.head}, taken ${m.created_at} by pds ${m.version}`;

/**
 * A missing backup or a missing ledger `--erasures` names is `notFound` (3), a refused restore or an
 * unreadable erasure ledger `refused` (4); anything else fails (1).
 */
function exitCodeOf(error: unknown): never {
  if (error instanceof BackupNotFound || error instanceof ErasureLedgerMissing)
    throw new CliError(error.message, EXIT.notFound);
  if (error instanceof RestoreRefused || error instanceof ErasureLedgerUnreadable)
    throw new CliError(error.message, EXIT.refused);
  throw error;
}

export function registerBackup(program: Command): void {
  const backup = program
    .command('backup')
    .description('a consistent copy of the embedded data dir while the service serves; verify one')
    .argument('<dir>', 'where to make the backup (a new directory pds-backup-<time> in it)')
    .option('--json', 'print the manifest as JSON')
    .action((dir: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const dataDir = embeddedDataDir(process.env);
        const taken = await takeBackup({ dataDir, into: path.resolve(dir), version: pkg.version });
        if (options.json)
          return printJson({ backup: taken.dir, ms: Math.round(taken.ms), manifest: taken.manifest });
        return `backup ${taken.dir}: ${summary(taken.manifest)}, in ${(taken.ms / 1000).toFixed(1)} s\n${filesTable(taken.manifest.files)}\n`;
      }),
    );

  backup
    .command('verify')
    .description(
      'checksums, integrity check of each database, and the manifest against the files (exit 1 when not sound)',
    )
    .argument('<backup>', 'a backup directory')
    // `--json` is `pds backup`'s option, which commander finds after `verify` too.
    .action((dir: string, _options: unknown, command: Command) =>
      runClientCommand(async () => {
        const options = command.optsWithGlobals<{ json?: boolean }>();
        const { manifest, problems } = await verifyBackup(path.resolve(dir)).catch(exitCodeOf);
        if (options.json) {
          if (problems.length > 0) process.exitCode = EXIT.failed;
          return printJson({ backup: path.resolve(dir), sound: problems.length === 0, problems, manifest });
        }
        if (problems.length > 0)
          throw new CliError(`${dir} is not sound: ${problems.join('; ')}`, EXIT.failed);
        return `${dir} is sound: ${summary(manifest as Manifest)}\n`;
      }),
    );
}

export function registerRestore(program: Command): void {
  program
    .command('restore')
    .description(
      'a verified backup into an empty data dir, the erasures made since applied again; then start the service on it',
    )
    .argument('<backup>', 'a backup directory')
    .argument('[data dir]', 'where to restore (default: PDS_DATA_DIR, else ./data); must be empty or absent')
    .option(
      '--erasures <ledger...>',
      `erasure ledgers (or a replaced data dir's keys.db) to apply again, besides the ${ERASURE_LEDGER_FILE} beside the backup`,
    )
    .action((dir: string, target: string | undefined, options: { erasures?: string[] }) =>
      runClientCommand(async () => {
        const dataDir = target ? path.resolve(target) : embeddedDataDir(process.env);
        const backupDir = path.resolve(dir);
        const named = (options.erasures ?? []).map((f) => path.resolve(f));
        const ledgers = [ledgerBeside(backupDir), ...named];
        const restored = await restoreBackup(backupDir, dataDir, named).catch(exitCodeOf);
        const noLedger =
          restored.ledgers.length === 0
            ? `no erasure ledger at ${ledgers.join(', ')}: erasures made after the backup are not applied again (--erasures <ledger>)\n`
            : '';
        const applied =
          restored.ledgers.length === 0 && restored.reapplied.length === 0
            ? ''
            : `${restored.reapplied.length} erasure(s) the backup does not hold whole applied again from ${["the backup's keys.db", ...restored.ledgers].join(', ')}` +
              (restored.reapplied.length > 0
                ? ': their keys are destroyed; the service records them on their carts at start\n'
                : '\n');
        const erasures = noLedger + applied;
        return `restored into ${dataDir}: ${summary(restored.manifest)}\n${erasures}`;
      }),
    );
}
