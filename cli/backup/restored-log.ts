/**
 * What a restored log says of an erasure's carts (docs/operations.md, "Backups"): the log and the key
 * store of a backup are each copied at their own moment, so the log alone says whether an erasure
 * reached a cart (`application/erasure-ledger.ts`, `reapplyErasures`).
 */
import { DatabaseSync } from 'node:sqlite';

/** Events that put a customer on a cart. */
const CUSTOMER_EVENTS = ['CartCustomerIdentified', 'CurbsideArrivalPosted'];

/**
 * Opens the restored `events.db` read-only; `cartsNotErased` answers the carts of `cartUuids` whose
 * log holds no `CartCustomerErased` of the erasure and a customer after the last erasure it records.
 */
export function openRestoredLog(file: string) {
  const db = new DatabaseSync(file, { readOnly: true });
  const recorded = db.prepare(
    `SELECT 1 FROM events WHERE stream_id = ? AND type = 'CartCustomerErased'
       AND json_extract(data, '$.erasure_id') = ? LIMIT 1`,
  );
  const lastErased = db.prepare(
    `SELECT coalesce(max(position), 0) AS position FROM events WHERE stream_id = ? AND type = 'CartCustomerErased'`,
  );
  const customerAfter = db.prepare(
    `SELECT 1 FROM events WHERE stream_id = ? AND position > ?
       AND type IN (${CUSTOMER_EVENTS.map(() => '?').join(', ')}) LIMIT 1`,
  );
  return {
    cartsNotErased(erasureId: string, cartUuids: readonly string[]): string[] {
      return cartUuids.filter((uuid) => {
        const stream = `cart-${uuid.toLowerCase()}`;
        if (recorded.get(stream, erasureId)) return false;
        const after = (lastErased.get(stream) as { position: number }).position;
        return customerAfter.get(stream, after, ...CUSTOMER_EVENTS) !== undefined;
      });
    },
    close() {
      if (db.isOpen) db.close();
    },
  };
}
