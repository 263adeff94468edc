/**
 * The platform's cart lifecycle (docs/write-side.md): create a cart, add, change and remove its lines,
 * identify the customer, check out, move its status. Each answers with the cart as partners see it
 * (docs/partner-api.md, "Records"): its id is the global position of the cart's first event.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { CommandResult } from '../application/command-handler.ts';
import * as brand from '../domain/brand.ts';
import * as cart from '../domain/cart.ts';
import * as menuProduct from '../domain/menu-product.ts';
import { lineAtPlacement } from '../domain/pricing.ts';
import * as product from '../domain/product.ts';
import type { Weight } from '../domain/schemas.ts';
import * as store from '../domain/store.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import { type AppContext, HttpProblem } from './http.ts';
import { cartWritten } from './platform-records.ts';
import { PLATFORM_BASE, type PlatformWrites } from './platform-writes.ts';
import { pathId, pathUuid } from './validation.ts';
import { answerWrite } from './write-support.ts';

const cartParams = z.object({ uuid: pathUuid });
const cartLineParams = z.object({ uuid: pathUuid, menu_product_id: pathId });
const cartAnswer = { status: 200, description: 'The cart as it is now.', schema: cartWritten };

/** The routes of a cart and its lines. */
export function cartRoutes(writes: PlatformWrites): AdminRoute[] {
  const { run, now, storeExists, specials, lookups } = writes;

  /** The cart record of docs/partner-api.md: id is the global position of the cart's first event. */
  async function cartBody(result: CommandResult<cart.CartState, cart.CartEvent>) {
    const state = result.state;
    if (!state.exists) throw new Error('cart command left no cart');
    const storeState = await lookups.load(store.streamId(state.store_id), store.decider);
    return {
      cart: cart.toPartnerCart(state, {
        id: result.firstPosition,
        store_name: storeState.exists ? storeState.name : '',
      }),
    };
  }

  async function runCart(ctx: AppContext, uuid: string, command: cart.CartCommand, status = 200) {
    const result = await run(ctx, cart.streamId(uuid), cart.decider, command);
    if (!result.state.exists)
      throw new HttpProblem(404, { code: 'cart_not_found', detail: `no cart ${uuid}` });
    answerWrite(ctx, status, await cartBody(result), result);
  }

  /** What a line placed now looks like: the menu product's current price, after today's specials. */
  async function lineFor(menuProductId: number, priceId: Weight, at: string) {
    const listing = await lookups.load(menuProduct.streamId(menuProductId), menuProduct.decider);
    if (!listing.exists || !listing.listed) return null;
    const item = await lookups.load(product.streamId(listing.product_id), product.decider);
    if (!item.exists) return null;
    const maker = await lookups.load(brand.streamId(item.brand_id), brand.decider);
    return lineAtPlacement({
      product: item,
      storeId: listing.store_id,
      brandName: maker.exists ? maker.name : '',
      unitPrice: menuProduct.priceOf(listing, priceId),
      specials: specials.ofStore(listing.store_id),
      at,
    });
  }

  const create = adminRoute({
    method: 'post',
    path: '/carts',
    operationId: 'createCart',
    summary: 'Open a cart at a store',
    description:
      'With a `uuid` of your own (one cart per uuid, whatever its letter case: 409 `cart_exists`) or one ' +
      'the service picks. The store must exist (422 `unknown_store_id`).',
    body: cart.createCartFields,
    ifMatch: true,
    response: {
      status: 201,
      description: 'The new cart.',
      schema: cartWritten,
      headers: { Location: { description: `\`${PLATFORM_BASE}/carts/{uuid}\`.`, required: true } },
    },
    problems: [409],
    async handler(ctx, { body }) {
      // One cart per uuid whatever its letter case: stream ids are case-sensitive.
      const uuid = body.uuid?.toLowerCase() ?? randomUUID();
      ctx.set('Location', `${PLATFORM_BASE}/carts/${uuid}`);
      const { store_id, source, user_id } = body;
      const context = { store_exists: await storeExists(store_id) };
      const at = now();
      await runCart(
        ctx,
        uuid,
        { type: 'CreateCart', cart_uuid: uuid, store_id, source, user_id, at, context },
        201,
      );
    },
  });

  const addItem = adminRoute({
    method: 'post',
    path: '/carts/{uuid}/items',
    operationId: 'addCartItem',
    summary: 'Add units of a menu product to a cart',
    description:
      "Priced now, at the menu product's price after the store's specials; a line already in the cart " +
      'grows. 409 once the cart is checked out.',
    params: cartParams,
    body: cart.addCartItemFields,
    ifMatch: true,
    response: cartAnswer,
    problems: [409],
    async handler(ctx, { params, body }) {
      const at = now();
      const line = await lineFor(body.menu_product_id, body.price_id, at);
      await runCart(ctx, params.uuid, { type: 'AddCartItem', ...body, at, context: { line } });
    },
  });

  const changeItem = adminRoute({
    method: 'patch',
    path: '/carts/{uuid}/items/{menu_product_id}',
    operationId: 'changeCartItemQuantity',
    summary: "Change a line's count",
    description: 'A count of 0 removes the line. 409 once the cart is checked out.',
    params: cartLineParams,
    body: cart.changeCartItemQuantityFields,
    ifMatch: true,
    response: cartAnswer,
    problems: [409],
    async handler(ctx, { params, body }) {
      const { uuid, menu_product_id } = params;
      await runCart(ctx, uuid, {
        type: 'ChangeCartItemQuantity',
        menu_product_id,
        count: body.count,
        at: now(),
      });
    },
  });

  const removeItem = adminRoute({
    method: 'delete',
    path: '/carts/{uuid}/items/{menu_product_id}',
    operationId: 'removeCartItem',
    summary: 'Remove a line',
    description: '409 once the cart is checked out.',
    params: cartLineParams,
    ifMatch: true,
    response: cartAnswer,
    problems: [409],
    async handler(ctx, { params }) {
      const { uuid, menu_product_id } = params;
      await runCart(ctx, uuid, { type: 'RemoveCartItem', menu_product_id, at: now() });
    },
  });

  return [create, addItem, changeItem, removeItem, ...lifecycleRoutes(writes, runCart)];
}

/** The customer, checkout and status moves (docs/write-side.md). */
function lifecycleRoutes(
  { commands, lookups, now }: PlatformWrites,
  runCart: (ctx: AppContext, uuid: string, command: cart.CartCommand) => Promise<void>,
): AdminRoute[] {
  const customer = adminRoute({
    method: 'put',
    path: '/carts/{uuid}/customer',
    operationId: 'identifyCartCustomer',
    summary: "Set the cart's customer",
    params: cartParams,
    body: cart.cartCustomerFields,
    ifMatch: true,
    response: cartAnswer,
    problems: [409],
    async handler(ctx, { params, body }) {
      await runCart(ctx, params.uuid, { type: 'IdentifyCartCustomer', ...body, at: now() });
    },
  });

  const checkout = adminRoute({
    method: 'post',
    path: '/carts/{uuid}/checkout',
    operationId: 'checkOutCart',
    summary: 'Check a cart out: a reservation for pickup, delivery or curbside',
    description:
      'The store must offer the reservation mode; an empty cart cannot be checked out (409 `cart_empty`).',
    params: cartParams,
    body: cart.checkOutCartFields,
    ifMatch: true,
    response: cartAnswer,
    problems: [409],
    async handler(ctx, { params, body }) {
      const current = (await commands.load(cart.streamId(params.uuid), cart.decider)).state;
      const shop = current.exists
        ? await lookups.load(store.streamId(current.store_id), store.decider)
        : undefined;
      const offers = shop?.exists
        ? { pickup: shop.pickup, delivery: shop.delivery, curbside_enabled: store.curbsideEnabled(shop) }
        : { pickup: false, delivery: false, curbside_enabled: false };
      await runCart(ctx, params.uuid, {
        type: 'CheckOutCart',
        ...body,
        at: now(),
        context: { store: offers },
      });
    },
  });

  const status = adminRoute({
    method: 'post',
    path: '/carts/{uuid}/status',
    operationId: 'changeCartStatus',
    summary: "Move a checked-out cart's status",
    description:
      'Along the status table of docs/write-side.md (409 `invalid_status_move` otherwise); each move ' +
      'sends `cart_status_updated` to the subscribed webhooks.',
    params: cartParams,
    body: cart.changeCartStatusFields,
    ifMatch: true,
    response: cartAnswer,
    problems: [409],
    async handler(ctx, { params, body }) {
      await runCart(ctx, params.uuid, { type: 'ChangeCartStatus', ...body, at: now() });
    },
  });
  return [customer, checkout, status];
}
