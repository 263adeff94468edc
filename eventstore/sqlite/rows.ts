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
 * ask; `firstRows` and `rowsAfter` fetch no row past the count asked. A negative or missing limit is
 * none, as SQLite takes `LIMIT -1`.
 */
export function limitSql(max: number | undefined): string {
  if (!isLimit(max)) return '';
  return max === 0 ? ' LIMIT 0' : ` LIMIT ${2 ** Math.ceil(Math.log2(max))}`;
}

function isLimit(max: number | undefined): max is number {
  return max !== undefined && max >= 0 && max <= 2 ** 31;
}

/** Whether `limitSql(max)` writes `max` itself: no limit, zero, or a power of two. */
function exactLimit(max: number | undefined): boolean {
  return !isLimit(max) || max === 0 || 2 ** Math.floor(Math.log2(max)) === max;
}

/**
 * The first `max` rows of `stmt`, whose SQL ends in `limitSql(max)`, and no more: when the limit
 * written is larger than the count asked, the rows are stepped one at a time and the read stops at
 * `max`, so the rows past it are neither read by SQLite nor converted to JavaScript; otherwise they
 * are fetched in one call, which costs less per row. The statement is reset after a read stopped
 * early: a statement left open would hold its read snapshot, and the WAL's checkpoints behind it.
 */
export function firstRows<T>(stmt: StatementSync, max: number | undefined, params: SQLInputValue[]): T[] {
  if (exactLimit(max)) return stmt.all(...params) as unknown as T[];
  const rows: T[] = [];
  const it = stmt.iterate(...params) as Iterator<T>;
  try {
    while (rows.length < (max as number)) {
      const next = it.next();
      if (next.done) break;
      rows.push(next.value);
    }
  } finally {
    it.return?.();
  }
  return rows;
}

/** The first `max` rows (as arrays) that `sql`, with `limitSql(max)` written after it, reads. */
export function limitedRows<T extends unknown[]>(
  log: { stmt(sql: string, arrays: boolean): StatementSync },
  sql: string,
  max: number | undefined,
  params: SQLInputValue[],
): T[] {
  return firstRows<T>(log.stmt(`${sql}${limitSql(max)}`, true), max, params);
}

/**
 * The first `max` rows (as arrays, the position first) of `sql`, a read in position order of the
 * events after the position given to `paramsAfter`: read in pieces whose limits are powers of two
 * (5,000 rows: 4,096, 512, 256, 128 and 8), each piece after the last position of the one before and
 * fetched whole. So the read fetches exactly the rows it returns, with the statements `limitSql` keeps,
 * at the per-row cost of fetching whole pieces, for the catch-ups' batches (projectors and followers)
 * (docs/operations.md, "Threads"). Each piece seeks to its first position, so `sql` must read by a
 * range of positions (an index walk, not a gathering of rows sorted afterwards).
 */
export function rowsAfter<T extends [number, ...unknown[]]>(
  log: { stmt(sql: string, arrays: boolean): StatementSync },
  sql: string,
  after: number,
  max: number | undefined,
  paramsAfter: (after: number) => SQLInputValue[],
): T[] {
  if (!isLimit(max)) return log.stmt(sql, true).all(...paramsAfter(after)) as unknown as T[];
  const rows: T[] = [];
  let from = after;
  while (rows.length < max) {
    const piece = 2 ** Math.floor(Math.log2(max - rows.length));
    const got = log.stmt(`${sql}${limitSql(piece)}`, true).all(...paramsAfter(from)) as unknown as T[];
    for (const row of got) rows.push(row);
    if (got.length < piece) break;
    from = got[got.length - 1][0];
  }
  return rows;
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
