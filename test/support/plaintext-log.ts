/**
 * A data dir as a version before sealing left it (docs/operations.md, "Customer data"): every sealed
 * event's data replaced by what it opens to, and the key store removed. The service writes the events
 * (a real cart, its webhook, its recorded answers); this takes the seal off them afterwards.
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { createCustomerData } from '../../application/customer-data.ts';
import { SEALED_EVENT_TYPES } from '../../application/customer-data-protection.ts';
import { loadConfig } from '../../cli/config.ts';
import { openSqliteKeyStore } from '../../eventstore/key-store-sqlite.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';

/** Unseals the log of the stopped service in `dataDir`; returns how many events it changed. */
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
    const update = db.prepare('UPDATE events SET data = ? WHERE position = ?');
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
      const text = JSON.stringify(opened);
      if (text === row.data) continue;
      update.run(text, row.position);
      changed++;
    }
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
    await keys.close();
  }
  for (const suffix of ['', '-wal', '-shm']) rmSync(path.join(dataDir, `keys.db${suffix}`), { force: true });
  return changed;
}
