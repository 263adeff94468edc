/**
 * Who copies the embedded store's WAL into its file (eventstore/sqlite/log.ts, `checkpoints`), and the
 * group commit of one event-loop turn (eventstore/sqlite/appends.ts). Observed from outside, through
 * the files: the database file grows only when a checkpoint copies pages into it, and a second
 * connection's passive checkpoint, or the wal-index in the `-shm` file, reports how many pages the WAL
 * holds.
 */
import { once } from 'node:events';
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { endianness, tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import test, { type ExecutionContext } from 'ava';
import type { EventStore } from '../eventstore/port.ts';
import { CHECKPOINT_EVERY_MS, RESTART_AT_PAGES } from '../eventstore/sqlite/log.ts';
import { type CheckpointMode, type GroupCommit, openSqliteEventStore } from '../eventstore/sqlite.ts';
import { rawEvent } from './support/raw-events.ts';

/** How many events the appender thread of the 'background' case appends: past 20,000 WAL pages. */
const APPENDS = 6_000;

async function storeFile(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-checkpoints-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 'events.db');
}

async function open(t: ExecutionContext, file: string, checkpoints: CheckpointMode): Promise<EventStore> {
  const store = await openSqliteEventStore(file, { checkpoints });
  t.teardown(() => store.close());
  return store;
}

/** Appends one at a time, each its own transaction: a few new WAL pages each (the table and two indexes). */
async function appendOneByOne(store: EventStore, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await store.append(`s-${i % 50}`, [rawEvent('Appended', { i, padding: 'x'.repeat(500) })]);
  }
}

/** The WAL's size in pages, as a passive checkpoint of another connection reports it (it copies nothing new). */
function walPages(file: string): number {
  const db = new DatabaseSync(file);
  try {
    return (db.prepare('PRAGMA wal_checkpoint(PASSIVE)').get() as { log: number }).log;
  } finally {
    db.close();
  }
}

/**
 * The WAL's length in frames now, as the header of the wal-index in the `-shm` file holds it
 * (`mxFrame`, at byte 16 in the host's byte order; https://sqlite.org/walformat.html, "2.1 The
 * WAL-Index Header"). Read, not a checkpoint: unlike `walPages` it copies nothing, so it leaves the
 * checkpointer alone.
 */
function walFrames(file: string): number {
  const fd = openSync(`${file}-shm`, 'r');
  try {
    const header = Buffer.alloc(4);
    readSync(fd, header, 0, 4, 16);
    return endianness() === 'LE' ? header.readUInt32LE(0) : header.readUInt32BE(0);
  } finally {
    closeSync(fd);
  }
}

const fileSize = (file: string) => statSync(file).size;

test("'commit' (the default): the commit that takes the WAL past 1,000 pages copies it into the file", async (t) => {
  const file = await storeFile(t);
  const store = await open(t, file, 'commit');
  const before = fileSize(file);
  await appendOneByOne(store, 1_500);
  t.true(fileSize(file) > before, 'pages were copied into the database file');
});

test("'elsewhere': this connection's commits leave the WAL to another connection below the backstop", async (t) => {
  const file = await storeFile(t);
  const store = await open(t, file, 'elsewhere');
  const before = fileSize(file);
  await appendOneByOne(store, 1_500);
  t.is(fileSize(file), before, 'nothing was copied into the database file');
  t.true(walPages(file) > 1_000, 'the WAL holds every append');
});

test("'background': another thread's connection copies the WAL into the file and starts it again at its next turn past 4,000 pages while appends go on", async (t) => {
  const file = await storeFile(t);
  (await open(t, file, 'commit')).close(); // the schema, before both connections
  const before = fileSize(file);
  await open(t, file, 'background');
  // The checkpointer's chances are the turns of its timer, however late a loaded machine runs them: a
  // timer of the same period, set after it on the same event loop, looks at the WAL after each turn.
  const turns = { pastRestart: 0, longestPast: 0 };
  const watch = setInterval(() => {
    turns.pastRestart = walFrames(file) >= RESTART_AT_PAGES ? turns.pastRestart + 1 : 0;
    turns.longestPast = Math.max(turns.longestPast, turns.pastRestart);
  }, CHECKPOINT_EVERY_MS);
  t.teardown(() => clearInterval(watch));
  // Steady appends on another thread, enough to take the WAL past the writer's backstop (16,000
  // pages): the WAL is never all copied when a writer begins, so without the restart checkpoints it
  // would grow to that backstop, staying past 4,000 pages for many turns.
  const appender = new Worker(new URL('./support/appender-thread.ts', import.meta.url), {
    workerData: { file, count: APPENDS },
  });
  await once(appender, 'message');
  clearInterval(watch);
  t.true(fileSize(file) > before, 'the background connection copied the WAL into the file');
  // The WAL file keeps the largest size the WAL had: a restart starts it again from its beginning.
  const walFilePages = Math.round(statSync(`${file}-wal`).size / 4_096);
  t.log(`the WAL grew to ${walFilePages} pages at most`);
  t.true(walFilePages > RESTART_AT_PAGES, 'the WAL grew past the point of a restart');
  t.true(
    turns.longestPast <= 3,
    `the WAL stayed past ${RESTART_AT_PAGES} pages for ${turns.longestPast} turns of the checkpointer`,
  );
});

/** Forty appends requested by forty timer callbacks of one turn, one of them refused; how many WAL pages they took, against 39 one by one. */
async function turnOfAppends(t: ExecutionContext, groupCommit: GroupCommit) {
  const file = await storeFile(t);
  const store = await openSqliteEventStore(file, { checkpoints: 'elsewhere', groupCommit });
  t.teardown(() => store.close());
  await store.append('taken', [rawEvent('First')]);
  const start = walPages(file);
  const settled = await new Promise<PromiseSettledResult<unknown>[]>((resolve) => {
    const appends: Promise<unknown>[] = [];
    for (let i = 0; i < 40; i++) {
      setTimeout(() => {
        appends.push(
          i === 7
            ? store.append('taken', [rawEvent('Second')], { expectedRevision: 'no_stream' })
            : store.append(`turn-${i}`, [rawEvent('Appended', { i })]),
        );
        if (appends.length === 40) resolve(Promise.allSettled(appends));
      }, 0);
    }
  });
  t.is(
    settled.filter((s) => s.status === 'rejected').length,
    1,
    'the wrong expected revision alone is refused',
  );
  t.is((await store.readAll()).length, 40, 'the other 39 are kept');
  const turn = walPages(file) - start;
  await appendOneByOne(store, 39);
  return { turn, oneByOne: walPages(file) - start - turn };
}

test("groupCommit 'turn': the appends of one event-loop turn share one transaction, each refused or kept alone", async (t) => {
  const { turn, oneByOne } = await turnOfAppends(t, 'turn');
  t.true(turn * 5 < oneByOne, `the turn wrote ${turn} pages; 39 transactions wrote ${oneByOne}`);
});

test("groupCommit 'callback': the appends of one callback share a transaction, those of others do not", async (t) => {
  const { turn, oneByOne } = await turnOfAppends(t, 'callback');
  t.true(turn * 2 > oneByOne, `the turn wrote ${turn} pages; 39 transactions wrote ${oneByOne}`);
});
