/**
 * Read model `curbside_pickup_settings` (catalog projection): one document per store (`_id` store id),
 * the partner `curbside_pickup_setting` record of docs/partner-api.md as `toCurbsidePickupSettingRecord`
 * renders it. A store has the default setting (curbside off, the default arrival form, `updated_at` the
 * store's creation) until its first `CurbsidePickupSettingChanged`.
 */
import {
  type CurbsidePickupSettingRecord,
  decider,
  type StoreState,
  toCurbsidePickupSettingRecord,
} from '../../../domain/store.ts';
import type { Collection, Doc } from '../../read-store.ts';
import { type CatalogEventOf, type CatalogReadModel, type CatalogTx, iso } from './support.ts';

export const CURBSIDE_PICKUP_SETTINGS = 'curbside_pickup_settings';

export type CurbsidePickupSettingDoc = Doc & CurbsidePickupSettingRecord & { _id: number };

function save(tx: CatalogTx, record: CurbsidePickupSettingRecord | null) {
  if (!record) return;
  tx.save(CURBSIDE_PICKUP_SETTINGS, { _id: record.store_id, ...record, updated_at: iso(record.updated_at) });
}

function change(e: CatalogEventOf<'CurbsidePickupSettingChanged'>, tx: CatalogTx) {
  const { store_id, changed_at, ...setting } = e.data;
  // The record needs only the store id and the setting, which the event carries in full; the rest of
  // the store's state is not part of it.
  const state = {
    exists: true,
    store_id,
    curbside_pickup_setting: setting,
    curbside_updated_at: changed_at,
  } as Extract<StoreState, { exists: true }>;
  save(tx, toCurbsidePickupSettingRecord(state));
}

export const curbsidePickupSettings: CatalogReadModel = {
  collections: { [CURBSIDE_PICKUP_SETTINGS]: [] },
  prefetch(e) {
    if (e.type === 'StoreUpserted' || e.type === 'CurbsidePickupSettingChanged') {
      return [[CURBSIDE_PICKUP_SETTINGS, e.data.store_id]];
    }
    return [];
  },
  apply(e, tx) {
    if (e.type === 'StoreUpserted') {
      // Only the store's first upsert creates the (default) setting; later ones leave it alone.
      if (tx.get(CURBSIDE_PICKUP_SETTINGS, e.data.store_id)) return;
      save(tx, toCurbsidePickupSettingRecord(decider.evolve(decider.initialState, e)));
    } else if (e.type === 'CurbsidePickupSettingChanged') {
      change(e, tx);
    }
  },
};

// ---- queries of the partner routes (docs/partner-api.md) -------------------------------------------

/** The store's setting, or undefined for a store never upserted. */
export async function settingOf(
  settings: Collection<CurbsidePickupSettingDoc>,
  storeId: number,
): Promise<CurbsidePickupSettingDoc | undefined> {
  return (await settings.findByIds([storeId]))[0];
}
