/** Appends and stream reads; `$all` reads are in read-all.ts. */
import type { AppendExpectedRevision, JSONEventData } from '@eventstore/db-client';
import {
  ANY,
  BACKWARDS,
  END,
  type EventStoreDBClient,
  FORWARDS,
  jsonEvent,
  START,
  StreamDeletedError,
} from '@eventstore/db-client';
import { append as unaryAppend } from '@eventstore/db-client/dist/streams/appendToStream/append.js';
import {
  type AppendOptions,
  type AppendResult,
  checkDeletable,
  checkMaxAge,
  type Direction,
  EventStoreError,
  EventStoreUnavailableError,
  type ExpectedRevision,
  type NewEvent,
  type ReadStreamOptions,
  type RecordedEvent,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from '../port.ts';
import { APPEND_TIMEOUT_MS, onLeader, withTimeout } from './client.ts';
import { appendTimedOut, mapError } from './errors.ts';
import { createAllReads } from './read-all.ts';
import { toBigInt, toEsdbExpected, toEventData, toRecorded, validateStreamId } from './translate.ts';

export interface StreamsOptions {
  /** Bound on one append, whatever it waits for (see APPEND_TIMEOUT_MS). */
  appendTimeoutMs?: number;
  /** Bound on a filtered `headPosition`'s search back from the end (see HEAD_SEARCH_MS). */
  headSearchMs?: number;
}

export function createStreams(client: EventStoreDBClient, options: StreamsOptions = {}) {
  const appendTimeoutMs = options.appendTimeoutMs ?? APPEND_TIMEOUT_MS;
  /** Appends not settled yet: `settle()` waits for them before the client is disposed. */
  const appending = new Set<Promise<unknown>>();
  const all = createAllReads(client, options.headSearchMs);

  async function append(
    streamId: string,
    events: NewEvent[],
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    validateStreamId(streamId);
    const expected = options.expectedRevision ?? 'any';
    const expectedRevision = toEsdbExpected(expected);
    const proposed = events.map(toEventData);
    if (proposed.length === 0) return checkOnly(streamId, expected);
    if (options.maxAgeMs !== undefined) checkMaxAge(options.maxAgeMs);
    const write = withTimeout(
      appendOnce(streamId, proposed, expected, expectedRevision).then(async (result) => {
        if (options.maxAgeMs !== undefined && result.nextExpectedRevision === proposed.length - 1) {
          await setMaxAge(client, streamId, options.maxAgeMs);
        }
        return result;
      }),
      appendTimeoutMs,
      () => appendTimedOut(streamId, appendTimeoutMs),
    );
    appending.add(write);
    try {
      return await write;
    } catch (err) {
      throw mapError(err, { streamId, expected });
    } finally {
      appending.delete(write);
    }
  }

  async function appendOnce(
    streamId: string,
    proposed: JSONEventData[],
    expected: ExpectedRevision,
    expectedRevision: AppendExpectedRevision,
  ): Promise<AppendResult> {
    // The client's unary Append, not its appendToStream: that one takes the batch-append stream whenever
    // the server offers it (its dist/streams/appendToStream/index.js), whose pending appends share one
    // module-wide table across clients and which leaves a rejection unhandled when a queued write fails
    // (its batchAppend.js). The unary call is one gRPC call per append with the client's call deadline.
    const result = await unaryAppend.call(client, streamId, proposed, {
      expectedRevision,
      batchAppendSize: 0, // required by the option type, read only by the batch path
    });
    // A client made with throwOnAppendFailure=false answers a wrong expected version as `success:
    // false` with the stream's revision (-1: no stream). connect() refuses that option; should such an
    // answer come anyway, it is the refusal it stands for, never a write.
    if (!result.success) {
      const actual = result.nextExpectedRevision < 0n ? 'no_stream' : Number(result.nextExpectedRevision);
      throw new WrongExpectedVersionError(streamId, expected, actual);
    }
    // An idempotent re-append gets no position from the server: report the original write's.
    const position = result.position
      ? Number(result.position.commit)
      : (await readAt(streamId, result.nextExpectedRevision)).position;
    return { nextExpectedRevision: Number(result.nextExpectedRevision), position };
  }

  /** Resolves once every append started so far has settled (each is bounded by the append timeout). */
  async function settle(): Promise<void> {
    while (appending.size > 0) await Promise.allSettled([...appending]);
  }

  /** An empty append only checks the expected revision, as EventStoreDB does; nothing is written. */
  async function checkOnly(streamId: string, expected: ExpectedRevision): Promise<AppendResult> {
    const [last] = await readStream(streamId, { direction: 'backwards', maxCount: 1 }).catch((err) => {
      if (err instanceof StreamNotFoundError) return [];
      throw err;
    });
    const actual = last ? last.revision : 'no_stream';
    const ok =
      expected === 'any' ||
      (expected === 'no_stream' && actual === 'no_stream') ||
      (expected === 'stream_exists' && actual !== 'no_stream') ||
      expected === actual;
    if (!ok) throw new WrongExpectedVersionError(streamId, expected, actual);
    return { nextExpectedRevision: last ? last.revision : -1, position: await all.headPosition() };
  }

  async function readAt(streamId: string, revision: bigint): Promise<RecordedEvent> {
    const [event] = await readStream(streamId, { fromRevision: Number(revision), maxCount: 1 });
    if (!event) throw new EventStoreError(`stream ${streamId} has no event at revision ${revision}`);
    return event;
  }

  /**
   * A stream read asks for the leader (`requires-leader`): every stream read here is one a decision or
   * an answer rests on (docs/operations.md, "EventStoreDB"), and a follower may not hold the last
   * writes yet. A follower refuses it with NotLeader naming the leader; the client then moves its whole
   * connection there, and the read is made again.
   */
  async function readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const direction = options.direction ?? 'forwards';
    const maxCount = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    if (maxCount <= 0) return [];
    const fromRevision =
      options.fromRevision !== undefined
        ? toBigInt(options.fromRevision, 'fromRevision')
        : direction === 'forwards'
          ? START
          : END;
    try {
      return await onLeader(() => readFromLeader(streamId, direction, fromRevision, maxCount));
    } catch (err) {
      // The port has no deletion: a stream deleted by other means reads as absent.
      if (err instanceof StreamDeletedError) throw new StreamNotFoundError(streamId);
      throw mapError(err, { streamId });
    }
  }

  async function readFromLeader(
    streamId: string,
    direction: Direction,
    fromRevision: bigint | typeof START | typeof END,
    maxCount: number,
  ): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    const read = client.readStream(streamId, {
      direction: direction === 'forwards' ? FORWARDS : BACKWARDS,
      fromRevision,
      maxCount,
      requiresLeader: true,
    });
    for await (const resolved of read) {
      if (resolved.event) out.push(toRecorded(resolved.event));
    }
    return out;
  }

  return {
    append,
    deleteStream: (streamId: string, expected: { revision: number }) =>
      deleteStream(client, streamId, expected.revision, appendTimeoutMs),
    settle,
    readAt,
    readStream,
    ...all,
  };
}

/**
 * The stream's `$maxAge`, set by the append that started it (docs/operations.md, "Retention"): the
 * server leaves its expired events out of reads and subscriptions and deletes them at a scavenge.
 * Whole seconds, rounded up: an event is never dropped before its time. What the client's
 * setStreamMetadata writes, through the unary Append (see `appendOnce`).
 */
async function setMaxAge(client: EventStoreDBClient, streamId: string, maxAgeMs: number): Promise<void> {
  const metadata = jsonEvent({ type: '$metadata', data: { $maxAge: Math.ceil(maxAgeMs / 1_000) } });
  await unaryAppend.call(client, `$$${streamId}`, [metadata], { expectedRevision: ANY, batchAppendSize: 0 });
}

/**
 * A soft delete (`EventStore.deleteStream`) at the expected revision: the server answers "not found"
 * to reads of the stream at once and removes its events at a scavenge; an append expecting
 * `no_stream` starts the stream again, its revisions going on after the deleted ones (the server's
 * IndexWriter.CheckCommit accepts `NoStream` on a soft-deleted stream, and StorageWriterService's
 * SoftUndeleteStream truncates it before the first new event). Bounded like an append.
 */
async function deleteStream(
  client: EventStoreDBClient,
  streamId: string,
  expectedRevision: number,
  timeoutMs: number,
): Promise<boolean> {
  validateStreamId(streamId);
  checkDeletable(streamId);
  try {
    await withTimeout(
      onLeader(() => client.deleteStream(streamId, { expectedRevision: BigInt(expectedRevision) })),
      timeoutMs,
      () => new EventStoreUnavailableError(`deleting ${streamId} did not complete within ${timeoutMs} ms`),
    );
    return true;
  } catch (err) {
    throw mapError(err, { streamId, expected: expectedRevision });
  }
}
