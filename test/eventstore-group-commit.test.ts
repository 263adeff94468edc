/**
 * The embedded store's adaptive group commit, as the dispatcher thread opens it (cli/store-options.ts;
 * eventstore/sqlite/appends.ts): a callback that appends alone in its turn commits at its end, so a
 * lone webhook's appends wait for nothing; the appends of a turn's later callbacks (a backlog's
 * answers, each read in a callback of its own) wait for the turn's end and share one commit. Commits
 * are counted in the write-ahead log (support/wal-commits.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { eventStoreOptionsOf } from '../cli/store-options.ts';
import type { EventStore } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { rawEvent } from './support/raw-events.ts';
import { walCommits } from './support/wal-commits.ts';

const CALLBACKS = 200;

async function dispatcherStore(t: ExecutionContext): Promise<{ store: EventStore; file: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-group-commit-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'events.db');
  const store = await openSqliteEventStore(
    file,
    eventStoreOptionsOf({ role: 'all', thread: 'dispatcher' }, true),
  );
  t.teardown(() => store.close());
  await store.append('taken', [rawEvent('First')]);
  return { store, file };
}

test('200 appends requested by 200 callbacks of one turn make at most two commits; a refused one is refused alone', async (t) => {
  const { store, file } = await dispatcherStore(t);
  const before = walCommits(file);
  const settled = await new Promise<PromiseSettledResult<unknown>[]>((resolve) => {
    const appends: Promise<unknown>[] = [];
    // Callbacks queued together run in one turn, the microtasks of each before the next.
    for (let i = 0; i < CALLBACKS; i++) {
      setImmediate(() => {
        appends.push(
          i === 7
            ? store.append('taken', [rawEvent('Second')], { expectedRevision: 'no_stream' })
            : store.append(`turn-${i}`, [rawEvent('Appended', { i })], { expectedRevision: 'no_stream' }),
        );
        if (appends.length === CALLBACKS) resolve(Promise.allSettled(appends));
      });
    }
  });
  const commits = walCommits(file) - before;
  t.log(`${commits} commits for ${CALLBACKS} appends`);
  t.true(commits >= 1 && commits <= 2, `${commits} commits for ${CALLBACKS} appends`);
  t.deepEqual(
    settled.flatMap((s, i) => (s.status === 'rejected' ? [i] : [])),
    [7],
    'the wrong expected revision alone is refused',
  );
  t.is((await store.readAll()).length, CALLBACKS, 'the other 199 are kept');
});

test('an append alone in its turn is committed at the end of its callback, not the turn’s; a second callback’s waits for the turn’s end', async (t) => {
  const { store, file } = await dispatcherStore(t);
  const before = walCommits(file);
  const order: string[] = [];
  await new Promise<void>((resolve) => {
    setImmediate(() => {
      void store.append('alone', [rawEvent('Appended')]).then(() => order.push('first answered'));
      setImmediate(() => order.push('the turn ended'));
    });
    setImmediate(() => {
      void store.append('second', [rawEvent('Appended')]).then(() => {
        order.push('second answered');
        resolve();
      });
    });
  });
  t.deepEqual(order, ['first answered', 'the turn ended', 'second answered']);
  t.is(walCommits(file) - before, 2);
});

test('the commit at a turn’s end of its later callbacks’ appends is told to the other threads as it commits, not a turn later', async (t) => {
  const { store, file } = await dispatcherStore(t);
  // What this connection tells the other threads on the file's channel (eventstore/sqlite/log.ts).
  const told: string[][] = [];
  const post = BroadcastChannel.prototype.postMessage;
  BroadcastChannel.prototype.postMessage = function (this: { name: string }, message: unknown) {
    if (this.name === `pds:sqlite-log:${path.resolve(file)}`) {
      told.push((message as Array<{ streamId: string }>).map((run) => run.streamId));
    }
    return post.call(this, message);
  };
  t.teardown(() => {
    BroadcastChannel.prototype.postMessage = post;
  });
  // The setup's append is told at the end of its turn.
  await new Promise((resolve) => setImmediate(resolve));
  told.length = 0;
  const toldWhenAnswered = await new Promise<string[][]>((resolve) => {
    setImmediate(() => {
      void store.append('first', [rawEvent('Appended')]);
    });
    setImmediate(() => {
      void store.append('second', [rawEvent('Appended')]).then(() => resolve(told.map((m) => [...m])));
    });
  });
  t.deepEqual(
    toldWhenAnswered,
    [['first'], ['second']],
    'the turn’s first commit at the turn’s end; the later one’s as it commits there',
  );
});
