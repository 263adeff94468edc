/**
 * Which event, with which position, a persistent delivery hands over (eventstore/esdb/translate.ts),
 * on records the client itself converts from the gRPC messages the server sends: a replayed parked
 * message is a resolved link whose event and link both carry the parked link's position.
 */
import { randomUUID } from 'node:crypto';
import {
  convertGrpcEvent,
  convertPersistentSubscriptionGrpcEvent,
} from '@eventstore/db-client/dist/utils/convertGrpcEvent.js';
import persistentPb from '@eventstore/db-client/generated/persistent_pb.js';
import streamsPb from '@eventstore/db-client/generated/streams_pb.js';
import test from 'ava';
import { type AllRecord, type EsdbRecord, NO_POSITION } from '../../eventstore/esdb/client.ts';
import { deliveredEvent, isAfterStart, originalOf, toRecorded } from '../../eventstore/esdb/translate.ts';
import { EventStoreError } from '../../eventstore/port.ts';
import { fillRecord } from '../support/esdb-replies.ts';

interface Fields {
  id: string;
  streamId: string;
  revision: number;
  /** Commit and prepare, as 23.10+ servers send them for a self-committing event; -1 when unknown. */
  position?: number | bigint;
  type: string;
  data: string;
}

/** Fills a gRPC RecordedEvent (of the persistent or the streams service) as the server does. */
const fill = <R extends Parameters<typeof fillRecord>[0]>(record: R, f: Fields): R =>
  fillRecord(record, {
    ...f,
    contentType: f.type === '$>' ? 'application/octet-stream' : 'application/json',
    created: 17356896000000000n, // 2025-01-01, in 100 ns ticks
  });

const PersistentRecord = persistentPb.ReadResp.ReadEvent.RecordedEvent;

/** A persistent delivery as the client hands it to the subscription's `data` listeners. */
function delivery(event: Fields | undefined, link?: Fields) {
  const message = new persistentPb.ReadResp.ReadEvent();
  if (event) message.setEvent(fill(new PersistentRecord(), event));
  if (link) message.setLink(fill(new PersistentRecord(), link));
  const position = link?.position ?? event?.position;
  if (position !== undefined) message.setCommitPosition(String(position));
  message.setRetryCount(0);
  return convertPersistentSubscriptionGrpcEvent(message) as { event?: AllRecord; link?: EsdbRecord };
}

/** What `readStream(streamId, { fromRevision, maxCount: 1 })` yields, as the client converts it. */
function streamRead(fields: Fields): EsdbRecord {
  const message = new streamsPb.ReadResp.ReadEvent();
  message.setEvent(fill(new streamsPb.ReadResp.ReadEvent.RecordedEvent(), fields));
  return (convertGrpcEvent(message) as { event: EsdbRecord }).event;
}

const GROUP = 'webhook-fan-out';
const original: Fields = {
  id: randomUUID(),
  streamId: 'cart-1',
  revision: 3,
  position: 1_000,
  type: 'CartCreated',
  data: '{"cart_id":"1"}',
};
/** The server's replay of the parked message: the original's data, both positions the link's. */
const replayed: Fields = { ...original, position: 9_000 };
const parkedLink: Fields = {
  id: randomUUID(),
  streamId: `$persistentsubscription-$all::${GROUP}-parked`,
  revision: 0,
  position: 9_000,
  type: '$>',
  data: `3@cart-1`,
};

test('a first delivery is handed over as it comes, with its own position', (t) => {
  const chosen = deliveredEvent(delivery(original));
  t.is(chosen.kind, 'event');
  if (chosen.kind === 'none') return;
  t.is(toRecorded(chosen.event).position, 1_000);
});

test('a replayed parked message (a resolved link) needs its event looked up: its position is the link’s', (t) => {
  const resolved = delivery(replayed, parkedLink);
  // What the client gives: the parked link's position on the event itself.
  t.is(resolved.event?.position.commit, 9_000n);
  const chosen = deliveredEvent(resolved);
  t.is(chosen.kind, 'lookup');
  if (chosen.kind === 'none') return;
  const found = originalOf(chosen.event, streamRead(original));
  t.truthy(found);
  t.like(toRecorded(found as AllRecord), {
    id: original.id,
    streamId: 'cart-1',
    revision: 3,
    position: 1_000,
    data: { cart_id: '1' },
  });
});

test('nothing to hand over: no event, an unresolved link, a system event', (t) => {
  t.is(deliveredEvent({}).kind, 'none');
  t.is(deliveredEvent(delivery(undefined, parkedLink)).kind, 'none');
  const system: Fields = { ...original, streamId: '$settings', type: '$metadata' };
  t.is(deliveredEvent(delivery(system)).kind, 'none');
  t.is(deliveredEvent(delivery({ ...original, type: '$>' })).kind, 'none');
});

test('the looked-up event must be the delivered one: gone or replaced means skip', (t) => {
  const delivered = delivery(replayed, parkedLink).event as AllRecord;
  t.is(originalOf(delivered, undefined), undefined, 'the stream or the event is gone');
  t.is(
    originalOf(delivered, streamRead({ ...original, id: randomUUID() })),
    undefined,
    'another event holds the revision (the stream was deleted and written again)',
  );
  t.is(originalOf(delivered, streamRead({ ...original, revision: 4 })), undefined);
  t.is(originalOf(delivered, streamRead({ ...original, streamId: 'cart-2' })), undefined);
});

test('a server that sends no position on stream reads is refused, not guessed at', (t) => {
  const delivered = delivery(replayed, parkedLink).event as AllRecord;
  const unknown = { ...original, position: NO_POSITION };
  t.throws(() => originalOf(delivered, streamRead(unknown)), { instanceOf: EventStoreError });
});

test('the group’s start bound is checked on the event’s own position', (t) => {
  const delivered = delivery(replayed, parkedLink).event as AllRecord;
  const found = originalOf(delivered, streamRead(original)) as AllRecord;
  const bound = { commit: 5_000n, prepare: 5_000n };
  // The link's position is past the bound, the event's own is not: the group never had this event.
  t.true(isAfterStart(delivered, bound));
  t.false(isAfterStart(found, bound));
  t.true(isAfterStart(found, undefined));
  t.true(isAfterStart(found, { commit: 999n, prepare: 999n }));
  t.false(isAfterStart(found, { commit: 1_000n, prepare: 1_000n }), 'a position start is exclusive');
});
