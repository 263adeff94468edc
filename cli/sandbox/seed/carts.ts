/**
 * The sandbox's past carts, in the order they were created: each cart's whole life (items, customer,
 * checkout, status moves, curbside arrival, abandonment) decided command by command by the cart
 * decider, with the context the platform routes would look up, and appended as one new stream.
 */
import { toNewEvents } from '../../../application/command-handler.ts';
import { ABANDONMENT_ACTOR } from '../../../dispatcher/abandonment.ts';
import * as cart from '../../../domain/cart.ts';
import { eventRegistry } from '../../../domain/index.ts';
import { lineAtPlacement } from '../../../domain/pricing.ts';
import type { Actor, NewEvent } from '../../../eventstore/port.ts';
import type { CartPlan, CartStep, SandboxData } from '../generate.ts';
import type { CatalogFacts } from './catalog.ts';
import { PLATFORM, type SeedWriter } from './writer.ts';

/** What deciding a past cart needs: where to write, the catalog, and `PDS_ABANDON_AFTER` as planned. */
interface CartContext {
  writer: SeedWriter;
  facts: CatalogFacts;
  abandonAfterMs: number;
}

export async function writeCarts(
  writer: SeedWriter,
  data: SandboxData,
  facts: CatalogFacts,
  abandonAfterMs: number,
): Promise<void> {
  writer.phase = 'carts';
  const ctx: CartContext = { writer, facts, abandonAfterMs };
  await writer.each(data.carts, (plan) => seedCart(ctx, plan));
}

/** What POST /carts/{uuid}/items puts in the command's context (platform.ts `lineFor`). */
function lineFor(facts: CatalogFacts, menuProductId: number, priceId: cart.CartLine['price_id'], at: string) {
  const listing = facts.listings.get(menuProductId);
  if (!listing) return null;
  const item = facts.products.get(listing.fields.product_id);
  if (!item) return null;
  return lineAtPlacement({
    product: { ...item, product_id: listing.fields.product_id },
    storeId: listing.store_id,
    brandName: facts.brandNames.get(item.brand_id) ?? '',
    unitPrice: listing.fields.prices[priceId] ?? null,
    specials: facts.specialsByStore.get(listing.store_id) ?? [],
    at,
  });
}

/**
 * A past cart's whole life, decided command by command by the cart decider (as the platform routes
 * would run them, one after the other) and appended in one append that requires a new stream. One
 * append, because an abandonment timer watching the store (a service running beside `pds sandbox
 * seed`) would abandon a half-written past cart at once: its first item is days old.
 */
async function seedCart(ctx: CartContext, plan: CartPlan): Promise<void> {
  const { writer } = ctx;
  const fields = cart.createCartFields.parse({ uuid: plan.uuid, ...plan.body });
  const uuid = plan.uuid.toLowerCase();
  let state = cart.decider.initialState;
  const batch: NewEvent[] = [];
  const decide = (command: cart.CartCommand, at: string, actor: Actor = PLATFORM) => {
    const decided = cart.decider.decide(command, state);
    state = decided.reduce(cart.decider.evolve, state);
    batch.push(...toNewEvents(eventRegistry, decided, writer.meta(at, actor, plan.correlation_id)));
  };
  decide(
    {
      type: 'CreateCart',
      cart_uuid: uuid,
      store_id: fields.store_id,
      source: fields.source,
      user_id: fields.user_id,
      at: plan.at,
      context: { store_exists: ctx.facts.stores.has(fields.store_id) },
    },
    plan.at,
  );
  for (const s of plan.steps) {
    const { command, actor } = stepCommand(ctx, fields.store_id, s);
    decide(command, s.at, actor);
  }
  // A cart written by an earlier, interrupted run (or a concurrent one) is left as it is.
  if (await writer.sink.create(cart.streamId(uuid), batch)) writer.events += batch.length;
  else writer.cartsSkipped += 1;
}

/** The command one step of a cart's life runs, with the context its route would look up, and its actor. */
function stepCommand(
  { facts, abandonAfterMs }: CartContext,
  storeId: number,
  s: CartStep,
): { command: cart.CartCommand; actor: Actor } {
  switch (s.type) {
    case 'add': {
      const body = cart.addCartItemFields.parse(s.body);
      const line = lineFor(facts, body.menu_product_id, body.price_id, s.at);
      return { command: { type: 'AddCartItem', ...body, at: s.at, context: { line } }, actor: PLATFORM };
    }
    case 'quantity':
      return {
        command: {
          type: 'ChangeCartItemQuantity',
          menu_product_id: s.menu_product_id,
          count: s.count,
          at: s.at,
        },
        actor: PLATFORM,
      };
    case 'remove':
      return {
        command: { type: 'RemoveCartItem', menu_product_id: s.menu_product_id, at: s.at },
        actor: PLATFORM,
      };
    case 'customer':
      return {
        command: { type: 'IdentifyCartCustomer', ...cart.cartCustomerFields.parse(s.body), at: s.at },
        actor: PLATFORM,
      };
    case 'checkout': {
      const shop = facts.stores.get(storeId);
      const store = {
        pickup: shop?.pickup ?? false,
        delivery: shop?.delivery ?? false,
        curbside_enabled: facts.curbside.get(storeId)?.enabled ?? false,
      };
      return {
        command: {
          type: 'CheckOutCart',
          ...cart.checkOutCartFields.parse(s.body),
          at: s.at,
          context: { store },
        },
        actor: PLATFORM,
      };
    }
    case 'status':
      return {
        command: { type: 'ChangeCartStatus', ...cart.changeCartStatusFields.parse(s.body), at: s.at },
        actor: PLATFORM,
      };
    case 'arrival': {
      const setting = facts.curbside.get(storeId);
      const curbside = setting
        ? { enabled: setting.enabled, arrival_form_fields: setting.arrival_form_fields }
        : null;
      return {
        command: {
          type: 'PostCurbsideArrival',
          arrival_id: s.arrival_id,
          fields: cart.curbsideArrivalFields.parse(s.fields),
          at: s.at,
          context: { curbside },
        },
        actor: { type: 'partner', id: s.partner_id },
      };
    }
    case 'abandon':
      return {
        command: { type: 'AbandonCart', at: s.at, abandon_after_ms: abandonAfterMs },
        actor: ABANDONMENT_ACTOR,
      };
  }
}
