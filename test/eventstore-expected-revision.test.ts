/**
 * An append expecting a revision its connection has committed, or no stream at all, is checked by its
 * insert rather than by a read of the stream's last revision (eventstore/sqlite/appends.ts,
 * docs/operations.md "Threads"): the (stream_id, revision) index refuses the next revision once the
 * stream has moved on. What the contract suite does not cover: the stream moved by another connection
 * since, reads counted, and refusals inside one group commit.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { WrongExpectedVersionError } from '../eventstore/port.ts';
import { createAppends } from '../eventstore/sqlite/appends.ts';
import { openLog } from '../eventstore/sqlite/log.ts';
import { createReads } from '../eventstore/sqlite/reads.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { rawEvent } from './support/raw-events.ts';

async function tempFile(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-expected-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 'events.db');
}

/** Appends on their own connection, counting the reads of a stream's last revision they make. */
function countingAppends(t: ExecutionContext, file: string) {
  const log = openLog(file);
  t.teardown(() => log.close());
  const reads = createReads(log);
  const counted = {
    reads: 0,
    lastRevision(streamId: string) {
      counted.reads += 1;
      return reads.lastRevision(streamId);
    },
  };
  return { append: createAppends(log, counted).append, counted, readStream: reads.readStream };
}

test('an append expecting the revision its connection committed reads nothing first; no_stream neither', async (t) => {
  const file = await tempFile(t);
  const { append, counted } = countingAppends(t, file);
  await append('cart-1', [rawEvent('A')], { expectedRevision: 'no_stream' });
  await append('cart-1', [rawEvent('B'), rawEvent('C')], { expectedRevision: 0 });
  await append('cart-1', [rawEvent('D')], { expectedRevision: 2 });
  t.is(counted.reads, 0);
  // Nothing known of this stream's revision 0 on this connection yet, nor of what 'any' appends after.
  await append('cart-2', [rawEvent('A')]);
  await append('cart-2', [rawEvent('B')], { expectedRevision: 'any' });
  t.is(counted.reads, 2);
});

test('the stream moved on through another connection: refused with its revision, nothing written', async (t) => {
  const file = await tempFile(t);
  const { append, counted, readStream } = countingAppends(t, file);
  const other = await openSqliteEventStore(file);
  t.teardown(() => other.close());
  await append('cart-1', [rawEvent('A'), rawEvent('B')], { expectedRevision: 'no_stream' });
  await other.append('cart-1', [rawEvent('Other')], { expectedRevision: 1 });

  for (const expectedRevision of [1, 0]) {
    const error = await t.throwsAsync(append('cart-1', [rawEvent('Stale')], { expectedRevision }));
    t.true(error instanceof WrongExpectedVersionError, String(error));
    t.is((error as WrongExpectedVersionError).actual, 2, `expected ${expectedRevision}`);
  }
  t.deepEqual(
    (await readStream('cart-1')).map((e) => e.type),
    ['A', 'B', 'Other'],
  );
  const created = await t.throwsAsync(
    append('cart-1', [rawEvent('Again')], { expectedRevision: 'no_stream' }),
  );
  t.true(created instanceof WrongExpectedVersionError);
  t.is((created as WrongExpectedVersionError).actual, 2);
  // The refusals read the revision only once refused; the next append expecting it is written.
  const reads = counted.reads;
  await append('cart-1', [rawEvent('Next')], { expectedRevision: 2 });
  t.is(counted.reads, reads + 1, 'revision 2 is not yet known to have been committed here');
  t.is((await readStream('cart-1')).length, 4);
});

test('in one group commit, two appends expecting the same revision: the first is written, the second refused alone', async (t) => {
  const file = await tempFile(t);
  const store = await openSqliteEventStore(file);
  t.teardown(() => store.close());
  await store.append('cart-1', [rawEvent('A')], { expectedRevision: 'no_stream' });
  // Asked in one callback: one transaction, each append in its own savepoint.
  const [first, second, elsewhere] = await Promise.allSettled([
    store.append('cart-1', [rawEvent('B')], { expectedRevision: 0 }),
    store.append('cart-1', [rawEvent('C')], { expectedRevision: 0 }),
    store.append('cart-2', [rawEvent('D')], { expectedRevision: 'no_stream' }),
  ]);
  t.is(first.status, 'fulfilled');
  t.is(second.status, 'rejected');
  t.true((second as PromiseRejectedResult).reason instanceof WrongExpectedVersionError);
  t.is(((second as PromiseRejectedResult).reason as WrongExpectedVersionError).actual, 1);
  t.is(elsewhere.status, 'fulfilled');
  t.deepEqual(
    (await store.readStream('cart-1')).map((e) => e.type),
    ['A', 'B'],
  );
});

test('a repeat of a committed append, expecting the revision it was written after, answers its first result', async (t) => {
  const file = await tempFile(t);
  const store = await openSqliteEventStore(file);
  t.teardown(() => store.close());
  await store.append('cart-1', [rawEvent('A')], { expectedRevision: 'no_stream' });
  const event = { ...rawEvent('B'), id: '0190a0a0-0000-7000-8000-000000000001' };
  const written = await store.append('cart-1', [event], { expectedRevision: 0 });
  t.deepEqual(await store.append('cart-1', [event], { expectedRevision: 0 }), written);
  t.is((await store.readStream('cart-1')).length, 2);
});
