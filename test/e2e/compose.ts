/**
 * `npm run e2e:compose`: the end-to-end suite against the production shape of docker-compose.yml
 * (docs/architecture.md, "Roles"). It starts the stack under its own project name (so `down -v` never
 * touches a developer's `pds` volumes), with a fresh operator token and secret key unless the
 * environment gives them, private webhook URLs allowed (the suite's receiver runs on this host) and
 * short retries; runs test/e2e/deployment.test.ts against the first api replica; and always takes the
 * stack down with its volumes. Without docker, its compose plugin or a daemon it says why and exits 0,
 * or under `PDS_REQUIRE_ENGINES=1` (CI's engines job, docs/development.md, "Engine suites") exits 1.
 */
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { enginesRequired, REQUIRE_ENGINES } from '../support/engines.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const AVA = fileURLToPath(new URL('../../node_modules/ava/entrypoints/cli.js', import.meta.url));
const PROJECT = 'pds-e2e';
const COMPOSE = [
  'compose',
  '-p',
  PROJECT,
  '-f',
  'docker-compose.yml',
  '-f',
  'test/e2e/docker-compose.e2e.yml',
];

const firstLine = (r: SpawnSyncReturns<string>) =>
  `${r.stderr ?? ''}\n${r.stdout ?? ''}`
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '') ?? `exit code ${r.status}`;

/** Why the stack cannot run here, or undefined when it can. */
function skipReason(): string | undefined {
  const probe = (args: string[]) => spawnSync('docker', args, { encoding: 'utf8', timeout: 30_000 });
  const version = probe(['--version']);
  if (version.error) return `docker is not on PATH (${version.error.message})`;
  const compose = probe(['compose', 'version']);
  if (compose.status !== 0) return `docker has no compose plugin: ${firstLine(compose)}`;
  const info = probe(['info', '--format', '{{.ServerVersion}}']);
  if (info.status !== 0 || info.stdout.trim() === '')
    return `the Docker daemon does not answer: ${firstLine(info)}`;
  return undefined;
}

/** Runs a command with this terminal; answers its exit code and logs how long it took. */
function run(what: string, command: string, args: string[], env: NodeJS.ProcessEnv): number {
  const began = Date.now();
  console.log(`e2e:compose: ${what}: ${command === process.execPath ? 'node' : command} ${args.join(' ')}`);
  const r = spawnSync(command, args, { cwd: ROOT, env, stdio: 'inherit' });
  const code = r.status ?? 1;
  console.log(`e2e:compose: ${what}: exit ${code} in ${((Date.now() - began) / 1000).toFixed(1)} s`);
  return code;
}

function main(): number {
  const required = enginesRequired();
  const reason = skipReason();
  if (reason && required) {
    console.error(`e2e:compose: cannot run, and ${REQUIRE_ENGINES}=1 requires it: ${reason}`);
    return 1;
  }
  if (reason) {
    console.log(`e2e:compose: skipped: ${reason}`);
    return 0;
  }
  // A terminal's Ctrl-C reaches the child too; this process stays to take the stack down.
  process.on('SIGINT', () => console.log('e2e:compose: interrupted; taking the stack down'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PDS_OPERATOR_TOKEN: process.env.PDS_OPERATOR_TOKEN || randomBytes(32).toString('base64url'),
    PDS_SECRET_KEY: process.env.PDS_SECRET_KEY || randomBytes(32).toString('base64'),
    PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
    PDS_WEBHOOK_RETRY_SCHEDULE: process.env.PDS_WEBHOOK_RETRY_SCHEDULE || '0s,1s,2s,5s,10s',
  };
  let code = 1;
  try {
    code = run('start', 'docker', [...COMPOSE, 'up', '--detach', '--wait', '--build'], env);
    if (code === 0) {
      code = run('suite', process.execPath, [AVA, 'test/e2e/deployment.test.ts'], {
        ...env,
        PDS_E2E_URL: process.env.PDS_E2E_URL || 'http://127.0.0.1:8080',
        PDS_E2E_OPERATOR_TOKEN: env.PDS_OPERATOR_TOKEN,
        PDS_E2E_RECEIVER_HOST: process.env.PDS_E2E_RECEIVER_HOST || 'host.docker.internal',
      });
    }
    if (code !== 0) run('logs', 'docker', [...COMPOSE, 'logs', '--no-color', '--tail', '200'], env);
  } finally {
    const down = run('stop', 'docker', [...COMPOSE, 'down', '--volumes', '--remove-orphans'], env);
    if (code === 0) code = down;
  }
  return code;
}

process.exitCode = main();
