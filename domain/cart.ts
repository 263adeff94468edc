/**
 * Cart aggregate (`cart-<uuid>`): the open cart and its lines, the customer, checkout, the status
 * table of docs/write-side.md, abandonment (docs/write-side.md, "Abandonment") and curbside arrivals
 * (docs/partner-api.md). Its parts are in `domain/cart/`: the vocabulary, the commands and events, the
 * state and `evolve`, `decide` (one named function per command), and the records it renders.
 *
 * Pure: no I/O and no clock. Times come in each command as `at`; facts the command handler reads from
 * other streams (the store, the menu product with its product, brand and specials, the curbside
 * setting) come in the command's `context`.
 */
import type { CartCommand } from './cart/commands.ts';
import { decide } from './cart/decide.ts';
import type { CartEvent } from './cart/events.ts';
import { type CartState, evolve } from './cart/state.ts';
import type { Decider } from './decider.ts';

export * from './cart/changes.ts';
export * from './cart/commands.ts';
export * from './cart/events.ts';
export * from './cart/records.ts';
export * from './cart/state.ts';
export * from './cart/vocabulary.ts';

export const decider: Decider<CartCommand, CartEvent, CartState> = {
  initialState: { exists: false },
  decide,
  evolve,
};
