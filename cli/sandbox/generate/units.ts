/** Time units, and times, money and shares written the way the generated bodies carry them. */

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

export const iso = (ms: number) => new Date(ms).toISOString();
export const money = (dollars: number) => dollars.toFixed(2);
/** Splits `total` into `parts` whole shares that differ by at most one. */
export const shares = (total: number, parts: number) =>
  Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
