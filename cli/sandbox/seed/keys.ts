/**
 * The sandbox partners' API keys: derived, never stored, and shown only while active.
 *
 * Only a key's hash enters events, so a restart cannot read the keys back. The sandbox keys are
 * derived instead, as HMAC-SHA256(PDS_SECRET_KEY, seed + partner kind): a restart (or `pds sandbox
 * seed` again) recomputes them and prints those that are still active. Nothing new is written to disk,
 * and the keys are exactly as secret as the secret key, which already guards every webhook secret; a
 * key the operator revokes or rotates stays dead, because it is only printed while its hash is active.
 */
import { createHmac, type KeyObject } from 'node:crypto';
import { createCommandHandler } from '../../../application/command-handler.ts';
import {
  API_KEY_PREFIX,
  apiKeyPrefix,
  type GeneratedApiKey,
  hashApiKey,
} from '../../../application/credentials.ts';
import { eventRegistry } from '../../../domain/index.ts';
import * as partner from '../../../domain/partner.ts';
import type { EventStore } from '../../../eventstore/port.ts';
import { sandboxPartnerIds } from '../generate.ts';
import type { SandboxPartnerCredential } from './types.ts';

/** The sandbox key of one partner kind: HMAC-SHA256(secret key, seed and kind), as an API key. */
export function sandboxApiKey(
  secretKey: KeyObject,
  seed: number,
  kind: partner.PartnerKind,
): GeneratedApiKey {
  const mac = (purpose: string) =>
    createHmac('sha256', secretKey).update(`pds-sandbox-key\0${seed}\0${kind}\0${purpose}`).digest();
  const api_key = API_KEY_PREFIX + mac('api_key').toString('base64url');
  return {
    api_key,
    key_id: `key_${mac('key_id').subarray(0, 9).toString('base64url')}`,
    key_hash: hashApiKey(api_key),
    key_prefix: apiKeyPrefix(api_key),
  };
}

/** The sandbox partners and their keys as they stand now (a revoked key is not shown). */
export async function sandboxCredentials(
  es: EventStore,
  secretKey: KeyObject,
  seed: number,
): Promise<SandboxPartnerCredential[]> {
  const commands = createCommandHandler(es, eventRegistry);
  const ids = sandboxPartnerIds(seed);
  const credentials: SandboxPartnerCredential[] = [];
  for (const kind of partner.partnerKinds) {
    const state = (await commands.load(partner.streamId(ids[kind]), partner.decider)).state;
    if (!state.exists) continue;
    const key = sandboxApiKey(secretKey, seed, kind);
    const held = state.keys.find((k) => k.key_hash === key.key_hash);
    const status = held?.status ?? 'missing';
    credentials.push({
      kind,
      partner_id: state.partner_id,
      name: state.name,
      brand_ids: state.brand_ids,
      store_ids: state.store_ids,
      all_brands: state.all_brands,
      key_id: key.key_id,
      key_prefix: key.key_prefix,
      api_key: status === 'active' ? key.api_key : null,
      key_status: status,
    });
  }
  return credentials;
}
