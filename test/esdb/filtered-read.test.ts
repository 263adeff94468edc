/**
 * Filtered `$all` reads are sent to the server with their filter (eventstore/esdb/filtered-read.ts):
 * the request for a filter, direction and start; that it is the client's own `readAll` request but for
 * the filter; and which requests `readAll` and `headPosition` send, seen on the client's real gRPC stub
 * on its way to an address where nothing listens (so every read ends unavailable).
 */
import {
  BACKWARDS,
  END,
  EventStoreDBClient,
  eventTypeFilter,
  FORWARDS,
  START,
  streamNameFilter,
} from '@eventstore/db-client';
import { StreamsClient } from '@eventstore/db-client/generated/streams_grpc_pb.js';
import test from 'ava';
import { MATCH_NOTHING, PAGE_MAX, PAGE_MIN } from '../../eventstore/esdb/client.ts';
import { filteredReadRequest, readFiltered } from '../../eventstore/esdb/filtered-read.ts';
import { pageSizeOf } from '../../eventstore/esdb/read-all.ts';
import { serverFilter } from '../../eventstore/esdb/translate.ts';
import { createEsdbEventStore } from '../../eventstore/esdb.ts';
import { EventStoreUnavailableError } from '../../eventstore/port.ts';
import { silentPeer } from '../support/silent-peer.ts';

/** Port 1 on loopback: nothing listens, so a call fails at once with UNAVAILABLE. */
const NOWHERE = 'esdb://127.0.0.1:1?tls=false';

type Request = ReturnType<typeof filteredReadRequest>;
type Options = NonNullable<ReturnType<Request['toObject']>['options']>;

const optionsOf = (request: Request): Options => request.toObject().options as Options;

test('headPosition’s request: backwards from the end, one event, the event types as an anchored regex', (t) => {
  const options = optionsOf(
    filteredReadRequest({
      filter: serverFilter({ eventTypes: ['CartCreated', 'Cart.Abandoned'] }),
      forwards: false,
      from: END,
      maxCount: 1,
    }),
  );
  t.like(options, {
    all: { end: {} },
    readDirection: 1,
    count: '1',
    resolveLinks: false,
    uuidOption: { string: {} },
    filter: {
      eventType: { regex: '^(?:CartCreated|Cart\\.Abandoned)$', prefixList: [] },
      count: {},
      checkpointintervalmultiplier: 1,
    },
  });
  t.is(options.filter?.streamIdentifier, undefined);
  t.is(options.noFilter, undefined);
});

test('a forward page after a position: stream prefixes, from that very position', (t) => {
  const options = optionsOf(
    filteredReadRequest({
      filter: serverFilter({ streamPrefixes: ['cart-', 'partner-'] }),
      forwards: true,
      from: { commit: 4_242n, prepare: 4_242n },
      maxCount: 8,
    }),
  );
  t.like(options, {
    all: { position: { commitPosition: '4242', preparePosition: '4242' } },
    readDirection: 0,
    count: '8',
    filter: { streamIdentifier: { prefixList: ['cart-', 'partner-'], regex: '' } },
  });
  t.is(options.filter?.eventType, undefined);
});

test('empty filter lists match nothing; no filter drops the system events; a search window is sent', (t) => {
  const read = (filter: Parameters<typeof filteredReadRequest>[0]['filter']) =>
    optionsOf(filteredReadRequest({ filter, forwards: true, from: START, maxCount: 5 }));
  t.is(read(serverFilter({ streamPrefixes: [] })).filter?.streamIdentifier?.regex, MATCH_NOTHING);
  t.is(read(serverFilter({ eventTypes: [] })).filter?.eventType?.regex, MATCH_NOTHING);
  t.is(read(serverFilter(undefined)).filter?.eventType?.regex, '^[^$].*');
  t.like(read(serverFilter(undefined)).all, { start: {} });
  const windowed = read(streamNameFilter({ prefixes: ['cart-'], maxSearchWindow: 64 })).filter;
  t.is(windowed?.max, 64);
  t.is(windowed?.count, undefined);
  t.throws(
    () => filteredReadRequest({ filter: serverFilter(undefined), forwards: true, from: START, maxCount: 0 }),
    {
      instanceOf: RangeError,
    },
  );
});

/** The Read requests sent through the client's gRPC stub while `run` runs. */
async function sentReads(run: () => Promise<unknown>): Promise<Options[]> {
  const seen: Options[] = [];
  const proto = StreamsClient.prototype as unknown as {
    read: (request: Request, ...rest: unknown[]) => unknown;
  };
  const original = proto.read;
  proto.read = function (this: unknown, request: Request, ...rest: unknown[]) {
    seen.push(optionsOf(request));
    return original.call(this, request, ...rest);
  };
  try {
    await run();
  } finally {
    proto.read = original;
  }
  return seen;
}

test.serial('the request is the client’s own readAll request but for the filter', async (t) => {
  const client = EventStoreDBClient.connectionString(NOWHERE);
  t.teardown(() => client.dispose());
  const drain = async (read: AsyncIterable<unknown>) => {
    await t.throwsAsync(async () => {
      for await (const _ of read);
    });
  };
  const from = { commit: 77n, prepare: 77n };
  for (const [forwards, start] of [
    [true, from],
    [false, END],
  ] as const) {
    const [theirs] = await sentReads(() =>
      drain(client.readAll({ fromPosition: start, direction: forwards ? FORWARDS : BACKWARDS, maxCount: 9 })),
    );
    const [ours] = await sentReads(() =>
      drain(
        readFiltered(
          client,
          filteredReadRequest({
            filter: eventTypeFilter({ regex: '^A$' }),
            forwards,
            from: start,
            maxCount: 9,
          }),
        ),
      ),
    );
    const apart = (options: Options) => ({ ...options, filter: undefined, noFilter: undefined });
    t.deepEqual(apart(ours), apart(theirs));
    t.deepEqual(theirs.noFilter, {});
    t.is(ours.noFilter, undefined);
    t.like(ours.filter, { eventType: { regex: '^A$' } });
  }
});

test.serial(
  'headPosition and readAll with a filter send filtered reads; without one, raw pages as before',
  async (t) => {
    const store = createEsdbEventStore(NOWHERE);
    t.teardown(() => store.close());
    const unavailable = { instanceOf: EventStoreUnavailableError };

    const head = await sentReads(() =>
      t.throwsAsync(store.headPosition({ eventTypes: ['CartAbandoned'] }), unavailable),
    );
    t.is(head.length, 1);
    t.like(head[0], {
      all: { end: {} },
      readDirection: 1,
      count: '1',
      filter: { eventType: { regex: '^(?:CartAbandoned)$' } },
    });

    const page = await sentReads(() =>
      t.throwsAsync(
        store.readAll({ after: 500, maxCount: 7, filter: { streamPrefixes: ['cart-'] } }),
        unavailable,
      ),
    );
    t.like(page[0], {
      all: { position: { commitPosition: '500', preparePosition: '500' } },
      readDirection: 0,
      count: '8',
      filter: { streamIdentifier: { prefixList: ['cart-'] } },
    });

    const raw = await sentReads(() => t.throwsAsync(store.headPosition(), unavailable));
    t.like(raw[0], { all: { end: {} }, readDirection: 1, count: String(PAGE_MIN), noFilter: {} });
    t.is(raw[0].filter, undefined);
  },
);

test('page sizes: a filtered read asks for what it needs, an unfiltered one for a page around it', (t) => {
  t.is(pageSizeOf(true, 1, false), 1, 'headPosition(filter): one matching event');
  t.is(pageSizeOf(true, 7, true), 8, 'from a cursor, its own event may come back too');
  t.is(pageSizeOf(true, Number.POSITIVE_INFINITY, false), PAGE_MAX);
  t.is(pageSizeOf(false, 1, false), PAGE_MIN);
  t.is(pageSizeOf(false, 5_000, true), PAGE_MAX);
});

test('headPosition is bounded: against a server that never answers it ends unavailable, filtered or not', async (t) => {
  const port = await silentPeer(t);
  const store = createEsdbEventStore(`esdb://127.0.0.1:${port}?tls=false&defaultDeadline=3000`, {
    headSearchMs: 200,
  });
  t.teardown(() => store.close());
  await t.throwsAsync(store.headPosition({ streamPrefixes: ['webhooksub-'] }), {
    instanceOf: EventStoreUnavailableError,
    message: 'the last event of $all matching the filter was not found within 200 ms',
  });
  await t.throwsAsync(store.headPosition(), {
    instanceOf: EventStoreUnavailableError,
    message: 'the last event of $all was not found within 200 ms',
  });
});
