/**
 * `pds serve` waits for the first start to settle before it gives back the memory of the catch-up
 * (`untilReady`; docs/read-side.md, "Memory after the first start"): the wait ends when the process
 * is ready, and also when it stops, whether a signal stopped it or the service did, so that nothing
 * polls the readiness checks for the life of a process that never became ready.
 */
import test from 'ava';
import { createReadiness } from '../api/readiness.ts';
import { untilReady } from '../cli/commands/serve.ts';

/** A readiness whose one check fails `failures` times, then passes; `looks` counts the checks run. */
function readinessFailing(failures: number) {
  const readiness = createReadiness();
  let looks = 0;
  readiness.add('read models built', () => ++looks > failures);
  return { readiness, looks: () => looks };
}

test('the wait ends once every check passes, having looked until then', async (t) => {
  const { readiness, looks } = readinessFailing(2);
  await untilReady(readiness, () => false);
  t.is(looks(), 3);
});

test('the wait ends once the service stops, never ready, and looks no more', async (t) => {
  const { readiness, looks } = readinessFailing(Number.POSITIVE_INFINITY);
  readiness.add('stops after two looks', () => {
    if (looks() === 2) readiness.markStopping();
    if (looks() > 2) throw new Error('still polling a stopped service');
    return true;
  });
  await untilReady(readiness, () => false);
  t.is(looks(), 2, 'the look that found it stopping is the last');
});

test('the wait ends at a signal without another look', async (t) => {
  const { readiness, looks } = readinessFailing(Number.POSITIVE_INFINITY);
  let signalled = false;
  readiness.add('signalled after one look', () => {
    signalled = true;
    return true;
  });
  await untilReady(readiness, () => signalled);
  t.is(looks(), 1);
});
