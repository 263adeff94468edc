/**
 * The cart keys of customer data (docs/operations.md, "Customer data"): finds or makes a cart's key,
 * unwraps keys with `PDS_SECRET_KEY` and keeps them a short while, and hashes the links by user id and
 * email under a key derived for that use alone.
 */
import { createHmac, hkdfSync, type KeyObject, randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { type Clock, systemClock } from '../domain/clock.ts';
import { createSecretBox } from './credentials.ts';
import { CustomerKeyMissing, type CustomerKeyStore, type StoredCustomerKey } from './customer-keys.ts';

/**
 * How long another process may still open data with a key it holds unwrapped after an erasure
 * elsewhere (docs/operations.md, "Customer data"); the erasing process forgets its keys at once.
 */
export const KEY_CACHE_TTL_MS = 30_000;
const KEY_CACHE_SIZE = 4_096;

export interface CustomerDataOptions {
  /** The clock the key cache's time-to-live runs on. */
  clock?: Clock;
  keyCacheTtlMs?: number;
}

export interface KeyRing {
  /** The key store; destroying keys through it also forgets them in this process at once. */
  keys: CustomerKeyStore;
  /**
   * The data key of this id, 'erased' once an erasure destroyed it; throws `CustomerKeyMissing` when
   * neither. `fresh`: whether it is erased is asked of the key store, not of the cache (what leaves the
   * service: a webhook at each attempt).
   */
  dataKey(keyId: string, options?: { fresh?: boolean }): Promise<Buffer | 'erased'>;
  /**
   * The key for a customer identified on the cart now (their identities): the cart's own, linked to
   * `identities` too, or a new one, also after an erasure destroyed the cart's earlier key.
   */
  keyFor(cartUuid: string, identities: string[]): Promise<{ keyId: string; key: Buffer }>;
  /**
   * The key for data derived from the cart's customer (a webhook body, a recorded answer): the cart's
   * own; 'erased' when an erasure destroyed it and no customer was identified on the cart since, as
   * what was derived from the erased customer must stay erased; a new one only for a cart that never
   * had one.
   */
  derivedKeyFor(cartUuid: string): Promise<{ keyId: string; key: Buffer } | 'erased'>;
  /** The link of a user id (none for no user id). */
  userLink(userId: unknown): string[];
  /** The link of an email address (none for no address). */
  emailLink(email: unknown): string[];
}

/** Whether a value carries anything: null and '' say nothing about anyone. */
export const present = (v: unknown) => v !== null && v !== undefined && v !== '';

/** A key of its own for each use of `PDS_SECRET_KEY`, so that no two uses share one. */
const subkey = (secretKey: Buffer | KeyObject, info: string) =>
  Buffer.from(hkdfSync('sha256', secretKey, Buffer.alloc(0), info, 32));

export function createKeyRing(
  store: CustomerKeyStore,
  secretKey: Buffer | KeyObject,
  options: CustomerDataOptions = {},
): KeyRing {
  // Data keys are wrapped by the credentials' secret box of PDS_SECRET_KEY, with a context per key.
  const box = createSecretBox(secretKey);
  const linkKey = subkey(secretKey, 'pds customer link v1');
  const clock = options.clock ?? systemClock;
  // Unwrapped data keys, and the erased ones, for a short while: reading sealed events costs no key
  // store read each time, and another process's erasure is seen within the time-to-live.
  const cache = new LRUCache<string, Buffer | 'erased'>({
    max: KEY_CACHE_SIZE,
    ttl: options.keyCacheTtlMs ?? KEY_CACHE_TTL_MS,
    perf: { now: () => clock.now().getTime() },
    ttlResolution: 0,
  });
  const keys: CustomerKeyStore = {
    ...store,
    async destroyKeys(keyIds, erasure) {
      for (const keyId of keyIds) cache.delete(keyId);
      const result = await store.destroyKeys(keyIds, erasure);
      for (const keyId of keyIds) cache.delete(keyId);
      return result;
    },
  };
  // The links by user id and email are keyed hashes: the key store never holds either value.
  const hashed = (kind: 'user' | 'email', value: string) =>
    `${kind}:${createHmac('sha256', linkKey).update(`${kind}:${value}`).digest('base64url')}`;
  const userLink = (userId: unknown) => (present(userId) ? [hashed('user', String(userId))] : []);
  const emailLink = (email: unknown) =>
    typeof email === 'string' && email !== '' ? [hashed('email', email.trim().toLowerCase())] : [];
  const keyContext = (keyId: string) => `customer-key:${keyId}`;

  function unwrap(stored: StoredCustomerKey): Buffer {
    return Buffer.from(box.decrypt(stored.wrapped, keyContext(stored.key_id)), 'base64');
  }

  /** The data key of this id, 'erased' once an erasure destroyed it; throws when it is neither. */
  async function dataKey(keyId: string, options: { fresh?: boolean } = {}): Promise<Buffer | 'erased'> {
    const cached = cache.get(keyId);
    // An erased key stays erased: only a present one is asked about again when fresh.
    if (cached !== undefined && (cached === 'erased' || !options.fresh)) return cached;
    const record = await store.key(keyId);
    if (record === null) throw new CustomerKeyMissing(keyId);
    const found = 'key' in record ? (cached ?? unwrap(record.key)) : 'erased';
    cache.set(keyId, found);
    return found;
  }

  /** The cart's present key, linked to `identities` too, or null when it has none. */
  async function ownKey(cartLink: string, identities: string[]) {
    const [own] = await store.keysLinkedTo([cartLink]);
    if (!own) return null;
    const key = await dataKey(own.key_id);
    if (key === 'erased') return null;
    const added = identities.filter((l) => !own.links.includes(l));
    // Links only: a key destroyed since it was read gets none, and is never written again.
    if (added.length > 0) await store.addLinks(own.key_id, added);
    return { keyId: own.key_id, key };
  }

  /** One key per cart, so that an erasure reaches exactly the carts its targets name. */
  async function keyFor(cartUuid: string, identities: string[]): Promise<{ keyId: string; key: Buffer }> {
    const cartLink = `cart:${cartUuid.toLowerCase()}`;
    return (await ownKey(cartLink, identities)) ?? createKey(cartLink, identities);
  }

  async function derivedKeyFor(cartUuid: string): Promise<{ keyId: string; key: Buffer } | 'erased'> {
    const cartLink = `cart:${cartUuid.toLowerCase()}`;
    const own = await ownKey(cartLink, []);
    if (own) return own;
    if ((await store.tombstonesOfCart(cartUuid.toLowerCase())).length > 0) return 'erased';
    // Data of a customer the cart has no key of (identified before customer data was sealed).
    return createKey(cartLink, []);
  }

  async function createKey(cartLink: string, identities: string[]): Promise<{ keyId: string; key: Buffer }> {
    const key = randomBytes(32);
    const keyId = `ck_${randomBytes(12).toString('base64url')}`;
    const stored: StoredCustomerKey = {
      key_id: keyId,
      wrapped: box.encrypt(key.toString('base64'), keyContext(keyId)),
      created_at: clock.now().toISOString(),
    };
    // A new id, so no tombstone can refuse it but a store that is wrong.
    if (!(await store.createKey(stored, [cartLink, ...identities]))) {
      throw new Error(`customer key ${keyId} was refused by the key store`);
    }
    cache.set(keyId, key);
    return { keyId, key };
  }

  return { keys, dataKey, keyFor, derivedKeyFor, userLink, emailLink };
}
