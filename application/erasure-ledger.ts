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
    key: (keyId) => keys.key(keyId),
    keysLinkedTo: (links) => keys.keysLinkedTo(links),
    link: (key, links) => keys.link(key, links),
    async beginErasure(erasure) {
      await ledger.record(erasure);
      await keys.beginErasure(erasure);
    },
    destroyKeys: (keyIds) => keys.destroyKeys(keyIds),
    pendingErasures: () => keys.pendingErasures(),
    finishErasure: (erasureId) => keys.finishErasure(erasureId),
    close: () => keys.close(),
  };
}

/**
 * Applies again, to a restored key store, the erasures of the ledger the restored copy may not hold:
 * those requested since `since` (when the backup was taken) and any whose keys are still there. Each is
 * recorded pending and its keys destroyed; the service finishes it at start, when its carts record
 * `CartCustomerErased` (`finishPendingErasures`). Returns the erasures applied, oldest first.
 */
export async function reapplyErasures(
  keys: CustomerKeyStore,
  ledger: readonly CustomerErasure[],
  since: string,
): Promise<CustomerErasure[]> {
  const seen = new Set<string>();
  const applied: CustomerErasure[] = [];
  const ordered = [...ledger].sort((a, b) => a.requested_at.localeCompare(b.requested_at));
  for (const erasure of ordered) {
    if (seen.has(erasure.erasure_id)) continue;
    seen.add(erasure.erasure_id);
    const present = await Promise.all(erasure.key_ids.map((id) => keys.key(id)));
    if (erasure.requested_at < since && present.every((k) => k === null)) continue;
    await keys.beginErasure(erasure);
    await keys.destroyKeys(erasure.key_ids);
    applied.push(erasure);
  }
  return applied;
}
