/**
 * `pds serve` as a real child process: start, ops endpoints, signals, configuration errors.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-serve-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Spawns `pds serve` (or another command line) with a clean environment: only PATH and what the test sets. */
function run(
  t: ExecutionContext,
  env: Record<string, string>,
  args: string[] = [],
  command: string[] = [process.execPath, 'cli/pds.ts', 'serve'],
): Run {
  const child = spawn(command[0], [...command.slice(1), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Waits for the banner line and returns the base URL (on 127.0.0.1, whatever host the banner names). */
async function listening(t: ExecutionContext, r: Run, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = /^pds: listening on http:\/\/[^:]+:(\d+)/m.exec(r.stdout());
    if (match) return `http://127.0.0.1:${match[1]}`;
    if (r.child.exitCode !== null) t.fail(`exited with ${r.child.exitCode}: ${r.stderr()}`);
    if (Date.now() > deadline) t.fail(`not listening after ${timeoutMs} ms: ${r.stdout()} ${r.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * How long a process may take to exit: a bound for a loaded machine (a start that fails opens its
 * stores first; at load 15 that took over 10 s), not a figure the tests assert.
 */
const EXIT_WAIT_MS = 30_000;

async function exitWithin(r: Run, ms: number): Promise<number | null | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  const result = await Promise.race([r.exited, timeout]);
  clearTimeout(timer);
  return result;
}

test('serves the ops endpoints, prints the generated token, and stops on SIGTERM with 0', async (t) => {
  const dir = await tempDir(t);
  const r = run(t, { PDS_DATA_DIR: dir });
  const base = await listening(t, r);

  const health = await fetch(`${base}/healthz`, { headers: { 'X-Request-Id': 'serve-test-1' } });
  t.is(health.status, 200);
  t.deepEqual(await health.json(), { status: 'ok' });
  t.is(health.headers.get('x-request-id'), 'serve-test-1');

  // Listening comes first; ready once the projector and dispatcher threads have caught up.
  let ready = await fetch(`${base}/readyz`);
  for (let i = 0; ready.status !== 200 && i < 200; i++) {
    await ready.body?.cancel();
    await new Promise((resolve) => setTimeout(resolve, 50));
    ready = await fetch(`${base}/readyz`);
  }
  t.is(ready.status, 200);
  t.deepEqual(await ready.json(), {
    status: 'ready',
    role: 'all',
    checks: {
      event_store: 'ok',
      key_store: 'ok',
      write_side_lookups: 'ok',
      // Every subscription to the log, each up (docs/operations.md, "Recovery").
      'subscription:index_of_special_streams': 'ok',
      'subscription:lookups': 'ok',
      // The projector on its own thread, and that thread's checks (docs/operations.md, "Threads").
      projector_thread: 'ok',
      'projector:event_store': 'ok',
      'projector:key_store': 'ok',
      'projector:projections_caught_up': 'ok',
      'projector:subscription:projection_carts': 'ok',
      'projector:subscription:projection_catalog': 'ok',
      'projector:subscription:projection_operators': 'ok',
      'projector:subscription:projection_partner_keys': 'ok',
      'projector:subscription:projection_webhook_deliveries': 'ok',
      'projector:subscription:projection_webhook_subscriptions': 'ok',
      // The dispatcher on its own thread, and that thread's checks.
      dispatcher_thread: 'ok',
      'dispatcher:event_store': 'ok',
      'dispatcher:key_store': 'ok',
      'dispatcher:abandonment_timers_restored': 'ok',
      'dispatcher:webhook_deliveries_restored': 'ok',
      'dispatcher:subscription:abandonment_timer': 'ok',
      'dispatcher:subscription:webhook_delivery_worker': 'ok',
      'dispatcher:subscription:webhook_fan_out': 'ok',
      'dispatcher:subscription:webhook_subscription_tracker': 'ok',
    },
  });

  const metrics = await (await fetch(`${base}/metrics`)).text();
  t.regex(metrics, /http_request_duration_seconds_count\{method="GET",route="\/healthz",status="200"\} 1/);
  // The threads' metrics, merged: their subscriptions beside this thread's, their gauges, once each.
  t.regex(metrics, /^pds_subscription_up\{subscription="webhook_fan_out"\} 1$/m);
  t.regex(metrics, /^pds_subscription_up\{subscription="projection_carts"\} 1$/m);
  t.regex(metrics, /^pds_subscription_up\{subscription="lookups"\} 1$/m);
  t.regex(metrics, /^pds_webhook_deliveries_pending 0$/m);
  // The sandbox is being seeded meanwhile: the lag is whatever it is, but reported.
  t.regex(metrics, /^pds_projection_lag_events\{projection="carts"\} \d+$/m);
  t.regex(metrics, /^pds_thread_restarts_total\{thread="projector"\} 0$/m);
  t.regex(metrics, /^pds_thread_restarts_total\{thread="dispatcher"\} 0$/m);
  t.regex(metrics, /^process_start_time_seconds \d+/m);
  t.is(metrics.match(/^# TYPE pds_subscription_up gauge$/gm)?.length, 1);

  // Embedded mode prints the token it keeps in the data dir, outside the JSON log.
  const token = (await readFile(path.join(dir, 'operator-token'), 'utf8')).trim();
  t.true(
    r
      .stdout()
      .includes(`pds: operator token (generated into ${path.join(dir, 'operator-token')}): ${token}\n`),
  );
  const logs = r
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  t.false(
    logs.some((line) => JSON.stringify(line).includes(token)),
    'the token is never logged',
  );
  t.true(logs.some((line) => String(line.msg).startsWith('listening on http://')));
  t.true(logs.some((line) => line.msg === 'starting pds (role all)'));
  // The configuration once, by the main thread: the role threads run on the same one and say so not.
  t.is(logs.filter((line) => 'config' in line).length, 1);
  for (const thread of ['dispatcher', 'projector'])
    t.like(
      logs.find((line) => line.msg === `starting the ${thread} thread`),
      { thread, level: 30 },
      thread,
    );
  // The banner names the console and the docs, and `/` links both.
  const url = base.replace('127.0.0.1', 'localhost');
  t.true(r.stdout().includes(`pds: console: ${url}/console, docs: ${url}/docs\n`), r.stdout());
  const home = await fetch(`${base}/`);
  t.is(home.status, 200);
  t.regex(await home.text(), /href="\/console"/);

  r.child.kill('SIGTERM');
  t.is(await exitWithin(r, EXIT_WAIT_MS), 0);
  t.regex(r.stdout(), /"msg":"pds stopped"/);
  t.is(r.stderr(), '');
});

test('a later start reuses the stored token; a token from the environment is not printed', async (t) => {
  const dir = await tempDir(t);
  const first = run(t, { PDS_DATA_DIR: dir });
  await listening(t, first);
  first.child.kill('SIGINT');
  t.is(await exitWithin(first, EXIT_WAIT_MS), 0);
  const token = (await readFile(path.join(dir, 'operator-token'), 'utf8')).trim();

  const second = run(t, { PDS_DATA_DIR: dir });
  await listening(t, second);
  // The bootstrap token is printed at the start that generated it only: later starts name its file.
  t.true(second.stdout().includes(`pds: operator token: kept in ${path.join(dir, 'operator-token')}\n`));
  t.false(second.stdout().includes(token));
  second.child.kill('SIGTERM');
  t.is(await exitWithin(second, EXIT_WAIT_MS), 0);

  const fromEnv = 'operator-token-from-the-environment';
  const third = run(t, { PDS_DATA_DIR: dir, PDS_OPERATOR_TOKEN: fromEnv });
  await listening(t, third);
  t.true(third.stdout().includes('pds: operator token: from PDS_OPERATOR_TOKEN\n'));
  t.false(third.stdout().includes(fromEnv));
  third.child.kill('SIGTERM');
  t.is(await exitWithin(third, EXIT_WAIT_MS), 0);
});

test('each role serves the ops endpoints and names its role in /readyz', async (t) => {
  const dir = await tempDir(t);
  const r = run(t, { PDS_DATA_DIR: dir }, ['--role', 'dispatcher']);
  const base = await listening(t, r);
  t.like(await (await fetch(`${base}/readyz`)).json(), { status: 'ready', role: 'dispatcher' });
  t.is((await fetch(`${base}/healthz`)).status, 200);
  r.child.kill('SIGTERM');
  t.is(await exitWithin(r, EXIT_WAIT_MS), 0);
});

test('with PDS_OPS_PORT the ops endpoints answer on that port only, and the banner names it', async (t) => {
  const dir = await tempDir(t);
  const r = run(t, { PDS_DATA_DIR: dir, PDS_OPS_PORT: '0' }, ['--role', 'dispatcher']);
  const base = await listening(t, r);
  const opsLine =
    /^pds: operational endpoints \(\/healthz, \/readyz, \/metrics\) on http:\/\/localhost:(\d+)$/m;
  for (let i = 0; !opsLine.test(r.stdout()) && i < 100; i++) await new Promise((res) => setTimeout(res, 20));
  const opsPort = opsLine.exec(r.stdout())?.[1];
  t.truthy(opsPort, r.stdout());
  const ops = `http://127.0.0.1:${opsPort}`;
  t.not(ops, base);
  t.like(await (await fetch(`${ops}/readyz`)).json(), { status: 'ready', role: 'dispatcher' });
  t.is((await fetch(`${ops}/healthz`)).status, 200);
  t.regex(await (await fetch(`${ops}/metrics`)).text(), /^process_start_time_seconds \d+/m);
  for (const p of ['/healthz', '/readyz', '/metrics']) t.is((await fetch(`${base}${p}`)).status, 404, p);
  r.child.kill('SIGTERM');
  t.is(await exitWithin(r, EXIT_WAIT_MS), 0);
});

test('bad configuration: exit 1 and exactly one line on stderr naming the variable', async (t) => {
  const dir = await tempDir(t);
  const r = run(t, { PDS_DATA_DIR: dir, PORT: 'abc' });
  t.is(await exitWithin(r, EXIT_WAIT_MS), 1);
  t.is(r.stderr(), 'pds: configuration error: PORT: expected an integer from 0 to 65535, got "abc"\n');
  t.is(r.stdout(), '');
});

test('a PDS_EVENT_STORE naming a tlsCAFile that does not exist: exit 1 and one line naming the variable and the file', async (t) => {
  const dir = await tempDir(t);
  const ca = path.join(dir, 'eventstore-ca', 'ca.crt');
  const r = run(t, {
    PDS_DATA_DIR: dir,
    PDS_EVENT_STORE: `esdb://admin:esdb-password@eventstore:2113?tls=true&tlsCAFile=${ca}`,
    PDS_READ_STORE: 'mongodb://mongo:27017/pds?replicaSet=rs0',
    PDS_OPERATOR_TOKEN: 'operator-token-0123456789',
    PDS_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
  });
  t.is(await exitWithin(r, EXIT_WAIT_MS), 1);
  t.is(
    r.stderr(),
    `pds: configuration error: PDS_EVENT_STORE: tlsCAFile names ${ca}, which does not exist\n`,
  );
  t.is(r.stdout(), '');
});

test('an unknown role is a usage error: exit 2', async (t) => {
  const dir = await tempDir(t);
  const r = run(t, { PDS_DATA_DIR: dir }, ['--role', 'web']);
  t.is(await exitWithin(r, EXIT_WAIT_MS), 2);
  t.regex(r.stderr(), /--role/);
  t.regex(r.stderr(), /all, api, projector, dispatcher/);
});

test('a port already in use: exit 1 with one clear line on stderr', async (t) => {
  const dir = await tempDir(t);
  const first = run(t, { PDS_DATA_DIR: path.join(dir, 'a') });
  const base = await listening(t, first);
  const port = new URL(base).port;
  const second = run(t, { PDS_DATA_DIR: path.join(dir, 'b'), PORT: port });
  t.is(await exitWithin(second, EXIT_WAIT_MS), 1);
  t.regex(second.stderr(), /^pds: cannot start: .*EADDRINUSE.*\n$/);
  first.child.kill('SIGTERM');
  t.is(await exitWithin(first, EXIT_WAIT_MS), 0);
});

test('`npm start` answers /healthz and stops cleanly when npm itself gets SIGTERM', async (t) => {
  const dir = await tempDir(t);
  // npm forwards the signal to its script; `exec` in the script makes that script the service itself.
  const r = run(t, { PDS_DATA_DIR: dir, HOME: process.env.HOME ?? dir }, [], ['npm', 'start', '--silent']);
  const base = await listening(t, r);
  t.is((await fetch(`${base}/healthz`)).status, 200);
  r.child.kill('SIGTERM');
  t.is(await exitWithin(r, EXIT_WAIT_MS), 0);
  await t.throwsAsync(fetch(`${base}/healthz`), undefined, 'the service is gone, not orphaned');
});
