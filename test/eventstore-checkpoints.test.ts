/**
 * Who copies the embedded store's WAL into its file (eventstore/sqlite/log.ts, `checkpoints`), and the
 * group commit of one event-loop turn (eventstore/sqlite/appends.ts). Observed from outside, through
 * the files: the database file grows only when a checkpoint copies pages into it, and a second
 * connection's passive checkpoint reports how many pages the WAL holds.
 */
import { once } from 'node:events';
import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import test, { type ExecutionContext } from 'ava';
import type { EventStore } from '../eventstore/port.ts';
import { type CheckpointMode, type GroupCommit, openSqliteEventStore } from '../eventstore/sqlite.ts';
import { rawEvent } from './support/raw-events.ts';

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

test("'background': another thread's connection copies the WAL into the file and keeps it short while appends go on", async (t) => {
  const file = await storeFile(t);
  (await open(t, file, 'commit')).close(); // the schema, before both connections
  const before = fileSize(file);
  await open(t, file, 'background');
  // Steady appends on another thread: the WAL is never all copied when a writer begins, so without
  // the restart checkpoints it would grow to the writer's backstop (16,000 pages).
  const appender = new Worker(new URL('./support/appender-thread.ts', import.meta.url), {
    workerData: { file, ms: 2_000 },
  });
  const [appended] = (await once(appender, 'message')) as [number];
  t.true(appended > 5_500, `appended ${appended}: enough to pass the backstop without restarts`);
  t.true(fileSize(file) > before, 'the background connection copied the WAL into the file');
  const walFilePages = statSync(`${file}-wal`).size / 4_096;
  t.true(walFilePages < 10_000, `the WAL grew to ${Math.round(walFilePages)} pages at most`);
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
