/**
 * The sandbox partners, one per kind: what POST /admin/v1/partners runs, each with its derived key
 * (see `keys.ts`). A partner that exists already (a resumed or concurrent seeding) is left as it is.
 */
import type { KeyObject } from 'node:crypto';
import { DomainError } from '../../../domain/decider.ts';
import * as partner from '../../../domain/partner.ts';
import type { SandboxData } from '../generate.ts';
import { sandboxApiKey } from './keys.ts';
import { OPERATOR, type SeedWriter } from './writer.ts';

export async function writePartners(w: SeedWriter, data: SandboxData, secretKey: KeyObject): Promise<void> {
  w.phase = 'partners';
  for (const p of data.partners) {
    const body = partner.partnerFields.parse(p.body);
    const key = sandboxApiKey(secretKey, data.seed, p.kind);
    try {
      await w.run(
        partner.streamId(p.partner_id),
        partner.decider,
        {
          type: 'RegisterPartner',
          partner_id: p.partner_id,
          ...body,
          key: { key_id: key.key_id, key_hash: key.key_hash, key_prefix: key.key_prefix },
          unknown_brand_ids: await w.sink.missing('brand-', body.brand_ids),
          unknown_store_ids: await w.sink.missing('store-', body.store_ids),
          at: data.partners_at,
        },
        w.meta(data.partners_at, OPERATOR),
      );
    } catch (err) {
      if (!(err instanceof DomainError && err.code === 'partner_exists')) throw err;
    }
    await w.step(1);
  }
}
