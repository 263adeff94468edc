/**
 * What the generator gives: how much of each kind a size makes, and the shapes it writes, the
 * platform's own request bodies (docs/partner-api.md, docs/write-side.md) plus ids and times.
 */
import type { z } from 'zod';
import type * as cart from '../../../domain/cart.ts';
import type * as menuProduct from '../../../domain/menu-product.ts';
import type { PartnerKind } from '../../../domain/partner.ts';
import type * as product from '../../../domain/product.ts';
import type * as review from '../../../domain/review.ts';
import type { kinds, Weight } from '../../../domain/schemas.ts';
import type * as special from '../../../domain/special.ts';
import type * as store from '../../../domain/store.ts';
import { DEFAULT_SANDBOX_SIZE, MAX_SANDBOX_SIZE } from '../sizes.ts';

export type Kind = (typeof kinds)[number];

/** What a planned cart ends as; the first carts cycle through all of them so each appears at any size. */
export const CART_TARGETS = [
  'finished',
  'with_review',
  'cancelled',
  'dismissed',
  'abandoned',
  'pending_empty',
  'pending_open',
  'verification',
  'staff_member_review',
  'preparing',
  'ready_for_pickup',
  'delivery_started',
  'delivery_finished',
] as const;
export type CartTarget = (typeof CART_TARGETS)[number];

export interface SandboxCounts {
  stores: number;
  brands: number;
  products: number;
  menu_products: number;
  reviews: number;
  specials: number;
  carts: number;
}

/**
 * How much data a size gives. `size` is the number of stores; the default (50) gives 40 brands, 2,000
 * products, 30,000 menu products, 10,000 reviews, 300 specials and 5,000 carts, and smaller sizes scale
 * everything down, keeping enough of each kind that every endpoint and every cart status has data.
 */
export function sandboxCounts(size: number): SandboxCounts {
  if (!Number.isInteger(size) || size < 1 || size > MAX_SANDBOX_SIZE) {
    throw new RangeError(`the sandbox size is a number of stores from 1 to ${MAX_SANDBOX_SIZE}, got ${size}`);
  }
  const f = size / DEFAULT_SANDBOX_SIZE;
  const brands = Math.max(3, Math.round(40 * f));
  const products = Math.max(40, Math.round(2000 * f));
  return {
    stores: size,
    brands,
    products,
    // A store lists at most three quarters of the catalog.
    menu_products: Math.min(Math.round(30_000 * f), size * Math.floor(products * 0.75)),
    reviews: Math.max(20, Math.round(10_000 * f)),
    specials: Math.max(2 * size, Math.round(300 * f)),
    carts: Math.max(CART_TARGETS.length * 2, Math.round(5000 * f)),
  };
}

// Output shapes: platform request bodies (zod inputs of the platform's schemas) with ids and times

export interface SandboxStore {
  id: number;
  body: z.input<typeof store.storeFields>;
}
export interface SandboxCurbsideSetting {
  store_id: number;
  body: z.input<typeof store.curbsidePickupSettingFields>;
}
export interface SandboxProduct {
  id: number;
  body: z.input<typeof product.productFields>;
}
export interface SandboxMenuProduct {
  id: number;
  store_id: number;
  body: z.input<typeof menuProduct.menuProductFields>;
}
export interface SandboxSpecial {
  id: number;
  /** When the platform wrote it. */
  at: string;
  body: z.input<typeof special.specialFields>;
}
export interface SandboxReview {
  id: number;
  at: string;
  body: z.input<typeof review.reviewFields>;
}
export interface SandboxPartner {
  kind: PartnerKind;
  partner_id: string;
  /** The admin API's `POST /partners` body. */
  body: { name: string; kind: PartnerKind; brand_ids: number[]; store_ids: number[]; all_brands: boolean };
}

/** One step of a cart's life, as the platform (or, for an arrival, a partner) would send it. */
export type CartStep =
  | { type: 'add'; at: string; body: z.input<typeof cart.addCartItemFields> }
  | { type: 'quantity'; at: string; menu_product_id: number; count: number }
  | { type: 'remove'; at: string; menu_product_id: number }
  | { type: 'customer'; at: string; body: z.input<typeof cart.cartCustomerFields> }
  | { type: 'checkout'; at: string; body: z.input<typeof cart.checkOutCartFields> }
  | { type: 'status'; at: string; body: z.input<typeof cart.changeCartStatusFields> }
  | { type: 'arrival'; at: string; arrival_id: string; partner_id: string; fields: Record<string, string> }
  /** What the abandonment timer does when the cart's deadline has passed. */
  | { type: 'abandon'; at: string };

export interface CartPlan {
  uuid: string;
  /** One correlation id for the cart's whole shopping session. */
  correlation_id: string;
  at: string;
  body: z.input<typeof cart.createCartFields>;
  /** What the cart ends as: a status, or `abandoned` / `pending_empty` / `pending_open`. */
  target: CartTarget;
  steps: CartStep[];
}

export interface SandboxData {
  seed: number;
  size: number;
  reference: string;
  counts: SandboxCounts;
  /** When the catalog (stores, brands, products, menu products) was written. */
  catalog_at: string;
  partners_at: string;
  stores: SandboxStore[];
  curbside_settings: SandboxCurbsideSetting[];
  brands: { id: number; name: string }[];
  products: SandboxProduct[];
  menu_products: SandboxMenuProduct[];
  specials: SandboxSpecial[];
  reviews: SandboxReview[];
  partners: SandboxPartner[];
  /** In order of creation. */
  carts: CartPlan[];
}

/** What the carts need to know of a product; `base` also prices it on every menu. */
export interface ProductFacts {
  id: number;
  brand_id: number;
  kind: Kind;
  /** Base shelf prices in dollars by weight, before a store's own markup. */
  base: Partial<Record<Weight, number>>;
}
