/** Field schemas shared by several aggregates, in the partner's vocabulary (docs/partner-api.md). */
import { z } from 'zod';

export const id = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
export const uuid = z.uuid();
export const isoDateTime = z.iso.datetime({ offset: true });
/** A decimal amount written as a string with two decimals, e.g. "12.50". */
export const money = z
  .string()
  .regex(/^\d{1,9}\.\d{2}$/, 'expected a decimal amount with two decimals, e.g. "12.50"');

/**
 * Text people read (names, titles, descriptions, a customer's answers) holds no control character
 * and no lone surrogate. A NUL cuts text short in C strings, terminals and many a tool; ESC, CSI and
 * the other C0 and C1 controls rewrite an operator's terminal or split a log line; a lone surrogate
 * (`"\ud800"` in a JSON body) is no Unicode character and has no UTF-8 form, so every store, log and
 * receiver would write it differently. Text of several lines keeps tab, line feed and carriage return.
 */
/** Unicode's control characters (`Cc`): U+0000-U+001F and U+007F-U+009F. */
const CONTROLS = /\p{Cc}/u;
const CONTROLS_BUT_TAB_AND_LINE_BREAKS = /[^\P{Cc}\t\n\r]/u;
const ONE_LINE_MESSAGE =
  'expected text on one line: no control characters (U+0000-U+001F, U+007F-U+009F) and no lone surrogates';
const SEVERAL_LINES_MESSAGE =
  'expected text: no control characters but tab and line breaks (U+0000-U+001F, U+007F-U+009F) and no lone surrogates';

/** Whether `text` is printable on one line (no control character, no lone surrogate). */
export const isOneLine = (text: string) => !CONTROLS.test(text) && text.isWellFormed();
/** Whether `text` is printable text of several lines (tab and line breaks allowed). */
export const isPrintable = (text: string) =>
  !CONTROLS_BUT_TAB_AND_LINE_BREAKS.test(text) && text.isWellFormed();

/** Printable text on one line, as given (not trimmed): a key, a URL, a form's field name. */
export const oneLineText = z.string().refine(isOneLine, ONE_LINE_MESSAGE);
/** Printable text of several lines, as given (not trimmed): a customer's answer. */
export const printableText = z.string().refine(isPrintable, SEVERAL_LINES_MESSAGE);

/** A string of one line of printable text (`isOneLine`), trimmed, at most `max` characters; may be empty. */
export const oneLine = (max: number) => z.string().trim().max(max).refine(isOneLine, ONE_LINE_MESSAGE);
/** A name, title or label: one line of printable text, trimmed, 1 to `max` characters. */
export const nonEmpty = (max: number) => oneLine(max).min(1);
/** Free text of several lines (a description, a comment, instructions), trimmed, at most `max` characters. */
export const freeText = (max: number) =>
  z.string().trim().max(max).refine(isPrintable, SEVERAL_LINES_MESSAGE);

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
export const webUrl = z.httpUrl().max(2048).refine(isOneLine, ONE_LINE_MESSAGE);
