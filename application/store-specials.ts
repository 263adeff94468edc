/** Each store's specials, for pricing a cart line when the item is placed. */
import type { EventRegistry } from '../domain/events.ts';
import type { PricingSpecial } from '../domain/pricing.ts';
import { decider, type SpecialState } from '../domain/special.ts';
import type { EventStore } from '../eventstore/port.ts';
import { type AggregateIndex, createAggregateIndex } from './aggregate-index.ts';
import type { Supervisor } from './supervisor.ts';

export interface StoreSpecials
  extends Pick<AggregateIndex<SpecialState>, 'waitFor' | 'caughtUp' | 'position' | 'stop'> {
  /** Every special of the store (active or not: pricing decides at the time of the line). */
  ofStore(storeId: number): PricingSpecial[];
}

export function createStoreSpecials(
  store: EventStore,
  registry: EventRegistry,
  supervisor?: Supervisor,
  /** Told when the specials' subscription drops (it is opened again after a pause). */
  onDrop?: (error: unknown) => void,
): StoreSpecials {
  const byStore = new Map<number, Map<number, PricingSpecial>>();
  const index = createAggregateIndex(store, registry, {
    prefix: 'special-',
    decider,
    supervisor,
    onDrop,
    onChange(_id, before, after) {
      if (before?.exists) byStore.get(before.store_id)?.delete(before.special_id);
      if (!after.exists) return;
      let specials = byStore.get(after.store_id);
      if (!specials) {
        specials = new Map();
        byStore.set(after.store_id, specials);
      }
      specials.set(after.special_id, {
        id: after.special_id,
        title: after.title,
        special_type: after.special_type,
        discount_type: after.discount_type,
        discount_value: after.discount_value,
        product_ids: after.product_ids,
        brand_ids: after.brand_ids,
        kinds: after.kinds,
        starts_at: after.starts_at,
        ends_at: after.ends_at,
        enabled: after.enabled,
      });
    },
  });
  return {
    ofStore: (storeId) => [...(byStore.get(storeId)?.values() ?? [])],
    waitFor: index.waitFor,
    caughtUp: index.caughtUp,
    position: index.position,
    stop: index.stop,
  };
}
