/**
 * Operational streams' expiry on the embedded store (docs/operations.md, "Retention"): an append with
 * `maxAgeMs` records the stream's max age; `dropExpired` deletes its events once they are older. The
 * pages they held go to the file's free list and take later appends, so the file stops growing once
 * as much expires as is appended; it does not shrink (`VACUUM`, offline, gives the space back).
 */
import type { DroppedEvents } from '../port.ts';
import type { Log } from './log.ts';

/** Events deleted per transaction: a large backlog never holds the write lock for long. */
const DROP_BATCH = 2_000;

/** Inside an append's transaction: the stream's events expire `maxAgeMs` after each was recorded. */
export function setMaxAge(log: Log, streamId: string, maxAgeMs: number): void {
  log
    .stmt(
      'INSERT INTO stream_max_age (stream_id, max_age_ms) VALUES (?, ?) ON CONFLICT (stream_id) DO UPDATE SET max_age_ms = excluded.max_age_ms',
    )
    .run(streamId, maxAgeMs);
}

/**
 * Deletes the expired events, a batch per transaction, and forgets the streams left empty (they are
 * absent again). Never the log's last event: positions are rowids, and the next append takes the
 * largest one plus one, so deleting the last would give its position to another event.
 */
export async function dropExpired(log: Log): Promise<DroppedEvents> {
  const dropped = { events: 0, streams: 0 };
  for (;;) {
    const now = log.now().getTime();
    const deleted = log.transaction(() => {
      const head = log.stmt('SELECT max(position) AS p FROM events').get() as { p: number | null };
      const { changes } = log
        .stmt(
          `DELETE FROM events WHERE position IN (
             SELECT e.position FROM stream_max_age m JOIN events e ON e.stream_id = m.stream_id
             WHERE unixepoch(e.recorded_at, 'subsec') * 1000 + m.max_age_ms <= ? AND e.position < ?
             LIMIT ${DROP_BATCH})`,
        )
        .run(now, head.p ?? 0);
      return Number(changes);
    });
    dropped.events += deleted;
    if (deleted < DROP_BATCH) break;
    // Appends waiting for the write lock go first.
    await new Promise((resolve) => setImmediate(resolve));
  }
  dropped.streams = log.transaction(() =>
    Number(
      log
        .stmt(
          'DELETE FROM stream_max_age WHERE NOT EXISTS (SELECT 1 FROM events WHERE events.stream_id = stream_max_age.stream_id)',
        )
        .run().changes,
    ),
  );
  return dropped;
}
