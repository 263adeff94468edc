/**
 * The history the benches build on (`projection`, `restart`, `backup`) and a test of a long first
 * start: a catalog, then carts with about 20 events each, about `target` events in all, of the
 * same shape every run (a seeded generator; only the carts' uuids are random).
 */
import { randomUUID } from 'node:crypto';
import * as brand from '../domain/brand.ts';
import * as cart from '../domain/cart.ts';
import type { DomainEvent } from '../domain/decider.ts';
import * as menuProduct from '../domain/menu-product.ts';
import * as product from '../domain/product.ts';
import * as review from '../domain/review.ts';
import { kinds } from '../domain/schemas.ts';
import * as special from '../domain/special.ts';
import * as store from '../domain/store.ts';
import type { EventStore, NewEvent } from '../eventstore/port.ts';
import { toNewEvent } from './events.ts';

/** A small seeded generator (mulberry32), so every run writes the same events. */
export function seededRandom(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)],
  };
}

const at = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
const toNew = (e: DomainEvent, i: number): NewEvent => toNewEvent(e, at(i));

/** Appends a catalog and then carts until about `target` events exist. */
export async function generateEvents(es: EventStore, target: number): Promise<number> {
  const rnd = seededRandom(42);
  let written = 0;
  const put = async (streamId: string, events: DomainEvent[]) => {
    await es.append(
      streamId,
      events.map((e, k) => toNew(e, written + k)),
    );
    written += events.length;
  };
  const scale = Math.max(0.01, Math.min(1, target / 1_000_000));
  const storeCount = Math.max(3, Math.round(50 * scale));
  const brandCount = Math.max(3, Math.round(40 * scale));
  const productCount = Math.max(10, Math.round(2_000 * scale));
  const menuCount = Math.max(20, Math.round(30_000 * scale));
  for (let s = 1; s <= storeCount; s++) {
    await put(store.streamId(s), [
      store.events.StoreUpserted({
        store_id: s,
        name: `Store ${s}`,
        display_name: null,
        store_url: null,
        address: `${s} Main St`,
        city: 'Denver',
        state: 'CO',
        zip: '80202',
        lat: 39 + rnd.next(),
        long: -105 + rnd.next(),
        phone: null,
        time_zone: 'America/Denver',
        recreational: true,
        medical: false,
        pickup: true,
        delivery: true,
        curbside: false,
        working_hours: [],
        upserted_at: at(written),
      }),
    ]);
  }
  for (let b = 1; b <= brandCount; b++) {
    await put(brand.streamId(b), [
      brand.events.BrandUpserted({ brand_id: b, name: `Brand ${b}`, upserted_at: at(written) }),
    ]);
  }
  const products: Array<{ id: number; brand_id: number; kind: (typeof kinds)[number] }> = [];
  for (let p = 1; p <= productCount; p++) {
    const info = { id: p, brand_id: rnd.int(1, brandCount), kind: rnd.pick(kinds) };
    products.push(info);
    await put(product.streamId(p), [
      product.events.ProductUpserted({
        product_id: p,
        name: `Product ${p}`,
        brand_id: info.brand_id,
        kind: info.kind,
        kind_subtype: null,
        lineage: rnd.pick(['indica', 'sativa', 'hybrid', 'cbd'] as const),
        description: null,
        percent_thc: rnd.int(0, 300) / 10,
        percent_cbd: rnd.int(0, 100) / 10,
        image_urls: [],
        upserted_at: at(written),
      }),
    ]);
  }
  const menu: Array<{ id: number; store_id: number; product: (typeof products)[number]; price: string }> = [];
  for (let m = 1; m <= menuCount; m++) {
    const p = rnd.pick(products);
    const entry = { id: m, store_id: rnd.int(1, storeCount), product: p, price: `${rnd.int(5, 80)}.00` };
    menu.push(entry);
    await put(menuProduct.streamId(m), [
      menuProduct.events.MenuProductListed({
        menu_product_id: m,
        store_id: entry.store_id,
        product_id: p.id,
        brand_id: p.brand_id,
        prices: { each: entry.price },
        in_stock: true,
        listed_at: at(written),
      }),
    ]);
  }
  for (let sp = 1; sp <= Math.round(300 * scale) + 1; sp++) {
    await put(special.streamId(sp), [
      special.events.SpecialUpserted({
        special_id: sp,
        store_id: rnd.int(1, storeCount),
        title: `Deal ${sp}`,
        description: null,
        special_type: 'product',
        discount_type: 'percent',
        discount_value: '10.00',
        product_ids: [],
        brand_ids: [rnd.int(1, brandCount)],
        kinds: [],
        starts_at: at(0),
        ends_at: null,
        enabled: true,
        upserted_at: at(written),
      }),
    ]);
  }
  for (let r = 1; r <= Math.round(10_000 * scale); r++) {
    const m = rnd.pick(menu);
    await put(review.streamId(r), [
      review.events.ReviewPosted({
        review_id: r,
        product_id: m.product.id,
        store_id: m.store_id,
        brand_id: m.product.brand_id,
        rating: rnd.int(1, 5),
        comment: null,
        feelings: [],
        activities: [],
        verified: true,
        posted_at: at(written),
      }),
    ]);
  }
  // Filtering the whole menu per cart made generating 1M events take longer than projecting them.
  const menuByStore = new Map<number, typeof menu>();
  for (const m of menu) {
    const list = menuByStore.get(m.store_id) ?? [];
    list.push(m);
    menuByStore.set(m.store_id, list);
  }
  // Carts: created, ~15 items, a customer, checkout and two status moves (about 20 events each).
  while (written < target) {
    const uuid = randomUUID();
    const storeId = rnd.int(1, storeCount);
    const atStore = menuByStore.get(storeId) ?? [];
    const events: DomainEvent[] = [
      cart.events.CartCreated({
        cart_uuid: uuid,
        store_id: storeId,
        source: { channel: 'embedded', partner_id: null },
        user_id: null,
        created_at: at(written),
      }),
    ];
    const placed = new Set<number>();
    for (let k = 0; k < 15 && atStore.length > 0; k++) {
      const m = rnd.pick(atStore);
      if (placed.has(m.id)) continue;
      placed.add(m.id);
      events.push(
        cart.events.CartItemAdded({
          menu_product_id: m.id,
          price_id: 'each',
          count: rnd.int(1, 3),
          product_id: m.product.id,
          store_id: storeId,
          name: `Product ${m.product.id}`,
          brand: `Brand ${m.product.brand_id}`,
          brand_id: m.product.brand_id,
          kind: m.product.kind,
          kind_subtype: null,
          lineage: null,
          image_urls: [],
          unit_price: m.price,
          discounted_unit_price: m.price,
          special_id: null,
          special_title: null,
          added_at: at(written + k),
        }),
      );
    }
    if (placed.size > 0) {
      events.push(
        cart.events.CartCustomerIdentified({
          email: 'buyer@example.com',
          first_name: 'Ada',
          last_name: 'Buyer',
          phone_number: null,
          DOB: null,
          identified_at: at(written),
        }),
        cart.events.CartCheckedOut({
          reservation_mode: 'pickup',
          reservation_start_window: '',
          promo_code: null,
          checked_out_at: at(written),
          amount: 10,
        }),
        ...(['verification', 'preparing'] as const).map((to, k) =>
          cart.events.CartStatusChanged({
            from: k === 0 ? 'pending' : 'verification',
            to,
            changed_at: at(written + k),
            ...cart.noAssignment,
            rating: null,
          }),
        ),
      );
    }
    await put(cart.streamId(uuid), events);
  }
  return written;
}
