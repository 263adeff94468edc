/**
 * How readers of the embedded store learn of another connection's appends (eventstore/sqlite/log.ts):
 * a connection in another thread of the process announces each commit on a broadcast channel named
 * after the file, once the commit is visible; the WAL watch is for other processes.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BroadcastChannel, Worker } from 'node:worker_threads';
import test from 'ava';
import { openLog } from '../eventstore/sqlite/log.ts';
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
