/** Reads of `$all`: raw pages, server-filtered pages, and the port's `readAll` and `headPosition` on them. */
import type { AllStreamResolvedEvent, Position, ReadPosition } from '@eventstore/db-client';
import {
  BACKWARDS,
  DeadlineExceededError,
  END,
  type EventStoreDBClient,
  FORWARDS,
  START,
} from '@eventstore/db-client';
import {
  type EventFilter,
  EventStoreError,
  EventStoreUnavailableError,
  type ReadAllOptions,
  type RecordedEvent,
} from '../port.ts';
import { type AllRecord, HEAD_SEARCH_MS, onLeader, PAGE_MAX, PAGE_MIN, withTimeout } from './client.ts';
import { mapError } from './errors.ts';
import { filteredReadRequest, readFiltered } from './filtered-read.ts';
import {
  describe,
  isBeyond,
  positionOf,
  serverFilter,
  toPortPosition,
  toRecorded,
  visible,
} from './translate.ts';

/**
 * How many events one page of a `$all` read asks for, `wanted` more being needed. A filtered page
 * holds only matches, and the cursor's own event when the read starts at it; an unfiltered one also
 * the system events between ours.
 */
export function pageSizeOf(filtered: boolean, wanted: number, fromCursor: boolean): number {
  if (filtered) return Math.min(wanted + (fromCursor ? 1 : 0), PAGE_MAX);
  return Math.min(Math.max(wanted + 1, PAGE_MIN), PAGE_MAX);
}

export function createAllReads(client: EventStoreDBClient, headSearchMs = HEAD_SEARCH_MS) {
  /** One raw page of `$all`, system events included; `count` says whether the page was full. */
  function readRaw(from: ReadPosition, forwards: boolean, maxCount: number) {
    const direction = forwards ? FORWARDS : BACKWARDS;
    return collectPage(() =>
      client.readAll({ fromPosition: from, direction, maxCount, requiresLeader: true }),
    );
  }

  /** One page of the events of `$all` that the server matched against the filter. */
  function readMatching(
    filter: EventFilter,
    from: ReadPosition,
    forwards: boolean,
    maxCount: number,
    deadlineMs?: number,
  ) {
    const request = filteredReadRequest({ filter: serverFilter(filter), forwards, from, maxCount });
    return collectPage(() => readFiltered(client, request, deadlineMs));
  }

  /**
   * Reads a page from the leader, as every read of this adapter does: what a caller learns of the log
   * (the head, a follower settling, a checkpoint's record) is then at least what was written before it
   * asked (docs/operations.md, "EventStoreDB").
   */
  async function collectPage(read: () => AsyncIterable<AllStreamResolvedEvent>) {
    try {
      return await onLeader(async () => {
        const events: AllRecord[] = [];
        let count = 0;
        for await (const resolved of read()) {
          count += 1;
          if (resolved.event) events.push(resolved.event);
        }
        return { events, count };
      });
    } catch (err) {
      throw mapError(err);
    }
  }

  /** `deadlineMs` bounds each filtered page's call (see `headPosition`). */
  async function readAll(options: ReadAllOptions = {}, deadlineMs?: number): Promise<RecordedEvent[]> {
    const forwards = (options.direction ?? 'forwards') === 'forwards';
    const limit = options.maxCount ?? Number.POSITIVE_INFINITY;
    const { filter } = options;
    const bound = forwards ? options.after : options.before;
    let cursor = bound === undefined ? undefined : positionOf(bound);
    const out: RecordedEvent[] = [];
    while (out.length < limit) {
      const pageSize = pageSizeOf(filter !== undefined, limit - out.length, cursor !== undefined);
      const from = cursor ?? (forwards ? START : END);
      const page = filter
        ? await readMatching(filter, from, forwards, pageSize, deadlineMs)
        : await readRaw(from, forwards, pageSize);
      // Pages start at the cursor's own record (inclusive forwards): keep only what lies beyond it.
      const start = cursor;
      for (const event of page.events) {
        if (start && !isBeyond(event.position, start, forwards)) continue;
        cursor = event.position;
        // Also the guard of the server's filter: a stream prefix matches system streams too.
        if (!visible(event, filter)) continue;
        out.push(toRecorded(event));
        if (out.length >= limit) break;
      }
      if (page.count < pageSize) break;
      if (cursor === start) throw new EventStoreError(`reading $all made no progress at ${describe(start)}`);
    }
    return out;
  }

  /**
   * The last event's position, of the filter's events if one is given. Unfiltered it is one event read
   * from the end. Filtered, the server walks back from the end until it meets a match, however far
   * back that lies. Either is bounded (HEAD_SEARCH_MS; the filtered call by its gRPC deadline too, so
   * the server stops walking) and then refused as unavailable: a caller never waits on a walk of the
   * whole log, nor on a connection that does not answer (docs/operations.md, "EventStoreDB").
   */
  async function headPosition(filter?: EventFilter): Promise<number> {
    const notFound = (cause?: Error) =>
      new EventStoreUnavailableError(
        `the last event of $all${filter ? ' matching the filter' : ''} was not found within ${headSearchMs} ms`,
        { cause },
      );
    // The filtered call's deadline is the same bound as the timer: whichever fires first, the caller
    // is told the same thing.
    const read = readAll({ direction: 'backwards', maxCount: 1, filter }, headSearchMs).catch((err) => {
      throw filter && err instanceof EventStoreUnavailableError && err.cause instanceof DeadlineExceededError
        ? notFound(err)
        : err;
    });
    const [last] = await withTimeout(read, headSearchMs, () => notFound());
    return last ? last.position : 0;
  }

  /**
   * The port position of the last record of `$all` before `bound`, system records included: where a
   * catch-up checkpoint, which names the record the server reads next, leaves a subscriber (a record's
   * own position, from which a read or a subscription may resume). Undefined before the first.
   */
  async function recordBefore(bound: Position): Promise<number | undefined> {
    const { events } = await readRaw(bound, false, 2);
    const before = events.find((e) => isBeyond(e.position, bound, false));
    return before ? toPortPosition(before.position) : undefined;
  }

  return { readRaw, readAll, headPosition, recordBefore };
}
