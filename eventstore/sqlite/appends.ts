/**
 * Appends to the embedded event store: optimistic concurrency on the stream's revision, EventStoreDB's
 * idempotency for repeated event ids, and group commit (docs/operations.md, "Threads").
 */
import { LRUCache } from 'lru-cache';
import { bindContext } from '../bind-context.ts';
import {
  type AppendOptions,
  type AppendResult,
  checkMaxAge,
  type ExpectedRevision,
  InvalidEventError,
  isDeletableStream,
  type NewEvent,
  newEventId,
  WrongExpectedVersionError,
} from '../port.ts';
import { setMaxAge } from './expiry.ts';
import type { JournalRun } from './journal.ts';
import type { GroupCommit, Log } from './log.ts';
import type { Reads } from './reads.ts';
import { COLUMNS, limitedRows, validateEvents, validateStreamId } from './rows.ts';

/**
 * Group commit: the appends requested together share one transaction, each inside its own
 * savepoint, so one append's refusal (a wrong expected revision) rolls back that append alone. A
 * transaction costs far more than an insert; this is what lets the abandonment timer keep up with
 * 100,000 deadlines. Each append still resolves only once its transaction has committed. Together
 * means (`GroupCommit`):
 * - `'callback'` (the default): asked by one callback and its microtasks (a timer firing for many
 *   carts, a fan-out of many events); committed as soon as they have run;
 * - `'turn'`: asked in one turn of the event loop (`setImmediate`), by any number of callbacks. Each
 *   request's body arrives in a callback of its own, so under load this takes the API thread from a
 *   transaction per request to one per turn, about twice the appends a second; but each append
 *   waits for the end of the turn, which slows a chain of appends that wait for each other (a
 *   webhook delivery's three, at a fixed concurrency: 830 to 700 deliveries a second, measured);
 * - `'adaptive'`: per callback while the turn has committed nothing yet, per turn after that: the
 *   first callback of a turn to append commits at its end, as `'callback'` does, and the appends of
 *   the turn's later callbacks wait for its end together. The dispatcher works this way
 *   (docs/webhooks.md, "Order, isolation, durability"): a lone webhook's appends are each the first
 *   of their turn and leave at once, but under a backlog each answer of a receiver arrives in a
 *   callback of its own, and one commit each (its sync included) was most of the dispatcher thread's
 *   time; now the answers read in one turn share a commit. Durability is the same: each append is
 *   answered after its commit.
 */
/** Each append of a group runs inside this savepoint: a refused one is rolled back alone. */
const APPEND_SAVEPOINT = 'pds_append';

/** What an append did: its answer, and when it wrote, the events' stream and types (for the journal). */
type AppendWork = () => {
  result: AppendResult;
  wrote: boolean;
  streamId?: string;
  types?: string[];
  /** The stream has a max age: its revisions may be dropped, so it is not kept in `committed`. */
  expires?: boolean;
};

/** Streams whose last committed revision through this connection is kept (`AppendContext.committed`). */
const COMMITTED_STREAMS = 10_000;

interface AppendContext {
  log: Log;
  groupCommit: GroupCommit;
  lastRevision(streamId: string): number | undefined;
  /**
   * The revision each recent stream had when this connection last committed to it: that revision
   * exists for good (the log is append-only and a stream's revisions have no gaps), so an append
   * expecting it, or any earlier one, needs no read of the stream's last revision (see `append`).
   */
  committed: LRUCache<string, number>;
  /** The appends of this turn, committed together at its end (undefined: none yet). */
  group: Array<{ work: AppendWork; resolve(r: AppendResult): void; reject(e: unknown): void }> | undefined;
  /** `'adaptive'`: a callback of this turn has committed, so the next group waits for the turn's end. */
  committedThisTurn: boolean;
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
  ctx: AppendContext,
  streamId: string,
  ids: string[],
  expected: ExpectedRevision,
): AppendResult | undefined {
  const first = ctx.log.stmt('SELECT stream_id, revision FROM events WHERE event_id = ?').get(ids[0]) as
    | { stream_id: string; revision: number }
    | undefined;
  if (!first) {
    if (ids.length > 1) {
      const others = ids.slice(1);
      const hit = ctx.log
        .stmt(`SELECT 1 FROM events WHERE event_id IN (${others.map(() => '?').join(',')}) LIMIT 1`)
        .get(...others);
      if (hit) throw new InvalidEventError('some event ids of this batch are already stored');
    }
    return undefined;
  }
  if (first.stream_id !== streamId) {
    throw new InvalidEventError(`event id ${ids[0]} is already stored in another stream`);
  }
  const rows = limitedRows<[string, number]>(
    ctx.log,
    'SELECT event_id, position FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision',
    ids.length,
    [streamId, first.revision],
  );
  const matches = rows.length === ids.length && rows.every((r, i) => r[0] === ids[i]);
  const before = first.revision - 1;
  const placeOk =
    expected === 'any' ||
    (expected === 'no_stream' && first.revision === 0) ||
    (expected === 'stream_exists' && first.revision > 0) ||
    expected === before;
  if (!matches || !placeOk) {
    throw new WrongExpectedVersionError(streamId, expected, ctx.lastRevision(streamId) ?? 'no_stream');
  }
  return { nextExpectedRevision: first.revision + ids.length - 1, position: rows[rows.length - 1][1] };
}

async function append(
  ctx: AppendContext,
  streamId: string,
  events: NewEvent[],
  opts: AppendOptions = {},
): Promise<AppendResult> {
  validateStreamId(streamId);
  validateEvents(events);
  if (opts.maxAgeMs !== undefined) checkMaxAge(opts.maxAgeMs);
  const expected = opts.expectedRevision ?? 'any';
  if (events.length === 0) {
    const actual = ctx.lastRevision(streamId);
    checkExpected(streamId, expected, actual);
    const head = ctx.log.stmt('SELECT max(position) AS p FROM events').get() as { p: number | null };
    return { nextExpectedRevision: actual ?? -1, position: head.p ?? 0 };
  }
  const ids = events.map((e) => e.id ?? newEventId());
  const payloads = events.map((e) => [JSON.stringify(e.data), JSON.stringify(e.metadata)]);
  const recordedAt = ctx.log.now().toISOString();
  return inGroup(ctx, () => {
    // An expected revision known to exist (or no stream at all) is checked by the insert itself: the
    // (stream_id, revision) index refuses the next revision once the stream has moved past it. Other
    // expectations read the stream's last revision first (docs/operations.md, "Threads").
    const known = typeof expected === 'number' && expected <= (ctx.committed.get(streamId) ?? -1);
    // A stream with a max age may have lost its first revisions: its last one is read.
    const unread = known || (expected === 'no_stream' && opts.maxAgeMs === undefined);
    const actual = known ? expected : unread ? undefined : ctx.lastRevision(streamId);
    try {
      if (!unread) checkExpected(streamId, expected, actual);
      const written = insertEvents(ctx, streamId, actual, events, ids, payloads, recordedAt);
      if (opts.maxAgeMs === undefined) return written;
      setMaxAge(ctx.log, streamId, opts.maxAgeMs, recordedAt);
      return { ...written, expires: true };
    } catch (error) {
      // A repeat of a stored append fails one way or another: its expected revision has passed, its
      // revision is taken, or its ids are. Only then is it looked for, instead of a query per append.
      const revisionTaken = isRevisionTaken(error);
      if (!(error instanceof WrongExpectedVersionError || isEventIdTaken(error) || revisionTaken))
        throw error;
      ctx.log.db.exec(`ROLLBACK TO ${APPEND_SAVEPOINT}`);
      const again = idempotentResult(ctx, streamId, ids, expected);
      if (again) return { result: again, wrote: false };
      if (revisionTaken) {
        throw new WrongExpectedVersionError(streamId, expected, ctx.lastRevision(streamId) ?? 'no_stream');
      }
      throw error;
    }
  });
}

/** A UNIQUE constraint refused an insert (SQLITE_CONSTRAINT_UNIQUE), its message naming `columns`. */
const isTaken = (error: unknown, columns: string): boolean =>
  (error as { errcode?: number }).errcode === 2067 && String((error as Error).message).includes(columns);
/** The UNIQUE constraint on event ids refused an insert. */
const isEventIdTaken = (error: unknown): boolean => isTaken(error, 'events.event_id');
/** The UNIQUE constraint on a stream's revisions refused an insert: the stream has moved on. */
const isRevisionTaken = (error: unknown): boolean => isTaken(error, 'events.stream_id, events.revision');

/** Inserts one append's events after revision `actual`. */
function insertEvents(
  ctx: AppendContext,
  streamId: string,
  actual: number | undefined,
  events: NewEvent[],
  ids: string[],
  payloads: string[][],
  recordedAt: string,
): ReturnType<AppendWork> {
  const insert = ctx.log.stmt(`INSERT INTO events (${COLUMNS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?)`);
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
  return {
    result: { nextExpectedRevision: revision, position },
    wrote: true,
    streamId,
    types: events.map((e) => e.type),
  };
}

/** Joins this turn's group of appends (see `AppendWork`). */
function inGroup(ctx: AppendContext, work: AppendWork): Promise<AppendResult> {
  ctx.log.ensureOpen();
  return new Promise((resolve, reject) => {
    if (!ctx.group) {
      ctx.group = [];
      if (ctx.groupCommit === 'turn' || (ctx.groupCommit === 'adaptive' && ctx.committedThisTurn)) {
        setImmediate(() => commitGroup(ctx, true));
      } else {
        queueMicrotask(() => {
          if (ctx.groupCommit === 'adaptive') committedInCallback(ctx);
          commitGroup(ctx, false);
        });
      }
    }
    ctx.group.push({ work, resolve, reject });
  });
}

/** `'adaptive'`: until this turn ends, the next group waits for its end (the turn's later callbacks together). */
function committedInCallback(ctx: AppendContext): void {
  if (ctx.committedThisTurn) return;
  ctx.committedThisTurn = true;
  // Queued before any group of the turn's end: that group finds the turn over, and commits.
  setImmediate(() => {
    ctx.committedThisTurn = false;
  });
}

/** Commits this turn's group; `atTurnEnd` when it waited for the turn's end (see `Log.announceAppends`). */
function commitGroup(ctx: AppendContext, atTurnEnd: boolean): void {
  const batch = ctx.group ?? [];
  ctx.group = undefined;
  const outcomes: Array<{ ok: true; value: ReturnType<AppendWork> } | { ok: false; error: unknown }> = [];
  try {
    ctx.log.transaction(() => {
      for (const item of batch) {
        ctx.log.db.exec(`SAVEPOINT ${APPEND_SAVEPOINT}`);
        try {
          const value = item.work();
          ctx.log.db.exec(`RELEASE ${APPEND_SAVEPOINT}`);
          outcomes.push({ ok: true, value });
        } catch (error) {
          ctx.log.db.exec(`ROLLBACK TO ${APPEND_SAVEPOINT}`);
          ctx.log.db.exec(`RELEASE ${APPEND_SAVEPOINT}`);
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
  const runs: JournalRun[] = [];
  batch.forEach((item, i) => {
    const outcome = outcomes[i];
    if (!outcome.ok) {
      item.reject(outcome.error);
      return;
    }
    const value = outcome.value;
    if (value.wrote) {
      wrote = true;
      // One append's events take consecutive positions (rowids, in one transaction).
      const last = value.result.position;
      const types = value.types ?? [];
      const run = { first: last - types.length + 1, last, streamId: value.streamId ?? '', types };
      // A deletable stream's revisions are given again once it is deleted and started again (by any
      // connection): an append to it always reads its last revision.
      if (!value.expires && !isDeletableStream(run.streamId)) {
        ctx.committed.set(run.streamId, value.result.nextExpectedRevision);
      }
      ctx.log.journal.record(run.first, run.last, run.streamId, run.types);
      runs.push(run);
      if (ctx.log.head.cached !== undefined) {
        ctx.log.head.cached = Math.max(ctx.log.head.cached, outcome.value.result.position);
      }
    }
    item.resolve(outcome.value.result);
  });
  if (wrote) ctx.log.announceAppends(runs, atTurnEnd);
}

export function createAppends(
  log: Log,
  reads: Pick<Reads, 'lastRevision'>,
  groupCommit: GroupCommit = 'callback',
) {
  const ctx: AppendContext = {
    log,
    groupCommit,
    lastRevision: reads.lastRevision,
    committed: new LRUCache({ max: COMMITTED_STREAMS }),
    group: undefined,
    committedThisTurn: false,
  };
  return bindContext(ctx, { append });
}
