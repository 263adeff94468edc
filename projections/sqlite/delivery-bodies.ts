/**
 * The pending webhook bodies the embedded dispatcher store (`dispatcher.db`) keeps in its working
 * state (`webhook_delivery_queues`, or `webhook_delivery_queues_<i>_of_<K>` for delivery shards), for
 * `pds customers protect` (`application/customer-data-protection.ts`;
 * docs/operations.md, "Customer data"): a delivery scheduled before sealing keeps its body there in
 * plain text, and a retry would send it as it is, also after an erasure. Only a delivery's `body` changes, each document in one
 * short transaction with `secure_delete`, and a document the dispatcher changed meanwhile is left for
 * the next run. The dispatcher of a running service keeps its
 * queues in memory and writes them back: run this with the service stopped.
 */
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import type { DeliveryBodies } from '../../application/customer-data-protection.ts';
import { rebuildAndTruncate } from './rebuild.ts';
import { q } from './sql.ts';

const QUEUES = 'webhook_delivery_queues';
/** The collection of shard i of K (`dispatcher/shards.ts`, `shardCheckpoint`). */
const SHARD_QUEUES = `${QUEUES}_[0-9]*_of_[0-9]*`;

interface QueueDoc {
  deliveries?: Array<{ delivery_id: string; body: string }>;
}

/** The dispatcher store's delivery bodies in `file`; null when the file is not there. */
export function openDeliveryBodies(file: string): DeliveryBodies | null {
  if (!existsSync(file)) return null;
  const db = new DatabaseSync(file, { timeout: 10_000 });
  db.exec('PRAGMA secure_delete = ON');
  const known = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pds_collections'")
    .get();
  const tables = known
    ? (db
        .prepare('SELECT physical FROM pds_collections WHERE name = ? OR name GLOB ?')
        .all(QUEUES, SHARD_QUEUES) as Array<{
        physical: string;
      }>)
    : [];
  return {
    async pending() {
      const found: Array<{ delivery_id: string; body: string }> = [];
      for (const { physical } of tables) {
        for (const row of db.prepare(`SELECT doc FROM ${q(physical)}`).all() as Array<{ doc: string }>) {
          found.push(...((JSON.parse(row.doc) as QueueDoc).deliveries ?? []));
        }
      }
      return found.map(({ delivery_id, body }) => ({ delivery_id, body }));
    },
    async replace(bodies) {
      let replaced = 0;
      for (const { physical } of tables) {
        const rows = db.prepare(`SELECT _id, doc FROM ${q(physical)}`).all() as Array<{
          _id: string;
          doc: string;
        }>;
        for (const row of rows) {
          const doc = JSON.parse(row.doc) as QueueDoc;
          let changed = 0;
          for (const d of doc.deliveries ?? []) {
            const next = bodies.get(d.delivery_id);
            if (next !== undefined && next !== d.body) {
              d.body = next;
              changed++;
            }
          }
          if (changed === 0) continue;
          const done = db
            .prepare(`UPDATE ${q(physical)} SET doc = ? WHERE _id = ? AND doc = ?`)
            .run(JSON.stringify(doc), row._id, row.doc);
          if (Number(done.changes) > 0) replaced += changed;
        }
      }
      return replaced;
    },
    async finish(vacuum) {
      return rebuildAndTruncate(db, vacuum);
    },
    async close() {
      if (db.isOpen) db.close();
    },
  };
}
