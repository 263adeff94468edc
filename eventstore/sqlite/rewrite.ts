/**
 * Rewriting stored events' data in place on the embedded store, for the one-time sealing of personal
 * data written before sealing existed (`application/customer-data-protection.ts`; docs/operations.md,
 * "Customer data"). Only `data` changes: position, stream, revision, event id, type and metadata stay,
 * and so do the readers' places in the log. A batch is one short IMMEDIATE transaction, so a running
 * service's appends wait at most that long; it records the position reached in `event_rewrites`, in the
 * same file, so a stopped run resumes there.
 *
 * `secure_delete` makes SQLite overwrite the space an old value frees, and `finish` copies the WAL into
 * the file and truncates it, so the old values are in neither. Still, the old values stay in the file:
 * what the service's own connection freed before (without `secure_delete`: a page that split, a stream
 * dropped) and what a rewrite's page rebalancing leaves in pages' unused space. Only a `VACUUM`, which
 * rebuilds the file and holds appends back meanwhile, clears that (`finish` with `vacuum`), and the
 * rewrite is recorded vacuumed only then (a batch that seals anything after clears it again).
 *
 * The final checkpoint never waits on a reader with the writer's lock held: a PASSIVE one copies what
 * it can, then a TRUNCATE one is tried a few times without a busy handler (the service's appends would
 * wait behind it), and the answer says whether it truncated.
 */
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  EventDataRewrite,
  RecordedErasure,
  StoredEventData,
} from '../../application/customer-data-protection.ts';
import { firstRows, limitSql } from './rows.ts';

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS event_rewrites (
    name        TEXT PRIMARY KEY,
    position    INTEGER NOT NULL,
    finished_at TEXT,
    vacuumed_at TEXT
  ) WITHOUT ROWID;
`;

/** Truncating checkpoints tried at the end, and the pause between two, in ms. */
const TRUNCATE_ATTEMPTS = 5;
const TRUNCATE_PAUSE_MS = 100;

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
  // Progress kept by a run before it recorded a vacuum.
  const columns = db.prepare('PRAGMA table_info(event_rewrites)').all() as Array<{ name: string }>;
  if (!columns.some((c) => c.name === 'vacuumed_at'))
    db.exec('ALTER TABLE event_rewrites ADD COLUMN vacuumed_at TEXT');
  const progress = db.prepare('SELECT position, finished_at, vacuumed_at FROM event_rewrites WHERE name = ?');
  const head = db.prepare('SELECT coalesce(max(position), 0) AS head FROM events');
  const record = db.prepare(
    `INSERT INTO event_rewrites (name, position) VALUES (?, ?)
     ON CONFLICT (name) DO UPDATE SET position = max(position, excluded.position)`,
  );
  // A log with nothing to seal had no batch to record a position: the run is recorded all the same.
  const finished = db.prepare(
    `INSERT INTO event_rewrites (name, position, finished_at) VALUES (?, 0, ?)
     ON CONFLICT (name) DO UPDATE SET finished_at = excluded.finished_at`,
  );
  const vacuumed = db.prepare('UPDATE event_rewrites SET vacuumed_at = ? WHERE name = ?');
  const vacuumedAt = db.prepare('SELECT vacuumed_at FROM event_rewrites WHERE name = ?');
  const update = db.prepare('UPDATE events SET data = ? WHERE position = ? AND event_id = ? AND data = ?');
  const erasures = db.prepare(
    `SELECT stream_id, position, json_extract(data, '$.erasure_id') AS erasure_id,
       coalesce(json_extract(data, '$.erased_at'), recorded_at) AS erased_at
     FROM events WHERE type = 'CartCustomerErased' AND position > ? ORDER BY position`,
  );
  const appendedSince = db.prepare('SELECT 1 FROM events WHERE position > ? AND type = ? LIMIT 1');

  /** PASSIVE first (it waits on no one), then TRUNCATE a few times without the busy handler. */
  async function truncateWal(): Promise<boolean> {
    db.exec('PRAGMA wal_checkpoint(PASSIVE)');
    for (let attempt = 1; ; attempt++) {
      db.exec('PRAGMA busy_timeout = 0');
      let busy: number;
      try {
        busy = (db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as { busy: number }).busy;
      } finally {
        db.exec('PRAGMA busy_timeout = 10000');
      }
      if (busy === 0) return true;
      if (attempt >= TRUNCATE_ATTEMPTS) return false;
      await sleep(TRUNCATE_PAUSE_MS);
    }
  }

  return {
    async progress() {
      const row = progress.get(name) as
        | { position: number; finished_at: string | null; vacuumed_at: string | null }
        | undefined;
      return row ?? { position: 0, finished_at: null, vacuumed_at: null };
    },
    async head() {
      return (head.get() as { head: number }).head;
    },
    async read(after, through, types, limit) {
      // The limit written, not bound, as every statement of the store (rows.ts, `limitSql`).
      const read = db.prepare(
        `SELECT position, stream_id, event_id, type, data, metadata FROM events
           WHERE position > ? AND position <= ? AND type IN (${types.map(() => '?').join(', ')})
           ORDER BY position${limitSql(limit)}`,
      );
      return firstRows<StoredEventData>(read, limit, [after, through, ...types]);
    },
    async erasures(after = 0) {
      const found = new Map<string, RecordedErasure[]>();
      for (const row of erasures.all(after) as unknown as Array<RecordedErasure & { stream_id: string }>) {
        const { stream_id, ...erasure } = row;
        found.set(stream_id, [...(found.get(stream_id) ?? []), { ...erasure }]);
      }
      return found;
    },
    async scheduledBodies(deliveryIds) {
      if (deliveryIds.length === 0) return new Map();
      const rows = db
        .prepare(
          `SELECT json_extract(data, '$.delivery_id') AS id, json_extract(data, '$.body') AS body FROM events
           WHERE type = 'WebhookDeliveryScheduled'
             AND json_extract(data, '$.delivery_id') IN (${deliveryIds.map(() => '?').join(', ')})`,
        )
        .all(...deliveryIds) as Array<{ id: string; body: string }>;
      return new Map(rows.map((r) => [r.id, r.body]));
    },
    async cartUsers(streamIds) {
      const carts = streamIds.filter((s) => s.startsWith('cart-'));
      if (carts.length === 0) return new Map();
      const rows = db
        .prepare(
          `SELECT stream_id, json_extract(data, '$.user_id') AS user_id FROM events
           WHERE type = 'CartCreated' AND stream_id IN (${carts.map(() => '?').join(', ')})`,
        )
        .all(...carts) as Array<{ stream_id: string; user_id: unknown }>;
      return new Map(
        rows
          .filter((r) => typeof r.user_id === 'string' && r.user_id !== '')
          .map((r) => [r.stream_id, String(r.user_id)]),
      );
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
        // Old values freed now may linger in the file's free space until the next vacuum.
        if (written.length > 0) vacuumed.run(null, name);
        db.exec('COMMIT');
        return { written, guarded: false };
      } catch (error) {
        if (db.isTransaction) db.exec('ROLLBACK');
        throw error;
      }
    },
    async finish(at, vacuum) {
      finished.run(name, at);
      if (vacuum) {
        // Rebuilds every page: the old values left in pages' unused space and free pages go too.
        db.exec('VACUUM');
        vacuumed.run(at, name);
      }
      const row = vacuumedAt.get(name) as { vacuumed_at: string | null } | undefined;
      return { wal_truncated: await truncateWal(), vacuumed_at: row?.vacuumed_at ?? null };
    },
    async close() {
      if (db.isOpen) db.close();
    },
  };
}
