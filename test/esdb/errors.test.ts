/**
 * The adapter's error mapping (eventstore/esdb/errors.ts) on errors the client makes itself: the
 * append replies of a server that cannot take the write now go through the client's own unpacking
 * (batch append) and conversion (unary append) and come out as the port's retryable
 * EventStoreUnavailableError; anything else the client does not recognize stays a plain EventStoreError.
 */
import { createRequire } from 'node:module';
import {
  convertToCommandError,
  DeadlineExceededError,
  UnavailableError,
  UnknownError,
} from '@eventstore/db-client';
import { unpackToCommandError } from '@eventstore/db-client/dist/streams/appendToStream/unpackError.js';
import statusPb from '@eventstore/db-client/generated/status_pb.js';
import test from 'ava';
import { appendTimedOut, isUnavailable, mapError } from '../../eventstore/esdb/errors.ts';
import { EventStoreError, EventStoreUnavailableError } from '../../eventstore/port.ts';

// The protobuf and gRPC runtime the client itself loads, resolved from its own package.
const clientRequire = createRequire(import.meta.resolve('@eventstore/db-client'));
const { Any } = clientRequire('google-protobuf/google/protobuf/any_pb.js');
const { Empty } = clientRequire('google-protobuf/google/protobuf/empty_pb.js');
const { Metadata } = clientRequire('@grpc/grpc-js');

/**
 * A batch-append reply for a write the server did not handle, as its Streams.BatchAppend.cs makes it:
 * a google.rpc.Status with the message, an Empty as details and no code, unpacked by the client.
 */
function batchReply(message: string): Error {
  const details = new Any();
  details.pack(new Empty().serializeBinary(), 'google.protobuf.Empty');
  const status = new statusPb.Status();
  status.setMessage(message);
  status.setDetails(details);
  return unpackToCommandError(status, 'cart-1');
}

/** A failed unary call as @grpc/grpc-js reports it, converted by the client. */
function unaryFailure(code: number, details: string): Error {
  const name = { 4: 'DEADLINE_EXCEEDED', 14: 'UNAVAILABLE' }[code] ?? String(code);
  const serviceError = Object.assign(new Error(`${code} ${name}: ${details}`), {
    code,
    details,
    metadata: new Metadata(),
  });
  return convertToCommandError(serviceError);
}

for (const message of [
  'Server Is Not Ready',
  'Server Is Busy',
  'Server Is Too Busy',
  'No leader info available in response',
]) {
  test(`a batch-append reply "${message}" is retryable`, (t) => {
    const err = batchReply(message);
    t.true(err instanceof UnknownError, 'the client does not recognize it');
    t.is(err.message, `Could not recognize ${message}`);
    const mapped = mapError(err, { streamId: 'cart-1', expected: 3 });
    t.true(mapped instanceof EventStoreUnavailableError);
    t.is((mapped as Error).cause, err);
  });
}

test('the unary append’s UNAVAILABLE replies (not ready, too busy) are retryable', (t) => {
  for (const details of ['Server Is Not Ready', 'Server Is Too Busy']) {
    const err = unaryFailure(14, details);
    t.true(err instanceof UnavailableError, details);
    t.true(mapError(err) instanceof EventStoreUnavailableError, details);
  }
  // A connection refused on the unary path is the same class.
  t.true(mapError(unaryFailure(14, 'No connection established')) instanceof EventStoreUnavailableError);
});

test('timeouts are retryable: the server’s write timeout and the call deadline', (t) => {
  const details = new Any();
  details.pack(new Empty().serializeBinary(), 'event_store.client.Timeout');
  const status = new statusPb.Status();
  status.setMessage('');
  status.setDetails(details);
  const serverTimeout = unpackToCommandError(status, 'cart-1');
  t.true(serverTimeout instanceof DeadlineExceededError);
  t.true(mapError(serverTimeout) instanceof EventStoreUnavailableError);
  t.true(mapError(unaryFailure(4, 'Deadline exceeded')) instanceof EventStoreUnavailableError);
});

test('other unrecognized replies are not taken for unavailability', (t) => {
  for (const message of ['Something else', 'Server Is Not Ready yet', 'the Server Is Busy']) {
    const err = batchReply(message);
    t.false(isUnavailable(err), message);
    const mapped = mapError(err);
    t.true(mapped instanceof EventStoreError, message);
    t.false(mapped instanceof EventStoreUnavailableError, message);
  }
  // The wording alone, on an error the client did not make, is not enough either.
  t.false(isUnavailable(new Error('Could not recognize Server Is Not Ready')));
});

test('an append that timed out is retryable and says it may have been written', (t) => {
  const err = appendTimedOut('cart-1', 15_000);
  t.true(err instanceof EventStoreUnavailableError);
  t.regex(err.message, /cart-1.*15000 ms.*may have been written/);
  t.is(mapError(err), err);
});
