import type {
  AppendExpectedRevision,
  Filter,
  JSONEventData,
  JSONType,
  PersistentSubscriptionToAllSettings,
  Position,
  ReadPosition,
} from '@eventstore/db-client';
import {
  ANY,
  END,
  eventTypeFilter,
  excludeSystemEvents,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  streamNameFilter,
} from '@eventstore/db-client';
import {
  type EventFilter,
  type EventMetadata,
  EventStoreError,
  type ExpectedRevision,
  InvalidEventError,
  type NewEvent,
  newEventId,
  type RecordedEvent,
  type SubscriptionStart,
} from '../port.ts';
import { type AllRecord, type EsdbRecord, MATCH_NOTHING, NO_POSITION, UUID } from './client.ts';

// ---- positions -------------------------------------------------------------------------------------

export function positionOf(position: number): Position {
  const p = toBigInt(position, 'position');
  return { commit: p, prepare: p };
}

export function readPositionOf(from: SubscriptionStart): ReadPosition {
  return from === 'start' ? START : from === 'end' ? END : positionOf(from.after);
}

export function startOf(
  startFrom: PersistentSubscriptionToAllSettings['startFrom'] | undefined,
): SubscriptionStart {
  if (startFrom === undefined || startFrom === START) return 'start';
  if (startFrom === END) return 'end';
  return { after: Number(startFrom.commit) };
}

/** The port's number for an event's position (see the module comment). */
export function toPortPosition(position: Position | undefined): number {
  // The server sends -1 (u64 max) for both halves of a position it does not know.
  if (
    position &&
    position.commit === position.prepare &&
    position.commit > 0n &&
    position.commit < NO_POSITION
  ) {
    return Number(position.commit);
  }
  throw new EventStoreError(
    `cannot map the $all position ${describe(position)} to a number: events of explicit transactions ` +
      '(commit != prepare) and servers that report no event positions are not supported',
  );
}

/**
 * A server checkpoint that is an event's own position: a live one, sent at the event that completed
 * the server's interval (commit == prepare). Undefined for any other: a catch-up checkpoint is the
 * start of the page the server reads next, (the next record's position, 0), which is no event's
 * position, and a subscription resumed after it (as (p, p)) would start between two records, which the
 * server refuses; the catch-up looks up the record before it instead (`catch-up.ts`).
 */
export function checkpointPosition(position: Position): number | undefined {
  const { commit, prepare } = position;
  if (commit !== prepare || commit <= 0n || commit >= NO_POSITION) return undefined;
  return Number(commit);
}

/** Whether a checkpoint is a catch-up one, (the next record's position, 0), as the server sends them. */
export function isNextRecordBound(position: Position): boolean {
  return position.prepare === 0n && position.commit > 0n && position.commit < NO_POSITION;
}

export function compare(a: Position, b: Position): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  if (a.prepare !== b.prepare) return a.prepare < b.prepare ? -1 : 1;
  return 0;
}

/** Whether `position` comes strictly after `bound` in the read direction. */
export function isBeyond(position: Position, bound: Position, forwards: boolean): boolean {
  const c = compare(position, bound);
  return forwards ? c > 0 : c < 0;
}

export function describe(position: Position | undefined): string {
  return position ? `C:${position.commit}/P:${position.prepare}` : 'none';
}

export function toBigInt(n: number, what: string): bigint {
  if (!Number.isSafeInteger(n) || n < 0)
    throw new InvalidEventError(`${what} must be a non-negative integer, got ${n}`);
  return BigInt(n);
}

// ---- events ----------------------------------------------------------------------------------------

export function validateStreamId(streamId: string): void {
  if (typeof streamId !== 'string' || streamId.length === 0 || streamId.startsWith('$')) {
    throw new InvalidEventError(`invalid stream id ${JSON.stringify(streamId)}`);
  }
}

export function toEsdbExpected(expected: ExpectedRevision): AppendExpectedRevision {
  if (expected === 'any') return ANY;
  if (expected === 'no_stream') return NO_STREAM;
  if (expected === 'stream_exists') return STREAM_EXISTS;
  return toBigInt(expected, 'expectedRevision');
}

export function fromEsdbExpected(expected: AppendExpectedRevision): ExpectedRevision {
  return typeof expected === 'bigint' ? Number(expected) : expected;
}

export function toEventData(event: NewEvent): JSONEventData {
  const { type, data, metadata } = event;
  if (typeof type !== 'string' || type.length === 0 || type.startsWith('$')) {
    throw new InvalidEventError(`invalid event type ${JSON.stringify(type)}`);
  }
  if (data === undefined) throw new InvalidEventError(`event ${type} has no data`);
  if (typeof metadata !== 'object' || metadata === null)
    throw new InvalidEventError(`event ${type} has no metadata`);
  assertJson(data, `data of event ${type}`);
  assertJson(metadata, `metadata of event ${type}`);
  const id = event.id ?? newEventId();
  if (!UUID.test(id)) throw new InvalidEventError(`event id ${JSON.stringify(id)} is not a UUID`);
  // The client serialises any JSON value, not only the objects, arrays and strings its type names.
  return { id, contentType: 'application/json', type, data: data as JSONType, metadata: { ...metadata } };
}

export function assertJson(value: unknown, what: string): void {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new InvalidEventError(`${what} is not JSON: ${(err as Error).message}`);
  }
  if (text === undefined) throw new InvalidEventError(`${what} is not JSON`);
}

export function toRecorded(event: EsdbRecord): RecordedEvent {
  return {
    id: event.id,
    streamId: event.streamId,
    type: event.type,
    revision: Number(event.revision),
    position: toPortPosition(event.position),
    data: decodeJson(event.data, event.isJson),
    metadata: (decodeJson(event.metadata, false) ?? {}) as EventMetadata,
    recordedAt: event.created.toISOString(),
  };
}

/** The client parses JSON events itself; bytes of events written by other tools may still be JSON. */
export function decodeJson(value: unknown, parsed: boolean): unknown {
  if (parsed || !(value instanceof Uint8Array)) return value;
  try {
    return JSON.parse(Buffer.from(value).toString('utf8'));
  } catch {
    return value;
  }
}

export function parkReason(metadata: unknown): string {
  if (typeof metadata !== 'object' || metadata === null) return '';
  const { reason, Reason } = metadata as { reason?: unknown; Reason?: unknown };
  return typeof reason === 'string' ? reason : typeof Reason === 'string' ? Reason : '';
}

// ---- persistent deliveries ---------------------------------------------------------------------

/**
 * What a persistent delivery hands over: nothing (no event, or a system one), its event as delivered,
 * or its event whose position must be read from its stream. That is a delivery with a resolved link:
 * the groups here do not resolve links, so it is a parked message replayed, and the server gives the
 * event of a replayed parked message the position of the parked link, written when it was parked, not
 * the event's own (its PersistentSubscriptions.Read.cs converts both records with the link's position).
 */
export function deliveredEvent(resolved: {
  event?: AllRecord;
  link?: EsdbRecord;
}): { kind: 'none' } | { kind: 'event' | 'lookup'; event: AllRecord } {
  const { event, link } = resolved;
  if (!event || isSystem(event)) return { kind: 'none' };
  return { kind: link ? 'lookup' : 'event', event };
}

/**
 * The event read at a delivered event's stream and revision, when it is that very event; undefined
 * when it is gone (deleted or scavenged), or another event holds its revision now (the stream was
 * deleted and written again).
 */
export function originalOf(delivered: EsdbRecord, read: EsdbRecord | undefined): AllRecord | undefined {
  if (!read || read.id !== delivered.id) return undefined;
  if (read.streamId !== delivered.streamId || read.revision !== delivered.revision) return undefined;
  // Stream reads carry event positions from EventStoreDB 23.10 on (see eventstore/esdb.ts): refuses others.
  toPortPosition(read.position);
  return read as AllRecord;
}

/** Whether a group starting after `bound` (none: from the start or the end) hands `event` over. */
export function isAfterStart(event: AllRecord, bound: Position | undefined): boolean {
  return bound === undefined || isBeyond(event.position, bound, true);
}

// ---- filters ---------------------------------------------------------------------------------------

export function isSystem(event: { streamId: string; type: string }): boolean {
  return event.streamId.startsWith('$') || event.type.startsWith('$');
}

export function matches(event: { streamId: string; type: string }, filter: EventFilter | undefined): boolean {
  if (!filter) return true;
  if ('streamPrefixes' in filter) return filter.streamPrefixes.some((p) => event.streamId.startsWith(p));
  return filter.eventTypes.includes(event.type);
}

export function visible(event: { streamId: string; type: string }, filter: EventFilter | undefined): boolean {
  return !isSystem(event) && matches(event, filter);
}

/** What a subscription's filter also carries: the callback the server's checkpoints are handed to. */
export type CheckpointReached = NonNullable<Filter['checkpointReached']>;

export function serverFilter(filter: EventFilter | undefined, checkpointReached?: CheckpointReached): Filter {
  const options = checkpointReached ? { checkpointReached } : {};
  if (!filter) return excludeSystemEvents(options);
  if ('streamPrefixes' in filter) {
    return filter.streamPrefixes.length > 0
      ? streamNameFilter({ prefixes: filter.streamPrefixes, ...options })
      : streamNameFilter({ regex: MATCH_NOTHING, ...options });
  }
  if (filter.eventTypes.length === 0) return eventTypeFilter({ regex: MATCH_NOTHING, ...options });
  const names = filter.eventTypes.map((t) => t.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&'));
  return eventTypeFilter({ regex: `^(?:${names.join('|')})$`, ...options });
}
