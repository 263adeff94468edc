/**
 * The erasure ledger (docs/operations.md, "Backups"): every erasure is also written, before its keys
 * are destroyed, to a ledger kept outside the data dir, beside the backups, so that a restore of a
 * backup taken before it can apply it again: an erasure is never undone by a restore. An entry holds
 * the erasure's id and time, its key ids and cart uuids: nothing personal.
 */
import type { CustomerErasure, CustomerKeyStore } from './customer-keys.ts';

export interface ErasureLedger {
  /** Appends the erasure durably (a second entry with the same id is harmless: it is read once). */
  record(erasure: CustomerErasure): Promise<void>;
}

/**
 * The key store, with each erasure written to the ledger before the key store records it: an erasure
 * the ledger could not take is not begun (its request fails, and no key is destroyed).
 */
export function recordErasuresIn(keys: CustomerKeyStore, ledger: ErasureLedger): CustomerKeyStore {
  return {
    ...keys,
    async beginErasure(erasure) {
      await ledger.record(erasure);
      await keys.beginErasure(erasure);
    },
  };
}

/** A restored data dir, as the re-applying of erasures needs it (`cli/backup/restore.ts`). */
export interface RestoredData {
  keys: CustomerKeyStore;
  /** Records the erasure pending, also when the copy holds it finished. */
  reopenErasure(erasure: CustomerErasure): Promise<void>;
  /**
   * The carts of `cartUuids` whose restored log holds a customer the erasure never reached: no
   * `CartCustomerErased` of it, and a customer identified (or an arrival's answers) after the last
   * erasure the cart records.
   */
  cartsNotErased(erasureId: string, cartUuids: readonly string[]): Promise<string[]>;
}

/**
 * Applies again, to a restored data dir, the erasures of the ledger the copy does not hold whole: one
 * with a key the copy still holds (no tombstone), or a cart whose restored log holds the customer
 * without its `CartCustomerErased`. The copy's keys and log are each taken at their own moment, so
 * neither the backup's time nor the key store's "finished" says which: an erasure between the two
 * copies is finished in `keys.db` and absent from the log. Each is recorded pending again and its keys
 * destroyed; the service finishes it at start, when its carts record `CartCustomerErased`
 * (`finishPendingErasures`). Returns the erasures applied, oldest first.
 */
export async function reapplyErasures(
  restored: RestoredData,
  ledger: readonly CustomerErasure[],
): Promise<CustomerErasure[]> {
  const seen = new Set<string>();
  const applied: CustomerErasure[] = [];
  const ordered = [...ledger].sort((a, b) => a.requested_at.localeCompare(b.requested_at));
  for (const erasure of ordered) {
    if (seen.has(erasure.erasure_id)) continue;
    seen.add(erasure.erasure_id);
    const records = await Promise.all(erasure.key_ids.map((id) => restored.keys.key(id)));
    // A tombstone is a key gone: only one still there makes the erasure undone.
    const keyLeft = records.some((r) => r !== null && 'key' in r);
    const carts = await restored.cartsNotErased(erasure.erasure_id, erasure.cart_uuids);
    if (!keyLeft && carts.length === 0) continue;
    await restored.reopenErasure(erasure);
    await restored.keys.destroyKeys(erasure.key_ids, {
      erasure_id: erasure.erasure_id,
      erased_at: erasure.requested_at,
    });
    applied.push(erasure);
  }
  return applied;
}
