/**
 * Partner aggregate (`partner-<partner_id>`): a partner of one kind, its scope (brand ids, all brands, or
 * store ids), its per-key rate limit and its API keys.
 *
 * A key never enters an event or the state in plaintext: only its SHA-256 hash (hex, for the lookup at
 * authentication) and a short prefix (to tell keys apart on screen). The handler generates the key
 * (`application/credentials.ts`), shows it once and hands this aggregate only `{key_id, key_hash, key_prefix}`.
 */
import { z } from 'zod';
import { conflict, type Decider, invalid, notFound } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { id, isoDateTime, nonEmpty, uuid } from './schemas.ts';

export const streamId = (partnerId: string) => `partner-${partnerId}`;

export const partnerKinds = ['brand', 'brand_feed', 'store_operator', 'store_menu_feed'] as const;
export const partnerKind = z.enum(partnerKinds);
export type PartnerKind = z.infer<typeof partnerKind>;

export const DEFAULT_RATE_LIMIT_PER_MINUTE = 600;
export const MAX_RATE_LIMIT_PER_MINUTE = 100_000;
/** Active keys a partner may hold at once (rotation replaces one, so it never hits the limit). */
export const MAX_ACTIVE_KEYS = 10;
/** Brand or store ids one partner's scope may name. */
export const MAX_SCOPE_IDS = 1000;

export const rateLimitPerMinute = z.number().int().min(1).max(MAX_RATE_LIMIT_PER_MINUTE);

/** What identifies a key without revealing it. */
export const keyId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'expected a key id of 1-64 URL-safe characters');
export const keyHash = z
  .string()
  .regex(/^[0-9a-f]{64}$/, 'expected a SHA-256 digest as 64 lowercase hex digits');
/** Short enough that it can never carry the key itself (keys are far longer). */
export const keyPrefix = z.string().min(1).max(16);
export const partnerKey = z.strictObject({ key_id: keyId, key_hash: keyHash, key_prefix: keyPrefix });
export type PartnerKeyMaterial = z.infer<typeof partnerKey>;

/** Body of the admin API's partner registration (docs/operations.md), before the handler adds ids and keys. */
export const partnerFields = z.strictObject({
  name: nonEmpty(200),
  kind: partnerKind,
  brand_ids: z.array(id).max(MAX_SCOPE_IDS).default([]),
  store_ids: z.array(id).max(MAX_SCOPE_IDS).default([]),
  all_brands: z.boolean().default(false),
  rate_limit_per_minute: rateLimitPerMinute.default(DEFAULT_RATE_LIMIT_PER_MINUTE),
});

export const events = {
  PartnerRegistered: defineEvent(
    'PartnerRegistered',
    z.object({
      partner_id: uuid,
      name: z.string(),
      kind: partnerKind,
      brand_ids: z.array(id),
      store_ids: z.array(id),
      all_brands: z.boolean(),
      rate_limit_per_minute: rateLimitPerMinute,
      registered_at: isoDateTime,
    }),
  ),
  PartnerKeyIssued: defineEvent(
    'PartnerKeyIssued',
    z.object({
      partner_id: uuid,
      key_id: keyId,
      key_hash: keyHash,
      key_prefix: keyPrefix,
      issued_at: isoDateTime,
    }),
  ),
  PartnerKeyRevoked: defineEvent(
    'PartnerKeyRevoked',
    z.object({ partner_id: uuid, key_id: keyId, revoked_at: isoDateTime }),
  ),
  /** The old key is revoked and the new one active, at the same instant. */
  PartnerKeyRotated: defineEvent(
    'PartnerKeyRotated',
    z.object({
      partner_id: uuid,
      old_key_id: keyId,
      key_id: keyId,
      key_hash: keyHash,
      key_prefix: keyPrefix,
      rotated_at: isoDateTime,
    }),
  ),
  PartnerRateLimitChanged: defineEvent(
    'PartnerRateLimitChanged',
    z.object({ partner_id: uuid, rate_limit_per_minute: rateLimitPerMinute, changed_at: isoDateTime }),
  ),
};
export type PartnerEvent = EventOf<typeof events>;

export type PartnerCommand =
  | {
      type: 'RegisterPartner';
      partner_id: string;
      name: string;
      kind: PartnerKind;
      brand_ids: number[];
      store_ids: number[];
      all_brands: boolean;
      rate_limit_per_minute?: number;
      key: PartnerKeyMaterial;
      /** Context from the handler: which of `brand_ids` name no known brand. */
      unknown_brand_ids: number[];
      /** Context from the handler: which of `store_ids` name no known store. */
      unknown_store_ids: number[];
      at: string;
    }
  | { type: 'IssuePartnerKey'; key: PartnerKeyMaterial; at: string }
  | { type: 'RevokePartnerKey'; key_id: string; at: string }
  | { type: 'RotatePartnerKey'; key_id: string; key: PartnerKeyMaterial; at: string }
  | { type: 'ChangePartnerRateLimit'; rate_limit_per_minute: number; at: string };

export type PartnerKeyStatus = 'active' | 'revoked';
export type PartnerKey = {
  key_id: string;
  key_hash: string;
  key_prefix: string;
  status: PartnerKeyStatus;
  issued_at: string;
  revoked_at: string | null;
};

export type RegisteredPartner = {
  exists: true;
  partner_id: string;
  name: string;
  kind: PartnerKind;
  brand_ids: number[];
  store_ids: number[];
  all_brands: boolean;
  rate_limit_per_minute: number;
  /** In the order they were issued. */
  keys: PartnerKey[];
  registered_at: string;
  updated_at: string;
};
export type PartnerState = { exists: false } | RegisteredPartner;

/** Sorted, without duplicates: a scope is a set. */
const idSet = (ids: number[]) => [...new Set(ids)].sort((a, b) => a - b);

const scopeError = (field: string, kind: PartnerKind, message: string) =>
  invalid('invalid_scope', message, { field, kind });

/** The scope rules of each kind (docs/partner-api.md): which ids a key of that kind is bound to. */
function checkScope(kind: PartnerKind, brandIds: number[], storeIds: number[], allBrands: boolean): void {
  if (brandIds.length > MAX_SCOPE_IDS)
    throw scopeError('brand_ids', kind, `at most ${MAX_SCOPE_IDS} brand ids`);
  if (storeIds.length > MAX_SCOPE_IDS)
    throw scopeError('store_ids', kind, `at most ${MAX_SCOPE_IDS} store ids`);
  switch (kind) {
    case 'brand':
      if (allBrands) throw scopeError('all_brands', kind, 'a brand partner cannot cover all brands');
      if (brandIds.length === 0)
        throw scopeError('brand_ids', kind, 'a brand partner needs at least one brand id');
      if (storeIds.length > 0) throw scopeError('store_ids', kind, 'a brand partner takes no store ids');
      return;
    case 'brand_feed':
      if (allBrands && brandIds.length > 0) {
        throw scopeError('brand_ids', kind, 'a brand feed partner names brand ids or all brands, not both');
      }
      if (!allBrands && brandIds.length === 0) {
        throw scopeError(
          'brand_ids',
          kind,
          'a brand feed partner needs at least one brand id, or all_brands',
        );
      }
      if (storeIds.length > 0) throw scopeError('store_ids', kind, 'a brand feed partner takes no store ids');
      return;
    case 'store_operator':
    case 'store_menu_feed':
      if (allBrands) throw scopeError('all_brands', kind, `a ${kind} partner cannot cover all brands`);
      if (storeIds.length === 0)
        throw scopeError('store_ids', kind, `a ${kind} partner needs at least one store id`);
      if (brandIds.length > 0) throw scopeError('brand_ids', kind, `a ${kind} partner takes no brand ids`);
      return;
  }
}

function checkRateLimit(value: number): void {
  if (!rateLimitPerMinute.safeParse(value).success) {
    throw invalid(
      'invalid_rate_limit',
      `rate_limit_per_minute must be a whole number from 1 to ${MAX_RATE_LIMIT_PER_MINUTE}`,
      { field: 'rate_limit_per_minute' },
    );
  }
}

function checkNewKey(state: RegisteredPartner, key: PartnerKeyMaterial): void {
  if (state.keys.some((k) => k.key_id === key.key_id || k.key_hash === key.key_hash)) {
    throw conflict('key_exists', `key ${key.key_id} already exists`, { key_id: key.key_id });
  }
}

function activeKey(state: RegisteredPartner, keyId: string): PartnerKey {
  const key = state.keys.find((k) => k.key_id === keyId);
  if (!key)
    throw notFound('key_not_found', `partner ${state.partner_id} has no key ${keyId}`, { key_id: keyId });
  if (key.status === 'revoked') {
    throw conflict('key_revoked', `key ${keyId} is already revoked`, {
      key_id: keyId,
      revoked_at: key.revoked_at,
    });
  }
  return key;
}

export const decider: Decider<PartnerCommand, PartnerEvent, PartnerState> = {
  initialState: { exists: false },
  decide(command, state) {
    if (command.type === 'RegisterPartner') {
      if (state.exists) {
        throw conflict('partner_exists', `partner ${command.partner_id} already exists`, {
          partner_id: command.partner_id,
        });
      }
      const name = command.name.trim();
      if (!nonEmpty(200).safeParse(name).success) {
        throw invalid('invalid_name', 'a partner needs a name of 1-200 characters', { field: 'name' });
      }
      const rateLimit = command.rate_limit_per_minute ?? DEFAULT_RATE_LIMIT_PER_MINUTE;
      checkRateLimit(rateLimit);
      const brandIds = idSet(command.brand_ids);
      const storeIds = idSet(command.store_ids);
      checkScope(command.kind, brandIds, storeIds, command.all_brands);
      if (command.unknown_brand_ids.length > 0) {
        const brand_ids = idSet(command.unknown_brand_ids);
        throw invalid('unknown_brand_id', `no brand with id ${brand_ids.join(', ')}`, {
          field: 'brand_ids',
          brand_ids,
        });
      }
      if (command.unknown_store_ids.length > 0) {
        const store_ids = idSet(command.unknown_store_ids);
        throw invalid('unknown_store_id', `no store with id ${store_ids.join(', ')}`, {
          field: 'store_ids',
          store_ids,
        });
      }
      return [
        events.PartnerRegistered({
          partner_id: command.partner_id,
          name,
          kind: command.kind,
          brand_ids: brandIds,
          store_ids: storeIds,
          all_brands: command.all_brands,
          rate_limit_per_minute: rateLimit,
          registered_at: command.at,
        }),
        events.PartnerKeyIssued({ partner_id: command.partner_id, ...command.key, issued_at: command.at }),
      ];
    }

    if (!state.exists) throw notFound('partner_not_found', 'no such partner');
    const partner_id = state.partner_id;
    switch (command.type) {
      case 'IssuePartnerKey': {
        const active = state.keys.filter((k) => k.status === 'active').length;
        if (active >= MAX_ACTIVE_KEYS) {
          throw conflict(
            'too_many_keys',
            `a partner holds at most ${MAX_ACTIVE_KEYS} active keys; revoke one first`,
            {
              max_active_keys: MAX_ACTIVE_KEYS,
            },
          );
        }
        checkNewKey(state, command.key);
        return [events.PartnerKeyIssued({ partner_id, ...command.key, issued_at: command.at })];
      }
      case 'RevokePartnerKey': {
        activeKey(state, command.key_id);
        return [events.PartnerKeyRevoked({ partner_id, key_id: command.key_id, revoked_at: command.at })];
      }
      case 'RotatePartnerKey': {
        activeKey(state, command.key_id);
        checkNewKey(state, command.key);
        return [
          events.PartnerKeyRotated({
            partner_id,
            old_key_id: command.key_id,
            ...command.key,
            rotated_at: command.at,
          }),
        ];
      }
      case 'ChangePartnerRateLimit': {
        checkRateLimit(command.rate_limit_per_minute);
        // Setting the limit it already has appends nothing, so retries are harmless.
        if (state.rate_limit_per_minute === command.rate_limit_per_minute) return [];
        return [
          events.PartnerRateLimitChanged({
            partner_id,
            rate_limit_per_minute: command.rate_limit_per_minute,
            changed_at: command.at,
          }),
        ];
      }
    }
  },
  evolve(state, event) {
    if (event.type === 'PartnerRegistered') {
      const d = event.data;
      return {
        exists: true,
        partner_id: d.partner_id,
        name: d.name,
        kind: d.kind,
        brand_ids: d.brand_ids,
        store_ids: d.store_ids,
        all_brands: d.all_brands,
        rate_limit_per_minute: d.rate_limit_per_minute,
        keys: [],
        registered_at: d.registered_at,
        updated_at: d.registered_at,
      };
    }
    if (!state.exists) return state;
    const revoke = (keys: PartnerKey[], keyId: string, at: string) =>
      keys.map((k) => (k.key_id === keyId ? { ...k, status: 'revoked' as const, revoked_at: at } : k));
    const issue = (d: { key_id: string; key_hash: string; key_prefix: string }, at: string): PartnerKey => ({
      key_id: d.key_id,
      key_hash: d.key_hash,
      key_prefix: d.key_prefix,
      status: 'active',
      issued_at: at,
      revoked_at: null,
    });
    switch (event.type) {
      case 'PartnerKeyIssued':
        return {
          ...state,
          keys: [...state.keys, issue(event.data, event.data.issued_at)],
          updated_at: event.data.issued_at,
        };
      case 'PartnerKeyRevoked':
        return {
          ...state,
          keys: revoke(state.keys, event.data.key_id, event.data.revoked_at),
          updated_at: event.data.revoked_at,
        };
      case 'PartnerKeyRotated': {
        const at = event.data.rotated_at;
        return {
          ...state,
          keys: [...revoke(state.keys, event.data.old_key_id, at), issue(event.data, at)],
          updated_at: at,
        };
      }
      case 'PartnerRateLimitChanged':
        return {
          ...state,
          rate_limit_per_minute: event.data.rate_limit_per_minute,
          updated_at: event.data.changed_at,
        };
    }
  },
};

/** A partner as the admin API shows it: scope, limit and keys, never a key hash or anything secret. */
export type PartnerRecord = {
  partner_id: string;
  name: string;
  kind: PartnerKind;
  brand_ids: number[];
  store_ids: number[];
  all_brands: boolean;
  rate_limit_per_minute: number;
  keys: {
    key_id: string;
    key_prefix: string;
    status: PartnerKeyStatus;
    issued_at: string;
    revoked_at: string | null;
  }[];
  created_at: string;
  updated_at: string;
};

export function toPartnerRecord(state: RegisteredPartner): PartnerRecord {
  return {
    partner_id: state.partner_id,
    name: state.name,
    kind: state.kind,
    brand_ids: [...state.brand_ids],
    store_ids: [...state.store_ids],
    all_brands: state.all_brands,
    rate_limit_per_minute: state.rate_limit_per_minute,
    keys: state.keys.map((k) => ({
      key_id: k.key_id,
      key_prefix: k.key_prefix,
      status: k.status,
      issued_at: k.issued_at,
      revoked_at: k.revoked_at,
    })),
    created_at: state.registered_at,
    updated_at: state.updated_at,
  };
}
