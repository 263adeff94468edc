/**
 * How the fan-out handles the copies its group hands out (dispatcher/fan-out-handling.ts): a copy of an
 * event whose handling is under way joins it and is acknowledged with it, also when it arrives while
 * the handling's acknowledgements are being sent (docs/operations.md, "The fan-out's group").
 */
import test from 'ava';
import { createHandlings } from '../../dispatcher/fan-out-handling.ts';
import { manualClock } from '../../domain/clock.ts';
import type { PersistentMessage, RecordedEvent } from '../../eventstore/port.ts';

const checkout: RecordedEvent = {
  id: '00000000-0000-4000-8000-000000000001',
  streamId: 'cart-1',
  revision: 3,
  position: 40,
  type: 'CartStatusChanged',
  data: {},
  metadata: {
    correlation_id: '00000000-0000-4000-8000-000000000002',
    causation_id: null,
    actor: { type: 'platform', id: 'test' },
    occurred_at: '2026-01-01T00:00:00.000Z',
    schema_version: 1,
  },
  recordedAt: '2026-01-01T00:00:00.000Z',
};

/** A copy the group handed out, whose ack runs `onAck` and is recorded under `name`. */
function copy(
  name: string,
  acked: string[],
  retryCount: number,
  onAck: () => Promise<void> = async () => {},
): PersistentMessage {
  return {
    event: checkout,
    retryCount,
    ack: async () => {
      await onAck();
      acked.push(name);
    },
    nack: async () => {
      throw new Error('the fan-out never hands a message back');
    },
  };
}

test('a copy that joins a handling while its acknowledgements are under way is acknowledged too', async (t) => {
  const handlings = createHandlings({ scheduleOwed: async () => 1, clock: manualClock() });
  handlings.setLive(1);
  const acked: string[] = [];
  // The first copy's ack takes its time (a slow connection, the embedded store's write lock).
  const acking = Promise.withResolvers<void>();
  const answer = Promise.withResolvers<void>();
  const first = handlings.receive(
    copy('first', acked, 0, async () => {
      acking.resolve();
      await answer.promise;
    }),
    1,
  );
  t.false(first.joined);
  await acking.promise;

  // Handed out again meanwhile (its message timeout passed): it joins the handling.
  const second = handlings.receive(copy('second', acked, 1), 1);
  t.true(second.joined);
  answer.resolve();
  await first.run;
  await second.run;
  t.deepEqual(acked.sort(), ['first', 'second'], 'no copy is left for the group to hand out again');
  t.like(handlings.stats, { events: 1, scheduled: 1, errors: 0 });
});

test('a copy that joins before the deliveries are scheduled is acknowledged with the first, once', async (t) => {
  const scheduled = Promise.withResolvers<number>();
  let tries = 0;
  const handlings = createHandlings({
    scheduleOwed: () => {
      tries += 1;
      return scheduled.promise;
    },
    clock: manualClock(),
  });
  handlings.setLive(1);
  const acked: string[] = [];
  const first = handlings.receive(copy('first', acked, 0), 1);
  const second = handlings.receive(copy('second', acked, 1), 1);
  t.true(second.joined);
  scheduled.resolve(1);
  await first.run;
  t.deepEqual(acked.sort(), ['first', 'second']);
  t.is(tries, 1, 'the copy scheduled nothing of its own');
});
