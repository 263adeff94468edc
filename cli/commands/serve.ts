/**
 * `pds serve --role <role>`: runs the service until SIGTERM or SIGINT.
 *
 * Output contract: bad configuration prints exactly one line on stderr and exits 1; once listening,
 * the URL is logged and a short banner (URL, where the operator token is) goes to stdout. The first
 * signal stops gracefully and exits 0; a second one exits 1 at once.
 */
import { type Command, Option } from 'commander';
import { defaultComponents } from '../components.ts';
import { createService, ROLES, type Role } from '../compose.ts';
import { ConfigError, loadConfig, type ResolvedConfig } from '../config.ts';

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the service: every role in one process, or one role of a split deployment')
    .addOption(
      new Option('--role <role>', 'the part of the service this process runs').choices(ROLES).default('all'),
    )
    .action(async (options: { role: Role }) => {
      await serve(options.role);
    });
}

/** Where the operator token comes from; the token itself only when embedded mode keeps it in the data dir. */
function tokenLine(config: ResolvedConfig): string {
  const source = config.operatorTokenSource;
  if (source.kind === 'env') return `operator token: from ${source.variable}`;
  const where = `${source.kind === 'generated' ? 'generated into' : 'kept in'} ${source.file}`;
  return config.embedded ? `operator token (${where}): ${config.operatorToken}` : `operator token: ${where}`;
}

async function serve(role: Role): Promise<void> {
  let config: ResolvedConfig;
  try {
    config = await loadConfig(process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`pds: configuration error: ${error.message}\n`);
    process.exit(1);
  }

  const service = createService(config, { role, components: defaultComponents() });
  const log = service.logger;

  process.on('uncaughtException', (error) => {
    log.fatal({ err: error }, 'uncaught exception');
    process.exit(1);
  });
  process.on('unhandledRejection', (reason) => {
    log.fatal({ err: reason }, 'unhandled promise rejection');
    process.exit(1);
  });

  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      log.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    signalled = true;
    log.info({ signal }, 'stopping');
    service.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, 'graceful stop failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  let port: number;
  try {
    port = await service.start();
  } catch (error) {
    if (signalled) return; // the signal handler owns the exit
    log.fatal({ err: error }, 'start failed');
    process.stderr.write(`pds: cannot start: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
  if (signalled) return;

  const url = `http://localhost:${port}`;
  log.info({ url, components: service.components }, `listening on ${url}`);
  process.stdout.write(`pds: listening on ${url} (role ${role})\npds: ${tokenLine(config)}\n`);
}
