/**
 * The EventStoreDB adapter's catch-up subscriptions (eventstore/esdb/catch-up.ts) on the client's own
 * `subscribeToAll` and its `Subscription` stream, fed the replies a server sends on the Read call: the
 * server's checkpoints (how far its filter read past events it did not send) reach `onProgress`, after
 * every event the server sent before them, whatever the stream held back. A live checkpoint is an
 * event's position; a catch-up one names the record the server reads next, and the subscriber is told
 * the record before it instead, read from the log: a position a subscription can resume after.
 */
import test from 'ava';
import { createCatchUp } from '../../eventstore/esdb/catch-up.ts';
import { NO_POSITION } from '../../eventstore/esdb/client.ts';
import { createAllReads } from '../../eventstore/esdb/read-all.ts';
import type { CatchUpSubscriptionOptions } from '../../eventstore/port.ts';
import {
  answered,
  caughtUpReply,
  checkpointReply,
  clientAnswering,
  confirmationReply,
  eventReply,
  type ReadRequest,
  Replies,
  type Reply,
  readStart,
} from '../support/esdb-replies.ts';

/** An event of the given stream at the given position, as the server sends it. */
const event = (streamId: string, position: number): Reply =>
  eventReply({
    id: `00000000-0000-4000-8000-${String(position).padStart(12, '0')}`,
    streamId,
    type: 'CartCreated',
    revision: 0,
    position,
  });
const checkpoint = checkpointReply;
const caughtUp = caughtUpReply;
const confirmation = confirmationReply;

/**
 * A subscription through the adapter, on a server whose log holds records at `log` (their positions,
 * for the adapter's look-ups of the record before a catch-up checkpoint); what reaches the handlers.
 */
function subscribe(
  replies: Replies,
  options: CatchUpSubscriptionOptions,
  hold?: Promise<void>,
  log: number[] = [],
) {
  const requests: ReadRequest[] = [];
  const lookups: string[] = [];
  const client = clientAnswering((request) => {
    requests.push(request);
    if (request.getOptions()?.hasSubscription()) return replies;
    // A read backwards from a position: the records before it, the nearest first.
    const from = readStart(request);
    const bound = typeof from === 'object' ? Number(from.commit) : Number.POSITIVE_INFINITY;
    lookups.push(`${String(from === 'end' ? 'end' : bound)} count ${request.getOptions()?.getCount()}`);
    const before = log.filter((p) => p < bound).sort((a, b) => b - a);
    return answered(
      before.slice(0, Number(request.getOptions()?.getCount())).map((p) => event('other-1', p)),
    );
  });
  const seen: string[] = [];
  const { recordBefore } = createAllReads(client);
  const sub = createCatchUp(client, new Set(), recordBefore).subscribeToAll(options, {
    async onEvents(events) {
      seen.push(`events ${events.map((e) => e.position).join(',')}`);
      await hold;
    },
    onProgress: (position) => {
      seen.push(`progress ${position}`);
    },
    onCaughtUp: () => seen.push('caught up'),
  });
  return { sub, seen, requests, lookups };
}

const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
};

test('checkpoints reach onProgress after the events sent before them; a catch-up one as the record before it', async (t) => {
  const replies = new Replies();
  const release = Promise.withResolvers<void>();
  const { sub, seen, requests, lookups } = subscribe(
    replies,
    { filter: { streamPrefixes: ['cart-'] }, maxBatchSize: 10 },
    release.promise,
    [100, 200, 250, 290, 300],
  );
  t.teardown(() => sub.stop());
  replies.write(confirmation());
  replies.write(event('cart-1', 100));
  replies.write(event('cart-2', 200));
  // Catch-up: the page the server reads next starts at the record at 300; the one before is at 290.
  replies.write(checkpoint(300, 0));
  replies.write(caughtUp());
  await until(() => seen.length >= 1);
  t.deepEqual(seen, ['events 100,200'], 'the checkpoint waits for the batch before it');
  release.resolve();
  await sub.caughtUp;
  t.deepEqual(seen, ['events 100,200', 'progress 290', 'caught up']);
  t.deepEqual(lookups, ['300 count 2'], 'one read back from the checkpoint');
  // Live: an event, then checkpoints at the event that completed the server's interval.
  replies.write(event('cart-3', 400));
  replies.write(checkpoint(400, 400));
  replies.write(checkpoint(500, 500));
  await until(() => seen.length >= 5);
  t.deepEqual(seen.slice(3), ['events 400', 'progress 500']);
  // The filter asks the server for checkpoints at its default interval.
  const filter = requests[0].getOptions()?.getFilter();
  t.is(filter?.getCheckpointintervalmultiplier(), 1);
  t.deepEqual(filter?.getStreamIdentifier()?.getPrefixList(), ['cart-']);
});

test('a checkpoint sent while the stream held events back is told after them', async (t) => {
  const replies = new Replies();
  const release = Promise.withResolvers<void>();
  // One event a batch: the adapter pauses the stream, whose buffer fills with what follows.
  const { sub, seen } = subscribe(
    replies,
    { filter: { streamPrefixes: ['cart-'] }, maxBatchSize: 1 },
    release.promise,
  );
  t.teardown(() => sub.stop());
  for (let i = 1; i <= 12; i++) replies.write(event(`cart-${i}`, i * 10));
  replies.write(checkpoint(200, 200));
  replies.write(caughtUp());
  await until(() => seen.length >= 1);
  release.resolve();
  await sub.caughtUp;
  t.deepEqual(seen, [
    ...Array.from({ length: 12 }, (_, i) => `events ${(i + 1) * 10}`),
    'progress 200',
    'caught up',
  ]);
});

test('catch-up checkpoints are looked up at most once a second, and the last one before caught up', async (t) => {
  const replies = new Replies();
  const { sub, seen, lookups } = subscribe(
    replies,
    { filter: { streamPrefixes: ['cart-'] } },
    undefined,
    [10, 20, 30, 40],
  );
  t.teardown(() => sub.stop());
  replies.write(checkpoint(15, 0));
  replies.write(checkpoint(25, 0));
  replies.write(checkpoint(35, 0));
  replies.write(caughtUp());
  await sub.caughtUp;
  t.deepEqual(lookups, ['15 count 2', '35 count 2']);
  t.deepEqual(seen, ['progress 10', 'progress 30', 'caught up']);
});

test('a resumed subscription tells no checkpoint at or before its start, nor one of an unknown position', async (t) => {
  const replies = new Replies();
  const { sub, seen } = subscribe(
    replies,
    { from: { after: 1_000 }, filter: { eventTypes: ['CartCreated'] } },
    undefined,
    [990, 1_000],
  );
  t.teardown(() => sub.stop());
  replies.write(checkpoint(1_000, 1_000));
  replies.write(checkpoint(NO_POSITION, NO_POSITION));
  replies.write(checkpoint(1_001, 0)); // the record before is the start itself: nothing new
  replies.write(checkpoint(1_200, 1_200));
  replies.write(caughtUp());
  await sub.caughtUp;
  t.deepEqual(seen, ['progress 1200', 'caught up']);
});
