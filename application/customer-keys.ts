/**
 * The customer key store port (docs/operations.md, "Customer data"): each cart's data key, wrapped
 * by `PDS_SECRET_KEY`, kept outside the log, so that destroying it erases every copy of what it
 * sealed. Adapters: `eventstore/key-store-sqlite.ts` (`keys.db` beside the embedded store) and
 * `projections/mongo/key-store.ts` (the split deployment), passing `test/contract/key-store.ts`.
 *
 * A key belongs to one cart and is found by its links: `cart:<uuid>`, and keyed hashes of the user
 * ids (`user:<hmac>`) and email addresses (`email:<hmac>`) identified on that cart, never the values.
 * A destroyed key leaves a tombstone naming its erasure and its cart, so that only a recorded erasure
 * makes data read as erased (a key neither present nor tombstoned is a fault, `CustomerKeyMissing`),
 * and so that what is derived later from that cart's erased customer stays erased. A key is created
 * (`createKey`) only where no tombstone has its id, and links are added (`addLinks`) only to a key
 * still present: nothing brings a destroyed key back.
 */

/** A cart's data key as stored: AES-256-GCM, wrapped by the secret box of `PDS_SECRET_KEY`. */
export interface StoredCustomerKey {
  key_id: string;
  wrapped: string;
  created_at: string;
}

/**
 * What is left of a destroyed key: which erasure destroyed it and when, and the cart it was of (a uuid,
 * nothing personal), so that data derived later from that cart's customer stays erased; no key material.
 */
export interface CustomerKeyTombstone {
  key_id: string;
  cart_uuid: string | null;
  erasure_id: string;
  erased_at: string;
}

/** A key as the store holds it: present, or its tombstone. */
export type CustomerKeyRecord = { key: StoredCustomerKey } | { tombstone: CustomerKeyTombstone };

export interface LinkedKey {
  key_id: string;
  /** Every link of the key: its cart's, and its cart's identities'. */
  links: string[];
}

/**
 * An erasure on its way: written before the keys are destroyed, finished once the carts have recorded
 * it, so that one interrupted is completed at the next start or the next erasure (`pendingErasures`).
 */
export interface CustomerErasure {
  erasure_id: string;
  key_ids: string[];
  cart_uuids: string[];
  requested_at: string;
}

/**
 * Data sealed under a key the store neither holds nor has a tombstone of: a key store that lost it,
 * one another process does not share, or one not yet visible there. Never read as erased: a reader
 * fails and tries again later.
 */
export class CustomerKeyMissing extends Error {
  override name = 'CustomerKeyMissing';
  readonly keyId: string;
  constructor(keyId: string) {
    super(`customer key ${keyId} is neither in the key store nor erased (PDS_KEY_STORE)`);
    this.keyId = keyId;
  }
}

export interface CustomerKeyStore {
  /** The key of this id, its tombstone once destroyed, or null (never stored here). */
  key(keyId: string): Promise<CustomerKeyRecord | null>;
  /**
   * The keys (present ones) linked by any of `links`, each with all its links; in creation order.
   * With `last`, only the last that many of them made (a shared phone number links thousands).
   */
  keysLinkedTo(links: readonly string[], last?: number): Promise<LinkedKey[]>;
  /**
   * Stores a new key with its links, atomically with the check that no tombstone has its id; answers
   * false, storing nothing, when one has (or when the key is already stored).
   */
  createKey(key: StoredCustomerKey, links: readonly string[]): Promise<boolean>;
  /**
   * Adds the links a present key does not have yet. Never writes key material: a key destroyed
   * meanwhile, or never stored, gets nothing, so that no link brings a destroyed key back.
   */
  addLinks(keyId: string, links: readonly string[]): Promise<void>;
  /** The tombstones of the keys this cart had, oldest first. */
  tombstonesOfCart(cartUuid: string): Promise<CustomerKeyTombstone[]>;
  /** Records an erasure before its keys are destroyed (a second call with the same id changes nothing). */
  beginErasure(erasure: CustomerErasure): Promise<void>;
  /**
   * Replaces each key and its links by a tombstone naming the erasure and the key's cart, so that no
   * copy of the key remains in the store's files (the embedded store overwrites freed pages and
   * truncates its WAL). A key destroyed before keeps its first tombstone. `wiped` is false when a copy
   * may still be in the store's files (a reader kept the embedded store's WAL from being truncated):
   * the erasure stays pending, and destroying the keys again finishes it.
   */
  destroyKeys(
    keyIds: readonly string[],
    erasure: { erasure_id: string; erased_at: string },
  ): Promise<{ wiped: boolean }>;
  /** Erasures begun and not finished, oldest first. */
  pendingErasures(): Promise<CustomerErasure[]>;
  finishErasure(erasureId: string): Promise<void>;
  close(): Promise<void>;
}
