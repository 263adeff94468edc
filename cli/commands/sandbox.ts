/**
 * `pds sandbox …`: the sandbox data set and live traffic on it.
 *
 *   pds sandbox seed [--size <stores>] [--seed <n>] [--json | --env]
 *   pds sandbox traffic [--rate 5/s] [--duration 30s] [--seed <n>] [--json]
 *
 * `seed` writes the sandbox straight into the event store the service's configuration names (the same
 * environment as `pds serve`: PDS_DATA_DIR, PDS_EVENT_STORE, PDS_SECRET_KEY, …), through the platform's
 * deciders; it is what `pds serve` does on a first start, for split deployments and scripts. Run again,
 * it seeds nothing and prints the keys again.
 *
 * `traffic` is a client of the running service (PDS_URL, PDS_OPERATOR_TOKEN): it creates carts through
 * the platform API, adds items, identifies customers, checks out and moves carts along the allowed
 * status moves, and leaves some carts idle, so abandonment and webhooks have something to do. It finds
 * the sandbox's menu through the store menu feed partner, with a key it issues for the run and revokes
 * at the end (see `cli/sandbox/traffic.ts`).
 */
import type { Command } from 'commander';
import { createCustomerData } from '../../application/customer-data.ts';
import { protectCustomerData } from '../../application/protected-event-store.ts';
import { openEventStore } from '../../eventstore/index.ts';
import { CliError, EXIT } from '../client.ts';
import { ConfigError, loadConfig, parseDuration } from '../config.ts';
import { openKeyStore } from '../customer-keys.ts';
import { positiveInteger, printJson } from '../options.ts';
import {
  describeSandbox,
  SandboxRefusedError,
  sampleRequest,
  sandboxShellVariables,
  seedProgress,
  seedSandbox,
} from '../sandbox/seed.ts';
import { DEFAULT_SANDBOX_SEED, MAX_SANDBOX_SIZE } from '../sandbox/sizes.ts';
import { describeTraffic, runTraffic, type TrafficOptions } from '../sandbox/traffic.ts';
import { runClientCommand } from './run.ts';

export type { TrafficSummary } from '../sandbox/traffic.ts';

/** `5/s`, `5`, `300/m`, `0.5/s` → requests per second. */
export function parseRate(raw: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(?:\/\s*(s|m|min|h))?\s*$/.exec(raw);
  const per = { s: 1, m: 60, min: 60, h: 3600 }[(m?.[2] ?? 's') as 's'];
  const rate = m ? Number(m[1]) / per : Number.NaN;
  if (!(rate > 0 && rate <= 1000)) {
    throw new CliError(
      `--rate: expected requests per second like 5/s or 300/m (at most 1000/s), got ${JSON.stringify(raw)}`,
      EXIT.usage,
    );
  }
  return rate;
}

// ---------------------------------------------------------------------------------------------------
// seed

interface SeedFlags {
  size?: string;
  seed?: string;
  json?: boolean;
  env?: boolean;
}

async function seedCommand(options: SeedFlags): Promise<string> {
  if (options.json && options.env) throw new CliError('give --json or --env, not both', EXIT.usage);
  let config: Awaited<ReturnType<typeof loadConfig>>;
  try {
    config = await loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`configuration error: ${err.message}`, EXIT.usage);
    throw err;
  }
  const size =
    options.size === undefined
      ? config.sandboxSize
      : positiveInteger('--size', options.size, MAX_SANDBOX_SIZE);
  const seed =
    options.seed === undefined ? DEFAULT_SANDBOX_SEED : positiveInteger('--seed', options.seed, 2 ** 31 - 1);
  // As the service writes: the generated customers sealed under their keys (docs/operations.md,
  // "Customer data").
  const log = await openEventStore(config.eventStoreUrl, { synchronous: config.eventStoreSync });
  const keys = await openKeyStore(config.keyStoreUrl);
  const store = protectCustomerData(log, createCustomerData(keys, config.secretKey));
  const progress = seedProgress({ bar: !options.json && !options.env });
  try {
    const result = await seedSandbox({
      store,
      secretKey: config.secretKey,
      abandonAfterMs: config.abandonAfterMs,
      size,
      seed,
      onProgress: progress.onProgress,
    });
    const base = (process.env.PDS_URL?.trim() || `http://localhost:${config.port}`).replace(/\/+$/, '');
    if (options.env) return `${sandboxShellVariables(result)}\n`;
    if (options.json) {
      const sample = sampleRequest(result, base);
      return printJson({ ...result, docs_url: `${base}/docs`, sample_request: sample });
    }
    const note =
      result.size !== size && result.outcome === 'seeded'
        ? `(an interrupted seeding of size ${result.size} was finished; --size ${size} was not used)\n`
        : '';
    return `${note}${describeSandbox(result, base)}\n`;
  } catch (err) {
    if (err instanceof SandboxRefusedError) throw new CliError(err.message, EXIT.refused);
    throw err;
  } finally {
    progress.stop();
    await keys.close();
    await store.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// traffic

interface TrafficFlags {
  rate: string;
  duration?: string;
  seed?: string;
  json?: boolean;
}

/** The traffic command's options, checked (a bad one is a usage error). */
function trafficOptions(options: TrafficFlags): TrafficOptions {
  const rate = parseRate(options.rate);
  let durationMs: number | undefined;
  if (options.duration !== undefined) {
    try {
      durationMs = parseDuration(options.duration);
    } catch (err) {
      throw new CliError(`--duration: ${(err as Error).message}`, EXIT.usage);
    }
    if (durationMs <= 0) throw new CliError('--duration: expected more than zero', EXIT.usage);
  }
  const seed =
    options.seed === undefined ? DEFAULT_SANDBOX_SEED : positiveInteger('--seed', options.seed, 2 ** 31 - 1);
  return { rate, durationMs, seed, bar: !options.json };
}

async function trafficCommand(options: TrafficFlags): Promise<string> {
  const summary = await runTraffic(trafficOptions(options));
  if (summary.failed > 0) process.exitCode = EXIT.failed;
  return options.json ? printJson(summary) : describeTraffic(summary);
}

export function registerSandbox(program: Command): void {
  const sandbox = program
    .command('sandbox')
    .description('sandbox data: seed it, and drive live traffic on it');

  sandbox
    .command('seed')
    .description(
      'seed the sandbox into the configured event store (once; run again, it prints the API keys again)',
    )
    .option(
      '--size <stores>',
      `stores in the sandbox, 1-${MAX_SANDBOX_SIZE} (default: PDS_SANDBOX_SIZE or 50); the rest scales with them`,
    )
    .option('--seed <n>', `the data set's random seed (default ${DEFAULT_SANDBOX_SEED})`)
    .option('--json', 'print the outcome, the partners and their API keys as JSON')
    .option(
      '--env',
      'print the API keys as shell variables, one per partner kind: eval "$(pds sandbox seed --env)"',
    )
    .action((options: SeedFlags) => runClientCommand(() => seedCommand(options)));

  sandbox
    .command('traffic')
    .description('create, fill, check out and move carts through the platform API at a steady rate')
    .option('--rate <rate>', 'requests per second: 5/s, 300/m', '5/s')
    .option('--duration <duration>', 'how long to run (30s, 5m, 1h); default: until Ctrl-C')
    .option('--seed <n>', `the seed the sandbox was made with (default ${DEFAULT_SANDBOX_SEED})`)
    .option('--json', 'print the summary as JSON')
    .action((options: TrafficFlags) => runClientCommand(() => trafficCommand(options)));
}
