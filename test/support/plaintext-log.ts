/**
 * A data dir as a version before sealing left it (docs/operations.md, "Customer data"): every sealed
 * event's data replaced by what it opens to, in the shape that version wrote (`CartCustomerIdentified`
 * and `CurbsideArrivalPosted` at version 1, without `user_id`), the dispatcher's pending bodies in
 * plain text, and the key store removed. The service writes the events (a real cart, its webhook, its
 * recorded answers); this takes the seal off them afterwards.
 */
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { createCustomerData } from '../../application/customer-data.ts';
import { SEALED_EVENT_TYPES } from '../../application/customer-data-protection.ts';
import { loadConfig } from '../../cli/config.ts';
import { openSqliteKeyStore } from '../../eventstore/key-store-sqlite.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';

/** The event types whose version 2 added `user_id`: version 1 had none. */
const WITHOUT_USER_ID_AT_V1 = new Set(['CartCustomerIdentified', 'CurbsideArrivalPosted']);

/** Unseals the log (and the dispatcher's bodies) of the stopped service in `dataDir`; returns how many events it changed. */
export async function unsealLog(dataDir: string): Promise<number> {
  const config = await loadConfig({ PDS_DATA_DIR: dataDir });
  const keys = openSqliteKeyStore(path.join(dataDir, 'keys.db'));
  const data = createCustomerData(keys, config.secretKey);
  const db = new DatabaseSync(path.join(dataDir, 'events.db'));
  let changed = 0;
  try {
    const rows = db
      .prepare(
        `SELECT position, stream_id, revision, event_id, type, data, metadata, recorded_at FROM events
         WHERE type IN (${SEALED_EVENT_TYPES.map(() => '?').join(', ')})`,
      )
      .all(...SEALED_EVENT_TYPES) as Array<Record<string, string & number>>;
    const update = db.prepare('UPDATE events SET data = ?, metadata = ? WHERE position = ?');
    for (const row of rows) {
      const event: RecordedEvent = {
        id: row.event_id,
        streamId: row.stream_id,
        type: row.type,
        revision: row.revision,
        position: row.position,
        data: JSON.parse(row.data),
        metadata: JSON.parse(row.metadata),
        recordedAt: row.recorded_at,
      };
      const opened = (await data.open(event)).data as Record<string, unknown>;
      if (typeof opened.body === 'string') opened.body = await data.openBody(opened.body);
      const metadata = { ...event.metadata };
      if (WITHOUT_USER_ID_AT_V1.has(row.type)) {
        delete opened.user_id;
        metadata.schema_version = 1;
      }
      const text = JSON.stringify(opened);
      if (text === row.data) continue;
      update.run(text, JSON.stringify(metadata), row.position);
      changed++;
    }
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  try {
    await unsealDispatcher(path.join(dataDir, 'dispatcher.db'), (body) => data.openBody(body));
  } finally {
    await keys.close();
  }
  for (const suffix of ['', '-wal', '-shm']) rmSync(path.join(dataDir, `keys.db${suffix}`), { force: true });
  return changed;
}

/** The dispatcher's pending bodies as that version kept them: in plain text. */
async function unsealDispatcher(file: string, open: (body: string) => Promise<string>): Promise<void> {
  if (!existsSync(file)) return;
  const db = new DatabaseSync(file);
  try {
    const tables = db
      .prepare(
        "SELECT physical FROM pds_collections WHERE name = 'webhook_delivery_queues' OR name GLOB 'webhook_delivery_queues_[0-9]*_of_[0-9]*'",
      )
      .all() as Array<{ physical: string }>;
    for (const { physical } of tables) {
      const docs = db.prepare(`SELECT _id, doc FROM "${physical}"`).all() as Array<{
        _id: string;
        doc: string;
      }>;
      for (const row of docs) {
        const doc = JSON.parse(row.doc) as { deliveries?: Array<{ body: string }> };
        for (const d of doc.deliveries ?? []) d.body = await open(d.body);
        db.prepare(`UPDATE "${physical}" SET doc = ? WHERE _id = ?`).run(JSON.stringify(doc), row._id);
      }
    }
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}
