/** The timer queue: order, replacement, cancellation, re-runs within a tick, the real timer. */
import test from 'ava';
import { createScheduler } from '../../dispatcher/scheduler.ts';
import { manualClock } from '../../domain/clock.ts';

const T0 = '2026-01-01T00:00:00.000Z';
const at = (ms: number) => new Date(Date.parse(T0) + ms);

test('runs entries in due order, each once, only when due', async (t) => {
  const clock = manualClock(T0);
  const s = createScheduler(clock);
  t.teardown(() => s.stop());
  const ran: string[] = [];
  // Shuffled insertion, to exercise the heap.
  const times = [50, 10, 40, 30, 20, 60, 5, 45, 35, 15];
  for (const ms of times) s.schedule(`k${ms}`, at(ms), () => void ran.push(`k${ms}`));
  t.is(s.size(), 10);

  t.is(await s.tick(), 0);
  clock.advance(9);
  t.is(await s.tick(), 1);
  t.deepEqual(ran, ['k5']);
  clock.advance(1); // exactly at 10: due
  t.is(await s.tick(), 1);
  t.deepEqual(ran, ['k5', 'k10']);
  clock.advance(40);
  await s.tick();
  t.deepEqual(ran, ['k5', 'k10', 'k15', 'k20', 'k30', 'k35', 'k40', 'k45', 'k50']);
  t.is(s.size(), 1);
  t.is(await s.tick(), 0, 'nothing runs twice');
  clock.advance(1000);
  await s.tick();
  t.is(ran.length, 10);
  t.is(s.size(), 0);
});

test('schedule replaces the entry of a key; cancel removes it', async (t) => {
  const clock = manualClock(T0);
  const s = createScheduler(clock);
  t.teardown(() => s.stop());
  const ran: string[] = [];
  s.schedule('a', at(100), () => void ran.push('a@100'));
  s.schedule('b', at(50), () => void ran.push('b'));
  s.schedule('c', at(70), () => void ran.push('c'));
  s.schedule('a', at(10), () => void ran.push('a@10')); // earlier
  s.schedule('b', at(200), () => void ran.push('b@200')); // later
  t.is(s.size(), 3);
  t.deepEqual(s.dueAt('a'), at(10));
  t.true(s.cancel('c'));
  t.false(s.cancel('c'));
  t.is(s.dueAt('c'), undefined);
  clock.advance(150);
  await s.tick();
  t.deepEqual(ran, ['a@10']);
  clock.advance(100);
  await s.tick();
  t.deepEqual(ran, ['a@10', 'b@200']);
});

test('many random entries come out sorted; random cancels never leave a hole', async (t) => {
  const clock = manualClock(T0);
  const s = createScheduler(clock);
  t.teardown(() => s.stop());
  const ran: number[] = [];
  const expected: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const ms = Math.floor(Math.random() * 10_000);
    s.schedule(`k${i}`, at(ms), () => void ran.push(ms));
    expected.push(ms);
  }
  for (let i = 0; i < 2000; i += 3) {
    s.cancel(`k${i}`);
  }
  const kept = expected.filter((_, i) => i % 3 !== 0).sort((a, b) => a - b);
  t.is(s.size(), kept.length);
  clock.advance(10_000);
  t.is(await s.tick(), kept.length);
  t.deepEqual(ran, kept);
});

test('tick waits for async functions; a function rescheduling itself as due runs again in the same tick, bounded', async (t) => {
  const clock = manualClock(T0);
  const errors: string[] = [];
  const s = createScheduler(clock, { onError: (key) => errors.push(key) });
  t.teardown(() => s.stop());
  let done = false;
  s.schedule('slow', at(0), async () => {
    await new Promise((r) => setTimeout(r, 20));
    done = true;
  });
  let runs = 0;
  const again = () => {
    runs += 1;
    if (runs < 3) s.schedule('again', at(0), again);
  };
  s.schedule('again', at(0), again);
  s.schedule('boom', at(0), () => {
    throw new Error('boom');
  });
  let spins = 0;
  const spin = () => {
    spins += 1;
    s.schedule('spin', at(0), spin);
  };
  s.schedule('spin', at(0), spin);
  await s.tick();
  t.true(done);
  t.is(runs, 3);
  t.deepEqual(errors, ['boom']);
  // tick() returned: bounded at 100 passes (the real timer, armed for the due entry, may add a few).
  t.true(spins >= 100 && spins < 1000, `${spins} spins`);
  s.cancel('spin');
});

test('the real timer fires an entry that is due, on its own', async (t) => {
  const s = createScheduler({ now: () => new Date() });
  t.teardown(() => s.stop());
  const fired = new Promise<number>((resolve) => {
    const scheduled = Date.now();
    s.schedule('soon', new Date(scheduled + 30), () => resolve(Date.now() - scheduled));
  });
  const waited = await fired;
  t.true(waited >= 25, `waited ${waited} ms`);
  t.is(s.size(), 0);
});

test('the real timer is capped and re-armed: a far deadline is reached through several waits', async (t) => {
  let now = Date.parse(T0);
  const clock = { now: () => new Date(now) };
  const s = createScheduler(clock, { maxDelayMs: 10 });
  t.teardown(() => s.stop());
  let fired = false;
  s.schedule('far', new Date(now + 60_000), () => {
    fired = true;
  });
  // Each capped wake finds nothing due and re-arms; move the clock past the deadline meanwhile.
  await new Promise((r) => setTimeout(r, 30));
  t.false(fired);
  now += 60_000;
  await new Promise((r) => setTimeout(r, 50));
  t.true(fired);
});

test('stop drops every entry and nothing fires afterwards', async (t) => {
  const s = createScheduler({ now: () => new Date() });
  let fired = false;
  s.schedule('x', new Date(Date.now() + 10), () => {
    fired = true;
  });
  s.stop();
  t.is(s.size(), 0);
  s.schedule('y', new Date(), () => {
    fired = true;
  });
  await new Promise((r) => setTimeout(r, 40));
  t.false(fired);
  t.is(await s.tick(), 0);
});
