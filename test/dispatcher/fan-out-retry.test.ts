/**
 * The pauses between tries of a cart event whose fan-out failed (dispatcher/fan-out-retry.ts): they
 * double up to a cap, with jitter, and count the times the group handed the event out before.
 */
import test from 'ava';
import { retryPause } from '../../dispatcher/fan-out-retry.ts';

test('a pause doubles from the base up to the cap, between half its ceiling and all of it', (t) => {
  const low = { baseMs: 100, capMs: 30_000, random: () => 0 };
  const high = { ...low, random: () => 0.999_999 };
  t.deepEqual(
    [0, 1, 2, 3, 8, 9, 20, 1_000_000].map((n) => retryPause(n, low)),
    [50, 100, 200, 400, 12_800, 15_000, 15_000, 15_000],
  );
  t.deepEqual(
    [0, 1, 8, 9, 1_000_000].map((n) => retryPause(n, high)),
    [100, 200, 25_600, 30_000, 30_000],
  );
});

test('the defaults: 100 ms at first, 30 s at most', (t) => {
  for (let i = 0; i < 100; i++) {
    const first = retryPause(0);
    const late = retryPause(50);
    t.true(first >= 50 && first <= 100, String(first));
    t.true(late >= 15_000 && late <= 30_000, String(late));
  }
});
