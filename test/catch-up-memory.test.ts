/**
 * The memory a start's catch-up took is given back once the start has settled (docs/read-side.md,
 * "Memory after the first start"): `giveMemoryBack` on its own, and `pds serve` asking it of every
 * thread once the sandbox is seeded and projected; the main thread gives back what loading the
 * program took as soon as a start has gone a second without being ready.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { generateEvents } from '../bench/projection.ts';
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

test('pds serve: once the sandbox is seeded and projected, the main, projector and dispatcher threads each give back the memory of the catch-up', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-catch-up-memory-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const child = spawn(process.execPath, ['cli/pds.ts', 'serve'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      PDS_DATA_DIR: dir,
      PDS_SANDBOX: '1',
      PDS_SANDBOX_SIZE: '1',
    },
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
  type Line = { msg: string; thread?: string; heap_mb_before?: number; heap_mb_after?: number };
  const lines = () =>
    stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Line);
  const givenBack = () => lines().filter((line) => line.msg === CATCH_UP_MEMORY_GIVEN_BACK);
  const deadline = Date.now() + 30_000;
  while (givenBack().length < 3) {
    if (child.exitCode !== null) t.fail(`exited with ${child.exitCode}`);
    if (Date.now() > deadline) t.fail(`not given back by every thread: ${JSON.stringify(givenBack())}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const given = givenBack();
  t.deepEqual(given.map((line) => line.thread ?? 'main').sort(), ['dispatcher', 'main', 'projector']);
  for (const line of given) t.true(line.heap_mb_after! <= line.heap_mb_before!, JSON.stringify(line));
  // After the seeding and its projection, not before: the banner came first.
  const banner = stdout.indexOf('pds: sandbox ready at ');
  t.true(banner >= 0 && banner < stdout.indexOf(CATCH_UP_MEMORY_GIVEN_BACK));
  t.is(lines().filter((line) => line.msg === 'sandbox seeded').length, 1);
  child.kill('SIGTERM');
  t.deepEqual(await exited, [0, null]);
});

test('pds serve: a first start over a long log has the main thread give back the memory of loading the program while the read models build, before it is ready', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-start-memory-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // About 200,000 events: their first start takes five seconds here, well past the second the main
  // thread waits.
  const events = await openSqliteEventStore(path.join(dir, 'events.db'));
  await generateEvents(events, 200_000);
  await events.close();
  const child = spawn(process.execPath, ['cli/pds.ts', 'serve'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', PDS_DATA_DIR: dir, PDS_SANDBOX: '0' },
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
  type Line = { msg: string; thread?: string; heap_mb_before?: number; heap_mb_after?: number };
  // Complete lines only: the last may still be arriving.
  const lines = () =>
    stdout
      .split('\n')
      .slice(0, -1)
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Line);
  const deadline = Date.now() + 90_000;
  while (lines().filter((line) => line.msg === CATCH_UP_MEMORY_GIVEN_BACK).length < 3) {
    if (child.exitCode !== null) t.fail(`exited with ${child.exitCode}`);
    if (Date.now() > deadline) t.fail(`the start did not settle: ${stdout.slice(-2_000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const messages = lines().map((line) => line.msg);
  const early = lines().filter((line) => line.msg === START_MEMORY_GIVEN_BACK);
  t.is(early.length, 1, 'once, by the main thread');
  t.is(early[0].thread, undefined);
  t.true(early[0].heap_mb_after! < early[0].heap_mb_before!, JSON.stringify(early[0]));
  // Before the start settled, and again once it has, as every start does.
  t.true(messages.indexOf(START_MEMORY_GIVEN_BACK) < messages.indexOf(CATCH_UP_MEMORY_GIVEN_BACK));
  child.kill('SIGTERM');
  t.deepEqual(await exited, [0, null]);
});
