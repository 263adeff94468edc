/**
 * The memory a start's catch-up took is given back once the start has settled (docs/read-side.md,
 * "Memory after the first start"): `giveMemoryBack` on its own, and `pds serve` asking it of every
 * thread once the sandbox is seeded and projected; the main thread gives back what loading the
 * program took as soon as a start has gone a second without being ready.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import { generateEvents } from '../bench/history.ts';
import { CATCH_UP_MEMORY_GIVEN_BACK, giveMemoryBack, START_MEMORY_GIVEN_BACK } from '../cli/memory.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

test('giveMemoryBack collects the garbage a catch-up left and shrinks the heap back, with no --expose-gc', (t) => {
  t.is((globalThis as { gc?: unknown }).gc, undefined);
  const settled = giveMemoryBack().heap_mb_after;
  // About 100 MB of documents that outlive the young generation, as a catch-up's batches do, then dropped.
  let kept: object[] | undefined = [];
  for (let i = 0; i < 400_000; i++) kept.push({ id: i, text: `document ${i}`.repeat(8), at: [i, i + 1] });
  t.true(kept.length > 0);
  kept = undefined;
  const given = giveMemoryBack();
  t.true(given.heap_mb_before >= settled + 64, JSON.stringify({ settled, given }));
  // The heap is back to what it was, not just emptied: an ordinary collection keeps the pages.
  t.true(given.heap_mb_after <= settled + 4, JSON.stringify({ settled, given }));
});

type Line = { msg: string; thread?: string; heap_mb_before?: number; heap_mb_after?: number };

/**
 * `pds serve` on `dir` with `env`, its stdout collected: `lines` are its complete JSON log lines (the
 * last may still be arriving), `untilSettled` waits (up to `ms`) until `threads` threads gave back
 * the catch-up's memory, and `stop` ends it with SIGTERM and answers how it exited.
 */
function serve(t: ExecutionContext, dir: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ['cli/pds.ts', 'serve'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', PDS_DATA_DIR: dir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  const exited = once(child, 'exit');
  const lines = () =>
    stdout
      .split('\n')
      .slice(0, -1)
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Line);
  const givenBack = () => lines().filter((line) => line.msg === CATCH_UP_MEMORY_GIVEN_BACK);
  return {
    stdout: () => stdout,
    lines,
    givenBack,
    async untilSettled(ms: number, threads = 3) {
      const deadline = Date.now() + ms;
      while (givenBack().length < threads) {
        if (child.exitCode !== null)
          throw new Error(`exited with ${child.exitCode}: ${stdout.slice(-2_000)}`);
        if (Date.now() > deadline) throw new Error(`not given back by every thread: ${stdout.slice(-2_000)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop() {
      child.kill('SIGTERM');
      return await exited;
    },
  };
}

test('pds serve: once the sandbox is seeded and projected, the main, projector and dispatcher threads each give back the memory of the catch-up', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-catch-up-memory-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const pds = serve(t, dir, { PDS_SANDBOX: '1', PDS_SANDBOX_SIZE: '1' });
  await pds.untilSettled(30_000);
  const given = pds.givenBack();
  t.deepEqual(given.map((line) => line.thread ?? 'main').sort(), ['dispatcher', 'main', 'projector']);
  for (const line of given) t.true(line.heap_mb_after! <= line.heap_mb_before!, JSON.stringify(line));
  // After the seeding and its projection, not before: the banner came first.
  const stdout = pds.stdout();
  const banner = stdout.indexOf('pds: sandbox ready at ');
  t.true(banner >= 0 && banner < stdout.indexOf(CATCH_UP_MEMORY_GIVEN_BACK));
  t.is(pds.lines().filter((line) => line.msg === 'sandbox seeded').length, 1);
  t.deepEqual(await pds.stop(), [0, null]);
});

/**
 * About 200,000 events, whose first start takes five seconds here, well past the second the main
 * thread waits: generated once, and copied into each test's data dir.
 */
let history: Promise<string> | undefined;
async function withLongHistory(dir: string): Promise<void> {
  history ??= (async () => {
    const source = await mkdtemp(path.join(tmpdir(), 'pds-long-history-'));
    const events = await openSqliteEventStore(path.join(source, 'events.db'));
    await generateEvents(events, 200_000);
    await events.close();
    return source;
  })();
  await copyFile(path.join(await history, 'events.db'), path.join(dir, 'events.db'));
}
test.after.always(async () => {
  if (history) await rm(await history, { recursive: true, force: true });
});

test('pds serve: a first start over a long log has the main thread give back the memory of loading the program while the read models build, before it is ready', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-start-memory-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await withLongHistory(dir);
  const pds = serve(t, dir, { PDS_SANDBOX: '0' });
  await pds.untilSettled(90_000);
  const messages = pds.lines().map((line) => line.msg);
  const early = pds.lines().filter((line) => line.msg === START_MEMORY_GIVEN_BACK);
  t.is(early.length, 1, 'once, by the main thread');
  t.is(early[0].thread, undefined);
  t.true(early[0].heap_mb_after! < early[0].heap_mb_before!, JSON.stringify(early[0]));
  // Before the start settled, and again once it has, as every start does.
  t.true(messages.indexOf(START_MEMORY_GIVEN_BACK) < messages.indexOf(CATCH_UP_MEMORY_GIVEN_BACK));
  t.deepEqual(await pds.stop(), [0, null]);
});

test('pds serve: where the main thread builds the read models itself (no projector thread), it gives back nothing while it builds them', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-start-memory-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await withLongHistory(dir);
  const pds = serve(t, dir, { PDS_SANDBOX: '0', PDS_PROJECTOR_THREAD: '0' });
  // The main thread and the dispatcher's give back the catch-up's memory once the start settles.
  await pds.untilSettled(90_000, 2);
  t.deepEqual(
    pds
      .givenBack()
      .map((line) => line.thread ?? 'main')
      .sort(),
    ['dispatcher', 'main'],
  );
  t.is(pds.lines().filter((line) => line.msg === START_MEMORY_GIVEN_BACK).length, 0);
  t.deepEqual(await pds.stop(), [0, null]);
});
