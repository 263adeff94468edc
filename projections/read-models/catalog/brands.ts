/**
 * Private lookup of the catalog: every brand's current name (`_id` brand id), which products and menu
 * products copy into their `brand` field. Renames reach the copies through `updateMany` in those models.
 */
import type { Doc } from '../../read-store.ts';
import { type CatalogReadModel, type CatalogTx, iso } from './support.ts';

export const CATALOG_BRANDS = 'catalog_brands';

export interface BrandDoc extends Doc {
  _id: number;
  name: string;
  updated_at: string;
}

/** The brand's current name, or null for a brand the log has not named (the write side prevents it). */
export const brandName = (tx: CatalogTx, brandId: number): string | null =>
  tx.get<BrandDoc>(CATALOG_BRANDS, brandId)?.name ?? null;

export const brands: CatalogReadModel = {
  collections: { [CATALOG_BRANDS]: [] },
  prefetch(e) {
    switch (e.type) {
      case 'BrandUpserted':
      case 'ProductUpserted':
      case 'MenuProductListed':
        return [[CATALOG_BRANDS, e.data.brand_id]];
      default:
        return [];
    }
  },
  apply(e, tx) {
    if (e.type !== 'BrandUpserted') return;
    tx.save(CATALOG_BRANDS, { _id: e.data.brand_id, name: e.data.name, updated_at: iso(e.data.upserted_at) });
  },
};
