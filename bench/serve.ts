/**
 * The service as `npm start` runs it, in a child process of the bench: the benches that time a start
 * or keep their load generator and receiver off the service's threads use it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { npmStartArgs, npmStartEnv } from '../test/support/npm-start.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface Served {
  base: string;
  pid: number;
  readyMs: number;
  rssMb: number;
  /** What the process wrote on stdout so far. */
  output(): string;
  stop(signal: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

/**
 * `npm start`'s command (its V8 flags included) on `dir`, from spawn to `/readyz` 200; `env` adds to
 * (or overrides) its environment. `PDS_BENCH_DISPATCHER_THREAD` and `PDS_BENCH_PROJECTOR_THREAD` are
 * passed on as `PDS_DISPATCHER_THREAD` and `PDS_PROJECTOR_THREAD`, to compare the same code without a thread.
 */
function benchThreads(): Record<string, string> {
  const { PDS_BENCH_DISPATCHER_THREAD: dispatcher, PDS_BENCH_PROJECTOR_THREAD: projector } = process.env;
  return {
    ...(dispatcher !== undefined && { PDS_DISPATCHER_THREAD: dispatcher }),
    ...(projector !== undefined && { PDS_PROJECTOR_THREAD: projector }),
  };
}

export async function serve(dir: string, env: Record<string, string> = {}): Promise<Served> {
  const began = performance.now();
  const child: ChildProcess = spawn(process.execPath, npmStartArgs(), {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      PDS_DATA_DIR: dir,
      PDS_SANDBOX: '0',
      LOG_LEVEL: 'warn',
      ...npmStartEnv(),
      ...benchThreads(),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (c: string) => {
    out += c;
  });
  const exited = once(child, 'exit');
  let base = '';
  try {
    for (;;) {
      const m = /^pds: listening on http:\/\/[^:]+:(\d+)/m.exec(out);
      if (m) {
        base = `http://127.0.0.1:${m[1]}`;
        break;
      }
      if (child.exitCode !== null) throw new Error(`pds serve exited: ${out}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    for (;;) {
      const res = await fetch(`${base}/readyz`).catch(() => undefined);
      await res?.body?.cancel();
      if (res?.status === 200) break;
      if (child.exitCode !== null) throw new Error(`pds serve exited: ${out}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  const readyMs = performance.now() - began;
  const pid = child.pid as number;
  return {
    base,
    pid,
    readyMs,
    rssMb: rssMbOf(pid),
    output: () => out,
    async stop(signal) {
      child.kill(signal);
      await exited;
    },
  };
}

/** A process's resident memory (VmRSS), in MB. */
export const rssMbOf = (pid: number): number => statusMbOf(pid, 'VmRSS');

/** The most a process has held resident since it started (VmHWM), in MB. */
export const rssPeakMbOf = (pid: number): number => statusMbOf(pid, 'VmHWM');

function statusMbOf(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) / 1024,
  );
}
