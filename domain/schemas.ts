/** Field schemas shared by several aggregates, in the partner's vocabulary (docs/partner-api.md). */
import { z } from 'zod';

export const id = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
export const uuid = z.uuid();
export const isoDateTime = z.iso.datetime({ offset: true });
/** A decimal amount written as a string with two decimals, e.g. "12.50". */
export const money = z
  .string()
  .regex(/^\d{1,9}\.\d{2}$/, 'expected a decimal amount with two decimals, e.g. "12.50"');
export const nonEmpty = (max: number) => z.string().trim().min(1).max(max);

/** A product's kind: the category of docs/partner-api.md, "Records". */
export const kinds = [
  'flower',
  'edible',
  'extract',
  'merch',
  'grow',
  'tincture',
  'gear',
  'topical',
  'pre-roll',
  'vape',
] as const;
export const kind = z.enum(kinds);
export const lineage = z.enum(['indica', 'sativa', 'hybrid', 'cbd']);

/** Weights a menu product is sold in, and the price field that carries each. */
export const weights = [
  'each',
  'half gram',
  'gram',
  'two gram',
  'eighth ounce',
  'quarter ounce',
  'half ounce',
  'ounce',
] as const;
export const weight = z.enum(weights);
export type Weight = z.infer<typeof weight>;
/** `eighth ounce` → `price_eighth_ounce`. */
export const priceField = (w: Weight) => `price_${w.replaceAll(' ', '_')}` as const;

export const days = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'] as const;
const hhmm = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'expected a time of day HH:MM');
export const openingHours = z.array(z.strictObject({ day: z.enum(days), from: hhmm, to: hhmm })).max(50);

export const percent = z.number().min(0).max(100);

/** A US ZIP code: five digits. */
export const usZip = z.string().regex(/^\d{5}$/, 'expected a five-digit US ZIP code, e.g. "94103"');
/** A public web address: http or https, with a domain name. */
export const webUrl = z.httpUrl().max(2048);
