/**
 * The customer key store port (docs/operations.md, "Customer data"): each customer's data key, wrapped
 * by `PDS_SECRET_KEY`, kept outside the log, so that destroying it erases every copy of what it
 * sealed. Adapters: `eventstore/key-store-sqlite.ts` (`keys.db` beside the embedded store) and
 * `eventstore/key-store-mongo.ts` (the split deployment), passing `test/contract/key-store.ts`.
 *
 * A key is found by its links: `cart:<uuid>` for every cart whose data it sealed, and keyed hashes of
 * the customer's user id (`user:<hmac>`) and email address (`email:<hmac>`), never the values.
 */

/** A customer's data key as stored: AES-256-GCM, wrapped by the secret box of `PDS_SECRET_KEY`. */
export interface StoredCustomerKey {
  key_id: string;
  wrapped: string;
  created_at: string;
}

export interface LinkedKey {
  key_id: string;
  /** Every link of the key. */
  links: string[];
}

/**
 * An erasure on its way: written before the keys are destroyed, finished once the carts have recorded
 * it, so that one interrupted is completed by the next (`pendingErasures`).
 */
export interface CustomerErasure {
  erasure_id: string;
  key_ids: string[];
  cart_uuids: string[];
  requested_at: string;
}

export interface CustomerKeyStore {
  /** The key of this id, or null (never created, or destroyed). */
  key(keyId: string): Promise<StoredCustomerKey | null>;
  /** The keys linked by any of `links`, each with all its links; in creation order. */
  keysLinkedTo(links: readonly string[]): Promise<LinkedKey[]>;
  /** Stores the key when it is new, and adds the links it does not have yet. */
  link(key: StoredCustomerKey, links: readonly string[]): Promise<void>;
  /** Records an erasure before its keys are destroyed (a second call with the same id changes nothing). */
  beginErasure(erasure: CustomerErasure): Promise<void>;
  /**
   * Deletes the keys and their links so that no copy remains in the store's files (the embedded store
   * overwrites freed pages and truncates its WAL).
   */
  destroyKeys(keyIds: readonly string[]): Promise<void>;
  /** Erasures begun and not finished, oldest first. */
  pendingErasures(): Promise<CustomerErasure[]>;
  finishErasure(erasureId: string): Promise<void>;
  close(): Promise<void>;
}
