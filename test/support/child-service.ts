/**
 * `pds serve` as a real child process on a given data dir, for crash tests: SIGKILL it mid-work, start
 * it again on the same data, and check nothing was lost.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ExecutionContext } from 'ava';
import type { Caller } from './cart-world.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CHILD_TOKEN = 'crash-test-operator-token-0123456789abcdef';

export interface Child {
  process: ChildProcess;
  api: Caller;
  base: string;
  /** What it printed so far, stdout and stderr. */
  output(): string;
}

/** A data dir removed after the test. */
export async function childDataDir(t: ExecutionContext, prefix = 'pds-crash-'): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * `pds serve` on `dataDir`, ready (`/readyz` 200). By default a 1 s webhook timeout (a lease runs out
 * 3 s after an attempt starts), fast retries and no sandbox; `env` adds or overrides variables, and
 * `args` replaces the command line after `node`.
 */
export async function serveChild(
  t: ExecutionContext,
  dataDir: string,
  env: Record<string, string> = {},
  args = ['cli/pds.ts', 'serve'],
): Promise<Child> {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      PDS_DATA_DIR: dataDir,
      PDS_OPERATOR_TOKEN: CHILD_TOKEN,
      PDS_WEBHOOK_TIMEOUT: '1s',
      PDS_WEBHOOK_RETRY_SCHEDULE: '0s,200ms,200ms,200ms,200ms',
      LOG_LEVEL: 'warn',
      // Embedded mode seeds the sandbox on a first start: its 80,000 events would race the test's own.
      PDS_SANDBOX: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  child.stdout?.setEncoding('utf8').on('data', (c: string) => {
    stdout += c;
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
  });
  // A child that dies on its own is a finding: say what it printed.
  child.once('exit', (code, signal) => {
    if (signal === null && code !== 0) t.log(`pds serve exited with ${code}: ${stderr.slice(-2_000)}`);
  });
  const deadline = Date.now() + 30_000;
  let base: string | undefined;
  while (!base) {
    const match = /^pds: listening on http:\/\/[^:]+:(\d+)/m.exec(stdout);
    if (match) base = `http://127.0.0.1:${match[1]}`;
    else if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`no start: ${stdout} ${stderr}`);
    else await new Promise((r) => setTimeout(r, 50));
  }
  for (;;) {
    const ready = await fetch(`${base}/readyz`).catch(() => undefined);
    if (ready?.status === 200) break;
    if (Date.now() > deadline) throw new Error('not ready');
    await new Promise((r) => setTimeout(r, 50));
  }
  const url = base;
  return {
    process: child,
    base: url,
    output: () => stdout + stderr,
    api: {
      call: (method, p, body, headers = {}) =>
        fetch(`${url}${p}`, {
          method,
          headers: {
            authorization: `Bearer ${CHILD_TOKEN}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            ...headers,
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        }),
    },
  };
}

export async function killChild(child: Child): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  const exited = once(child.process, 'exit');
  child.process.kill('SIGKILL');
  await exited;
}
