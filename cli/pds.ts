#!/usr/bin/env node
/**
 * `pds`: the service and its operator CLI. Each subcommand lives in `cli/commands/` and registers
 * itself onto the program.
 */
import { Command } from 'commander';
import pkg from '../package.json' with { type: 'json' };
import { registerServe } from './commands/serve.ts';

const program = new Command('pds')
  .description('Partner Data Service: partner APIs, signed webhooks and their operation')
  .version(pkg.version);

registerServe(program);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  process.stderr.write(`pds: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
