/**
 * The embedded event store's table of events (docs/architecture.md): its schema, a row as read, and
 * what every part of the adapter checks or builds from rows.
 */
import type { SQLInputValue, StatementSync } from 'node:sqlite';
import {
  type EventFilter,
  type EventMetadata,
  InvalidEventError,
  type NewEvent,
  type RecordedEvent,
} from '../port.ts';

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS events (
  position    INTEGER PRIMARY KEY,
  stream_id   TEXT    NOT NULL,
  revision    INTEGER NOT NULL,
  event_id    TEXT    NOT NULL,
  type        TEXT    NOT NULL,
  data        TEXT    NOT NULL,
  metadata    TEXT    NOT NULL,
  recorded_at TEXT    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_stream_revision ON events (stream_id, revision);
CREATE UNIQUE INDEX IF NOT EXISTS events_event_id ON events (event_id);
CREATE TABLE IF NOT EXISTS stream_expiry (
  stream_id  TEXT    PRIMARY KEY,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS stream_expiry_due ON stream_expiry (expires_at);
CREATE TABLE IF NOT EXISTS psub_groups (
  name       TEXT PRIMARY KEY,
  settings   TEXT NOT NULL,
  checkpoint INTEGER NOT NULL,
  created_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS psub_retries (
  grp         TEXT    NOT NULL,
  position    INTEGER NOT NULL,
  retry_count INTEGER NOT NULL,
  PRIMARY KEY (grp, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS psub_parked (
  grp       TEXT    NOT NULL,
  position  INTEGER NOT NULL,
  reason    TEXT    NOT NULL,
  parked_at TEXT    NOT NULL,
  replaying INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (grp, position)
) WITHOUT ROWID;
`;

export const COLUMNS = 'position, stream_id, revision, event_id, type, data, metadata, recorded_at';

export type Row = [number, string, number, string, string, string, string, string];

export function toRecorded(row: Row): RecordedEvent {
  return {
    position: row[0],
    streamId: row[1],
    revision: row[2],
    id: row[3],
    type: row[4],
    data: JSON.parse(row[5]),
    metadata: JSON.parse(row[6]) as EventMetadata,
    recordedAt: row[7],
  };
}

/** SQL predicate and parameters for a filter; system streams are never stored here, so none is needed for them. */
export function filterSql(filter: EventFilter | undefined): { sql: string; params: SQLInputValue[] } {
  if (!filter) return { sql: '', params: [] };
  if ('streamPrefixes' in filter) {
    if (filter.streamPrefixes.length === 0) return { sql: ' AND 0', params: [] };
    // substr() compares exact bytes; LIKE would treat `_` and `%` in a prefix as wildcards.
    const parts = filter.streamPrefixes.map(() => 'substr(stream_id, 1, ?) = ?');
    return {
      sql: ` AND (${parts.join(' OR ')})`,
      params: filter.streamPrefixes.flatMap((p) => [p.length, p]),
    };
  }
  if (filter.eventTypes.length === 0) return { sql: ' AND 0', params: [] };
  return {
    sql: ` AND type IN (${filter.eventTypes.map(() => '?').join(',')})`,
    params: [...filter.eventTypes],
  };
}

/**
 * A read's row limit as SQL text, written into the statement rather than bound. SQLite plans with the
 * value of a bound `LIMIT ?`, so such a statement is prepared again at every execution (a third of a
 * short stream read's cost; docs/benchmarks.md, "Statements prepared again, and malloc arenas").
 * The limit is rounded up to a power of two, so a query keeps a few statements whatever its callers
 * ask, and `withinLimit` trims the rows to the count asked. A negative or missing limit is none, as
 * SQLite takes `LIMIT -1`.
 */
export function limitSql(max: number | undefined): string {
  if (max === undefined || !(max >= 0) || max > 2 ** 31) return '';
  return max === 0 ? ' LIMIT 0' : ` LIMIT ${2 ** Math.ceil(Math.log2(max))}`;
}

/** The first `max` rows of a read made with `limitSql(max)`. */
export function withinLimit<T>(rows: T[], max: number | undefined): T[] {
  return max !== undefined && max >= 0 && rows.length > max ? rows.slice(0, max) : rows;
}

/** The first `max` rows (as arrays) that `sql`, with `limitSql(max)` written after it, reads. */
export function limitedRows<T extends unknown[]>(
  log: { stmt(sql: string, arrays: boolean): StatementSync },
  sql: string,
  max: number | undefined,
  params: SQLInputValue[],
): T[] {
  return withinLimit(log.stmt(`${sql}${limitSql(max)}`, true).all(...params) as unknown as T[], max);
}

/**
 * The least string greater than every string starting with `prefix`, in SQLite's BINARY order, for a
 * printable ASCII prefix (the only kind it is used for): the last character plus one.
 */
export function prefixUpperBound(prefix: string): string {
  const last = prefix.charCodeAt(prefix.length - 1);
  return prefix.slice(0, -1) + String.fromCharCode(last + 1);
}

export function validateEvents(events: NewEvent[]): void {
  for (const e of events) {
    if (typeof e.type !== 'string' || e.type.length === 0 || e.type.startsWith('$')) {
      throw new InvalidEventError(`invalid event type ${JSON.stringify(e.type)}`);
    }
    if (e.data === undefined) throw new InvalidEventError(`event ${e.type} has no data`);
  }
}

export function validateStreamId(streamId: string): void {
  if (typeof streamId !== 'string' || streamId.length === 0 || streamId.startsWith('$')) {
    throw new InvalidEventError(`invalid stream id ${JSON.stringify(streamId)}`);
  }
}

export function isBusy(err: unknown): boolean {
  const e = err as { errcode?: number; message?: string };
  // SQLITE_BUSY (5) and SQLITE_LOCKED (6), including their extended codes.
  return (
    (typeof e?.errcode === 'number' && [5, 6].includes(e.errcode & 0xff)) ||
    /database is locked/.test(String(e?.message))
  );
}
