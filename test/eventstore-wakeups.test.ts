/**
 * How readers of the embedded store learn of another connection's appends (eventstore/sqlite/log.ts):
 * a connection in another thread of the process announces each commit on a broadcast channel named
 * after the file, once the commit is visible; the WAL watch (eventstore/sqlite/wal-watch.ts) is for
 * other processes, whose appends are made here by a plain SQLite connection that announces nothing.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { BroadcastChannel, Worker } from 'node:worker_threads';
import test from 'ava';
import { openLog } from '../eventstore/sqlite/log.ts';
import { watchWal } from '../eventstore/sqlite/wal-watch.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { META, rawEvent } from './support/raw-events.ts';

async function tempFile(t: import('ava').ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-wakeups-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 'events.db');
}

test("a commit on one connection wakes another connection's readers on the same file, with no file watch", async (t) => {
  const file = await tempFile(t);
  const writer = openLog(file);
  const reader = openLog(file);
  t.teardown(() => {
    writer.close();
    reader.close();
  });
  // No reader retains the WAL watch: only the announcement can wake this one.
  reader.head.stale = false;
  const woken = reader.appended.wait();
  writer.announceAppends([
    { first: 1, last: 2, streamId: 'cart-1', types: ['CartCreated', 'CartItemAdded'] },
  ]);
  await woken;
  t.true(reader.head.stale, 'the cached head is read again');
  // What the other connection appended is known here: a reader that wants none of it skips it.
  t.true(reader.journal.skips(0, 2, { streamPrefixes: ['webhook'] }));
  t.false(reader.journal.skips(0, 2, { streamPrefixes: ['cart-'] }));
});

test('a subscriber in this thread receives what a worker thread appends, at once, many times over', async (t) => {
  const file = await tempFile(t);
  const store = await openSqliteEventStore(file);
  t.teardown(() => store.close());
  const ROUNDS = 200;
  const seen: number[] = [];
  let reached: () => void = () => {};
  const all = new Promise<void>((resolve) => {
    reached = resolve;
  });
  const sub = store.subscribeToAll(
    { from: 'start', filter: { streamPrefixes: ['thread-'] } },
    {
      onEvents(events) {
        for (const e of events) seen.push(e.revision);
        if (seen.length >= ROUNDS) reached();
      },
    },
  );
  t.teardown(() => sub.stop());
  // The worker appends one event at a time, each after the last one was read here: a lost wake-up
  // leaves the loop waiting for good (the test times out).
  const worker = new Worker(
    `
    const { parentPort, workerData } = require('node:worker_threads');
    import(workerData.module).then(async ({ openSqliteEventStore }) => {
      const store = await openSqliteEventStore(workerData.file);
      parentPort.on('message', async (n) => {
        if (n === 'stop') { await store.close(); parentPort.close(); return; }
        await store.append('thread-1', [{ type: 'Ticked', data: { n }, metadata: workerData.meta }]);
      });
      parentPort.postMessage('ready');
    });
    `,
    {
      eval: true,
      workerData: { file, meta: META, module: new URL('../eventstore/sqlite.ts', import.meta.url).href },
    },
  );
  t.teardown(() => worker.terminate());
  await new Promise((resolve) => worker.once('message', resolve));
  for (let n = 0; n < ROUNDS; n++) {
    worker.postMessage(n);
    const deadline = Date.now() + 5_000;
    while (seen.length <= n) {
      if (Date.now() > deadline) return t.fail(`append ${n} was never read (${seen.length} read)`);
      await new Promise((r) => setImmediate(r));
    }
  }
  await all;
  t.deepEqual(
    seen,
    Array.from({ length: ROUNDS }, (_, i) => i),
  );
  worker.postMessage('stop');
});

test.serial(
  "a turn's group commit is announced to other threads as it commits; a callback's, at the turn's end",
  async (t) => {
    const file = await tempFile(t);
    // What goes out on this file's channel, and when: spied on the channel's prototype, for this file only.
    const posted: string[] = [];
    const post = BroadcastChannel.prototype.postMessage;
    BroadcastChannel.prototype.postMessage = function (this: BroadcastChannel, message: unknown) {
      if (this.name.endsWith(file)) {
        posted.push((message as Array<{ streamId: string }>).map((r) => r.streamId).join(','));
      }
      return post.call(this, message);
    };
    t.teardown(() => {
      BroadcastChannel.prototype.postMessage = post;
    });
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

    const turns = await openSqliteEventStore(file, { groupCommit: 'turn' });
    t.teardown(() => turns.close());
    await Promise.all([turns.append('cart-1', [rawEvent('A')]), turns.append('cart-2', [rawEvent('B')])]);
    // Told by the time the appends are answered, not a turn later (the dispatcher thread waited for
    // the rest of the API thread's turn), and in one message.
    t.deepEqual(posted, ['cart-1,cart-2']);

    const callbacks = await openSqliteEventStore(file, { groupCommit: 'callback' });
    t.teardown(() => callbacks.close());
    posted.length = 0;
    await callbacks.append('cart-3', [rawEvent('C')]);
    await callbacks.append('cart-4', [rawEvent('D')]);
    t.deepEqual(posted, [], "a callback's commits wait for the turn's end");
    await nextTurn();
    t.deepEqual(posted, ['cart-3,cart-4'], 'and go out together');
  },
);

/** A connection of "another process": it writes events straight into the file and tells nobody. */
function silentWriter(file: string) {
  const db = new DatabaseSync(file, { timeout: 5_000 });
  const insert = db.prepare(
    `INSERT INTO events (stream_id, revision, event_id, type, data, metadata, recorded_at)
     VALUES (?, ?, ?, 'Ticked', ?, ?, '2026-01-01T00:00:00.000Z')`,
  );
  let n = 0;
  return {
    /** One commit of one event in `streamId` (revision `n`), with data big enough to write a page or two. */
    append(streamId: string) {
      insert.run(
        streamId,
        n,
        `other-${n}`,
        JSON.stringify({ n, pad: 'x'.repeat(2_000) }),
        JSON.stringify(META),
      );
      n += 1;
    },
    close: () => db.close(),
  };
}

test("another process's appends wake a subscriber through the WAL watch, each one, however close together", async (t) => {
  const file = await tempFile(t);
  const store = await openSqliteEventStore(file);
  t.teardown(() => store.close());
  const other = silentWriter(file);
  t.teardown(() => other.close());
  const seen: number[] = [];
  const sub = store.subscribeToAll(
    { from: 'start', filter: { streamPrefixes: ['other-'] } },
    {
      onEvents(events) {
        for (const e of events) seen.push(e.revision);
      },
    },
  );
  t.teardown(() => sub.stop());
  await sleep(50);
  // Each append once the one before was read, so most land while the watch is closed after the
  // previous write: only the looks when it is set again can find them (a lost one times out here).
  const ROUNDS = 40;
  for (let n = 0; n < ROUNDS; n++) {
    other.append('other-1');
    const deadline = Date.now() + 5_000;
    while (seen.length <= n) {
      if (Date.now() > deadline) return t.fail(`append ${n} was never read (${seen.length} read)`);
      await new Promise((r) => setImmediate(r));
    }
  }
  t.deepEqual(
    seen,
    Array.from({ length: ROUNDS }, (_, i) => i),
  );
});

test('a burst of WAL writes has the readers look once per recheck period, and once more after the last write', async (t) => {
  const file = await tempFile(t);
  const log = openLog(file);
  t.teardown(() => log.close());
  const other = silentWriter(file);
  t.teardown(() => other.close());
  // Longer than the store's 20 ms, so that a slow machine's turns stay far shorter than a period.
  const RECHECK_MS = 50;
  const looks: number[] = [];
  const watch = watchWal(file, RECHECK_MS, () => looks.push(performance.now()));
  t.teardown(() => watch.close());
  watch.retain();
  t.true(watch.active);
  // A commit per turn of the event loop, each reported to this thread before the next is written:
  // a watch held open throughout has the readers look at every one of them.
  const WRITES = 200;
  const started = performance.now();
  for (let i = 0; i < WRITES; i++) {
    other.append(`burst-${i}`);
    await new Promise((r) => setImmediate(r));
  }
  const lastWrite = performance.now();
  await sleep(RECHECK_MS * 5);
  const periods = Math.ceil((lastWrite - started) / RECHECK_MS) + 1;
  t.true(looks.length >= 2, 'the first write is looked at, and again after it');
  // At a write, when the watch is set again, and once more after that.
  t.true(looks.length <= 3 * periods, `${looks.length} looks in ${periods} periods of ${RECHECK_MS} ms`);
  t.true(looks.length < WRITES / 2, `${looks.length} looks for ${WRITES} writes`);
  t.true(
    looks.some((at) => at > lastWrite),
    'a look after the last write',
  );

  // Nobody waits any more: writes are not watched, and nothing is looked at.
  t.false(watch.release());
  t.false(watch.active);
  const before = looks.length;
  other.append('after-release');
  await sleep(RECHECK_MS * 3);
  t.is(looks.length, before);
});
