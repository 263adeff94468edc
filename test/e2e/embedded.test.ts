/**
 * The end-to-end suite against the embedded service as `npm start` runs it
 * (docs/operations.md, "Processes and roles"): a child process on a fresh data dir and a free port,
 * found the way a user finds it — the port from its start line, the operator token it generated into
 * `<PDS_DATA_DIR>/operator-token` — then handed to the suite through the suite's environment variables.
 * The sandbox is off: the suite seeds its own catalog, as it must on a deployment that has none.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { npmStartArgs, npmStartEnv } from '../support/npm-start.ts';
import { sleep, targetFromEnv } from './http.ts';
import { registerSuite } from './suite.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;

let child: ChildProcess | undefined;
let dataDir: string | undefined;
let output = '';
let readyMs: number | undefined;

/** `npm start` until `/readyz` answers 200; sets `PDS_E2E_URL` and `PDS_E2E_OPERATOR_TOKEN`. */
async function start(): Promise<void> {
  dataDir = await mkdtemp(path.join(tmpdir(), 'pds-e2e-'));
  const began = performance.now();
  child = spawn(process.execPath, npmStartArgs(), {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      PDS_DATA_DIR: dataDir,
      PDS_SANDBOX: '0',
      LOG_LEVEL: 'warn',
      ...npmStartEnv(),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.setEncoding('utf8').on('data', (c: string) => {
    output += c;
  });
  child.stderr?.setEncoding('utf8').on('data', (c: string) => {
    output += c;
  });
  const deadline = Date.now() + START_TIMEOUT_MS;
  const fail = (why: string) => new Error(`npm start: ${why}; it printed: ${output.slice(-3_000)}`);
  let port: string | undefined;
  while (port === undefined) {
    port = /^pds: listening on http:\/\/[^:]+:(\d+)/m.exec(output)?.[1];
    if (child.exitCode !== null) throw fail(`exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw fail('no start line');
    await sleep(25);
  }
  const url = `http://127.0.0.1:${port}`;
  const probe = () => fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) }).catch(() => undefined);
  while ((await probe())?.status !== 200) {
    if (child.exitCode !== null || Date.now() > deadline) throw fail('never ready');
    await sleep(25);
  }
  process.env.PDS_E2E_URL = url;
  process.env.PDS_E2E_OPERATOR_TOKEN = (await readFile(path.join(dataDir, 'operator-token'), 'utf8')).trim();
  process.env.PDS_E2E_RECEIVER_HOST = '127.0.0.1';
  readyMs = performance.now() - began;
}

registerSuite(async () => {
  await start();
  return targetFromEnv();
});

// After the suite's own clean-up (serial hooks run in the order they were declared): a graceful stop by the
// child's PID, as SIGTERM must give (docs/operations.md, "Processes and roles").
test.serial.after.always('stop the service the runner started', async (t) => {
  const running = child;
  try {
    if (readyMs !== undefined) t.log(`npm start to /readyz 200: ${Math.round(readyMs)} ms`);
    if (running?.pid === undefined) return;
    if (running.exitCode !== null || running.signalCode !== null) {
      if (readyMs !== undefined) t.fail(`the service exited during the suite: ${output.slice(-2_000)}`);
      return;
    }
    const exited = new Promise<number | string | null>((resolve) =>
      running.once('exit', (code, signal) => resolve(code ?? signal)),
    );
    const stopping = performance.now();
    process.kill(running.pid, 'SIGTERM');
    // A stop that hangs is ended with SIGKILL, and fails below.
    const kill = setTimeout(() => process.kill(running.pid!, 'SIGKILL'), STOP_TIMEOUT_MS);
    const code = await exited;
    clearTimeout(kill);
    t.log(`SIGTERM to exit: ${Math.round(performance.now() - stopping)} ms`);
    t.is(code, 0, `the service's exit on SIGTERM; it printed: ${output.slice(-2_000)}`);
    // A 5xx or a failing component logs at error or fatal (pino levels 50, 60): the suite caused none.
    const errors = output.split('\n').filter((line) => /^\{.*"level":(50|60)[,}]/.test(line));
    t.deepEqual(errors, [], 'the service logged no error');
  } finally {
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  }
});
