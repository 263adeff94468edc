/**
 * The `pds` program: the service and its operator CLI. Each subcommand lives in `cli/commands/` and
 * registers itself onto the program. `cli/pds.ts` runs it.
 */
import { Command, CommanderError } from 'commander';
import pkg from '../package.json' with { type: 'json' };
import { EXIT } from './client.ts';
import { registerAudit } from './commands/audit.ts';
import { registerImport } from './commands/import.ts';
import { registerPartners } from './commands/partners.ts';
import { registerProjections } from './commands/projections.ts';
import { registerSandbox } from './commands/sandbox.ts';
import { registerServe } from './commands/serve.ts';
import { registerWebhooks } from './commands/webhooks.ts';

const program = new Command('pds')
  .description('Partner Data Service: partner APIs, signed webhooks and their operation')
  .version(pkg.version);

registerServe(program);
registerAudit(program);
registerProjections(program);
registerWebhooks(program);
registerPartners(program);
registerSandbox(program);
registerImport(program);

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
  process.stderr.write(`pds: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(EXIT.failed);
}
