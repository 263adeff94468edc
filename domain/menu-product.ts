/**
 * Menu product aggregate (`menuproduct-<id>`, ids are global): one product listed at one store, with
 * its prices per weight. Once an id has been listed at a store it stays that store's, even after
 * delisting, so partners and carts never see one id move between stores. The cart aggregate's command
 * handler reads this stream to price a line (`priceOf`).
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { conflict, type Decider, invalid, notFound } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { id, isoDateTime, money, priceField, type Weight, weight, weights } from './schemas.ts';

export const streamId = (menuProductId: number) => `menuproduct-${menuProductId}`;

/** Prices by weight (`{"gram": "12.00", "eighth ounce": "35.00"}`); keys are the weights of schemas.ts. */
const prices = z.partialRecord(weight, money);
export type Prices = z.infer<typeof prices>;

/** Body of `PUT /stores/{store_id}/menu_products/{id}`. `in_stock` defaults to true. */
export const menuProductFields = z.strictObject({
  product_id: id,
  prices: prices.refine((p) => Object.keys(p).length > 0, {
    message: 'at least one price is required',
    when: (payload) => payload.issues.length === 0,
  }),
  in_stock: z.boolean().default(true),
});
export type MenuProductFields = z.infer<typeof menuProductFields>;

export const events = {
  MenuProductListed: defineEvent(
    'MenuProductListed',
    z.object({
      menu_product_id: id,
      store_id: id,
      product_id: id,
      brand_id: id,
      prices,
      in_stock: z.boolean(),
      listed_at: isoDateTime,
    }),
  ),
  MenuProductDelisted: defineEvent(
    'MenuProductDelisted',
    z.object({ menu_product_id: id, store_id: id, delisted_at: isoDateTime }),
  ),
};
export type MenuProductEvent = EventOf<typeof events>;

/**
 * Context the command handler looks up: `store_exists` (the path's store), `product` (the body's
 * product: its id and brand, or null when there is none).
 */
export type MenuProductCommand =
  | {
      type: 'ListMenuProduct';
      menu_product_id: number;
      store_id: number;
      fields: MenuProductFields;
      store_exists: boolean;
      product: { product_id: number; brand_id: number } | null;
      at: string;
    }
  | { type: 'DelistMenuProduct'; menu_product_id: number; store_id: number; at: string };

type MenuProductData = Omit<z.output<typeof events.MenuProductListed.schema>, 'listed_at'>;
/** `listed` turns false on delisting; the last data stays, so the id's store is remembered. */
export type MenuProductState =
  | { exists: false }
  | (MenuProductData & { exists: true; listed: boolean; updated_at: string });

/** Prices in the order of `weights`, so equal price lists are equal events. */
const inWeightOrder = (p: Prices): Prices =>
  Object.fromEntries(weights.filter((w) => p[w] !== undefined).map((w) => [w, p[w]]));

export const decider: Decider<MenuProductCommand, MenuProductEvent, MenuProductState> = {
  initialState: { exists: false },
  decide(command, state) {
    switch (command.type) {
      case 'ListMenuProduct': {
        const { menu_product_id, store_id, fields, product } = command;
        if (!command.store_exists) throw notFound('store_not_found', `store ${store_id} does not exist`);
        if (state.exists && state.store_id !== store_id) {
          throw conflict(
            'menu_product_store_mismatch',
            `menu product ${menu_product_id} belongs to store ${state.store_id}`,
            { store_id: state.store_id },
          );
        }
        if (product === null) {
          throw invalid('unknown_product_id', `product ${fields.product_id} does not exist`, {
            product_id: fields.product_id,
          });
        }
        if (product.product_id !== fields.product_id) {
          throw new Error(
            `context product ${product.product_id} is not the body's product ${fields.product_id}`,
          );
        }
        if (Object.keys(fields.prices).length === 0)
          throw invalid('no_prices', 'a menu product needs a price');
        const event = events.MenuProductListed({
          menu_product_id,
          store_id,
          product_id: fields.product_id,
          brand_id: product.brand_id,
          prices: inWeightOrder(fields.prices),
          in_stock: fields.in_stock,
          listed_at: command.at,
        });
        const { listed_at: _, ...data } = event.data;
        // A listing that changes nothing appends nothing, so retries and replays are harmless.
        if (state.exists && state.listed && isDeepStrictEqual(menuProductData(state), data)) return [];
        return [event];
      }
      case 'DelistMenuProduct': {
        if (!state.exists || !state.listed || state.store_id !== command.store_id) {
          throw notFound(
            'menu_product_not_found',
            `menu product ${command.menu_product_id} is not listed at store ${command.store_id}`,
          );
        }
        return [
          events.MenuProductDelisted({
            menu_product_id: command.menu_product_id,
            store_id: command.store_id,
            delisted_at: command.at,
          }),
        ];
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'MenuProductListed': {
        const { listed_at, ...data } = event.data;
        return { ...data, exists: true, listed: true, updated_at: listed_at };
      }
      case 'MenuProductDelisted':
        return state.exists ? { ...state, listed: false, updated_at: event.data.delisted_at } : state;
    }
  },
};

function menuProductData(state: Extract<MenuProductState, { exists: true }>): MenuProductData {
  const { exists: _, listed: __, updated_at: ___, ...data } = state;
  return data;
}

/** The unit price of one weight, or null when the menu product is not listed or not sold in that weight. */
export function priceOf(state: MenuProductState, w: Weight): string | null {
  if (!state.exists || !state.listed) return null;
  return state.prices[w] ?? null;
}

/** The weights a menu product is sold in, in the order of `weights`. */
export const availableWeights = (p: Prices): Weight[] => weights.filter((w) => p[w] !== undefined);

/** `price_each` … `price_ounce`: each weight's price, or null. */
export function priceFields(p: Prices) {
  return Object.fromEntries(weights.map((w) => [priceField(w), p[w] ?? null])) as Record<
    ReturnType<typeof priceField>,
    string | null
  >;
}

/**
 * The partner `menu_product` record without the product's fields (`name`, `brand`, `kind`, …) and
 * the read side's (`aggregate_rating`, `review_count`, `applicable_special_ids`); null unless listed.
 */
export function toRecord(state: MenuProductState) {
  if (!state.exists || !state.listed) return null;
  return {
    id: state.menu_product_id,
    product_id: state.product_id,
    store_id: state.store_id,
    brand_id: state.brand_id,
    available_weights: availableWeights(state.prices),
    ...priceFields(state.prices),
    in_stock: state.in_stock,
    updated_at: state.updated_at,
  };
}
export type MenuProductRecord = NonNullable<ReturnType<typeof toRecord>>;
