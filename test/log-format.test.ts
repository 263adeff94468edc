/**
 * Logs a person reads and logs a collector reads (docs/operations.md, "Logs"): pino-pretty's text when
 * the process's stdout is a terminal, JSON lines otherwise, `PDS_LOG_FORMAT` to choose; the process
 * that reads the environment decides, for its role threads too; secrets censored in both forms.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import { parseConfig } from '../cli/config.ts';
import { createLogger } from '../cli/logger.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// biome-ignore lint/suspicious/noControlCharactersInRegex: the terminal's colour sequences are what it removes
const COLOURS = /\u001b\[[0-9;]*m/g;

test('the format follows the terminal unless PDS_LOG_FORMAT says; colours on a terminal unless NO_COLOR', (t) => {
  t.like(parseConfig({}, { isTTY: true }), { logFormat: 'pretty', logColors: true });
  t.like(parseConfig({}, { isTTY: false }), { logFormat: 'json', logColors: false });
  t.like(parseConfig({}), { logFormat: 'json', logColors: false });
  t.like(parseConfig({ PDS_LOG_FORMAT: 'json' }, { isTTY: true }), { logFormat: 'json' });
  t.like(parseConfig({ PDS_LOG_FORMAT: 'pretty' }, { isTTY: false }), {
    logFormat: 'pretty',
    logColors: false,
  });
  t.like(parseConfig({ NO_COLOR: '1' }, { isTTY: true }), { logFormat: 'pretty', logColors: false });
});

test('pretty lines: level, message and fields as text, secrets censored as in JSON', (t) => {
  let text = '';
  const logger = createLogger(
    'info',
    {
      write: (line: string) => {
        text += line;
      },
    },
    { format: 'pretty' },
  );
  logger
    .child({ role: 'all' })
    .info(
      { headers: { authorization: 'Bearer sk_live_secret' }, secret_key: 'k3y', operator_token: 'tok-123' },
      'hello operator',
    );
  logger.debug('not at info');
  t.regex(text, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: hello operator\n/);
  t.regex(text, /role: "all"/);
  t.regex(text, /"authorization": "\[redacted\]"/);
  t.regex(text, /secret_key: "\[redacted\]"/);
  for (const secret of ['sk_live_secret', 'k3y', 'tok-123']) t.false(text.includes(secret), secret);
  t.false(text.includes('{"level"'), 'no JSON line');
  t.false(text.includes('not at info'));
  t.false(COLOURS.test(text), 'no colour unless asked');
});

const hasScript = spawnSync('script', ['--version']).status === 0;

/**
 * `pds serve` on a pseudo-terminal (util-linux `script`): everything it wrote there, once `/readyz`
 * answered 200 (both role threads started and logged), colours and carriage returns removed.
 */
async function serveOnTerminal(
  t: ExecutionContext,
  env: Record<string, string>,
): Promise<{ raw: string; text: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-log-format-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const child = spawn('script', ['-qfec', `${process.execPath} cli/pds.ts serve`, '/dev/null'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', PDS_DATA_DIR: dir, PDS_SANDBOX: '0', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const deadline = Date.now() + 30_000;
  let base: string | undefined;
  while (Date.now() < deadline) {
    const port = /^pds: listening on http:\/\/[^:]+:(\d+)/m.exec(output)?.[1];
    if (port) base = `http://127.0.0.1:${port}`;
    if (
      base &&
      (await fetch(`${base}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      ))
    )
      break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.truthy(base, `no start: ${output}`);
  // The lines the role threads wrote as they started may reach the terminal after /readyz answers:
  // wait for them (the tests look at them in either format), not for a moment that load can outlast.
  const threadsLogged = () =>
    ['dispatcher', 'projector'].every((thread) => output.includes(`starting the ${thread} thread`));
  while (!threadsLogged() && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGTERM'); // `script` ends the service it runs
  await once(child, 'exit');
  return { raw: output, text: output.replace(COLOURS, '').replace(/\r/g, '') };
}

test("on a terminal the log is text, every thread's, with the configuration once and no secret", async (t) => {
  if (!hasScript) return t.pass('no `script` command here to make a pseudo-terminal');
  const { raw, text: output } = await serveOnTerminal(t, {});
  t.regex(raw, COLOURS, 'in colour on a terminal');
  const lines = output.split('\n');
  t.deepEqual(
    lines.filter((line) => line.startsWith('{')),
    [],
    'no JSON line',
  );
  t.is(lines.filter((line) => /^\[[\d:.]+\] INFO: starting pds \(role all\)$/.test(line)).length, 1);
  t.is(lines.filter((line) => line.includes('"log_format": "pretty"')).length, 1, 'the configuration once');
  t.true(lines.some((line) => line.includes('"operator_token": "[redacted]"')));
  for (const thread of ['dispatcher', 'projector'])
    t.true(
      lines.some((line) => new RegExp(`^\\[[\\d:.]+\\] INFO: starting the ${thread} thread$`).test(line)),
      thread,
    );
  // The generated token shows once, in the banner, never in the log.
  const token = /^pds: operator token \(generated into [^)]+\): (\S+)$/m.exec(output)?.[1];
  t.truthy(token);
  t.is(output.split(token ?? '?').length - 1, 1);
});

test("PDS_LOG_FORMAT=json keeps JSON lines on a terminal, the role threads' too", async (t) => {
  if (!hasScript) return t.pass('no `script` command here to make a pseudo-terminal');
  const { text: output } = await serveOnTerminal(t, { PDS_LOG_FORMAT: 'json' });
  const logs = output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  t.true(logs.some((line) => line.msg === 'starting pds (role all)'));
  t.true(logs.some((line) => line.msg === 'starting the dispatcher thread' && line.thread === 'dispatcher'));
  t.false(/^\[[\d:.]+\] INFO:/m.test(output));
});
