/**
 * The `pds` program: the service and its operator CLI. Each subcommand lives in `cli/commands/` and
 * registers itself onto the program. `cli/pds.ts` runs it.
 *
 * A subcommand's module (and what it imports: the sandbox generator, the import reader, progress bars)
 * is loaded only when that subcommand runs; `pds`, `pds help` and an unknown command load them all to
 * list them. Loading every module cost `pds serve` about 100 ms at every start (docs/read-side.md,
 * "Start-up and restart").
 */
import { Command, CommanderError } from 'commander';
import pkg from '../package.json' with { type: 'json' };
import { EXIT } from './client.ts';
import { printError } from './terminal.ts';

type Register = (program: Command) => void;

const SUBCOMMANDS: Record<string, () => Promise<Register>> = {
  serve: async () => (await import('./commands/serve.ts')).registerServe,
  audit: async () => (await import('./commands/audit.ts')).registerAudit,
  customers: async () => (await import('./commands/customers.ts')).registerCustomers,
  projections: async () => (await import('./commands/projections.ts')).registerProjections,
  webhooks: async () => (await import('./commands/webhooks.ts')).registerWebhooks,
  partners: async () => (await import('./commands/partners.ts')).registerPartners,
  operators: async () => (await import('./commands/operators.ts')).registerOperators,
  whoami: async () => (await import('./commands/operators.ts')).registerWhoami,
  sandbox: async () => (await import('./commands/sandbox.ts')).registerSandbox,
  import: async () => (await import('./commands/import.ts')).registerImport,
  backup: async () => (await import('./commands/backup.ts')).registerBackup,
  restore: async () => (await import('./commands/backup.ts')).registerRestore,
};

const program = new Command('pds')
  .description('Partner Data Service: partner APIs, signed webhooks and their operation')
  .version(pkg.version);

// The first word that is not an option names the subcommand (the program itself has no option that
// takes a value).
const named = process.argv.slice(2).find((arg) => !arg.startsWith('-'));
const wanted = named !== undefined && Object.hasOwn(SUBCOMMANDS, named) ? [named] : Object.keys(SUBCOMMANDS);
for (const register of await Promise.all(wanted.map((name) => SUBCOMMANDS[name]()))) register(program);

// Usage errors (unknown command or option, missing argument) exit 2, like most Unix tools;
// commander has already printed what was wrong.
const overrideExits = (command: Command): void => {
  command.exitOverride();
  for (const sub of command.commands) overrideExits(sub);
};
overrideExits(program);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    const benign = ['commander.helpDisplayed', 'commander.version', 'commander.help'].includes(error.code);
    process.exit(benign ? 0 : EXIT.usage);
  }
  printError(error instanceof Error ? error.message : String(error));
  process.exit(EXIT.failed);
}
