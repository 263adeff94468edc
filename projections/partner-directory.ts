/**
 * The partner directory: every partner folded from its events, and an index from API key hash to
 * the partner, its kind and scope, so that authenticating a request is one Map lookup (O(1)).
 */
import type { EventRegistry } from '../domain/events.ts';
import { decider, type PartnerKind, type PartnerState, type RegisteredPartner } from '../domain/partner.ts';
import type { EventStore } from '../eventstore/port.ts';
import { type AggregateIndex, createAggregateIndex } from './aggregate-index.ts';

export interface AuthenticatedPartner {
  partner_id: string;
  key_id: string;
  kind: PartnerKind;
  brand_ids: readonly number[];
  store_ids: readonly number[];
  all_brands: boolean;
  rate_limit_per_minute: number;
}

export interface PartnerDirectory
  extends Pick<AggregateIndex<PartnerState>, 'waitFor' | 'caughtUp' | 'position' | 'stop'> {
  /** The partner an active key (by its SHA-256 hash) belongs to. */
  byKeyHash(keyHash: string): AuthenticatedPartner | undefined;
  get(partnerId: string): RegisteredPartner | undefined;
  list(): RegisteredPartner[];
}

export const PARTNER_STREAM_PREFIX = 'partner-';

export function createPartnerDirectory(store: EventStore, registry: EventRegistry): PartnerDirectory {
  const keys = new Map<string, AuthenticatedPartner>();
  const index = createAggregateIndex(store, registry, {
    prefix: PARTNER_STREAM_PREFIX,
    decider,
    onChange(_id, before, after) {
      if (before?.exists) for (const k of before.keys) keys.delete(k.key_hash);
      if (!after.exists) return;
      for (const k of after.keys) {
        if (k.status !== 'active') continue;
        keys.set(k.key_hash, {
          partner_id: after.partner_id,
          key_id: k.key_id,
          kind: after.kind,
          brand_ids: after.brand_ids,
          store_ids: after.store_ids,
          all_brands: after.all_brands,
          rate_limit_per_minute: after.rate_limit_per_minute,
        });
      }
    },
  });
  return {
    byKeyHash: (hash) => keys.get(hash),
    get(id) {
      const p = index.get(id);
      return p?.exists ? p : undefined;
    },
    list: () => [...index.values()].filter((p): p is RegisteredPartner => p.exists),
    waitFor: index.waitFor,
    caughtUp: index.caughtUp,
    position: index.position,
    stop: index.stop,
  };
}
