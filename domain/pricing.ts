/**
 * Unit prices after specials, and money arithmetic. Pure: every amount is computed in integer cents
 * (BigInt where a product could pass 2^53), so no binary-float drift ever reaches a price; results are
 * rounded half-up to the cent.
 */

/** Longest amount: 9 digits, a point, 2 digits (the `money` schema's format). */
const MAX_MONEY_LENGTH = 12;
const ZERO = 48;

/**
 * `"12.50"` → `1250`. Throws on anything but a two-decimal amount (`^\d{1,9}\.\d{2}$`, the `money`
 * schema's format). Read digit by digit: a cart's total parses every line's price at every render.
 */
export function toCents(amount: string): number {
  const point = amount.length - 3;
  let cents = 0;
  let valid = point >= 1 && amount.length <= MAX_MONEY_LENGTH && amount.charCodeAt(point) === 46;
  for (let i = 0; valid && i < amount.length; i++) {
    if (i === point) continue;
    const digit = amount.charCodeAt(i) - ZERO;
    valid = digit >= 0 && digit <= 9;
    cents = cents * 10 + digit;
  }
  if (!valid) throw new RangeError(`not a money amount with two decimals: ${JSON.stringify(amount)}`);
  return cents;
}

/** `1250` → `"12.50"`. */
export function fromCents(cents: number): string {
  if (!Number.isSafeInteger(cents) || cents < 0)
    throw new RangeError(`not a whole, non-negative cent amount: ${cents}`);
  return `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`;
}

/** `1250` → `12.5`: money as a JSON number, as carts carry it (docs/webhooks.md). */
export const centsToNumber = (cents: number): number => cents / 100;

/** `"12.50"` → `12.5`. */
export const moneyToNumber = (amount: string): number => centsToNumber(toCents(amount));

/** A non-negative decimal written as a string ("15", "12.5", "2.50") as the exact fraction num / den. */
function parseDecimal(value: string): { num: bigint; den: bigint } | null {
  const m = /^(\d{1,12})(?:\.(\d{1,12}))?$/.exec(value.trim());
  if (!m) return null;
  const fraction = m[2] ?? '';
  return { num: BigInt(m[1] + fraction), den: 10n ** BigInt(fraction.length) };
}

/** a / b rounded half-up, for a ≥ 0 and b > 0. */
const divHalfUp = (a: bigint, b: bigint): bigint => (2n * a + b) / (2n * b);

export type SpecialType = 'product' | 'bulk_pricing' | 'bundle' | 'cart_total';
export type DiscountType = 'percent' | 'dollar_amount' | 'target_price';

/** The facts of a special (docs/partner-api.md, `special`) that pricing needs. */
export interface PricingSpecial {
  id: number;
  title: string;
  special_type: SpecialType;
  discount_type: DiscountType;
  /** A decimal string: a percentage for `percent`, a dollar amount otherwise. */
  discount_value: string;
  product_ids: readonly number[];
  brand_ids: readonly number[];
  kinds: readonly string[];
  starts_at: string;
  ends_at: string | null;
  enabled: boolean;
}

export interface PricedProduct {
  /** Money string, e.g. "12.50". */
  unit_price: string;
  product_id: number;
  brand_id: number;
  kind: string;
}

export interface PricedUnit {
  discounted_unit_price: string;
  special_id: number | null;
  special_title: string | null;
}

/** docs/partner-api.md: a special involves a product named in `product_ids`, or of a brand in `brand_ids`, or of a kind in `kinds`. */
export function involves(
  special: Pick<PricingSpecial, 'product_ids' | 'brand_ids' | 'kinds'>,
  product: Pick<PricedProduct, 'product_id' | 'brand_id' | 'kind'>,
): boolean {
  return (
    special.product_ids.includes(product.product_id) ||
    special.brand_ids.includes(product.brand_id) ||
    special.kinds.includes(product.kind)
  );
}

/** Enabled, and `starts_at ≤ at < ends_at` (no end: open-ended). */
export function isActive(
  special: Pick<PricingSpecial, 'enabled' | 'starts_at' | 'ends_at'>,
  at: string,
): boolean {
  if (!special.enabled) return false;
  const t = Date.parse(at);
  if (Number.isNaN(t)) throw new RangeError(`not a date-time: ${JSON.stringify(at)}`);
  if (Date.parse(special.starts_at) > t) return false;
  return special.ends_at === null || t < Date.parse(special.ends_at);
}

/**
 * The unit price one `product` special gives, in cents, or null when its discount value cannot be read.
 * percent → price × (1 − v/100); dollar_amount → price − v; target_price → v when lower than the price.
 * Never below 0.00 and never above the price.
 */
export function discountedCents(
  priceCents: number,
  special: Pick<PricingSpecial, 'discount_type' | 'discount_value'>,
): number | null {
  const v = parseDecimal(special.discount_value);
  if (!v) return null;
  const price = BigInt(priceCents);
  let result: bigint;
  switch (special.discount_type) {
    case 'percent': {
      // price × (100·den − num) / (100·den), exactly, then rounded once.
      const keep = 100n * v.den - v.num;
      result = keep <= 0n ? 0n : divHalfUp(price * keep, 100n * v.den);
      break;
    }
    case 'dollar_amount': {
      // (price·den − num·100) / den cents.
      const rest = price * v.den - v.num * 100n;
      result = rest <= 0n ? 0n : divHalfUp(rest, v.den);
      break;
    }
    case 'target_price':
      result = divHalfUp(v.num * 100n, v.den);
      break;
    default:
      return null;
  }
  return Number(result < price ? result : price);
}

/**
 * The unit price of a product at `at` after the store's specials: of the enabled `product` specials
 * that are active at `at` and involve the product, the one giving the lowest price wins (ties: the
 * lowest special id). A special that does not lower the price is not applied.
 *
 * Only `special_type: 'product'` changes a unit price. `bulk_pricing`, `bundle` and `cart_total`
 * depend on the quantity or the other lines of a cart, not on one unit, so they leave it as it is.
 */
export function applySpecials(
  input: PricedProduct,
  specials: readonly PricingSpecial[],
  at: string,
): PricedUnit {
  const price = toCents(input.unit_price);
  let best: { cents: number; special: PricingSpecial } | null = null;
  for (const special of specials) {
    if (special.special_type !== 'product' || !involves(special, input) || !isActive(special, at)) continue;
    const cents = discountedCents(price, special);
    if (cents === null || cents >= price) continue;
    if (!best || cents < best.cents || (cents === best.cents && special.id < best.special.id)) {
      best = { cents, special };
    }
  }
  return best
    ? {
        discounted_unit_price: fromCents(best.cents),
        special_id: best.special.id,
        special_title: best.special.title,
      }
    : { discounted_unit_price: fromCents(price), special_id: null, special_title: null };
}

/** The product facts a cart line copies when an item is placed. */
export interface LineProduct {
  product_id: number;
  brand_id: number;
  name: string;
  kind: string;
  kind_subtype: string | null;
  lineage: string | null;
  image_urls: string[];
}

/**
 * The line a cart records when an item is placed (the `line` context of `AddCartItem`): the product
 * as it is now, at the listing's price for the weight (null when it sells none at that weight), after
 * the store's specials in force at `at`. The platform API and the sandbox seeding both build it here.
 */
export function lineAtPlacement<P extends LineProduct>(input: {
  product: P;
  storeId: number;
  brandName: string;
  unitPrice: string | null;
  specials: readonly PricingSpecial[];
  at: string;
}) {
  const { product, unitPrice } = input;
  const priced = unitPrice
    ? applySpecials(
        {
          unit_price: unitPrice,
          product_id: product.product_id,
          brand_id: product.brand_id,
          kind: product.kind,
        },
        input.specials,
        input.at,
      )
    : null;
  return {
    product_id: product.product_id,
    store_id: input.storeId,
    name: product.name,
    brand: input.brandName,
    brand_id: product.brand_id,
    kind: product.kind as P['kind'],
    kind_subtype: product.kind_subtype,
    lineage: product.lineage as P['lineage'],
    image_urls: product.image_urls,
    unit_price: unitPrice,
    discounted_unit_price: priced?.discounted_unit_price ?? null,
    special_id: priced?.special_id ?? null,
    special_title: priced?.special_title ?? null,
  };
}
