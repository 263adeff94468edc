import {
  CancelledError,
  DeadlineExceededError,
  PersistentSubscriptionExistsError as EsdbPersistentSubscriptionExistsError,
  StreamNotFoundError as EsdbStreamNotFoundError,
  WrongExpectedVersionError as EsdbWrongExpectedVersionError,
  InvalidArgumentError,
  MaxAppendSizeExceededError,
  NotFoundError,
  NotLeaderError,
  PersistentSubscriptionDoesNotExistError,
  PersistentSubscriptionDroppedError,
  TimeoutError,
  UnavailableError,
  UnknownError,
} from '@eventstore/db-client';
import {
  EventStoreError,
  EventStoreUnavailableError,
  type ExpectedRevision,
  InvalidEventError,
  PersistentSubscriptionExistsError,
  PersistentSubscriptionNotFoundError,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from '../port.ts';
import { fromEsdbExpected } from './translate.ts';

// ---- errors ----------------------------------------------------------------------------------------

export interface ErrorContext {
  streamId?: string;
  expected?: ExpectedRevision;
  group?: string;
}

/** gRPC status codes meaning "try again later": DEADLINE_EXCEEDED, UNAVAILABLE. */
export const RETRYABLE_GRPC_CODES = new Set([4, 14]);
export const NETWORK_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'EHOSTUNREACH',
]);

/**
 * The server's replies for an append it did not handle (its Streams.BatchAppend.cs: not ready, too
 * busy, a follower that knows no leader). They carry no typed detail, so the client's
 * dist/streams/appendToStream/unpackError.js makes them an UnknownError "Could not recognize …"; the
 * unary Append sends the first two as UNAVAILABLE "Server Is Not Ready" / "Server Is Too Busy".
 */
export const NOT_HANDLED =
  /^(?:Could not recognize )?(?:Server Is Not Ready|Server Is (?:Too )?Busy|No leader info available in response)$/;

/**
 * An append that outlived its timeout. It may still have been written: the caller retries the same
 * append (same event ids, same expected revision), which the server answers as done when it finds
 * those ids at that revision.
 */
export function appendTimedOut(streamId: string, ms: number): EventStoreUnavailableError {
  return new EventStoreUnavailableError(
    `the append to ${streamId} did not complete within ${ms} ms; it may have been written, retry the same append`,
  );
}

/** Maps client errors to the port's typed errors; callers never see the client's classes. */
export function mapError(err: unknown, context: ErrorContext = {}): Error {
  if (err instanceof EventStoreError) return err;
  if (!(err instanceof Error)) return new EventStoreError(String(err));
  if (err instanceof EsdbWrongExpectedVersionError) {
    const actual = err.actualVersion === 'no_stream' ? 'no_stream' : Number(err.actualVersion);
    const expected = context.expected ?? fromEsdbExpected(err.expectedVersion);
    return new WrongExpectedVersionError(context.streamId ?? err.streamName, expected, actual);
  }
  if (err instanceof EsdbStreamNotFoundError)
    return new StreamNotFoundError(context.streamId ?? err.streamName);
  if (err instanceof EsdbPersistentSubscriptionExistsError) {
    return new PersistentSubscriptionExistsError(context.group ?? err.groupName);
  }
  if (
    err instanceof PersistentSubscriptionDoesNotExistError ||
    (err instanceof NotFoundError && context.group !== undefined)
  ) {
    return new PersistentSubscriptionNotFoundError(
      context.group ?? (err as { groupName?: string }).groupName ?? '',
    );
  }
  if (err instanceof InvalidArgumentError || err instanceof MaxAppendSizeExceededError) {
    return new InvalidEventError(err.message, { cause: err });
  }
  if (isUnavailable(err)) {
    return new EventStoreUnavailableError(err.message || 'EventStoreDB is unavailable', { cause: err });
  }
  return new EventStoreError(err.message || err.name, { cause: err });
}

export function isUnavailable(err: Error): boolean {
  if (
    err instanceof UnavailableError ||
    err instanceof NotLeaderError ||
    err instanceof DeadlineExceededError ||
    err instanceof TimeoutError ||
    err instanceof CancelledError ||
    err instanceof PersistentSubscriptionDroppedError
  ) {
    return true;
  }
  if (err instanceof UnknownError && NOT_HANDLED.test(err.message)) return true;
  const { code } = err as { code?: unknown };
  // A refused connection can surface as a plain Error carrying the gRPC status code.
  if (typeof code === 'number') return RETRYABLE_GRPC_CODES.has(code);
  if (typeof code === 'string') return NETWORK_ERROR_CODES.has(code);
  return /^Failed to discover/.test(err.message);
}
