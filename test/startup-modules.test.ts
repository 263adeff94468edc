/**
 * What `pds serve` loads before it is ready (docs/read-side.md, "Start-up and restart"): loading modules
 * is nearly all of a restart, so what a start does not need is loaded when it is first used, or a
 * second after the service is ready. A preload hook records every module the service resolves; the
 * modules resolved before `/readyz` answered 200 must not include any of these.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { childDataDir, killChild, serveChild } from './support/child-service.ts';

interface Resolved {
  url: string;
  parent: string | null;
  at: number;
  /** 0: the main thread; else a role thread (cli/role-thread.ts). */
  thread: number;
}

/** Every module a `pds serve` child resolved, on any thread, and when it answered `/readyz` 200. */
async function tracedStart(
  t: ExecutionContext,
  prefix: string,
): Promise<{ resolved: Resolved[]; readyAt: number }> {
  const dataDir = await childDataDir(t, prefix);
  const trace = path.join(dataDir, 'modules.jsonl');
  const child = await serveChild(t, dataDir, { PDS_TEST_MODULE_TRACE: trace }, [
    '--import',
    './test/fixtures/module-trace.ts',
    'cli/pds.ts',
    'serve',
  ]);
  const readyAt = Date.now();
  await killChild(child);
  const resolved = (await readFile(trace, 'utf8'))
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Resolved);
  return { resolved, readyAt };
}

test('a start loads only the serve command, and neither the sandbox seeder, nor all of mingo, nor http as an ES module', async (t) => {
  const traced = await tracedStart(t, 'pds-startup-');
  const resolved = traced.resolved.filter((m) => m.at <= traced.readyAt);
  const urls = resolved.map((m) => m.url);
  t.true(
    urls.some((u) => u.endsWith('/cli/commands/serve.ts')),
    'the serve command is loaded',
  );

  const unwanted: Array<[string, RegExp]> = [
    ['another subcommand', /\/cli\/commands\/(?!serve\.ts)[^/]+\.ts$/],
    ['the sandbox generator or seeder', /\/cli\/sandbox\/(generate|seed|record-sink)\.ts$/],
    // Its index registers every operator it has; the read stores need the query operators only.
    ['mingo with every operator', /\/node_modules\/mingo\/(cjs|esm)\/index\.js$/],
    // Its ES module build imports http as an ES module (see below).
    ['the ES module build of the router', /\/node_modules\/@koa\/router\/dist\/index\.mjs$/],
  ];
  for (const [what, pattern] of unwanted) {
    t.deepEqual(
      urls.filter((u) => pattern.test(u)),
      [],
      `${what} is not loaded before the service is ready`,
    );
  }
  // Importing http as an ES module makes Node load undici (its WebSocket export) at once: 30 ms.
  const esmHttp = resolved.filter(
    (m) => /^node:https?$/.test(m.url) && m.parent?.startsWith('file://') && !m.parent.endsWith('.cjs'),
  );
  t.deepEqual(
    esmHttp.filter((m) => m.parent?.includes('/work/') && !m.parent.includes('/node_modules/')),
    [],
    'no module of the service imports node:http as an ES module',
  );
});

test('the role threads, which serve no HTTP, load neither Koa nor its router', async (t) => {
  const { resolved } = await tracedStart(t, 'pds-thread-modules-');
  const threads = new Set(resolved.filter((m) => m.thread !== 0).map((m) => m.thread));
  t.is(threads.size, 2, 'the dispatcher and the projector threads ran, traced');
  const koa = /\/node_modules\/(koa|@koa\/router)\//;
  t.true(
    resolved.some((m) => m.thread === 0 && koa.test(m.url)),
    'the main thread serves, with Koa',
  );
  t.deepEqual(
    resolved.filter((m) => m.thread !== 0 && koa.test(m.url)).map((m) => m.url),
    [],
  );
});
