/**
 * The README's commands work as written (README, "Run it" and "The first five minutes"): every command
 * of its fenced `sh` blocks runs, in order, in one bash, as a user types them into their terminals on a
 * fresh data dir, and each must exit 0. `npm start` and the webhook receiver run in the background, as
 * they would in terminals of their own, and the script waits for what a user waits for (the start
 * banner's keys, the receiver listening). At the end the receiver must have been sent the cart's
 * status changes, as the README says it is.
 *
 * What the test changes, and why: the ports (8080 and 9000 may be taken on a shared machine: `PORT`
 * and the receiver's port are free ones, put where the README names them) and the data dir (a fresh
 * temporary one instead of `./data`). `curl` fails on an HTTP error (`--fail-with-body`), so a refused
 * request fails its step. The commands it does not run are named in `NOT_RUN`, with the reason.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { ROOT } from './support/source-files.ts';

/** Commands of the README this test does not run, with the reason. */
const NOT_RUN: Record<string, string> = {
  'npm ci': 'installs the dependencies: the test runs on the tree already installed',
};

/** Commands that keep running (a terminal of their own), and what a user waits for before going on. */
const BACKGROUND: Record<string, (log: string) => string> = {
  'npm start': (log) =>
    `for i in $(seq 1200); do grep -q 'sandbox API keys' ${log} && break; kill -0 $! 2>/dev/null || { cat ${log}; exit 1; }; sleep 0.5; done; grep -q 'sandbox API keys' ${log}`,
};
const RECEIVER = /^node -e .*\.listen\(9000\)'$/;

/** The README's fenced `sh` blocks, as commands: a line ending in `\` goes on, `#` lines are comments. */
function readmeCommands(): string[] {
  const text = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const commands: string[] = [];
  for (const [, block] of text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    let pending = '';
    for (const line of block.split('\n')) {
      if (pending === '' && (line.trim() === '' || line.trim().startsWith('#'))) continue;
      if (line.endsWith('\\')) {
        pending += `${line.slice(0, -1)}\n`;
        continue;
      }
      commands.push(pending + line);
      pending = '';
    }
  }
  return commands;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no TCP port was given');
  return address.port;
}

/** The substitutions a user on this machine would make, each required to apply at least once. */
function localise(
  commands: string[],
  port: number,
  receiverPort: number,
  dataDir: string,
): { commands: string[]; unused: string[] } {
  const substitutions: [RegExp, string][] = [
    [/localhost:8080/g, `localhost:${port}`],
    [/\b9000\b/g, String(receiverPort)],
    [/\bdata\/operator-token\b/g, path.join(dataDir, 'operator-token')],
  ];
  const used = new Set<RegExp>();
  const out = commands.map((command) =>
    substitutions.reduce((text, [pattern, value]) => {
      if (pattern.test(text)) used.add(pattern);
      pattern.lastIndex = 0;
      return text.replace(pattern, value);
    }, command),
  );
  return { commands: out, unused: substitutions.filter(([p]) => !used.has(p)).map(([p]) => String(p)) };
}

function has(program: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${program}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const missing = ['bash', 'curl'].filter((p) => !has(p));
const title =
  "the README's commands run as written, in order, and the receiver gets the cart's status changes";
if (missing.length > 0) {
  const reason = `${missing.join(' and ')} not installed`;
  console.log(`readme.test.ts: skipped: ${reason}`);
  test.skip(`${title} — skipped: ${reason}`, () => {});
} else {
  test(title, async (t) => {
    t.timeout(600_000);
    const work = mkdtempSync(path.join(tmpdir(), 'pds-readme-'));
    const dataDir = path.join(work, 'data');
    const [port, receiverPort] = [await freePort(), await freePort()];
    const all = readmeCommands();
    const runnable = all.filter((c) => !(c in NOT_RUN));
    for (const command of Object.keys(NOT_RUN)) t.true(all.includes(command), `the README has ${command}`);
    t.true(
      runnable.some((c) => RECEIVER.test(c)),
      'the README runs a webhook receiver on port 9000',
    );
    const { commands, unused } = localise(runnable, port, receiverPort, dataDir);
    t.deepEqual(unused, [], 'every substitution applies to the README');

    const progress = path.join(work, 'progress');
    const receiverLog = path.join(work, 'receiver.log');
    const lines = [
      'set -eo pipefail',
      'curl() { command curl --fail-with-body "$@"; }',
      ...commands.flatMap((command, i) => {
        const step = `echo ${i} >> ${progress}`;
        const original = runnable[i];
        if (original in BACKGROUND) {
          const log = path.join(work, `background-${i}.log`);
          return [step, `${command} > ${log} 2>&1 &`, BACKGROUND[original](log)];
        }
        if (RECEIVER.test(original)) {
          const ready = `for i in $(seq 100); do command curl -s -o /dev/null http://localhost:${receiverPort}/ && break; sleep 0.1; done`;
          return [step, `${command} > ${receiverLog} 2>&1 &`, ready];
        }
        return [step, command];
      }),
    ];
    const env: NodeJS.ProcessEnv = { PORT: String(port), PDS_DATA_DIR: dataDir };
    for (const [name, value] of Object.entries(process.env)) {
      // The user's shell has no service configuration of its own.
      if (!name.startsWith('PDS_') && name !== 'PORT' && name !== 'LOG_LEVEL') env[name] ??= value;
    }
    const shell: ChildProcess = spawn('bash', ['-c', lines.join('\n')], {
      cwd: ROOT,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    shell.stdout?.on('data', (chunk) => {
      output += chunk;
    });
    shell.stderr?.on('data', (chunk) => {
      output += chunk;
    });
    const stopAll = async () => {
      try {
        process.kill(-(shell.pid as number), 'SIGTERM');
      } catch {
        return; // every process of the group has ended
      }
      for (let i = 0; i < 100; i++) {
        try {
          process.kill(-(shell.pid as number), 0);
        } catch {
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      process.kill(-(shell.pid as number), 'SIGKILL');
    };
    try {
      const code = await new Promise<number | null>((resolve) => shell.on('exit', resolve));
      const steps = readFileSync(progress, 'utf8').trim().split('\n');
      const last = runnable[Number(steps[steps.length - 1])];
      t.is(code, 0, `the README's command failed: ${last}\n${output}`);
      t.is(steps.length, runnable.length, 'every command ran');

      // Checkout and the status move, each a cart_status_updated at the receiver (delivery is async).
      let bodies: { webhook_event: string; cart: { status: string } }[] = [];
      for (let i = 0; i < 300 && bodies.length < 2; i++) {
        bodies = readFileSync(receiverLog, 'utf8')
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line));
        if (bodies.length < 2) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      t.deepEqual(
        bodies.map((b) => `${b.webhook_event} ${b.cart.status}`),
        ['cart_status_updated verification', 'cart_status_updated preparing'],
      );
    } finally {
      await stopAll();
      rmSync(work, { recursive: true, force: true });
    }
  });
}

test("the README's configuration table has a row for every variable the service reads, and no other", async (t) => {
  const { CONFIG_VARIABLES } = await import('../cli/config.ts');
  const text = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = text.slice(
    text.indexOf('## Configuration'),
    text.indexOf('\n## ', text.indexOf('## Configuration') + 1),
  );
  const rows = [...section.matchAll(/^\| `(\w+)` \| .+ \| .+ \|$/gm)].map((m) => m[1]);
  t.deepEqual([...rows].sort(), [...CONFIG_VARIABLES].sort());
});

test("the README's dependency table says what every dependency of package.json is for, and names no other", (t) => {
  const text = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const start = text.indexOf('## Dependencies');
  const section = text.slice(start, text.indexOf('\n## ', start + 1));
  const named = [...section.matchAll(/^\| (.+?) \| .+ \|$/gm)]
    .flatMap((m) => [...m[1].matchAll(/`([^`]+)`/g)].map((n) => n[1]))
    .filter((n) => n !== 'package');
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  t.deepEqual(
    [...new Set(named)].sort(),
    Object.keys({ ...pkg.dependencies, ...pkg.devDependencies }).sort(),
  );
});
