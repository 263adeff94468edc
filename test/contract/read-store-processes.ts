/**
 * The ReadStore contract for two processes on one store (two stores opened on the same file or
 * database): what one leaves behind and the other finds, the console's sessions included (several
 * `api` replicas on one MongoDB). Every adapter passes it; the MongoDB run is at the end of
 * read-store-mongo.test.ts.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext, TestFn } from 'ava';
import { CONSOLE_SESSIONS, ConsoleSessions } from '../../application/console-sessions.ts';
import { bootstrapAuthenticator } from '../../application/operator-principal.ts';
import { manualClock } from '../../domain/clock.ts';
import {
  type Checkpoint,
  type Collection,
  type Doc,
  type Fence,
  type LeaseAttempt,
  LeaseLostError,
  type ReadStore,
} from '../../projections/read-store.ts';

/** Two stores on one file or database, closed (and it removed) after the test. */
export type OpenTwo = (t: ExecutionContext) => Promise<[ReadStore, ReadStore]>;

const prefix = () => `c${randomUUID().replaceAll('-', '').slice(0, 12)}`;

async function seed(c: Collection, docs: readonly Doc[]): Promise<void> {
  await c.bulkWrite(
    docs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
  );
}

const ids = (docs: readonly Doc[]) => docs.map((d) => d._id);

const at = (position: number): Checkpoint => ({
  position,
  events: position,
  updated_at: '2026-03-01T00:00:00.000Z',
});

/** The fence of an attempt that must have acquired the lease. */
function fenceOf(attempt: LeaseAttempt): Fence {
  if (!attempt.acquired) throw new Error(`not acquired: held by ${attempt.holder}`);
  return attempt.fence;
}

export function readStoreProcessesContract(test: TestFn, adapter: string, openTwo: OpenTwo): void {
  const name = (title: string) => `${adapter}: ${title}`;

  test(
    name('shadows a crashed rebuild left are dropped by the next projector; live and its own shadows stay'),
    async (t) => {
      const [crashed, next] = await openTwo(t);
      const p = prefix();
      const live = await crashed.collection(`${p}_items`);
      await seed(live, [{ _id: 'first' }]);
      const promoted = await crashed.createShadow(`${p}_items`);
      await seed(promoted, [{ _id: 'promoted' }]);
      await crashed.promote([promoted]);
      // A rebuild the crash interrupted: its shadows are neither promoted nor dropped.
      const left = [await crashed.createShadow(`${p}_items`), await crashed.createShadow(`${p}_other`)];
      await seed(left[0], [{ _id: 'orphan' }]);

      const mine = await next.createShadow(`${p}_items`);
      await seed(mine, [{ _id: 'mine' }]);
      t.is(await next.dropOrphanShadows(), 2);
      t.is(await next.dropOrphanShadows(), 0, 'none left');
      const served = await next.collection(`${p}_items`);
      t.deepEqual(ids(await served.find({})), ['promoted'], 'the live copy stays');
      t.deepEqual(ids(await mine.find({})), ['mine'], 'a running rebuild of its own stays');
      await next.promote([mine]);
      t.deepEqual(ids(await served.find({})), ['mine']);
      t.is(await next.dropOrphanShadows(), 0, 'a promoted shadow is live, not an orphan');
    },
  );

  test(
    name(
      'a lease has one holder at a time and a higher token at each acquisition; released or run out, another takes it',
    ),
    async (t) => {
      const [one, two] = await openTwo(t);
      const lease = `${prefix()}-projector`;
      const first = fenceOf(await one.acquireLease(lease, 'one', 60_000));
      const refused = await two.acquireLease(lease, 'two', 60_000);
      t.false(refused.acquired);
      if (!refused.acquired) {
        t.is(refused.holder, 'one');
        t.true(refused.expiresInMs > 50_000 && refused.expiresInMs <= 60_000, `${refused.expiresInMs} ms`);
      }
      // Its holder's process started again (a thread of it): it takes the lease again, a new token.
      const again = fenceOf(await one.acquireLease(lease, 'one', 60_000));
      t.true(again.token > first.token);
      t.false(await one.renewLease(first, 60_000), 'the earlier acquisition is no longer the lease');
      t.true(await one.renewLease(again, 60_000));

      await one.releaseLease(again);
      const taken = fenceOf(await two.acquireLease(lease, 'two', 60_000));
      t.true(taken.token > again.token);
      await one.releaseLease(again); // too late: not the last acquisition, changes nothing
      t.like(await one.acquireLease(lease, 'one', 60_000), { acquired: false, holder: 'two' });

      // A holder known to have ended (its process gone): taken over from it by name, at once.
      const crashed = `${prefix()}-crashed`;
      const dead = fenceOf(await one.acquireLease(crashed, 'one', 60_000));
      t.like(await two.acquireLease(crashed, 'two', 60_000, 'someone else'), {
        acquired: false,
        holder: 'one',
      });
      const over = fenceOf(await two.acquireLease(crashed, 'two', 60_000, 'one'));
      t.true(over.token > dead.token);
      t.like(await one.acquireLease(crashed, 'three', 60_000, 'one'), { acquired: false, holder: 'two' });

      // A holder that stops renewing: once its time has run out, another takes the lease.
      const short = `${prefix()}-short`;
      const gone = fenceOf(await one.acquireLease(short, 'one', 50));
      t.false((await two.acquireLease(short, 'two', 60_000)).acquired);
      await new Promise((r) => setTimeout(r, 200));
      const next = fenceOf(await two.acquireLease(short, 'two', 60_000));
      t.true(next.token > gone.token);
      t.false(await one.renewLease(gone, 60_000), 'run out and taken: it cannot be renewed');
    },
  );

  test(
    name(
      'a write under a stale fence is refused whole and applies nothing: commit, checkpoint, promote, shadow drops',
    ),
    async (t) => {
      const [old, next] = await openTwo(t);
      const p = prefix();
      const lease = `${p}-projector`;
      const stale = fenceOf(await old.acquireLease(lease, 'old', 60_000));
      const items = await old.collection(`${p}_items`);
      const other = await old.collection(`${p}_other`);
      const shadow = await old.createShadow(`${p}_items`);
      await seed(shadow, [{ _id: 'rebuilt' }]);
      const upsert = (_id: string) => ({
        replaceOne: { filter: { _id }, replacement: { _id }, upsert: true },
      });
      await old.commit({
        writes: [{ collection: items, ops: [upsert('a')] }],
        checkpoints: [{ name: `${p}-items`, checkpoint: at(1) }],
        fence: stale,
      });

      // Another process takes the lease over (here the old one let it go; a crash would let it run out).
      await old.releaseLease(stale);
      const current = fenceOf(await next.acquireLease(lease, 'next', 60_000));
      const running = await next.createShadow(`${p}_items`); // the new holder's own rebuild

      const lost = { instanceOf: LeaseLostError };
      await t.throwsAsync(
        old.commit({
          writes: [
            { collection: other, ops: [upsert('x')] },
            { collection: items, ops: [upsert('b')] },
          ],
          checkpoints: [{ name: `${p}-items`, checkpoint: at(2) }],
          fence: stale,
        }),
        lost,
      );
      await t.throwsAsync(old.setCheckpoint(`${p}-items`, at(3), stale), lost);
      await t.throwsAsync(old.promote([shadow], [{ name: `${p}-items`, checkpoint: at(4) }], stale), lost);
      await t.throwsAsync(old.dropOrphanShadows(stale), lost, "the new holder's shadow is no orphan of its");
      await t.throwsAsync(old.dropShadow(shadow, stale), lost);

      const served = await next.collection(`${p}_items`);
      t.deepEqual(ids(await served.find({})), ['a'], 'nothing of the refused writes applied');
      t.is(await (await next.collection(`${p}_other`)).count(), 0);
      t.deepEqual(await next.getCheckpoint(`${p}-items`), at(1));
      // The old holder's shadow is left to the new holder, as a crashed rebuild's; its own stays.
      t.is(await next.dropOrphanShadows(current), 1);
      await seed(running, [{ _id: 'new' }]);
      await next.promote([running], [{ name: `${p}-items`, checkpoint: at(5) }], current);
      await next.commit({
        writes: [{ collection: served, ops: [upsert('c')] }],
        checkpoints: [{ name: `${p}-items`, checkpoint: at(6) }],
        fence: current,
      });
      t.deepEqual(ids(await served.find({})), ['c', 'new']);
      t.deepEqual(await next.getCheckpoint(`${p}-items`), at(6));
      await next.setCheckpoint(`${p}-items`, at(7), current);
      t.deepEqual(await next.getCheckpoint(`${p}-items`), at(7));
    },
  );

  test(
    name(
      "the console's sessions are every api process's: one signs in, another serves the session, a sign-out in either ends it",
    ),
    async (t) => {
      const [one, two] = await openTwo(t);
      const clock = manualClock('2026-03-01T09:00:00.000Z');
      const operators = bootstrapAuthenticator('bootstrap-token-of-the-contract');
      const lifetime = { absoluteMs: 8 * 3_600_000, idleMs: 30 * 60_000 };
      const [here, there] = [
        await ConsoleSessions.open(one, operators, clock, lifetime),
        await ConsoleSessions.open(two, operators, clock, lifetime),
      ];
      const person = await operators.authenticate('bootstrap-token-of-the-contract');
      if (!person) throw new Error('the bootstrap token was refused');
      const started = await here.start(person);
      const served = await there.resume(started.id);
      t.deepEqual(served?.operator, person);
      t.is(served?.csrf_token, started.csrf_token);
      t.true(served?.acceptsCsrf(started.csrf_token));
      const stored = JSON.stringify(await (await two.collection(CONSOLE_SESSIONS)).find({}));
      t.false(stored.includes(started.id) || stored.includes(started.csrf_token), 'hashes only');

      await there.end(started.id);
      t.is(await here.resume(started.id), undefined, 'signed out on the other process');
      const idle = await there.start(person);
      clock.advance(31 * 60_000);
      await here.start(person);
      t.is(await there.resume(idle.id), undefined);
      t.is(await (await one.collection(CONSOLE_SESSIONS)).count(), 1, 'the ended one is gone');
    },
  );
}
