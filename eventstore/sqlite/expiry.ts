/**
 * Operational streams' expiry on the embedded store (docs/operations.md, "Retention"). An append with
 * `maxAgeMs` sets when its stream expires: its last event's time plus the max age. `dropExpired`
 * deletes the streams whose time has come, whole, in the order they expire, through an index on that
 * time: a run costs what it deletes, not the streams still live. A stream never loses its first events
 * while later ones stay. The pages the events held go to the file's free list and take later appends.
 * `deleteStream` deletes one stream whole on the caller's word (finished webhook deliveries).
 */
import { checkDeletable, type DroppedEvents, WrongExpectedVersionError } from '../port.ts';
import type { Log } from './log.ts';
import { validateStreamId } from './rows.ts';

/** Streams deleted per transaction: a large backlog never holds the write lock for long. */
const DROP_BATCH = 500;

/** Inside an append's transaction: the stream expires `maxAgeMs` after this append's events. */
export function setMaxAge(log: Log, streamId: string, maxAgeMs: number, recordedAt: string): void {
  log
    .stmt(
      `INSERT INTO stream_expiry (stream_id, expires_at) VALUES (?, ?)
       ON CONFLICT (stream_id) DO UPDATE SET expires_at = max(expires_at, excluded.expires_at)`,
    )
    .run(streamId, Date.parse(recordedAt) + maxAgeMs);
}

/**
 * Deletes the expired streams, a batch per transaction; each is absent afterwards. Never the stream of
 * the log's last event (it waits for the next run): positions are rowids, and the next append takes the
 * largest one plus one, so deleting the last event would give its position to another.
 */
export async function dropExpired(log: Log): Promise<DroppedEvents> {
  const dropped = { events: 0, streams: 0 };
  for (;;) {
    const now = log.now().getTime();
    const batch = log.transaction(() => {
      const due = log
        .stmt(
          `SELECT stream_id FROM stream_expiry
           WHERE expires_at <= ? AND stream_id IS NOT (SELECT stream_id FROM events ORDER BY position DESC LIMIT 1)
           ORDER BY expires_at LIMIT ${DROP_BATCH}`,
        )
        .all(now) as { stream_id: string }[];
      let events = 0;
      for (const { stream_id } of due) {
        events += Number(log.stmt('DELETE FROM events WHERE stream_id = ?').run(stream_id).changes);
        log.stmt('DELETE FROM stream_expiry WHERE stream_id = ?').run(stream_id);
      }
      return { events, streams: due.length };
    });
    dropped.events += batch.events;
    dropped.streams += batch.streams;
    if (batch.streams < DROP_BATCH) return dropped;
    // Appends waiting for the write lock go first.
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Deletes a stream whole if its last event is the one expected, by revision and position
 * (`EventStore.deleteStream`: a stream deleted and started again up to the same revision is another),
 * in one transaction; false, deleting nothing, when it holds the log's last event (see `dropExpired`).
 * No connection keeps a deletable stream's revisions cached (`appends.ts`), so none holds stale ones.
 */
export function deleteStream(
  log: Log,
  streamId: string,
  expected: { revision: number; position: number },
): boolean {
  validateStreamId(streamId);
  checkDeletable(streamId);
  return log.transaction(() => {
    const last = log
      .stmt('SELECT revision, position FROM events WHERE stream_id = ? ORDER BY revision DESC LIMIT 1')
      .get(streamId) as { revision: number; position: number } | undefined;
    if (last?.revision !== expected.revision || last.position !== expected.position) {
      throw new WrongExpectedVersionError(streamId, expected.revision, last?.revision ?? 'no_stream');
    }
    const newest = log.stmt('SELECT stream_id FROM events ORDER BY position DESC LIMIT 1').get() as {
      stream_id: string;
    };
    if (newest.stream_id === streamId) return false;
    log.stmt('DELETE FROM events WHERE stream_id = ?').run(streamId);
    log.stmt('DELETE FROM stream_expiry WHERE stream_id = ?').run(streamId);
    return true;
  });
}
