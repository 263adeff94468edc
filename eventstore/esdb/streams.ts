import type { ReadPosition } from '@eventstore/db-client';
import {
  BACKWARDS,
  END,
  type EventStoreDBClient,
  FORWARDS,
  START,
  StreamDeletedError,
} from '@eventstore/db-client';
import {
  type AppendOptions,
  type AppendResult,
  type EventFilter,
  EventStoreError,
  type ExpectedRevision,
  type NewEvent,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from '../port.ts';
import { type AllRecord, PAGE_MAX, PAGE_MIN } from './client.ts';
import { mapError } from './errors.ts';
import {
  describe,
  isBeyond,
  positionOf,
  toBigInt,
  toEsdbExpected,
  toEventData,
  toRecorded,
  validateStreamId,
  visible,
} from './translate.ts';

export function createStreams(client: EventStoreDBClient) {
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
    try {
      const result = await client.appendToStream(streamId, proposed, { expectedRevision });
      // An idempotent re-append gets no position from the server: report the original write's.
      const position = result.position
        ? Number(result.position.commit)
        : (await readAt(streamId, result.nextExpectedRevision)).position;
      return { nextExpectedRevision: Number(result.nextExpectedRevision), position };
    } catch (err) {
      throw mapError(err, { streamId, expected });
    }
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
    return { nextExpectedRevision: last ? last.revision : -1, position: await headPosition() };
  }

  async function readAt(streamId: string, revision: bigint): Promise<RecordedEvent> {
    const [event] = await readStream(streamId, { fromRevision: Number(revision), maxCount: 1 });
    if (!event) throw new EventStoreError(`stream ${streamId} has no event at revision ${revision}`);
    return event;
  }

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
    const out: RecordedEvent[] = [];
    try {
      const read = client.readStream(streamId, {
        direction: direction === 'forwards' ? FORWARDS : BACKWARDS,
        fromRevision,
        maxCount,
      });
      for await (const resolved of read) {
        if (resolved.event) out.push(toRecorded(resolved.event));
      }
    } catch (err) {
      // The port has no deletion: a stream deleted by other means reads as absent.
      if (err instanceof StreamDeletedError) throw new StreamNotFoundError(streamId);
      throw mapError(err, { streamId });
    }
    return out;
  }

  // ---- $all ----------------------------------------------------------------------------------------

  /** One raw page of `$all`, system events included; `count` says whether the page was full. */
  async function readRaw(from: ReadPosition, forwards: boolean, maxCount: number) {
    const events: AllRecord[] = [];
    let count = 0;
    try {
      const read = client.readAll({
        fromPosition: from,
        direction: forwards ? FORWARDS : BACKWARDS,
        maxCount,
      });
      for await (const resolved of read) {
        count += 1;
        if (resolved.event) events.push(resolved.event);
      }
    } catch (err) {
      throw mapError(err);
    }
    return { events, count };
  }

  async function readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const forwards = (options.direction ?? 'forwards') === 'forwards';
    const limit = options.maxCount ?? Number.POSITIVE_INFINITY;
    const bound = forwards ? options.after : options.before;
    let cursor = bound === undefined ? undefined : positionOf(bound);
    const out: RecordedEvent[] = [];
    while (out.length < limit) {
      const pageSize = Math.min(Math.max(limit - out.length + 1, PAGE_MIN), PAGE_MAX);
      const page = await readRaw(cursor ?? (forwards ? START : END), forwards, pageSize);
      // Pages start at the cursor's own record (inclusive forwards): keep only what lies beyond it.
      const start = cursor;
      for (const event of page.events) {
        if (start && !isBeyond(event.position, start, forwards)) continue;
        cursor = event.position;
        if (!visible(event, options.filter)) continue;
        out.push(toRecorded(event));
        if (out.length >= limit) break;
      }
      if (page.count < pageSize) break;
      if (cursor === start) throw new EventStoreError(`reading $all made no progress at ${describe(start)}`);
    }
    return out;
  }

  async function headPosition(filter?: EventFilter): Promise<number> {
    const [last] = await readAll({ direction: 'backwards', maxCount: 1, filter });
    return last ? last.position : 0;
  }

  return { append, readAt, readStream, readRaw, readAll, headPosition };
}
