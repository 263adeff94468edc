/**
 * Rewriting stored events' data in place on the embedded store, for the one-time sealing of personal
 * data written before sealing existed (`application/customer-data-protection.ts`; docs/operations.md,
 * "Customer data"). Only `data` changes: position, stream, revision, event id, type and metadata stay,
 * and so do the readers' places in the log. A batch is one short IMMEDIATE transaction, so a running
 * service's appends wait at most that long; it records the position reached in `event_rewrites`, in the
 * same file, so a stopped run resumes there.
 *
 * `secure_delete` makes SQLite overwrite the space an old value frees, and `finish` copies the WAL into
 * the file and truncates it, so the old values are in neither. What the service's own connection
 * freed before (without `secure_delete`: a page that split, a stream dropped) may still hold plain text
 * in pages' unused space: only a `VACUUM`, which rebuilds the file and holds appends back meanwhile,
 * clears that (`finish` with `vacuum`).
 */
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import type { EventDataRewrite, StoredEventData } from '../../application/customer-data-protection.ts';

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS event_rewrites (
    name        TEXT PRIMARY KEY,
    position    INTEGER NOT NULL,
    finished_at TEXT
  ) WITHOUT ROWID;
`;

/** The event store file is not there: nothing to rewrite (and nothing is created). */
export class EventStoreFileMissing extends Error {
  override name = 'EventStoreFileMissing';
}

/** Opens `file` (the embedded event store) for the rewrite called `name` (its progress is kept under it). */
export function openEventDataRewrite(file: string, name: string): EventDataRewrite {
  if (!existsSync(file)) throw new EventStoreFileMissing(`${file} does not exist`);
  const db = new DatabaseSync(file, { timeout: 10_000 });
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = FULL');
  db.exec('PRAGMA secure_delete = ON');
  db.exec(SCHEMA);
  const progress = db.prepare('SELECT position, finished_at FROM event_rewrites WHERE name = ?');
  const head = db.prepare('SELECT coalesce(max(position), 0) AS head FROM events');
  const record = db.prepare(
    `INSERT INTO event_rewrites (name, position) VALUES (?, ?)
     ON CONFLICT (name) DO UPDATE SET position = max(position, excluded.position)`,
  );
  const finished = db.prepare('UPDATE event_rewrites SET finished_at = ? WHERE name = ?');
  const update = db.prepare('UPDATE events SET data = ? WHERE position = ? AND event_id = ? AND data = ?');
  const lastOfType = db.prepare(
    'SELECT stream_id, max(position) AS position FROM events WHERE type = ? GROUP BY stream_id',
  );
  const appendedSince = db.prepare('SELECT 1 FROM events WHERE position > ? AND type = ? LIMIT 1');

  return {
    async progress() {
      const row = progress.get(name) as { position: number; finished_at: string | null } | undefined;
      return row ?? { position: 0, finished_at: null };
    },
    async head() {
      return (head.get() as { head: number }).head;
    },
    async read(after, through, types, limit) {
      return db
        .prepare(
          `SELECT position, stream_id, event_id, type, data, metadata FROM events
           WHERE position > ? AND position <= ? AND type IN (${types.map(() => '?').join(', ')})
           ORDER BY position LIMIT ?`,
        )
        .all(after, through, ...types, limit) as unknown as StoredEventData[];
    },
    async lastOfType(type) {
      const rows = lastOfType.all(type) as Array<{ stream_id: string; position: number }>;
      return new Map(rows.map((r) => [r.stream_id, r.position]));
    },
    async write(changes, through, guard) {
      db.exec('BEGIN IMMEDIATE');
      try {
        if (appendedSince.get(guard.after, guard.type)) {
          db.exec('ROLLBACK');
          return { written: [], guarded: true };
        }
        // An event another run sealed meanwhile no longer holds `before`: it is left as it is.
        const written = changes
          .filter((c) => Number(update.run(c.after, c.position, c.event_id, c.before).changes) > 0)
          .map((c) => c.position);
        record.run(name, through);
        db.exec('COMMIT');
        return { written, guarded: false };
      } catch (error) {
        if (db.isTransaction) db.exec('ROLLBACK');
        throw error;
      }
    },
    async finish(at, vacuum) {
      finished.run(at, name);
      // Rebuilds every page: the old values the first writer left in pages' unused space go too.
      if (vacuum) db.exec('VACUUM');
      const [result] = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').all() as Array<{ busy: number }>;
      return { wal_truncated: result.busy === 0 };
    },
    async close() {
      if (db.isOpen) db.close();
    },
  };
}
