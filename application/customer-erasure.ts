/**
 * Erasing a customer (docs/operations.md, "Customer data"): the keys of the carts the targets name
 * (`CustomerData.resolve`) are found, the erasure is recorded in the key store, the keys are replaced
 * by tombstones naming it, and each cart records `CartCustomerErased`, which holds no personal data
 * and makes the read models forget the customer. An erasure interrupted after its record is completed
 * at the next start of the service, or by the next erasure (`finishPendingErasures`): its keys are
 * destroyed again (a no-op) and its carts recorded. So is one whose key store could not yet wipe the
 * keys from its files (a reader held `keys.db`'s WAL): its data reads as erased already, and the
 * erasure stays pending until a later attempt wipes them. A pending erasure that fails again is
 * reported and left for later: it never stops a new one.
 */
import { randomUUID } from 'node:crypto';
import * as cart from '../domain/cart.ts';
import { DomainError } from '../domain/decider.ts';
import type { CommandHandler, CommandMetadata } from './command-handler.ts';
import type { CustomerData } from './customer-data.ts';
import type { CustomerErasure } from './customer-keys.ts';

export interface ErasureOutcome {
  /** null when the target names no customer or cart the service holds: nothing to erase. */
  erasure_id: string | null;
  keys_destroyed: number;
  carts: string[];
  /**
   * false when the keys are destroyed (their data reads as erased) but a copy may still be in the key
   * store's files: the erasure is pending, finished by the next erasure or the next start.
   */
  finished: boolean;
}

/** Told of a pending erasure that could not be finished (it stays pending). */
export type PendingErasureFailure = (erasureId: string, error: unknown) => void;

async function complete(
  data: CustomerData,
  commands: CommandHandler,
  erasure: CustomerErasure,
  metadata: CommandMetadata,
): Promise<{ carts: string[]; finished: boolean }> {
  const { wiped } = await data.keys.destroyKeys(erasure.key_ids, {
    erasure_id: erasure.erasure_id,
    erased_at: erasure.requested_at,
  });
  const recorded: string[] = [];
  for (const uuid of erasure.cart_uuids) {
    try {
      const result = await commands.handle(
        cart.streamId(uuid),
        cart.decider,
        { type: 'EraseCartCustomer', erasure_id: erasure.erasure_id, at: metadata.at },
        metadata,
      );
      if (result.events.length > 0) recorded.push(uuid);
    } catch (error) {
      // A uuid named directly may belong to no cart: there is nothing of it to record.
      if (!(error instanceof DomainError && error.code === 'cart_not_found')) throw error;
    }
  }
  if (wiped) await data.keys.finishErasure(erasure.erasure_id);
  return { carts: recorded, finished: wiped };
}

/** Whether any of these carts holds a customer an erasure would record as erased on it. */
async function anyCartHolds(
  commands: CommandHandler,
  uuids: readonly string[],
  at: string,
): Promise<boolean> {
  for (const uuid of uuids) {
    const { state } = await commands.load(cart.streamId(uuid), cart.decider);
    try {
      const erase = { type: 'EraseCartCustomer' as const, erasure_id: randomUUID(), at };
      if (cart.decider.decide(erase, state).length > 0) return true;
    } catch (error) {
      if (!(error instanceof DomainError && error.code === 'cart_not_found')) throw error;
    }
  }
  return false;
}

/**
 * Completes erasures an earlier run began and did not finish; returns how many it finished. One that
 * fails, or whose keys are not yet wiped from the key store's files, stays pending (`onFailure` is
 * told of a failure) and the others are tried all the same.
 */
export async function finishPendingErasures(
  data: CustomerData,
  commands: CommandHandler,
  metadata: CommandMetadata,
  onFailure?: PendingErasureFailure,
): Promise<number> {
  let finished = 0;
  for (const erasure of await data.keys.pendingErasures()) {
    try {
      if ((await complete(data, commands, erasure, metadata)).finished) finished += 1;
    } catch (error) {
      if (!onFailure) throw error;
      onFailure(erasure.erasure_id, error);
    }
  }
  return finished;
}

/**
 * Erases what the targets name, each a user id, an email address or a cart uuid, in one erasure: a
 * request naming a customer by both their user id and their email gives both.
 */
export async function eraseCustomer(
  data: CustomerData,
  commands: CommandHandler,
  target: string | readonly string[],
  metadata: CommandMetadata,
  onPendingFailure: PendingErasureFailure = () => {},
): Promise<ErasureOutcome> {
  // An earlier erasure that still fails is reported and left pending: it does not stop this one.
  await finishPendingErasures(data, commands, metadata, onPendingFailure);
  const found = await data.resolve(target);
  // Nothing to erase records nothing (no ledger line, no erasure in the key store): no key, and no
  // cart named that holds a customer (a uuid of no cart, a cart erased before).
  if (found.key_ids.length === 0 && !(await anyCartHolds(commands, found.cart_uuids, metadata.at))) {
    return { erasure_id: null, keys_destroyed: 0, carts: [], finished: true };
  }
  const erasure: CustomerErasure = {
    erasure_id: randomUUID(),
    key_ids: found.key_ids,
    cart_uuids: found.cart_uuids,
    requested_at: metadata.at,
  };
  await data.keys.beginErasure(erasure);
  const { carts, finished } = await complete(data, commands, erasure, metadata);
  // A cart named directly that holds nothing (erased before) records nothing: nothing was erased.
  if (erasure.key_ids.length === 0 && carts.length === 0)
    return { erasure_id: null, keys_destroyed: 0, carts, finished };
  return { erasure_id: erasure.erasure_id, keys_destroyed: erasure.key_ids.length, carts, finished };
}
