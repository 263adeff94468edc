/**
 * Distances on the Earth for the products-near-a-ZIP search (docs/partner-api.md, "Lists"): pure
 * arithmetic on latitude and longitude in degrees.
 */

export interface LatLong {
  lat: number;
  long: number;
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
