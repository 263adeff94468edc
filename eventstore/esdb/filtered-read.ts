/**
 * Server-side filtered reads of `$all`. The gRPC Read call takes a filter in both directions, but the
 * 6.x client's `readAll` always sends "no filter" (its dist/streams/readAll.js sets `setNoFilter`), so
 * the request is built here and sent on the client's own channel, the way that very `readAll` sends
 * its own: the client's `GRPCStreamCreator` and `callArguments`, and its `ReadStream` and
 * `convertGrpcEvent` to turn the replies into the records `readAll` returns. The server then sends
 * only matching events, so a filtered read costs the matching events, not the length of the log.
 */
import type { AllStreamResolvedEvent, EventStoreDBClient, Filter, ReadPosition } from '@eventstore/db-client';
import { ReadStream } from '@eventstore/db-client/dist/streams/utils/ReadStream.js';
import { convertGrpcEvent } from '@eventstore/db-client/dist/utils/convertGrpcEvent.js';
import sharedPb from '@eventstore/db-client/generated/shared_pb.js';
import { StreamsClient } from '@eventstore/db-client/generated/streams_grpc_pb.js';
import streamsPb from '@eventstore/db-client/generated/streams_pb.js';

// The generated protobuf modules export through `goog.object.extend`, which Node's CommonJS named-export
// detection cannot see: they are imported whole.
const { ReadReq } = streamsPb;
const { Empty } = sharedPb;
type ReadRequest = InstanceType<typeof ReadReq>;

export interface FilteredRead {
  /** The client's filter shape, as `serverFilter` makes it. */
  filter: Filter;
  forwards: boolean;
  /** Where the read starts: inclusive forwards, as the unfiltered read. */
  from: ReadPosition;
  /** How many matching events the server sends at most. */
  maxCount: number;
}

/** The Read request of a filtered `$all` read, field for field what the client's own `readAll` sends but the filter. */
export function filteredReadRequest({ filter, forwards, from, maxCount }: FilteredRead): ReadRequest {
  if (!Number.isSafeInteger(maxCount) || maxCount <= 0) throw new RangeError(`maxCount ${maxCount}`);
  const all = new ReadReq.Options.AllOptions();
  if (from === 'start') all.setStart(new Empty());
  else if (from === 'end') all.setEnd(new Empty());
  else {
    const position = new ReadReq.Options.Position();
    position.setCommitPosition(from.commit.toString(10));
    position.setPreparePosition(from.prepare.toString(10));
    all.setPosition(position);
  }
  const expression = new ReadReq.Options.FilterOptions.Expression();
  if ('prefixes' in filter) expression.setPrefixList(filter.prefixes);
  else expression.setRegex(filter.regex);
  const filterOptions = new ReadReq.Options.FilterOptions();
  if (filter.filterOn === 'streamName') filterOptions.setStreamIdentifier(expression);
  else filterOptions.setEventType(expression);
  // Without a window the server pages through the log in its own read batch size.
  if (filter.maxSearchWindow !== undefined) filterOptions.setMax(filter.maxSearchWindow);
  else filterOptions.setCount(new Empty());
  filterOptions.setCheckpointintervalmultiplier(filter.checkpointInterval ?? 1);
  const uuid = new ReadReq.Options.UUIDOption();
  uuid.setString(new Empty());
  const options = new ReadReq.Options();
  options.setAll(all);
  options.setFilter(filterOptions);
  options.setResolveLinks(false);
  options.setCount(String(maxCount));
  options.setUuidOption(uuid);
  options.setReadDirection(
    forwards ? ReadReq.Options.ReadDirection.FORWARDS : ReadReq.Options.ReadDirection.BACKWARDS,
  );
  const request = new ReadReq();
  request.setOptions(options);
  return request;
}

type StreamsGrpc = InstanceType<typeof StreamsClient>;
/** `read(request, metadata, options)`, the overload the client itself calls. */
type ReadArgs = Parameters<StreamsGrpc['read']>;
type ReadCall = ReturnType<StreamsGrpc['read']>;

/** What the client keeps `protected` (its dist/Client/index.d.ts) and its own reads use. */
interface ClientInternals {
  GRPCStreamCreator(
    service: typeof StreamsClient,
    debugName: string,
    creator: (grpc: StreamsGrpc) => ReadCall,
  ): () => Promise<ReadCall>;
  callArguments(
    options: object,
    callOptions: { deadline: number },
  ): [NonNullable<ReadArgs[1]>, NonNullable<ReadArgs[2]>];
}

/**
 * Sends a filtered read; the stream yields what the client's `readAll` yields and errors as it does.
 * It asks for the leader, as every read of the adapter. No deadline by default, as the client's
 * readAll: a read streams for as long as it has events to send. `deadlineMs` bounds the call (the
 * server gives up with DEADLINE_EXCEEDED).
 */
export function readFiltered(
  client: EventStoreDBClient,
  request: ReadRequest,
  deadlineMs?: number,
): AsyncIterable<AllStreamResolvedEvent> {
  const internals = client as unknown as ClientInternals;
  const create = internals.GRPCStreamCreator(StreamsClient, 'readAll', (grpc) =>
    grpc.read(
      request,
      ...internals.callArguments(
        { requiresLeader: true },
        { deadline: deadlineMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + deadlineMs },
      ),
    ),
  );
  return new ReadStream<AllStreamResolvedEvent>(create, convertGrpcEvent, {});
}
