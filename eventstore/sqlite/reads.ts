import { bindContext } from '../bind-context.ts';
import {
  type CatchUpSubscriptionOptions,
  type CountAllOptions,
  type EventFilter,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  StreamNotFoundError,
  type SubscriptionStart,
} from '../port.ts';
import type { Log } from './log.ts';
import {
  COLUMNS,
  filterSql,
  limitedRows,
  limitSql,
  prefixUpperBound,
  type Row,
  rowsAfter,
  toRecorded,
} from './rows.ts';

/** Rows scanned per query by a filtered subscription, so one sparse filter never blocks the loop for long. */
const SCAN_WINDOW = 20_000;
/** A stream-prefix filter with fewer events than this ahead may be read through the stream index. */
const INDEXED_READ_LIMIT = 20_000;
/** Most stream index entries one decision walks to count a prefix's events (`cheaperThroughIndex`). */
const COUNT_WALK_LIMIT = 1_048_576;

/** How one reader of a filtered catch-up reads while far behind (see `indexedPrefixes`). */
export interface ReadRoute {
  indexed?: boolean;
  /** Whether a scan read any of the prefixes' events since they were last counted. */
  readSinceCount?: boolean;
}

function lastRevision(log: Log, streamId: string): number | undefined {
  const row = log.stmt('SELECT max(revision) AS r FROM events WHERE stream_id = ?').get(streamId) as {
    r: number | null;
  };
  return row.r ?? undefined;
}

async function readStream(
  log: Log,
  streamId: string,
  opts: ReadStreamOptions = {},
): Promise<RecordedEvent[]> {
  log.ensureOpen();
  const rows =
    opts.direction === 'backwards'
      ? limitedRows<Row>(
          log,
          `SELECT ${COLUMNS} FROM events WHERE stream_id = ? AND revision <= ? ORDER BY revision DESC`,
          opts.maxCount,
          [streamId, opts.fromRevision ?? Number.MAX_SAFE_INTEGER],
        )
      : limitedRows<Row>(
          log,
          `SELECT ${COLUMNS} FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision`,
          opts.maxCount,
          [streamId, opts.fromRevision ?? 0],
        );
  if (rows.length === 0 && lastRevision(log, streamId) === undefined) throw new StreamNotFoundError(streamId);
  return rows.map(toRecorded);
}

function readAllSync(log: Log, opts: ReadAllOptions & { upTo?: number }): Row[] {
  log.ensureOpen();
  const f = filterSql(opts.filter);
  return opts.direction === 'backwards'
    ? limitedRows<Row>(
        log,
        `SELECT ${COLUMNS} FROM events WHERE position < ?${f.sql} ORDER BY position DESC`,
        opts.maxCount,
        [opts.before ?? Number.MAX_SAFE_INTEGER, ...f.params],
      )
    : rowsAfter<Row>(
        log,
        `SELECT ${COLUMNS} FROM events WHERE position > ? AND position <= ?${f.sql} ORDER BY position`,
        opts.after ?? 0,
        opts.maxCount,
        (after) => [after, opts.upTo ?? Number.MAX_SAFE_INTEGER, ...f.params],
      );
}

/** `countAll`: counted by SQLite, the rows neither fetched nor parsed. */
function countSync(log: Log, opts: CountAllOptions): number {
  log.ensureOpen();
  const f = filterSql(opts.filter);
  const sql = `SELECT count(*) FROM (SELECT 1 FROM events WHERE position > ?${f.sql} ORDER BY position${limitSql(opts.max)})`;
  const [count] = log.stmt(sql, true).get(opts.after, ...f.params) as unknown as [number];
  return Math.min(count, Math.max(0, opts.max));
}

function headSync(log: Log, filter?: EventFilter): number {
  log.ensureOpen();
  if (filter && 'streamPrefixes' in filter && filter.streamPrefixes.every((p) => /^[\x20-\x7e]+$/.test(p))) {
    // A range on stream_id walks the (stream_id, revision) index, whose entries carry the position
    // (the rowid): the cost is the prefix's events, not the whole log (substr() cannot use an index).
    let head = 0;
    for (const prefix of filter.streamPrefixes) {
      const row = log
        .stmt('SELECT max(position) AS p FROM events WHERE stream_id >= ? AND stream_id < ?')
        .get(prefix, prefixUpperBound(prefix)) as { p: number | null };
      head = Math.max(head, row.p ?? 0);
    }
    return head;
  }
  if (!filter) {
    if (log.headTrusted() && log.head.cached !== undefined) return log.head.cached;
    const last = log.stmt('SELECT position FROM events ORDER BY position DESC LIMIT 1').get() as
      | { position: number }
      | undefined;
    log.head.cached = last?.position ?? 0;
    log.head.stale = false;
    return log.head.cached;
  }
  const f = filterSql(filter);
  const row = log.stmt(`SELECT max(position) AS p FROM events WHERE 1${f.sql}`).get(...f.params) as {
    p: number | null;
  };
  return row.p ?? 0;
}

/**
 * Whether the next events of a stream-prefix filter are better read through the (stream_id, revision)
 * index than by scanning positions, while the gap to the head is wider than a scan window. A reader
 * keeps the answer in `route` for as long as it stays far behind, until a scan window finds none of
 * the prefixes' events after it read some (`nextChunk`): they may all be behind it by then.
 */
function indexedPrefixes(
  log: Log,
  filter: EventFilter | undefined,
  after: number,
  head: number,
  max: number,
  route: ReadRoute,
): string[] | undefined {
  if (!filter || !('streamPrefixes' in filter) || filter.streamPrefixes.length === 0) return undefined;
  const prefixes = filter.streamPrefixes;
  if (!prefixes.every((p) => /^[\x20-\x7e]+$/.test(p))) return undefined;
  const gap = head - after;
  if (gap <= SCAN_WINDOW) {
    route.indexed = undefined; // caught up: decide afresh if it falls far behind again
    return undefined;
  }
  if (route.indexed === undefined) {
    route.indexed = cheaperThroughIndex(log, prefixes, after, gap, max);
    route.readSinceCount = false;
  }
  return route.indexed ? [...prefixes] : undefined;
}

/**
 * Whether the gap is cheaper to read through the stream index: each indexed read walks every entry
 * of the prefixes' ranges (the index is in stream order, not position order) and gathers and sorts
 * the events after the reader, so it pays only when those are few (fewer than INDEXED_READ_LIMIT, and
 * than the gap) and either the prefixes hold few events in all (a rarely written stream kind) or the
 * reads it takes walk fewer entries than the gap has positions (prefixes whose events lie behind the
 * reader: the catalog's, once a build has applied them). Both counts are bounded: the events ahead
 * by INDEXED_READ_LIMIT, the entries walked by the gap (and COUNT_WALK_LIMIT).
 */
function cheaperThroughIndex(
  log: Log,
  prefixes: readonly string[],
  after: number,
  gap: number,
  max: number,
): boolean {
  const bound = Math.min(gap, INDEXED_READ_LIMIT);
  let ahead = 0;
  for (const prefix of prefixes) {
    const wanted = bound - ahead;
    ahead += Math.min(prefixEvents(log, prefix, wanted, after), wanted);
    if (ahead >= bound) return false;
  }
  const walkLimit = Math.min(gap, COUNT_WALK_LIMIT);
  let walked = 0;
  for (const prefix of prefixes) {
    walked += prefixEvents(log, prefix, walkLimit - walked);
    if (walked >= walkLimit) return false;
  }
  const reads = Math.max(1, Math.ceil(ahead / max));
  return walked < INDEXED_READ_LIMIT || reads * walked <= gap;
}

/**
 * How many events of a prefix the stream index holds, after `after` when it is given, counting at
 * most `limit` (rounded up to a power of two, `limitSql`) of them.
 */
function prefixEvents(log: Log, prefix: string, limit: number, after?: number): number {
  const since = after === undefined ? '' : ' AND position > ?';
  const params = after === undefined ? [] : [after];
  const row = log
    .stmt(
      `SELECT count(*) AS n FROM (SELECT 1 FROM events INDEXED BY events_stream_revision WHERE stream_id >= ? AND stream_id < ?${since}${limitSql(limit)})`,
    )
    .get(prefix, prefixUpperBound(prefix), ...params) as { n: number };
  return row.n;
}

/** The next events of the prefixes after `after`, in position order, through the stream index. */
function readPrefixesIndexed(
  log: Log,
  prefixes: readonly string[],
  after: number,
  upTo: number,
  max: number,
): Row[] {
  const one = `SELECT ${COLUMNS} FROM events INDEXED BY events_stream_revision WHERE stream_id >= ? AND stream_id < ? AND position > ? AND position <= ?`;
  const sql = `SELECT * FROM (${prefixes.map(() => one).join(' UNION ')}) ORDER BY position`;
  const params = prefixes.flatMap((p) => [p, prefixUpperBound(p), after, upTo]);
  // One statement, its rows stepped to `max`: each execution gathers and sorts the prefixes' events
  // after `after`, so a read in pieces (`rowsAfter`) would gather them once per piece.
  return limitedRows<Row>(log, sql, max, params);
}

/**
 * Reads the next matching events after `after`, scanning at most SCAN_WINDOW positions when filtered
 * (or through the stream index, see `indexedPrefixes`). Returns the events and the position the read
 * reached (so a sparse filter still makes progress).
 */
function nextChunk(
  log: Log,
  after: number,
  filter: EventFilter | undefined,
  max: number,
  route: ReadRoute = {},
  known?: CatchUpSubscriptionOptions['known'],
): { rows: Row[]; reached: number } {
  const head = headSync(log);
  if (head <= after) return { rows: [], reached: after };
  // Only this process's appends since `after`, none of them wanted (not of the filter, or known to
  // the reader already): nothing to read.
  if (filter && log.journal.skips(after, head, filter, known)) return { rows: [], reached: head };
  const prefixes = indexedPrefixes(log, filter, after, head, max, route);
  if (prefixes) {
    const rows = readPrefixesIndexed(log, prefixes, after, head, max);
    return { rows, reached: rows.length === max ? rows[rows.length - 1][0] : head };
  }
  const upTo = filter ? Math.min(head, after + SCAN_WINDOW) : head;
  const rows = readAllSync(log, { after, upTo, filter, maxCount: max });
  const reached = rows.length === max ? rows[rows.length - 1][0] : upTo;
  // A window without one of the prefixes' events after some were read: they may all be behind the
  // reader now, and the rest of the log is better read through the index than scanned window by
  // window (a count of the prefixes' events after it decides again; not at every empty window,
  // since fewer are left only once some were read).
  if (rows.length > 0) route.readSinceCount = true;
  else if (route.indexed === false && route.readSinceCount) route.indexed = undefined;
  return { rows, reached };
}

function startPosition(log: Log, from: SubscriptionStart | undefined): number {
  if (from === undefined || from === 'start') return 0;
  if (from === 'end') return headSync(log);
  return from.after;
}

export type Reads = ReturnType<typeof createReads>;

export function createReads(log: Log) {
  return bindContext(log, {
    lastRevision,
    readStream,
    readAllSync,
    headSync,
    countSync,
    nextChunk,
    startPosition,
  });
}
