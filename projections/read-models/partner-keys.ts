/**
 * Read model `partner_keys`: what authentication needs, shared through the read store so API
 * processes of a split deployment (docs/architecture.md) authenticate without reading the event store.
 *
 * - `partner_keys`: one document per ACTIVE key, `_id` = the key's SHA-256 hash (what a request's
 *   bearer key hashes to), with the partner's kind, scope and rate limit. A revoked or rotated-away
 *   key has no document, so a lookup that finds nothing is a 401.
 * - `partners`: one document per partner, the admin record (`toPartnerRecord`) plus the private
 *   `_state` (the folded partner, key hashes included) the projection derives the key documents from.
 *   The admin API strips `_` fields; a key hash is never shown.
 */
import { isDeepStrictEqual } from 'node:util';
import { domainEventOf } from '../../application/read-state.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as partner from '../../domain/partner.ts';
import type { Projection } from '../projection.ts';
import type { Collection, Doc, DocId } from '../read-store.ts';

export const PARTNER_KEYS = 'partner_keys';
export const PARTNERS = 'partners';

export type PartnerKeyDoc = Doc & {
  /** SHA-256 of the key, lowercase hex. */
  _id: string;
  partner_id: string;
  key_id: string;
  kind: partner.PartnerKind;
  brand_ids: number[];
  store_ids: number[];
  all_brands: boolean;
  rate_limit_per_minute: number;
};

export type PartnerDoc = Doc &
  partner.PartnerRecord & {
    _id: string;
    _state: partner.RegisteredPartner;
  };

const PREFIX = 'partner-';
const partnerEventTypes = new Set<string>(Object.keys(partner.events));

const withoutPosition = <T extends Doc>(doc: T): T => {
  const { _position: _, ...rest } = doc;
  return rest as T;
};

/** The key documents a partner state implies: one per active key. */
function keyDocs(state: partner.PartnerState): PartnerKeyDoc[] {
  if (!state.exists) return [];
  return state.keys
    .filter((k) => k.status === 'active')
    .map((k) => ({
      _id: k.key_hash,
      partner_id: state.partner_id,
      key_id: k.key_id,
      kind: state.kind,
      brand_ids: [...state.brand_ids],
      store_ids: [...state.store_ids],
      all_brands: state.all_brands,
      rate_limit_per_minute: state.rate_limit_per_minute,
    }));
}

/** The keys an event changes: the hashes whose key documents it may create, change or remove. */
function touchedKeys(event: partner.PartnerEvent, state: partner.RegisteredPartner): string[] {
  const hashOf = (keyId: string) => state.keys.find((k) => k.key_id === keyId)?.key_hash;
  switch (event.type) {
    case 'PartnerRegistered':
      return [];
    case 'PartnerKeyIssued':
      return [event.data.key_hash];
    case 'PartnerKeyRevoked':
      return [hashOf(event.data.key_id)].filter((h): h is string => h !== undefined);
    case 'PartnerKeyRotated':
      return [hashOf(event.data.old_key_id), event.data.key_hash].filter((h): h is string => h !== undefined);
    case 'PartnerRateLimitChanged':
      return state.keys.filter((k) => k.status === 'active').map((k) => k.key_hash);
  }
}

export const partnerKeysProjection: Projection = {
  name: 'partner_keys',
  version: 1,
  collections: { [PARTNER_KEYS]: [], [PARTNERS]: [] },
  filter: { streamPrefixes: [PREFIX] },
  prefetch(event) {
    if (!event.streamId.startsWith(PREFIX)) return [];
    const out: Array<[string, DocId]> = [[PARTNERS, event.streamId.slice(PREFIX.length)]];
    // Hint only: revocations and limit changes name their keys by id, found on demand.
    const hash = (event.data as { key_hash?: unknown } | null)?.key_hash;
    if (typeof hash === 'string') out.push([PARTNER_KEYS, hash]);
    return out;
  },
  apply(event, tx) {
    if (!event.streamId.startsWith(PREFIX) || !partnerEventTypes.has(event.type)) return;
    const partnerId = event.streamId.slice(PREFIX.length);
    const e = domainEventOf<partner.PartnerEvent>(eventRegistry, event);
    const current = tx.get<PartnerDoc>(PARTNERS, partnerId);
    // Every event of the stream rewrites the partner document, so its `_position` tells whether this
    // event is applied (a batch replayed after a crash). The key documents are then made to agree
    // with that state rather than rebuilt from the event: a replayed PartnerKeyIssued of a key revoked
    // since must not bring the key back, even briefly; and since each collection gets its own bulk
    // write, a crash may have left the partner document written and a key document not.
    const replay =
      current !== undefined && typeof current._position === 'number' && current._position >= event.position;
    let state: partner.PartnerState;
    if (replay) {
      state = current._state;
    } else {
      state = partner.decider.evolve(current ? current._state : { exists: false }, e);
      if (!state.exists) return;
      tx.put(PARTNERS, { _id: partnerId, ...partner.toPartnerRecord(state), _state: state });
    }
    if (!state.exists) return;
    const wanted = new Map(keyDocs(state).map((d) => [d._id, d]));
    for (const hash of touchedKeys(e, state)) {
      const doc = wanted.get(hash);
      const stored = tx.get<PartnerKeyDoc>(PARTNER_KEYS, hash);
      if (doc && !(stored && isDeepStrictEqual(withoutPosition(stored), doc))) tx.put(PARTNER_KEYS, doc);
      else if (!doc && stored) tx.delete(PARTNER_KEYS, hash);
    }
  },
};

// ---- queries --------------------------------------------------------------------------------------

/** The active key with this hash, or null (unknown, revoked or rotated away). */
export async function keyByHash(
  collection: Collection<PartnerKeyDoc>,
  keyHash: string,
): Promise<PartnerKeyDoc | null> {
  const [doc] = await collection.findByIds([keyHash]);
  return doc ? withoutPosition(doc) : null;
}

/** The admin record of a partner (private fields stripped), or null. */
export function toPartnerRecord(doc: PartnerDoc): partner.PartnerRecord {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(doc)) if (!k.startsWith('_')) out[k] = v;
  return out as partner.PartnerRecord;
}

export async function partnerById(
  collection: Collection<PartnerDoc>,
  partnerId: string,
): Promise<partner.PartnerRecord | null> {
  const [doc] = await collection.findByIds([partnerId]);
  return doc ? toPartnerRecord(doc) : null;
}
