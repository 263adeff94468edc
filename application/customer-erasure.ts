/**
 * Erasing a customer (docs/operations.md, "Customer data"): the keys of the carts the targets name
 * (`CustomerData.resolve`) are found, the erasure is recorded in the key store, the keys are replaced
 * by tombstones naming it, and each cart records `CartCustomerErased`, which holds no personal data
 * and makes the read models forget the customer. An erasure interrupted after its record is completed
 * at the next start of the service, or by the next erasure (`finishPendingErasures`): its keys are
 * destroyed again (a no-op) and its carts recorded.
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
}

async function complete(
  data: CustomerData,
  commands: CommandHandler,
  erasure: CustomerErasure,
  metadata: CommandMetadata,
): Promise<string[]> {
  await data.keys.destroyKeys(erasure.key_ids, {
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
  await data.keys.finishErasure(erasure.erasure_id);
  return recorded;
}

/** Completes erasures an earlier run began and did not finish; returns how many. */
export async function finishPendingErasures(
  data: CustomerData,
  commands: CommandHandler,
  metadata: CommandMetadata,
): Promise<number> {
  const pending = await data.keys.pendingErasures();
  for (const erasure of pending) await complete(data, commands, erasure, metadata);
  return pending.length;
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
): Promise<ErasureOutcome> {
  await finishPendingErasures(data, commands, metadata);
  const found = await data.resolve(target);
  if (found.key_ids.length === 0 && found.cart_uuids.length === 0) {
    return { erasure_id: null, keys_destroyed: 0, carts: [] };
  }
  const erasure: CustomerErasure = {
    erasure_id: randomUUID(),
    key_ids: found.key_ids,
    cart_uuids: found.cart_uuids,
    requested_at: metadata.at,
  };
  await data.keys.beginErasure(erasure);
  const carts = await complete(data, commands, erasure, metadata);
  // A cart named directly that holds nothing (erased before) records nothing: nothing was erased.
  if (erasure.key_ids.length === 0 && carts.length === 0)
    return { erasure_id: null, keys_destroyed: 0, carts };
  return { erasure_id: erasure.erasure_id, keys_destroyed: erasure.key_ids.length, carts };
}
