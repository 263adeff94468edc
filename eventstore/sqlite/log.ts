/**
 * The embedded event store's database, as its parts share it: the connection and its prepared
 * statements, IMMEDIATE transactions, and the wake-ups of idle readers; nothing polls. Readers wake
 * at this connection's appends; at another thread's (the dispatcher's or projector's), through a broadcast
 * channel named after the file, sent once the commit is visible; at another process's, through a
 * file-system watch on the WAL.
 */
import { closeSync, fdatasyncSync, openSync } from 'node:fs';
import { resolve } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { BroadcastChannel } from 'node:worker_threads';
import { preparePrivateSqliteFile } from '../../application/private-files.ts';
import { EventStoreUnavailableError } from '../port.ts';
import { Journal, type JournalRun } from './journal.ts';
import { isBusy, SCHEMA } from './rows.ts';
import { watchWal } from './wal-watch.ts';

/**
 * How long after a WAL write of another process its readers look again (for a commit published late),
 * and how long the WAL watch stays closed after it reported a write (eventstore/sqlite/wal-watch.ts).
 */
const WAL_RECHECK_MS = 20;
/** How often the checkpointing connection (`checkpoints: 'background'`) copies the WAL into the file, after appends. */
export const CHECKPOINT_EVERY_MS = 100;
/**
 * The WAL size (pages, 16 MB) past which the checkpointing connection has the next writer start the
 * WAL from its beginning again (a restart checkpoint; see `backgroundCheckpoints`).
 */
export const RESTART_AT_PAGES = 4_000;
/** How long a restart checkpoint may hold writers back while it waits for readers (ms). */
const RESTART_WAIT_MS = 5;
/**
 * The WAL size (pages, 64 MB) at which a connection that leaves checkpoints to another one
 * (`'elsewhere'`) does one in its own commit after all: only while that other one is down or far behind.
 */
const CHECKPOINT_BACKSTOP_PAGES = 16_000;

/**
 * Each connection's page cache (KiB; SQLite's default is about the same): small, because a catch-up
 * (a first start's projector and followers) reads the whole log once, in order, and gains nothing from
 * a cache, while a large one would fill then and stay allocated for the process's life (glibc keeps
 * what SQLite frees). A page not in it comes from the OS's page cache
 * (docs/read-side.md, "Memory after the first start").
 */
const PAGE_CACHE_KIB = 2_048;

/**
 * Who copies the WAL into the database file (docs/operations.md, "Threads"):
 * - `'commit'` (SQLite's default): the commit that takes the WAL past 1,000 pages, inside that commit;
 * - `'elsewhere'`: another connection of the process (`'background'`); this one's commits do so only
 *   past `CHECKPOINT_BACKSTOP_PAGES`, when that one is down or behind;
 * - `'background'`: this connection, every 100 ms after appends (its own, or another thread's or
 *   process's), without waiting for the writers (`backgroundCheckpoints`).
 */
export type CheckpointMode = 'commit' | 'elsewhere' | 'background';

/**
 * Which appends share a transaction (`appends.ts`): one callback's, one turn of the event loop's, or
 * one callback's until another callback of the same turn appends, whose appends then wait for the
 * turn's end together (`'adaptive'`).
 */
export type GroupCommit = 'callback' | 'turn' | 'adaptive';

/**
 * When a commit reaches the disk (docs/operations.md, "Durability of the embedded event store"):
 * - `'full'` (the default): the WAL is synced at each commit, so an acknowledged append survives a
 *   power cut or a kernel crash; a group of appends sharing a commit (`GroupCommit`) pays one sync;
 * - `'normal'`: the WAL is written at each commit and synced only at checkpoints, so an acknowledged
 *   append survives the process being killed but the last commits may be lost to a power cut.
 */
export type EventStoreSync = 'full' | 'normal';

export interface SqliteEventStoreOptions {
  synchronous?: EventStoreSync;
  checkpoints?: CheckpointMode;
  /** Which appends share a transaction (`eventstore/sqlite/appends.ts`). */
  groupCommit?: GroupCommit;
  /** How long a write waits for another process's lock before failing (ms). */
  busyTimeoutMs?: number;
  now?: () => Date;
}

/** A promise that can be resolved from outside: the wake-up signal for idle readers. */
export interface Signal {
  wait(): Promise<void>;
  fire(): void;
  /** Fires once after the current turn: a burst of appends wakes each subscriber once, not per append. */
  fireSoon(): void;
}

function createSignal(): Signal {
  let waiters: Array<() => void> = [];
  let pending = false;
  const fire = (): void => {
    pending = false;
    const current = waiters;
    waiters = [];
    for (const w of current) w();
  };
  return {
    wait: () => new Promise((resolve) => waiters.push(resolve)),
    fire,
    fireSoon() {
      if (pending) return;
      pending = true;
      setImmediate(fire);
    },
  };
}

export interface Log {
  readonly db: DatabaseSync;
  readonly path: string;
  now(): Date;
  /** A prepared statement, kept for the connection's life (`arrays`: rows as arrays, not objects). */
  stmt(sql: string, arrays?: boolean): StatementSync;
  /** Throws `EventStoreUnavailableError` once the store is closed. */
  ensureOpen(): void;
  /** Runs `fn` in an IMMEDIATE transaction; a lock held by another process is a 503-able error, not a loss. */
  transaction<T>(fn: () => T): T;
  /** Wakes the readers waiting for appends. */
  readonly appended: Signal;
  /**
   * After a commit that appended `runs` (already in this journal): wakes this connection's readers, and
   * other threads' on the same file, whose journals take the runs too. Other threads hear of a commit
   * made in a callback at the end of this turn of the event loop, with the turn's other such commits;
   * of a commit made at the turn's end (`atTurnEnd`: a group that waited for it), at once, with any
   * not told yet.
   */
  announceAppends(runs: readonly JournalRun[], atTurnEnd?: boolean): void;
  /** This process's recent appends (this thread's and others'), for readers to skip wake-ups their filter does not want. */
  readonly journal: Journal;
  /**
   * The log's head, kept in memory while it can be trusted: this process's appends move it, and the
   * WAL watcher marks it stale when another process may have appended. Subscribers ask for the head
   * several times per wake-up; without the cache that is a query each time.
   */
  readonly head: { cached: number | undefined; stale: boolean };
  /** Whether the cached head may be trusted: the watcher runs, or nobody else can write (`:memory:`). */
  headTrusted(): boolean;
  /** A reader starts (or stops) waiting for appends: the WAL is watched while any does. */
  retainWatcher(): void;
  releaseWatcher(): void;
  close(): void;
}

export function openLog(path: string, options: SqliteEventStoreOptions = {}): Log {
  // Customers' data: 0600, and so are the WAL and shared memory SQLite makes beside it.
  preparePrivateSqliteFile(path);
  const db = new DatabaseSync(path, { timeout: options.busyTimeoutMs ?? 5_000 });
  db.exec('PRAGMA journal_mode = WAL');
  // The log is the only copy of the order history: durable unless told otherwise.
  db.exec(`PRAGMA synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
  db.exec('PRAGMA temp_store = MEMORY');
  db.exec(`PRAGMA cache_size = -${PAGE_CACHE_KIB}`);
  db.exec(SCHEMA);
  if (options.checkpoints === 'elsewhere')
    db.exec(`PRAGMA wal_autocheckpoint = ${CHECKPOINT_BACKSTOP_PAGES}`);

  let closed = false;
  const statements = new Map<string, StatementSync>();
  const appended = createSignal();
  const journal = new Journal();
  const head = { cached: undefined as number | undefined, stale: true };
  /** Another connection appended: the head is read again, readers wake, the checkpointer has work. */
  const otherAppended = (): void => {
    head.stale = true;
    appended.fireSoon();
    checkpointer?.moved();
  };
  // Another thread's connection to this file announces its commits here. Unlike the WAL watch, the
  // message is sent after the commit is visible: the watch fires at the write of the WAL, which can
  // come before the commit is published, so a reader woken by it may find nothing new yet.
  const channel = path === ':memory:' ? undefined : new BroadcastChannel(`pds:sqlite-log:${resolve(path)}`);
  if (channel) {
    channel.onmessage = (message) => {
      for (const run of (message as { data: JournalRun[] }).data) {
        journal.record(run.first, run.last, run.streamId, run.types);
      }
      otherAppended();
    };
    channel.unref();
  }
  let unannounced: JournalRun[] = [];
  const announce = (): void => {
    const runs = unannounced;
    if (runs.length === 0) return;
    unannounced = [];
    if (!closed) channel?.postMessage(runs);
  };

  const checkpointer =
    options.checkpoints === 'background' && path !== ':memory:' ? backgroundCheckpoints(db, path) : undefined;

  const ensureOpen = (): void => {
    if (closed) throw new EventStoreUnavailableError('event store is closed');
  };

  // Another process's appends: a write of the WAL (eventstore/sqlite/wal-watch.ts).
  const walWatch = path === ':memory:' ? undefined : watchWal(path, WAL_RECHECK_MS, otherAppended);

  return {
    db,
    path,
    now: options.now ?? (() => new Date()),
    stmt(sql, arrays = false) {
      const key = arrays ? `A:${sql}` : sql;
      let s = statements.get(key);
      if (!s) {
        s = db.prepare(sql);
        if (arrays) s.setReturnArrays(true);
        statements.set(key, s);
      }
      return s;
    },
    ensureOpen,
    transaction<T>(fn: () => T): T {
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
    },
    appended,
    announceAppends(runs, atTurnEnd = false) {
      appended.fireSoon();
      checkpointer?.moved();
      if (!channel) return;
      const pending = unannounced.length > 0;
      unannounced.push(...runs);
      // Commits of many callbacks go out together at the turn's end. A commit at the turn's end is told
      // at once: waiting for the next turn's end made the dispatcher thread wait for a whole poll phase
      // of partner requests under load (docs/benchmarks.md, "Loaded webhook latency, hop by hop").
      if (atTurnEnd) announce();
      else if (!pending) setImmediate(announce);
    },
    journal,
    head,
    headTrusted: () => !head.stale && (walWatch === undefined || walWatch.active),
    retainWatcher: () => walWatch?.retain(),
    releaseWatcher() {
      // Once nobody listens for other processes' appends, the cached head is read again each time.
      if (walWatch?.release() === false) head.stale = true;
    },
    close() {
      if (closed) return;
      appended.fire();
      if (unannounced.length > 0) announce();
      closed = true;
      checkpointer?.stop();
      channel?.close();
      walWatch?.close();
      db.close();
    },
  };
}

/**
 * The checkpoints of a `'background'` connection, every `CHECKPOINT_EVERY_MS` while the log moves:
 *
 * 1. a passive checkpoint: it copies what no reader still needs and never waits for a lock;
 * 2. the copied pages flushed to disk. SQLite syncs the file only at a checkpoint that reaches the
 *    WAL's end, which under steady appends never happens here; it would be the writers' backstop
 *    one, flushing everything copied since on the writer's thread (20-50 ms measured);
 * 3. once the WAL is past `RESTART_AT_PAGES`, a restart checkpoint: it holds the writers back while it
 *    copies the few pages appended since step 1 and waits (`RESTART_WAIT_MS` at most) for readers,
 *    so that the next commit starts the WAL from its beginning. Without it the WAL only grows: a
 *    writer restarts it only when it finds everything copied, which a copy on another thread,
 *    concurrent with the appends, never leaves it.
 *
 * So the writers' commits never copy the WAL (docs/operations.md, "Threads"); they wait a
 * millisecond or two each time step 3 runs.
 */
function backgroundCheckpoints(db: DatabaseSync, path: string): { moved(): void; stop(): void } {
  let moved = true;
  const passive = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  const restart = db.prepare('PRAGMA wal_checkpoint(RESTART)');
  const busyTimeout = (db.prepare('PRAGMA busy_timeout').get() as { timeout: number }).timeout;
  const file = openSync(path, 'r');
  const checkpoint = (): void => {
    const { log, checkpointed } = passive.get() as { log: number; checkpointed: number };
    if (checkpointed > 0) fdatasyncSync(file);
    if (log < RESTART_AT_PAGES) return;
    db.exec(`PRAGMA busy_timeout = ${RESTART_WAIT_MS}`);
    try {
      restart.get();
    } finally {
      db.exec(`PRAGMA busy_timeout = ${busyTimeout}`);
    }
  };
  const timer = setInterval(() => {
    if (!moved) return;
    moved = false;
    try {
      checkpoint();
    } catch {
      // Another connection's checkpoint, or an I/O error: the WAL keeps every commit, the next turn tries again.
      moved = true;
    }
  }, CHECKPOINT_EVERY_MS).unref();
  return {
    moved: () => {
      moved = true;
    },
    stop: () => {
      clearInterval(timer);
      closeSync(file);
    },
  };
}
