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
  /** The data key of this id, 'erased' once an erasure destroyed it; throws `CustomerKeyMissing` when neither. */
  dataKey(keyId: string): Promise<Buffer | 'erased'>;
  /** The cart's key: its own, linked to `identities` too, or a new one. */
  keyFor(cartUuid: string, identities: string[]): Promise<{ keyId: string; key: Buffer }>;
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
      await store.destroyKeys(keyIds, erasure);
      for (const keyId of keyIds) cache.delete(keyId);
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
  async function dataKey(keyId: string): Promise<Buffer | 'erased'> {
    const cached = cache.get(keyId);
    if (cached !== undefined) return cached;
    const record = await store.key(keyId);
    if (record === null) throw new CustomerKeyMissing(keyId);
    const found = 'key' in record ? unwrap(record.key) : 'erased';
    cache.set(keyId, found);
    return found;
  }

  /** One key per cart, so that an erasure reaches exactly the carts its targets name. */
  async function keyFor(cartUuid: string, identities: string[]): Promise<{ keyId: string; key: Buffer }> {
    const cartLink = `cart:${cartUuid.toLowerCase()}`;
    const [own] = await store.keysLinkedTo([cartLink]);
    if (own) {
      const key = await dataKey(own.key_id);
      if (key !== 'erased') {
        const added = identities.filter((l) => !own.links.includes(l));
        if (added.length > 0) {
          const record = await store.key(own.key_id);
          if (record && 'key' in record) await store.link(record.key, added);
        }
        return { keyId: own.key_id, key };
      }
    }
    const key = randomBytes(32);
    const keyId = `ck_${randomBytes(12).toString('base64url')}`;
    const stored: StoredCustomerKey = {
      key_id: keyId,
      wrapped: box.encrypt(key.toString('base64'), keyContext(keyId)),
      created_at: clock.now().toISOString(),
    };
    await store.link(stored, [cartLink, ...identities]);
    cache.set(keyId, key);
    return { keyId, key };
  }

  return { keys, dataKey, keyFor, userLink, emailLink };
}
