/** The partners: one of each kind, with ids from the seed alone. */
import type { PartnerKind } from '../../../domain/partner.ts';
import type { SandboxPartner, SandboxStore } from './model.ts';
import { stream } from './rng.ts';
import { chainOf } from './stores.ts';

/**
 * One partner of each kind. Their ids come from the seed alone, so a client (`pds sandbox traffic`)
 * can find them again without knowing the size.
 */
export function sandboxPartnerIds(seed: number): Record<PartnerKind, string> {
  const rng = stream(seed, 'partners');
  return {
    brand: rng.uuid(),
    brand_feed: rng.uuid(),
    store_operator: rng.uuid(),
    store_menu_feed: rng.uuid(),
  };
}

export function generatePartners(seed: number, stores: SandboxStore[], brandName: string): SandboxPartner[] {
  const ids = sandboxPartnerIds(seed);
  const operated = stores.slice(0, 3).map((s) => s.id);
  const partner = (
    kind: PartnerKind,
    name: string,
    scope: Partial<Pick<SandboxPartner['body'], 'brand_ids' | 'store_ids' | 'all_brands'>>,
  ): SandboxPartner => ({
    kind,
    partner_id: ids[kind],
    body: { name, kind, brand_ids: [], store_ids: [], all_brands: false, ...scope },
  });
  return [
    partner('brand', `${brandName} Storefront`, { brand_ids: [1] }),
    partner('brand_feed', 'Wholesale Bud Exchange', { all_brands: true }),
    partner('store_operator', `${chainOf(1)} Online`, { store_ids: operated }),
    partner('store_menu_feed', 'MenuMap Aggregator', { store_ids: stores.map((s) => s.id) }),
  ];
}
