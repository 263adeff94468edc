/**
 * The in-process dispatcher of one persistent subscription group of the embedded event store: reads
 * ahead from the group's checkpoint, hands messages to its consumers round-robin, and tracks answers
 * and deadlines. Retry counts, parked messages and the checkpoint are kept in the database, so a crash
 * loses no acknowledgement and skips no unacknowledged message. A store locked by another process is
 * waited out (the answer is kept in memory and written later), never a lost message.
 */
import {
  EventStoreUnavailableError,
  type NackAction,
  type PersistentMessage,
  type PersistentSubscriptionInfo,
  type RecordedEvent,
} from '../port.ts';
import type { Log } from './log.ts';
import type { ReadRoute, Reads } from './reads.ts';
import { isBusy, type Row, toRecorded } from './rows.ts';

/** Longest a group's checkpoint stays behind what it acknowledged (EventStoreDB's default checkpointAfter is 2 s). */
const CHECKPOINT_EVERY_MS = 1_000;

export type GroupSettings = PersistentSubscriptionInfo['settings'];

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

export interface Consumer {
  bufferSize: number;
  inFlight: number;
  handler: (message: PersistentMessage) => Promise<void> | void;
  stopped: boolean;
  fail(err: Error): void;
}

export class GroupRuntime {
  settings: GroupSettings;
  consumers: Consumer[] = [];
  /** The checkpoint as stored; `nextCheckpoint` is where it moves at the next write. */
  private checkpoint: number;
  private nextCheckpoint = 0;
  private checkpointWrittenAt = 0;
  private checkpointTimer: NodeJS.Timeout | undefined;
  private readPosition: number;
  private readonly route: ReadRoute = {};
  /** Every fetched, unfinished message of the window, in position order (a Map keeps insertion order). */
  private readonly outstanding = new Map<number, Message>();
  private readonly replays = new Map<number, Message>();
  private readonly ready: Message[] = [];
  private readonly retryCounts = new Map<number, number>();
  private roundRobin = 0;
  private timer: NodeJS.Timeout | undefined;
  private pumping = false;
  private closed = false;

  private readonly log: Log;
  private readonly reads: Pick<Reads, 'nextChunk'>;
  private readonly group: string;
  /** Told once when the group shuts down (its last consumer left, it was deleted, or it failed). */
  private readonly onClosed: (runtime: GroupRuntime) => void;

  constructor(
    log: Log,
    reads: Pick<Reads, 'nextChunk'>,
    group: string,
    loaded: { settings: GroupSettings; checkpoint: number },
    onClosed: (runtime: GroupRuntime) => void,
  ) {
    this.log = log;
    this.reads = reads;
    this.group = group;
    this.onClosed = onClosed;
    this.settings = loaded.settings;
    this.checkpoint = loaded.checkpoint;
    this.readPosition = loaded.checkpoint;
    const retries = log
      .stmt('SELECT position, retry_count FROM psub_retries WHERE grp = ?')
      .all(group) as Array<{
      position: number;
      retry_count: number;
    }>;
    for (const r of retries) this.retryCounts.set(r.position, r.retry_count);
    log.retainWatcher();
    void this.followAppends();
    this.loadReplays();
  }

  /** Pumps at every append, from the background: a locked store is tried again shortly. */
  private async followAppends(): Promise<void> {
    const pumpSafely = (): void => {
      try {
        this.pump();
      } catch (err) {
        if (isBusy(err)) setTimeout(pumpSafely, 250).unref();
        else this.shutdown(err instanceof Error ? err : new Error(String(err)));
      }
    };
    while (!this.closed) {
      await this.log.appended.wait();
      pumpSafely();
    }
  }

  /** Takes the messages an operator asked to replay from the parked list. */
  loadReplays(): void {
    const rows = this.log
      .stmt(
        `SELECT e.position, e.stream_id, e.revision, e.event_id, e.type, e.data, e.metadata, e.recorded_at
           FROM psub_parked p JOIN events e ON e.position = p.position
          WHERE p.grp = ? AND p.replaying = 1 ORDER BY p.position`,
        true,
      )
      .all(this.group) as unknown as Row[];
    for (const row of rows) {
      if (this.replays.has(row[0])) continue;
      const m: Message = { event: toRecorded(row), retryCount: 0, replay: true, delivery: 0, deadline: 0 };
      this.replays.set(row[0], m);
      this.ready.push(m);
    }
    this.pump();
  }

  /** Hands ready messages to consumers with room, reading ahead as they need. */
  pump(): void {
    if (this.pumping || this.closed) return;
    this.pumping = true;
    try {
      for (;;) {
        if (this.ready.length === 0) this.fetchMore();
        if (this.ready.length === 0) break;
        const consumer = this.nextConsumer();
        if (!consumer) break;
        this.deliver(this.ready.shift() as Message, consumer);
      }
    } finally {
      this.pumping = false;
    }
    this.armTimer();
  }

  removeConsumer(consumer: Consumer): void {
    consumer.stopped = true;
    this.consumers = this.consumers.filter((c) => c !== consumer);
    // What this consumer held goes back to the front of the queue, in order, without counting a retry.
    const held = [...this.inFlight()].filter((m) => m.consumer === consumer);
    held.sort((a, b) => a.event.position - b.event.position);
    for (const m of held) this.release(m);
    this.ready.unshift(...held);
    if (this.consumers.length === 0) this.shutdown();
    else this.pump();
  }

  shutdown(err?: Error): void {
    if (this.closed) return;
    clearTimeout(this.checkpointTimer);
    try {
      this.writeCheckpoint();
    } catch {
      // The store is closing under the group: a checkpoint behind only means redelivery.
    }
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.onClosed(this);
    this.log.releaseWatcher();
    for (const c of this.consumers) {
      c.stopped = true;
      if (err) c.fail(err);
    }
  }

  private capacity(): number {
    let free = 0;
    for (const c of this.consumers) if (!c.stopped) free += Math.max(0, c.bufferSize - c.inFlight);
    return free;
  }

  private fetchMore(): void {
    const want = this.capacity() - this.ready.length;
    if (want <= 0) return;
    const { rows, reached } = this.reads.nextChunk(
      this.readPosition,
      this.settings.filter,
      Math.max(want, 64),
      this.route,
    );
    for (const row of rows) {
      const m: Message = {
        event: toRecorded(row),
        retryCount: this.retryCounts.get(row[0]) ?? 0,
        replay: false,
        delivery: 0,
        deadline: 0,
      };
      this.outstanding.set(row[0], m);
      this.ready.push(m);
    }
    this.readPosition = reached;
    if (rows.length === 0) this.advanceCheckpoint();
  }

  private nextConsumer(): Consumer | undefined {
    const n = this.consumers.length;
    for (let i = 0; i < n; i++) {
      const c = this.consumers[(this.roundRobin + i) % n];
      if (!c.stopped && c.inFlight < c.bufferSize) {
        this.roundRobin = (this.roundRobin + i + 1) % n;
        return c;
      }
    }
    return undefined;
  }

  private deliver(m: Message, consumer: Consumer): void {
    m.consumer = consumer;
    m.delivery += 1;
    m.deadline = Date.now() + this.settings.messageTimeoutMs;
    consumer.inFlight += 1;
    const delivery = m.delivery;
    const settle = async (action: 'ack' | NackAction, reason: string): Promise<void> => {
      // A late answer (after a timeout moved the message on) or a second answer is ignored.
      if (m.delivery !== delivery || m.consumer !== consumer || this.closed) return;
      this.release(m);
      this.finish(m, action, reason);
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

  private release(m: Message): void {
    if (m.consumer) m.consumer.inFlight -= 1;
    m.consumer = undefined;
  }

  private finish(m: Message, action: 'ack' | NackAction, reason: string): void {
    if (action === 'retry') this.retry(m, reason);
    else if (action === 'park') this.park(m, reason);
    else this.acknowledge(m);
    this.pump();
  }

  private acknowledge(m: Message): void {
    const position = m.event.position;
    if (m.replay) {
      this.replays.delete(position);
      this.log.stmt('DELETE FROM psub_parked WHERE grp = ? AND position = ?').run(this.group, position);
      return;
    }
    this.outstanding.delete(position);
    if (this.retryCounts.delete(position)) {
      try {
        this.log.stmt('DELETE FROM psub_retries WHERE grp = ? AND position = ?').run(this.group, position);
      } catch (err) {
        // Locked: the row only counts past retries of a message now acknowledged (and below the
        // checkpoint once that is written); it is harmless left behind.
        if (!isBusy(err)) throw err;
      }
    }
    this.advanceCheckpoint();
  }

  private retry(m: Message, reason: string): void {
    m.retryCount += 1;
    if (m.retryCount > this.settings.maxRetryCount) {
      this.park(m, `max retry count exceeded: ${reason}`);
      return;
    }
    if (!m.replay) {
      this.retryCounts.set(m.event.position, m.retryCount);
      try {
        this.log
          .stmt('INSERT OR REPLACE INTO psub_retries (grp, position, retry_count) VALUES (?, ?, ?)')
          .run(this.group, m.event.position, m.retryCount);
      } catch (err) {
        // Locked: the count stays in memory (a restart would count from an older value); the
        // message itself is never dropped.
        if (!isBusy(err)) throw err;
      }
    }
    this.ready.unshift(m); // retries go before new messages, as in EventStoreDB
  }

  private park(m: Message, reason: string): void {
    try {
      this.parkDurably(m, reason);
    } catch (err) {
      // Locked: not parked yet; the message goes back to the queue and is parked at a later turn.
      if (!isBusy(err) && !(err instanceof EventStoreUnavailableError)) throw err;
      this.ready.unshift(m);
    }
  }

  private parkDurably(m: Message, reason: string): void {
    const position = m.event.position;
    this.log.transaction(() => {
      this.log
        .stmt(
          `INSERT INTO psub_parked (grp, position, reason, parked_at, replaying) VALUES (?, ?, ?, ?, 0)
           ON CONFLICT (grp, position) DO UPDATE SET reason = excluded.reason, parked_at = excluded.parked_at, replaying = 0`,
        )
        .run(this.group, position, reason, this.log.now().toISOString());
      this.log.stmt('DELETE FROM psub_retries WHERE grp = ? AND position = ?').run(this.group, position);
    });
    this.retryCounts.delete(position);
    if (m.replay) {
      this.replays.delete(position);
    } else {
      this.outstanding.delete(position);
      this.advanceCheckpoint();
    }
  }

  /**
   * Moves the checkpoint up to the first message not yet acknowledged, writing it at most once per
   * `CHECKPOINT_EVERY_MS` (as EventStoreDB checkpoints a group periodically): every append of another
   * thread advances a filtered group past events it does not want, and a write each time took the
   * store's write lock from that thread's appends. A checkpoint behind only means redelivery after a
   * crash, which at-least-once allows.
   */
  private advanceCheckpoint(): void {
    const first = this.outstanding.keys().next();
    const next = first.done ? this.readPosition : first.value - 1;
    if (next <= this.checkpoint) return;
    this.nextCheckpoint = next;
    if (this.checkpointTimer) return;
    const wait = this.checkpointWrittenAt + CHECKPOINT_EVERY_MS - Date.now();
    if (wait <= 0) this.writeCheckpoint();
    else this.checkpointTimer = setTimeout(() => this.writeCheckpoint(), wait).unref();
  }

  private writeCheckpoint(): void {
    this.checkpointTimer = undefined;
    const next = this.nextCheckpoint;
    if (next <= this.checkpoint) return;
    try {
      this.log.stmt('UPDATE psub_groups SET checkpoint = ? WHERE name = ?').run(next, this.group);
      this.checkpoint = next;
      this.checkpointWrittenAt = Date.now();
    } catch (err) {
      // Another process holds the write lock: written at the next advance.
      if (!isBusy(err)) throw err;
    }
  }

  private *inFlight(): Generator<Message> {
    for (const m of this.outstanding.values()) if (m.consumer) yield m;
    for (const m of this.replays.values()) if (m.consumer) yield m;
  }

  private armTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.closed) return;
    let earliest = Number.POSITIVE_INFINITY;
    for (const m of this.inFlight()) earliest = Math.min(earliest, m.deadline);
    if (earliest === Number.POSITIVE_INFINITY) return;
    this.timer = setTimeout(() => this.onTimeout(), Math.max(0, earliest - Date.now()));
    this.timer.unref();
  }

  private onTimeout(): void {
    this.timer = undefined;
    const t = Date.now();
    const expired = [...this.inFlight()].filter((m) => m.deadline <= t);
    try {
      for (const m of expired) {
        this.release(m);
        this.retry(m, 'message timeout');
      }
      this.pump();
    } catch (err) {
      // A timer callback must not throw: a locked store is tried again shortly, else the group ends.
      if (isBusy(err)) setTimeout(() => this.onTimeout(), 250).unref();
      else this.shutdown(err instanceof Error ? err : new Error(String(err)));
    }
  }
}
