/**
 * Embedded EventStore adapter on Node's built-in `node:sqlite`.
 *
 * - One table of events: the global position is the rowid (never reused: nothing is ever deleted),
 *   `(stream_id, revision)` and `event_id` are unique. Each append is one IMMEDIATE transaction.
 * - WAL journal. `synchronous=NORMAL` by default: a committed append survives the process being killed
 *   (the WAL write has reached the OS); `synchronous: 'full'` also survives power loss, at the cost of an
 *   fsync per append.
 * - Live subscribers are woken by the append itself (same process) or by a file-system watch on the
 *   WAL (another process appending to the same file); nothing polls.
 * - Persistent subscription state (settings, checkpoint, retry counts, parked messages) lives in the
 *   same database, so a crash loses no acknowledgement and skips no unacknowledged message.
 *   Consumers of one group must live in one process (use EventStoreDB to spread a group over processes).
 */
import { randomUUID } from 'node:crypto';
import { type FSWatcher, mkdirSync, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import {
  type AppendOptions,
  type AppendResult,
  type CatchUpHandlers,
  type CatchUpSubscription,
  type CatchUpSubscriptionOptions,
  type EventFilter,
  type EventMetadata,
  type EventStore,
  EventStoreUnavailableError,
  type ExpectedRevision,
  InvalidEventError,
  type NackAction,
  type NewEvent,
  type ParkedMessage,
  type PersistentConsumer,
  type PersistentConsumerOptions,
  type PersistentMessage,
  PersistentSubscriptionExistsError,
  type PersistentSubscriptionInfo,
  PersistentSubscriptionNotFoundError,
  type PersistentSubscriptionSettings,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  StreamNotFoundError,
  type SubscriptionStart,
  WrongExpectedVersionError,
} from './port.ts';

export interface SqliteEventStoreOptions {
  synchronous?: 'normal' | 'full';
  /** How long a write waits for another process's lock before failing (ms). */
  busyTimeoutMs?: number;
  now?: () => Date;
}

const SCHEMA = `
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

const COLUMNS = 'position, stream_id, revision, event_id, type, data, metadata, recorded_at';
/** Rows scanned per query by a filtered subscription, so one sparse filter never blocks the loop for long. */
const SCAN_WINDOW = 20_000;
/** How far a filtered subscription reads past skipped events before it tells `onProgress`. */
const PROGRESS_EVERY = 100_000;
/** A stream-prefix filter with fewer events than this may be read through the stream index. */
const INDEXED_READ_LIMIT = 20_000;

/** How one reader of a filtered catch-up reads while far behind (see `indexedPrefixes`). */
interface ReadRoute {
  indexed?: boolean;
}
const DEFAULT_MAX_RETRY = 10;
const DEFAULT_MESSAGE_TIMEOUT_MS = 30_000;

type Row = [number, string, number, string, string, string, string, string];

function toRecorded(row: Row): RecordedEvent {
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
function filterSql(filter: EventFilter | undefined): { sql: string; params: SQLInputValue[] } {
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
 * The least string greater than every string starting with `prefix`, in SQLite's BINARY order, for a
 * printable ASCII prefix (the only kind it is used for): the last character plus one.
 */
export function prefixUpperBound(prefix: string): string {
  const last = prefix.charCodeAt(prefix.length - 1);
  return prefix.slice(0, -1) + String.fromCharCode(last + 1);
}

function validateEvents(events: NewEvent[]): void {
  for (const e of events) {
    if (typeof e.type !== 'string' || e.type.length === 0 || e.type.startsWith('$')) {
      throw new InvalidEventError(`invalid event type ${JSON.stringify(e.type)}`);
    }
    if (e.data === undefined) throw new InvalidEventError(`event ${e.type} has no data`);
  }
}

function validateStreamId(streamId: string): void {
  if (typeof streamId !== 'string' || streamId.length === 0 || streamId.startsWith('$')) {
    throw new InvalidEventError(`invalid stream id ${JSON.stringify(streamId)}`);
  }
}

function isBusy(err: unknown): boolean {
  const e = err as { errcode?: number; message?: string };
  // SQLITE_BUSY (5) and SQLITE_LOCKED (6), including their extended codes.
  return (
    (typeof e?.errcode === 'number' && [5, 6].includes(e.errcode & 0xff)) ||
    /database is locked/.test(String(e?.message))
  );
}

/** A promise that can be resolved from outside: the wake-up signal for idle readers. */
function createSignal() {
  let waiters: Array<() => void> = [];
  let pending = false;
  const fire = (): void => {
    pending = false;
    const current = waiters;
    waiters = [];
    for (const w of current) w();
  };
  return {
    wait(): Promise<void> {
      return new Promise((resolve) => waiters.push(resolve));
    },
    fire,
    /** Fires once after the current turn: a burst of appends wakes each subscriber once, not per append. */
    fireSoon(): void {
      if (pending) return;
      pending = true;
      setImmediate(fire);
    },
    get waiting() {
      return waiters.length;
    },
  };
}

export async function openSqliteEventStore(
  path: string,
  options: SqliteEventStoreOptions = {},
): Promise<EventStore> {
  return createSqliteEventStore(path, options);
}

export function createSqliteEventStore(path: string, options: SqliteEventStoreOptions = {}): EventStore {
  const now = options.now ?? (() => new Date());
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path, { timeout: options.busyTimeoutMs ?? 5_000 });
  db.exec('PRAGMA journal_mode = WAL');
  db.exec(`PRAGMA synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  db.exec('PRAGMA temp_store = MEMORY');
  db.exec('PRAGMA cache_size = -65536');
  db.exec(SCHEMA);

  let closed = false;
  const statements = new Map<string, StatementSync>();
  function stmt(sql: string, arrays = false): StatementSync {
    const key = arrays ? `A:${sql}` : sql;
    let s = statements.get(key);
    if (!s) {
      s = db.prepare(sql);
      if (arrays) s.setReturnArrays(true);
      statements.set(key, s);
    }
    return s;
  }
  function ensureOpen(): void {
    if (closed) throw new EventStoreUnavailableError('event store is closed');
  }

  /** Runs `fn` in an IMMEDIATE transaction; a lock held by another process is retried, not lost. */
  function transaction<T>(fn: () => T): T {
    ensureOpen();
    try {
      db.exec('BEGIN IMMEDIATE');
    } catch (err) {
      if (isBusy(err)) throw new EventStoreUnavailableError('event store is locked by another writer');
      throw err;
    }
    try {
      const result = fn();
      db.exec('COMMIT');
      return result;
    } catch (err) {
      if (db.isTransaction) db.exec('ROLLBACK');
      throw err;
    }
  }

  // ---- wake-ups -------------------------------------------------------------------------------
  const appended = createSignal();
  let watcher: FSWatcher | undefined;
  /**
   * The log's head, kept in memory while it can be trusted: this process's appends move it, and the
   * WAL watcher marks it stale when another process may have appended. Subscribers ask for the head
   * several times per wake-up; without the cache that is a query each time.
   */
  let cachedHead: number | undefined;
  let headStale = true;
  let subscribers = 0;
  function retainWatcher(): void {
    subscribers += 1;
    if (watcher || path === ':memory:') return;
    const walName = `${basename(path)}-wal`;
    try {
      watcher = watch(dirname(path), { persistent: false }, (_event, file) => {
        if (file !== walName) return;
        // Possibly another process's append: the cached head must be read again.
        headStale = true;
        appended.fireSoon();
      });
      watcher.on('error', () => {});
    } catch {
      watcher = undefined; // same-process appends still wake subscribers
    }
  }
  function releaseWatcher(): void {
    subscribers -= 1;
    if (subscribers === 0 && watcher) {
      watcher.close();
      watcher = undefined;
      headStale = true; // nobody tells of other processes' appends any more
    }
  }

  // ---- append ---------------------------------------------------------------------------------
  function lastRevision(streamId: string): number | undefined {
    const row = stmt('SELECT max(revision) AS r FROM events WHERE stream_id = ?').get(streamId) as {
      r: number | null;
    };
    return row.r ?? undefined;
  }

  function checkExpected(streamId: string, expected: ExpectedRevision, actual: number | undefined): void {
    const actualOrNone = actual ?? 'no_stream';
    if (expected === 'any') return;
    if (expected === 'no_stream' && actual !== undefined) {
      throw new WrongExpectedVersionError(streamId, expected, actualOrNone);
    }
    if (expected === 'stream_exists' && actual === undefined) {
      throw new WrongExpectedVersionError(streamId, expected, actualOrNone);
    }
    if (typeof expected === 'number' && expected !== actual) {
      throw new WrongExpectedVersionError(streamId, expected, actualOrNone);
    }
  }

  /**
   * EventStoreDB's idempotency: when the batch's first event id is already stored, a write of the
   * very same ids at the same place answers the original result and writes nothing.
   */
  function idempotentResult(
    streamId: string,
    ids: string[],
    expected: ExpectedRevision,
  ): AppendResult | undefined {
    const first = stmt('SELECT stream_id, revision FROM events WHERE event_id = ?').get(ids[0]) as
      | { stream_id: string; revision: number }
      | undefined;
    if (!first) {
      if (ids.length > 1) {
        const others = ids.slice(1);
        const hit = stmt(
          `SELECT 1 FROM events WHERE event_id IN (${others.map(() => '?').join(',')}) LIMIT 1`,
        ).get(...others);
        if (hit) throw new InvalidEventError('some event ids of this batch are already stored');
      }
      return undefined;
    }
    if (first.stream_id !== streamId) {
      throw new InvalidEventError(`event id ${ids[0]} is already stored in another stream`);
    }
    const rows = stmt(
      'SELECT event_id, position FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision LIMIT ?',
      true,
    ).all(streamId, first.revision, ids.length) as unknown as Array<[string, number]>;
    const matches = rows.length === ids.length && rows.every((r, i) => r[0] === ids[i]);
    const before = first.revision - 1;
    const placeOk =
      expected === 'any' ||
      (expected === 'no_stream' && first.revision === 0) ||
      (expected === 'stream_exists' && first.revision > 0) ||
      expected === before;
    if (!matches || !placeOk) {
      throw new WrongExpectedVersionError(streamId, expected, lastRevision(streamId) ?? 'no_stream');
    }
    return { nextExpectedRevision: first.revision + ids.length - 1, position: rows[rows.length - 1][1] };
  }

  async function append(
    streamId: string,
    events: NewEvent[],
    opts: AppendOptions = {},
  ): Promise<AppendResult> {
    validateStreamId(streamId);
    validateEvents(events);
    const expected = opts.expectedRevision ?? 'any';
    if (events.length === 0) {
      const actual = lastRevision(streamId);
      checkExpected(streamId, expected, actual);
      const head = stmt('SELECT max(position) AS p FROM events').get() as { p: number | null };
      return { nextExpectedRevision: actual ?? -1, position: head.p ?? 0 };
    }
    const ids = events.map((e) => e.id ?? randomUUID());
    const payloads = events.map((e) => [JSON.stringify(e.data), JSON.stringify(e.metadata)]);
    const recordedAt = now().toISOString();
    return inGroup(() => {
      const again = events.some((e) => e.id !== undefined)
        ? idempotentResult(streamId, ids, expected)
        : undefined;
      if (again) return { result: again, wrote: false };
      const actual = lastRevision(streamId);
      checkExpected(streamId, expected, actual);
      const insert = stmt(`INSERT INTO events (${COLUMNS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?)`);
      let revision = actual ?? -1;
      let position = 0;
      for (let i = 0; i < events.length; i++) {
        revision += 1;
        const info = insert.run(
          streamId,
          revision,
          ids[i],
          events[i].type,
          payloads[i][0],
          payloads[i][1],
          recordedAt,
        );
        position = Number(info.lastInsertRowid);
      }
      return { result: { nextExpectedRevision: revision, position }, wrote: true };
    });
  }

  /**
   * Group commit: the appends requested in one turn of the event loop (a timer firing for many carts,
   * a fan-out of many events, concurrent requests) share one transaction, each inside its own
   * savepoint, so one append's refusal (a wrong expected revision) rolls back that append alone. A
   * transaction costs far more than an insert; this is what lets the abandonment timer keep up with
   * 100,000 deadlines. Each append still resolves only once its transaction has committed.
   */
  type AppendWork = () => { result: AppendResult; wrote: boolean };
  let group:
    | Array<{ work: AppendWork; resolve(r: AppendResult): void; reject(e: unknown): void }>
    | undefined;

  function inGroup(work: AppendWork): Promise<AppendResult> {
    ensureOpen();
    return new Promise((resolve, reject) => {
      if (!group) {
        group = [];
        queueMicrotask(commitGroup);
      }
      group.push({ work, resolve, reject });
    });
  }

  function commitGroup(): void {
    const batch = group ?? [];
    group = undefined;
    const outcomes: Array<
      { ok: true; value: { result: AppendResult; wrote: boolean } } | { ok: false; error: unknown }
    > = [];
    try {
      transaction(() => {
        for (const item of batch) {
          db.exec('SAVEPOINT pds_append');
          try {
            const value = item.work();
            db.exec('RELEASE pds_append');
            outcomes.push({ ok: true, value });
          } catch (error) {
            db.exec('ROLLBACK TO pds_append');
            db.exec('RELEASE pds_append');
            outcomes.push({ ok: false, error });
          }
        }
      });
    } catch (error) {
      // Nothing of the group was committed (locked store, closed store, disk error).
      for (const item of batch) item.reject(error);
      return;
    }
    let wrote = false;
    batch.forEach((item, i) => {
      const outcome = outcomes[i];
      if (!outcome.ok) {
        item.reject(outcome.error);
        return;
      }
      if (outcome.value.wrote) {
        wrote = true;
        if (cachedHead !== undefined) cachedHead = Math.max(cachedHead, outcome.value.result.position);
      }
      item.resolve(outcome.value.result);
    });
    if (wrote) appended.fireSoon();
  }

  // ---- reads ----------------------------------------------------------------------------------
  async function readStream(streamId: string, opts: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    ensureOpen();
    const backwards = opts.direction === 'backwards';
    const limit = opts.maxCount ?? -1;
    const rows = (backwards
      ? stmt(
          `SELECT ${COLUMNS} FROM events WHERE stream_id = ? AND revision <= ? ORDER BY revision DESC LIMIT ?`,
          true,
        ).all(streamId, opts.fromRevision ?? Number.MAX_SAFE_INTEGER, limit)
      : stmt(
          `SELECT ${COLUMNS} FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision LIMIT ?`,
          true,
        ).all(streamId, opts.fromRevision ?? 0, limit)) as unknown as Row[];
    if (rows.length === 0 && lastRevision(streamId) === undefined) throw new StreamNotFoundError(streamId);
    return rows.map(toRecorded);
  }

  function readAllSync(opts: ReadAllOptions & { upTo?: number }): Row[] {
    ensureOpen();
    const f = filterSql(opts.filter);
    const limit = opts.maxCount ?? -1;
    if (opts.direction === 'backwards') {
      return stmt(
        `SELECT ${COLUMNS} FROM events WHERE position < ?${f.sql} ORDER BY position DESC LIMIT ?`,
        true,
      ).all(opts.before ?? Number.MAX_SAFE_INTEGER, ...f.params, limit) as unknown as Row[];
    }
    return stmt(
      `SELECT ${COLUMNS} FROM events WHERE position > ? AND position <= ?${f.sql} ORDER BY position LIMIT ?`,
      true,
    ).all(opts.after ?? 0, opts.upTo ?? Number.MAX_SAFE_INTEGER, ...f.params, limit) as unknown as Row[];
  }

  function headSync(filter?: EventFilter): number {
    ensureOpen();
    if (
      filter &&
      'streamPrefixes' in filter &&
      filter.streamPrefixes.every((p) => /^[\x20-\x7e]+$/.test(p))
    ) {
      // A range on stream_id walks the (stream_id, revision) index, whose entries carry the position
      // (the rowid): the cost is the prefix's events, not the whole log (substr() cannot use an index).
      let head = 0;
      for (const prefix of filter.streamPrefixes) {
        const row = stmt('SELECT max(position) AS p FROM events WHERE stream_id >= ? AND stream_id < ?').get(
          prefix,
          prefixUpperBound(prefix),
        ) as { p: number | null };
        head = Math.max(head, row.p ?? 0);
      }
      return head;
    }
    if (!filter) {
      // Trusted only while the watcher runs (it tells of other processes' appends) or nobody else can write.
      const trusted = !headStale && (watcher !== undefined || path === ':memory:');
      if (trusted && cachedHead !== undefined) return cachedHead;
      const last = stmt('SELECT position FROM events ORDER BY position DESC LIMIT 1').get() as
        | { position: number }
        | undefined;
      cachedHead = last?.position ?? 0;
      headStale = false;
      return cachedHead;
    }
    const f = filterSql(filter);
    const row = stmt(`SELECT max(position) AS p FROM events WHERE 1${f.sql}`).get(...f.params) as {
      p: number | null;
    };
    return row.p ?? 0;
  }

  /**
   * Whether the next events of a stream-prefix filter are better read through the (stream_id, revision)
   * index than by scanning positions: when the gap to the head is wider than a scan window and the
   * prefixes hold few events (fewer than INDEXED_READ_LIMIT, and than the gap): a rarely written stream
   * kind read from the start or from an old checkpoint. Each indexed read costs the prefixes' events,
   * so a large prefix is scanned by position. The count is bounded, and a reader keeps the answer in
   * `route` for as long as it stays far behind.
   */
  function indexedPrefixes(
    filter: EventFilter | undefined,
    after: number,
    head: number,
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
      const bound = Math.min(gap, INDEXED_READ_LIMIT);
      let events = 0;
      for (const prefix of prefixes) {
        const row = stmt(
          'SELECT count(*) AS n FROM (SELECT 1 FROM events INDEXED BY events_stream_revision WHERE stream_id >= ? AND stream_id < ? LIMIT ?)',
        ).get(prefix, prefixUpperBound(prefix), bound - events) as { n: number };
        events += row.n;
        if (events >= bound) break;
      }
      route.indexed = events < bound;
    }
    return route.indexed ? [...prefixes] : undefined;
  }

  /** The next events of the prefixes after `after`, in position order, through the stream index. */
  function readPrefixesIndexed(prefixes: readonly string[], after: number, upTo: number, max: number): Row[] {
    const one = `SELECT ${COLUMNS} FROM events INDEXED BY events_stream_revision WHERE stream_id >= ? AND stream_id < ? AND position > ? AND position <= ?`;
    const sql = `SELECT * FROM (${prefixes.map(() => one).join(' UNION ')}) ORDER BY position LIMIT ?`;
    const params = prefixes.flatMap((p) => [p, prefixUpperBound(p), after, upTo]);
    return stmt(sql, true).all(...params, max) as unknown as Row[];
  }

  /**
   * Reads the next matching events after `after`, scanning at most SCAN_WINDOW positions when filtered
   * (or through the stream index, see `indexedPrefixes`). Returns the events and the position the read
   * reached (so a sparse filter still makes progress).
   */
  function nextChunk(
    after: number,
    filter: EventFilter | undefined,
    max: number,
    route: ReadRoute = {},
  ): { rows: Row[]; reached: number } {
    const head = headSync();
    if (head <= after) return { rows: [], reached: after };
    const prefixes = indexedPrefixes(filter, after, head, route);
    if (prefixes) {
      const rows = readPrefixesIndexed(prefixes, after, head, max);
      return { rows, reached: rows.length === max ? rows[rows.length - 1][0] : head };
    }
    const upTo = filter ? Math.min(head, after + SCAN_WINDOW) : head;
    const rows = readAllSync({ after, upTo, filter, maxCount: max });
    const reached = rows.length === max ? rows[rows.length - 1][0] : upTo;
    return { rows, reached };
  }

  function startPosition(from: SubscriptionStart | undefined): number {
    if (from === undefined || from === 'start') return 0;
    if (from === 'end') return headSync();
    return from.after;
  }

  // ---- catch-up subscriptions -----------------------------------------------------------------
  function subscribeToAll(opts: CatchUpSubscriptionOptions, handlers: CatchUpHandlers): CatchUpSubscription {
    const maxBatch = opts.maxBatchSize ?? 500;
    let stopped = false;
    let last: number | undefined;
    let resolveCaughtUp!: () => void;
    const caughtUp = new Promise<void>((r) => {
      resolveCaughtUp = r;
    });
    let isCaughtUp = false;
    retainWatcher();

    const run = async (): Promise<void> => {
      let position = startPosition(opts.from);
      let reported = position;
      const route: ReadRoute = {};
      let yieldedAt = performance.now();
      try {
        while (!stopped) {
          const { rows, reached } = nextChunk(position, opts.filter, maxBatch, route);
          if (rows.length > 0) {
            const events = rows.map(toRecorded);
            await handlers.onEvents(events);
            last = events[events.length - 1].position;
          }
          position = reached;
          // Events skipped by the filter: told when caught up, and every PROGRESS_EVERY positions.
          if (handlers.onProgress && reached > Math.max(last ?? 0, reported)) {
            if (reached >= headSync() || reached - reported >= PROGRESS_EVERY) {
              reported = reached;
              await handlers.onProgress(reached);
            }
          }
          // Reads are synchronous and handlers often settle in microtasks: a long catch-up would hold
          // the event loop (no HTTP, no timers) until it ends. Let the loop turn every ~20 ms.
          if (performance.now() - yieldedAt > 20) {
            await new Promise((resolve) => setImmediate(resolve));
            yieldedAt = performance.now();
          }
          if (reached >= headSync()) {
            if (!isCaughtUp) {
              isCaughtUp = true;
              resolveCaughtUp();
              handlers.onCaughtUp?.();
            }
            // Reads are synchronous: no append of this process can slip between the check and the wait.
            if (!stopped && reached >= headSync()) await appended.wait();
          }
        }
      } finally {
        releaseWatcher();
      }
    };
    const done = run();
    done.catch(() => {});
    return {
      caughtUp,
      done,
      lastPosition: () => last,
      async stop() {
        stopped = true;
        appended.fire();
        await done.catch(() => {});
      },
    };
  }

  // ---- persistent subscriptions ---------------------------------------------------------------
  type Settings = PersistentSubscriptionInfo['settings'];
  interface GroupRow {
    name: string;
    settings: string;
    checkpoint: number;
  }
  function loadGroup(group: string): { settings: Settings; checkpoint: number } {
    ensureOpen();
    const row = stmt('SELECT name, settings, checkpoint FROM psub_groups WHERE name = ?').get(group) as
      | GroupRow
      | undefined;
    if (!row) throw new PersistentSubscriptionNotFoundError(group);
    return { settings: JSON.parse(row.settings) as Settings, checkpoint: row.checkpoint };
  }

  async function createPersistentSubscription(
    group: string,
    settings: PersistentSubscriptionSettings = {},
  ): Promise<void> {
    ensureOpen();
    const full: Settings = {
      from: settings.from ?? 'start',
      maxRetryCount: settings.maxRetryCount ?? DEFAULT_MAX_RETRY,
      messageTimeoutMs: settings.messageTimeoutMs ?? DEFAULT_MESSAGE_TIMEOUT_MS,
      ...(settings.filter ? { filter: settings.filter } : {}),
    };
    transaction(() => {
      if (stmt('SELECT 1 FROM psub_groups WHERE name = ?').get(group)) {
        throw new PersistentSubscriptionExistsError(group);
      }
      stmt('INSERT INTO psub_groups (name, settings, checkpoint, created_at) VALUES (?, ?, ?, ?)').run(
        group,
        JSON.stringify(full),
        startPosition(full.from),
        now().toISOString(),
      );
    });
  }

  async function updatePersistentSubscription(
    group: string,
    settings: Pick<PersistentSubscriptionSettings, 'maxRetryCount' | 'messageTimeoutMs'>,
  ): Promise<void> {
    const current = loadGroup(group);
    const next = { ...current.settings, ...settings };
    stmt('UPDATE psub_groups SET settings = ? WHERE name = ?').run(JSON.stringify(next), group);
    const runtime = groups.get(group);
    if (runtime) runtime.settings = next;
  }

  async function deletePersistentSubscription(group: string): Promise<void> {
    loadGroup(group);
    const runtime = groups.get(group);
    if (runtime) runtime.shutdown(new PersistentSubscriptionNotFoundError(group));
    transaction(() => {
      stmt('DELETE FROM psub_groups WHERE name = ?').run(group);
      stmt('DELETE FROM psub_retries WHERE grp = ?').run(group);
      stmt('DELETE FROM psub_parked WHERE grp = ?').run(group);
    });
  }

  async function getPersistentSubscriptionInfo(group: string): Promise<PersistentSubscriptionInfo> {
    const g = loadGroup(group);
    const parked = stmt('SELECT count(*) AS n FROM psub_parked WHERE grp = ? AND replaying = 0').get(
      group,
    ) as {
      n: number;
    };
    return {
      group,
      settings: g.settings,
      lastCheckpointedPosition: g.checkpoint > 0 ? g.checkpoint : undefined,
      parkedCount: parked.n,
      connections: groups.get(group)?.consumers.length ?? 0,
    };
  }

  async function listParkedMessages(
    group: string,
    opts: { maxCount?: number } = {},
  ): Promise<ParkedMessage[]> {
    loadGroup(group);
    const rows = stmt(
      `SELECT e.position, e.stream_id, e.revision, e.event_id, e.type, e.data, e.metadata, e.recorded_at, p.reason, p.parked_at
         FROM psub_parked p JOIN events e ON e.position = p.position
        WHERE p.grp = ? AND p.replaying = 0 ORDER BY p.parked_at, p.position LIMIT ?`,
      true,
    ).all(group, opts.maxCount ?? -1) as unknown as Array<[...Row, string, string]>;
    return rows.map((r) => ({
      event: toRecorded(r.slice(0, 8) as Row),
      reason: r[8],
      parkedAt: r[9],
    }));
  }

  async function replayParkedMessages(group: string): Promise<void> {
    loadGroup(group);
    stmt('UPDATE psub_parked SET replaying = 1 WHERE grp = ? AND replaying = 0').run(group);
    groups.get(group)?.loadReplays();
  }

  interface Message {
    event: RecordedEvent;
    retryCount: number;
    /** Replayed from the parked list: outside the checkpoint window. */
    replay: boolean;
    consumer?: Consumer;
    /** Incremented at every delivery, so a late answer to an earlier delivery is ignored. */
    delivery: number;
    deadline: number;
  }
  interface Consumer {
    bufferSize: number;
    inFlight: number;
    handler: (message: PersistentMessage) => Promise<void> | void;
    stopped: boolean;
    fail(err: Error): void;
  }
  interface GroupRuntime {
    settings: Settings;
    consumers: Consumer[];
    pump(): void;
    removeConsumer(consumer: Consumer): void;
    loadReplays(): void;
    shutdown(err?: Error): void;
  }

  const groups = new Map<string, GroupRuntime>();

  /** In-process dispatcher of one group: reads ahead, hands messages round-robin, tracks acks and deadlines. */
  function createGroupRuntime(group: string): GroupRuntime {
    const loaded = loadGroup(group);
    let checkpoint = loaded.checkpoint;
    let readPosition = checkpoint;
    const route: ReadRoute = {};
    /** Every fetched, unfinished message of the window, in position order (a Map keeps insertion order). */
    const outstanding = new Map<number, Message>();
    const replays = new Map<number, Message>();
    const ready: Message[] = [];
    const retryCounts = new Map<number, number>();
    for (const r of stmt('SELECT position, retry_count FROM psub_retries WHERE grp = ?').all(group) as Array<{
      position: number;
      retry_count: number;
    }>) {
      retryCounts.set(r.position, r.retry_count);
    }
    let roundRobin = 0;
    let timer: NodeJS.Timeout | undefined;
    let pumping = false;
    let closedGroup = false;

    const g: GroupRuntime = {
      settings: loaded.settings,
      consumers: [],
      pump,
      removeConsumer,
      loadReplays,
      shutdown,
    };

    function capacity(): number {
      let free = 0;
      for (const c of g.consumers) if (!c.stopped) free += Math.max(0, c.bufferSize - c.inFlight);
      return free;
    }

    function loadReplays(): void {
      const rows = stmt(
        `SELECT e.position, e.stream_id, e.revision, e.event_id, e.type, e.data, e.metadata, e.recorded_at
           FROM psub_parked p JOIN events e ON e.position = p.position
          WHERE p.grp = ? AND p.replaying = 1 ORDER BY p.position`,
        true,
      ).all(group) as unknown as Row[];
      for (const row of rows) {
        if (replays.has(row[0])) continue;
        const m: Message = { event: toRecorded(row), retryCount: 0, replay: true, delivery: 0, deadline: 0 };
        replays.set(row[0], m);
        ready.push(m);
      }
      pump();
    }

    function fetchMore(): void {
      const want = capacity() - ready.length;
      if (want <= 0) return;
      const { rows, reached } = nextChunk(readPosition, g.settings.filter, Math.max(want, 64), route);
      for (const row of rows) {
        const m: Message = {
          event: toRecorded(row),
          retryCount: retryCounts.get(row[0]) ?? 0,
          replay: false,
          delivery: 0,
          deadline: 0,
        };
        outstanding.set(row[0], m);
        ready.push(m);
      }
      readPosition = reached;
      if (rows.length === 0) advanceCheckpoint();
    }

    function nextConsumer(): Consumer | undefined {
      const n = g.consumers.length;
      for (let i = 0; i < n; i++) {
        const c = g.consumers[(roundRobin + i) % n];
        if (!c.stopped && c.inFlight < c.bufferSize) {
          roundRobin = (roundRobin + i + 1) % n;
          return c;
        }
      }
      return undefined;
    }

    function pump(): void {
      if (pumping || closedGroup) return;
      pumping = true;
      try {
        for (;;) {
          if (ready.length === 0) fetchMore();
          if (ready.length === 0) break;
          const consumer = nextConsumer();
          if (!consumer) break;
          deliver(ready.shift()!, consumer);
        }
      } finally {
        pumping = false;
      }
      armTimer();
    }

    function deliver(m: Message, consumer: Consumer): void {
      m.consumer = consumer;
      m.delivery += 1;
      m.deadline = Date.now() + g.settings.messageTimeoutMs;
      consumer.inFlight += 1;
      const delivery = m.delivery;
      const settle = async (action: 'ack' | NackAction, reason: string): Promise<void> => {
        // A late answer (after a timeout moved the message on) or a second answer is ignored.
        if (m.delivery !== delivery || m.consumer !== consumer || closedGroup) return;
        release(m);
        finish(m, action, reason);
      };
      const message: PersistentMessage = {
        event: m.event,
        retryCount: m.retryCount,
        ack: () => settle('ack', ''),
        nack: (action, reason) => settle(action, reason),
      };
      Promise.resolve()
        .then(() => consumer.handler(message))
        .catch((err: unknown) => settle('retry', err instanceof Error ? err.message : String(err)));
    }

    function release(m: Message): void {
      if (m.consumer) m.consumer.inFlight -= 1;
      m.consumer = undefined;
    }

    function finish(m: Message, action: 'ack' | NackAction, reason: string): void {
      const position = m.event.position;
      if (action === 'retry') {
        retry(m, reason);
      } else if (action === 'park') {
        park(m, reason);
      } else if (m.replay) {
        replays.delete(position);
        stmt('DELETE FROM psub_parked WHERE grp = ? AND position = ?').run(group, position);
      } else {
        outstanding.delete(position);
        if (retryCounts.delete(position)) {
          try {
            stmt('DELETE FROM psub_retries WHERE grp = ? AND position = ?').run(group, position);
          } catch (err) {
            // Locked: the row only counts past retries of a message now acknowledged (and below the
            // checkpoint once that is written); it is harmless left behind.
            if (!isBusy(err)) throw err;
          }
        }
        advanceCheckpoint();
      }
      pump();
    }

    function retry(m: Message, reason: string): void {
      m.retryCount += 1;
      if (m.retryCount > g.settings.maxRetryCount) {
        park(m, `max retry count exceeded: ${reason}`);
        return;
      }
      if (!m.replay) {
        retryCounts.set(m.event.position, m.retryCount);
        try {
          stmt('INSERT OR REPLACE INTO psub_retries (grp, position, retry_count) VALUES (?, ?, ?)').run(
            group,
            m.event.position,
            m.retryCount,
          );
        } catch (err) {
          // Locked: the count stays in memory (a restart would count from an older value); the
          // message itself is never dropped.
          if (!isBusy(err)) throw err;
        }
      }
      ready.unshift(m); // retries go before new messages, as in EventStoreDB
    }

    function park(m: Message, reason: string): void {
      const position = m.event.position;
      try {
        parkDurably(m, reason, position);
      } catch (err) {
        // Locked: not parked yet; the message goes back to the queue and is parked at a later turn.
        if (!isBusy(err) && !(err instanceof EventStoreUnavailableError)) throw err;
        ready.unshift(m);
      }
    }

    function parkDurably(m: Message, reason: string, position: number): void {
      transaction(() => {
        stmt(
          `INSERT INTO psub_parked (grp, position, reason, parked_at, replaying) VALUES (?, ?, ?, ?, 0)
           ON CONFLICT (grp, position) DO UPDATE SET reason = excluded.reason, parked_at = excluded.parked_at, replaying = 0`,
        ).run(group, position, reason, now().toISOString());
        stmt('DELETE FROM psub_retries WHERE grp = ? AND position = ?').run(group, position);
      });
      retryCounts.delete(position);
      if (m.replay) {
        replays.delete(position);
      } else {
        outstanding.delete(position);
        advanceCheckpoint();
      }
    }

    function advanceCheckpoint(): void {
      const first = outstanding.keys().next();
      const next = first.done ? readPosition : first.value - 1;
      if (next > checkpoint) {
        try {
          stmt('UPDATE psub_groups SET checkpoint = ? WHERE name = ?').run(next, group);
          checkpoint = next;
        } catch (err) {
          // Another process holds the write lock: the checkpoint is written at the next advance (a
          // checkpoint behind only means redelivery after a restart, which at-least-once allows).
          if (!isBusy(err)) throw err;
        }
      }
    }

    function* inFlight(): Generator<Message> {
      for (const m of outstanding.values()) if (m.consumer) yield m;
      for (const m of replays.values()) if (m.consumer) yield m;
    }

    function armTimer(): void {
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (closedGroup) return;
      let earliest = Number.POSITIVE_INFINITY;
      for (const m of inFlight()) earliest = Math.min(earliest, m.deadline);
      if (earliest === Number.POSITIVE_INFINITY) return;
      timer = setTimeout(onTimeout, Math.max(0, earliest - Date.now()));
      timer.unref();
    }

    function onTimeout(): void {
      timer = undefined;
      const t = Date.now();
      const expired = [...inFlight()].filter((m) => m.deadline <= t);
      try {
        for (const m of expired) {
          release(m);
          retry(m, 'message timeout');
        }
        pump();
      } catch (err) {
        // A timer callback must not throw: a locked store is tried again shortly, else the group ends.
        if (isBusy(err)) setTimeout(onTimeout, 250).unref();
        else shutdown(err instanceof Error ? err : new Error(String(err)));
      }
    }

    function removeConsumer(consumer: Consumer): void {
      consumer.stopped = true;
      g.consumers = g.consumers.filter((c) => c !== consumer);
      // What this consumer held goes back to the front of the queue, in order, without counting a retry.
      const held = [...inFlight()].filter((m) => m.consumer === consumer);
      held.sort((a, b) => a.event.position - b.event.position);
      for (const m of held) release(m);
      ready.unshift(...held);
      if (g.consumers.length === 0) shutdown();
      else pump();
    }

    function shutdown(err?: Error): void {
      if (closedGroup) return;
      closedGroup = true;
      if (timer) clearTimeout(timer);
      if (groups.get(group) === g) groups.delete(group);
      releaseWatcher();
      for (const c of g.consumers) {
        c.stopped = true;
        if (err) c.fail(err);
      }
    }

    retainWatcher();
    /** Pumps from the background: a locked store is tried again shortly; anything else ends the group. */
    const pumpSafely = (): void => {
      try {
        pump();
      } catch (err) {
        if (isBusy(err)) setTimeout(pumpSafely, 250).unref();
        else shutdown(err instanceof Error ? err : new Error(String(err)));
      }
    };
    void (async () => {
      while (!closedGroup) {
        await appended.wait();
        pumpSafely();
      }
    })();
    loadReplays();
    return g;
  }

  function subscribeToPersistent(
    group: string,
    handler: (message: PersistentMessage) => Promise<void> | void,
    opts: PersistentConsumerOptions = {},
  ): PersistentConsumer {
    let resolveDone!: () => void;
    let rejectDone!: (err: Error) => void;
    const done = new Promise<void>((resolve, reject) => {
      resolveDone = resolve;
      rejectDone = reject;
    });
    done.catch(() => {});
    const consumer: Consumer = {
      bufferSize: opts.bufferSize ?? 10,
      inFlight: 0,
      handler,
      stopped: false,
      fail: (err) => rejectDone(err),
    };
    let g: GroupRuntime | undefined;
    try {
      ensureOpen();
      g = groups.get(group);
      if (!g) {
        g = createGroupRuntime(group);
        groups.set(group, g);
      }
      g.consumers.push(consumer);
      queueMicrotask(() => g?.pump());
    } catch (err) {
      rejectDone(err as Error);
    }
    return {
      done,
      async stop() {
        if (g && !consumer.stopped) g.removeConsumer(consumer);
        consumer.stopped = true;
        resolveDone();
      },
    };
  }

  async function close(): Promise<void> {
    if (closed) return;
    for (const g of [...groups.values()]) g.shutdown();
    appended.fire();
    closed = true;
    if (watcher) watcher.close();
    watcher = undefined;
    db.close();
  }

  return {
    kind: 'sqlite',
    append,
    readStream,
    readAll: async (opts = {}) => readAllSync(opts).map(toRecorded),
    headPosition: async (filter) => headSync(filter),
    subscribeToAll,
    createPersistentSubscription,
    updatePersistentSubscription,
    deletePersistentSubscription,
    getPersistentSubscriptionInfo,
    subscribeToPersistent,
    listParkedMessages,
    replayParkedMessages,
    close,
  };
}
