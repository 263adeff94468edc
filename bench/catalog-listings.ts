/**
 * `projection.listings_with_specials`: a store with a special on a brand and a kind, then N menu
 * products listed at it (over 500 products), the catalog built from them alone. A listing at such a
 * store rechecks the special's involvement (docs/read-side.md, "The catalog's lookups"), and that
 * recheck must not grow with the store: the line gives the time a listing at 10,000 and at 40,000
 * menu products, and `ratio` is the second over the first (target 1.25; a recheck that read the
 * store's lookups whole made it 4.2–4.7).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as brand from '../domain/brand.ts';
import type { DomainEvent } from '../domain/decider.ts';
import * as menuProduct from '../domain/menu-product.ts';
import * as product from '../domain/product.ts';
import type { kinds as allKinds } from '../domain/schemas.ts';
import * as special from '../domain/special.ts';
import * as store from '../domain/store.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { createProjector } from '../projections/projector.ts';
import { catalogProjection } from '../projections/read-models/catalog/projection.ts';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';
import { benchStore, toNewEvent } from './events.ts';

const PRODUCTS = 500;
const KINDS: Array<(typeof allKinds)[number]> = ['flower', 'edible', 'vape', 'pre-roll'];

/** The store, two brands, the products, the special, then `listings` menu products, in that order. */
function history(listings: number, at: string): Array<[string, DomainEvent]> {
  const events: Array<[string, DomainEvent]> = [[store.streamId(1), benchStore(1, 'Specials Store', at)]];
  for (const b of [1, 2]) {
    events.push([
      brand.streamId(b),
      brand.events.BrandUpserted({ brand_id: b, name: `Brand ${b}`, upserted_at: at }),
    ]);
  }
  for (let p = 1; p <= PRODUCTS; p++) {
    events.push([
      product.streamId(p),
      product.events.ProductUpserted({
        product_id: p,
        name: `Product ${p}`,
        brand_id: 1 + (p % 2),
        kind: KINDS[p % KINDS.length],
        kind_subtype: null,
        lineage: null,
        description: null,
        percent_thc: null,
        percent_cbd: null,
        image_urls: [],
        upserted_at: at,
      }),
    ]);
  }
  events.push([
    special.streamId(1),
    special.events.SpecialUpserted({
      special_id: 1,
      store_id: 1,
      title: 'Brand and kind deal',
      description: null,
      special_type: 'product',
      discount_type: 'percent',
      discount_value: '10.00',
      product_ids: [],
      brand_ids: [1],
      kinds: ['flower'],
      starts_at: at,
      ends_at: null,
      enabled: true,
      upserted_at: at,
    }),
  ]);
  for (let m = 1; m <= listings; m++) {
    const p = 1 + (m % PRODUCTS);
    events.push([
      menuProduct.streamId(m),
      menuProduct.events.MenuProductListed({
        menu_product_id: m,
        store_id: 1,
        product_id: p,
        brand_id: 1 + (p % 2),
        prices: { each: '10.00' },
        in_stock: true,
        listed_at: at,
      }),
    ]);
  }
  return events;
}

/** Microseconds a listing takes in a build of the catalog from `listings` listings at the store. */
async function perListing(listings: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'pds-bench-listings-'));
  try {
    const es = await openSqliteEventStore(join(dir, 'events.db'), { synchronous: 'normal' });
    const at = new Date().toISOString();
    for (const [stream, event] of history(listings, at)) await es.append(stream, [toNewEvent(event, at)]);
    const readStore = openSqliteReadStore(join(dir, 'read.db'));
    const projector = createProjector({ store: es, readStore, projections: [catalogProjection] });
    const t0 = performance.now();
    await projector.start();
    await projector.caughtUp;
    const ms = performance.now() - t0;
    await projector.stop();
    await readStore.close();
    await es.close();
    return (ms * 1_000) / listings;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchCatalogListings() {
  const small = await perListing(10_000);
  const large = await perListing(40_000);
  return [
    {
      name: 'projection.listings_with_specials',
      us_per_listing_at_10000: Math.round(small),
      us_per_listing_at_40000: Math.round(large),
      baseline: 'the same build at 10,000 listings',
      ratio: +(large / small).toFixed(2),
      target: 1.25,
    },
  ];
}
