/**
 * Platform write side (`/platform/v1`, operator token): the retail platform's own commands —
 * catalog upserts and the cart lifecycle. Every route validates its body with the aggregate's zod
 * schema (unknown fields refused), looks up the facts the decider needs in other streams, and answers
 * with the resource, the stream's new revision (also as ETag) and the global position.
 */
import { randomUUID } from 'node:crypto';
import type Router from '@koa/router';
import type { Next } from 'koa';
import { z } from 'zod';
import type { CommandHandler, CommandResult } from '../application/command-handler.ts';
import type { Lookups } from '../application/lookups.ts';
import type { OperatorAuthenticator } from '../application/operator-principal.ts';
import type { StoreSpecials } from '../application/store-specials.ts';
import * as brand from '../domain/brand.ts';
import * as cart from '../domain/cart.ts';
import type { Clock } from '../domain/clock.ts';
import type { Decider, DomainEvent } from '../domain/decider.ts';
import * as menuProduct from '../domain/menu-product.ts';
import { lineAtPlacement } from '../domain/pricing.ts';
import * as product from '../domain/product.ts';
import * as review from '../domain/review.ts';
import type { Weight } from '../domain/schemas.ts';
import * as special from '../domain/special.ts';
import * as store from '../domain/store.ts';
import type { Actor, EventStore } from '../eventstore/port.ts';
import {
  type AppContext,
  type AppState,
  createRouter,
  HttpProblem,
  securityHeaders,
  useEach,
} from './http.ts';
import { idempotency } from './idempotency.ts';
import { operatorAuth, operatorOf, personalKeySpace } from './operator-auth.ts';
import { requireRole } from './route-roles.ts';
import { ifMatch, parseBody, parseParams, pathId, pathUuid } from './validation.ts';
import { answerWrite, commandMetadata, jsonBody, writeErrors } from './write-support.ts';

export const PLATFORM_BASE = '/platform/v1';

/** The platform's writes are the platform's, made with an operator account's token: the actor names it. */
const platformActor = (ctx: AppContext): Actor => ({ type: 'platform', id: operatorOf(ctx).operator_id });

export interface PlatformDeps {
  store: EventStore;
  commands: CommandHandler;
  specials: StoreSpecials;
  /** The menu product, product, brand and store a command looks up, kept folded. */
  lookups: Lookups;
  clock: Clock;
  /** Who the bearer of an operator token is (docs/operations.md, "Accounts and roles"). */
  operators: OperatorAuthenticator;
  /** How long a special's write waits for this process's pricing to apply it (5 s). */
  specialsWaitMs?: number;
  /** How long an `Idempotency-Key` binds its request and answer (`PDS_IDEMPOTENCY_TTL`; 24 hours when left out). */
  idempotencyTtlMs?: number;
  /**
   * Whether the lookups and the specials have been built (docs/operations.md, "Health"); until then
   * every write answers 503. Built when left out.
   */
  writeSideBuilt?: () => boolean;
}

/** Seconds a client waits before it asks again whether this replica's pricing applies a special. */
const PRICING_RETRY_AFTER_SECONDS = 5;
/** Seconds a client waits before it writes again to a replica whose write side is not built yet. */
const WRITE_SIDE_RETRY_AFTER_SECONDS = 5;

/**
 * Refuses every write until the lookups and the store specials are built: a line priced before the
 * specials are would be priced without them, and until then the event store has not answered this
 * replica (docs/operations.md, "Health").
 */
function writeSideBuilt(built: () => boolean) {
  return async function whenBuilt(_ctx: AppContext, next: Next): Promise<void> {
    if (!built()) {
      throw new HttpProblem(503, {
        code: 'write_side_starting',
        detail:
          'this replica has not built its lookups and store specials yet (the event store has not answered ' +
          'since it started); retry after Retry-After seconds',
        headers: { 'Retry-After': String(WRITE_SIDE_RETRY_AFTER_SECONDS) },
      });
    }
    await next();
  };
}

const idParams = z.object({ id: pathId });
const menuProductParams = z.object({ store_id: pathId, id: pathId });
const cartParams = z.object({ uuid: pathUuid });
const cartLineParams = z.object({ uuid: pathUuid, menu_product_id: pathId });

export function createPlatformRouter(deps: PlatformDeps): Router<AppState> {
  const router = createRouter({ prefix: PLATFORM_BASE });
  useEach(
    router,
    securityHeaders,
    operatorAuth(deps.operators),
    requireRole(router),
    writeErrors,
    writeSideBuilt(deps.writeSideBuilt ?? (() => true)),
    jsonBody(),
    idempotency({
      store: deps.store,
      clock: deps.clock,
      ttlMs: deps.idempotencyTtlMs,
      scopeOf: personalKeySpace('platform'),
      actorOf: platformActor,
    }),
  );
  const writes = platformWrites(deps);
  storeRoutes(router, writes);
  catalogRoutes(router, writes);
  cartRoutes(router, writes);
  return router;
}

type PlatformWrites = ReturnType<typeof platformWrites>;

/** What every platform write shares: the command run with the request's metadata, and lookups. */
function platformWrites(deps: PlatformDeps) {
  const { commands, specials, lookups, clock } = deps;
  const now = () => clock.now().toISOString();

  /** Runs a command on one stream with the request's metadata and `If-Match`. */
  async function run<C, E extends DomainEvent, S>(
    ctx: AppContext,
    streamId: string,
    decider: Decider<C, E, S>,
    command: C,
  ): Promise<CommandResult<S, E>> {
    const result = await commands.handle(
      streamId,
      decider,
      command,
      commandMetadata(ctx, platformActor(ctx), clock),
      {
        ifMatch: ifMatch(ctx),
      },
    );
    if (result.events.length > 0) lookups.written(streamId, result.position);
    return result;
  }

  const exists = async (streamId: string, decider: Decider<never, DomainEvent, { exists: boolean }>) =>
    (await lookups.load(streamId, decider)).exists;
  const storeExists = (id: number) => exists(store.streamId(id), store.decider as never);

  /** 201 when this write created the resource, 200 otherwise. */
  const createdOr200 = (result: { events: unknown[]; revision: number }) =>
    result.events.length > 0 && result.revision + 1 === result.events.length ? 201 : 200;

  /**
   * Waits until this process's pricing applies the special written at `result` (docs/write-side.md,
   * "Lookups"). Its follower may be behind or down (just after an EventStoreDB restart it waits for its
   * pause, up to 30 s): the write stands, and the answer is a 503 that says so, never a 500.
   */
  async function pricingApplies(id: number, result: { revision: number; position: number }): Promise<void> {
    try {
      await specials.waitFor(result.position, deps.specialsWaitMs);
    } catch {
      throw new HttpProblem(503, {
        code: 'pricing_catching_up',
        detail:
          `special ${id} was written (revision ${result.revision}, position ${result.position}), but pricing ` +
          'on this replica has not caught up with it yet, so items placed here meanwhile may be priced ' +
          'without it; retry the request (it writes nothing again) to learn when it applies',
        headers: { 'Retry-After': String(PRICING_RETRY_AFTER_SECONDS) },
        extensions: { revision: result.revision, position: result.position },
      });
    }
  }

  return { run, now, exists, storeExists, createdOr200, commands, specials, lookups, pricingApplies };
}

/** Stores and their curbside pickup settings. */
function storeRoutes(router: Router<AppState>, writes: PlatformWrites): void {
  const { run, now, createdOr200 } = writes;

  router.put('/stores/:id', async (ctx) => {
    const { id } = parseParams(ctx.params, idParams, 404);
    const fields = parseBody(ctx, store.storeFields);
    const result = await run(ctx, store.streamId(id), store.decider, {
      type: 'UpsertStore',
      store_id: id,
      fields,
      at: now(),
    });
    answerWrite(ctx, createdOr200(result), { store: store.toRecord(result.state) }, result);
  });

  router.put('/stores/:id/curbside_pickup_setting', async (ctx) => {
    const { id } = parseParams(ctx.params, idParams, 404);
    const fields = parseBody(ctx, store.curbsidePickupSettingFields);
    const result = await run(ctx, store.streamId(id), store.decider, {
      type: 'SetCurbsidePickupSetting',
      store_id: id,
      fields,
      at: now(),
    });
    answerWrite(
      ctx,
      200,
      { curbside_pickup_setting: store.toCurbsidePickupSettingRecord(result.state) },
      result,
    );
  });
}

/** Brands, products, menu products, reviews and specials. */
function catalogRoutes(router: Router<AppState>, writes: PlatformWrites): void {
  const { run, now, exists, storeExists, createdOr200, commands, pricingApplies } = writes;
  router.put('/brands/:id', async (ctx) => {
    const { id } = parseParams(ctx.params, idParams, 404);
    const fields = parseBody(ctx, brand.brandFields);
    const result = await run(ctx, brand.streamId(id), brand.decider, {
      type: 'UpsertBrand',
      brand_id: id,
      fields,
      at: now(),
    });
    answerWrite(ctx, createdOr200(result), { brand: brand.toRecord(result.state) }, result);
  });

  router.put('/products/:id', async (ctx) => {
    const { id } = parseParams(ctx.params, idParams, 404);
    const fields = parseBody(ctx, product.productFields);
    const brandExists = await exists(brand.streamId(fields.brand_id), brand.decider as never);
    const result = await run(ctx, product.streamId(id), product.decider, {
      type: 'UpsertProduct',
      product_id: id,
      fields,
      brand_exists: brandExists,
      at: now(),
    });
    answerWrite(ctx, createdOr200(result), { product: product.toRecord(result.state) }, result);
  });

  router.put('/stores/:store_id/menu_products/:id', async (ctx) => {
    const { store_id, id } = parseParams(ctx.params, menuProductParams, 404);
    const fields = parseBody(ctx, menuProduct.menuProductFields);
    const listedProduct = (await commands.load(product.streamId(fields.product_id), product.decider)).state;
    const result = await run(ctx, menuProduct.streamId(id), menuProduct.decider, {
      type: 'ListMenuProduct',
      menu_product_id: id,
      store_id,
      fields,
      store_exists: await storeExists(store_id),
      product: listedProduct.exists
        ? { product_id: listedProduct.product_id, brand_id: listedProduct.brand_id }
        : null,
      at: now(),
    });
    answerWrite(ctx, createdOr200(result), { menu_product: menuProduct.toRecord(result.state) }, result);
  });

  router.delete('/stores/:store_id/menu_products/:id', async (ctx) => {
    const { store_id, id } = parseParams(ctx.params, menuProductParams, 404);
    const result = await run(ctx, menuProduct.streamId(id), menuProduct.decider, {
      type: 'DelistMenuProduct',
      menu_product_id: id,
      store_id,
      at: now(),
    });
    answerWrite(ctx, 200, { menu_product: { id, store_id, listed: false } }, result);
  });

  router.put('/reviews/:id', async (ctx) => {
    const { id } = parseParams(ctx.params, idParams, 404);
    const fields = parseBody(ctx, review.reviewFields);
    const reviewed = (await commands.load(product.streamId(fields.product_id), product.decider)).state;
    const result = await run(ctx, review.streamId(id), review.decider, {
      type: 'PostReview',
      review_id: id,
      fields,
      product: reviewed.exists ? { brand_id: reviewed.brand_id } : null,
      store_exists: await storeExists(fields.store_id),
      at: now(),
    });
    answerWrite(ctx, createdOr200(result), { review: review.toRecord(result.state) }, result);
  });

  router.put('/specials/:id', async (ctx) => {
    const { id } = parseParams(ctx.params, idParams, 404);
    const fields = parseBody(ctx, special.specialFields);
    const result = await run(ctx, special.streamId(id), special.decider, {
      type: 'UpsertSpecial',
      special_id: id,
      fields,
      store_exists: await storeExists(fields.store_id),
      at: now(),
    });
    // Items placed after this answer are priced with this special.
    await pricingApplies(id, result);
    answerWrite(ctx, createdOr200(result), { special: special.toRecord(result.state) }, result);
  });
}

/** The cart lifecycle: create, lines, customer, checkout, status. */
function cartRoutes(router: Router<AppState>, writes: PlatformWrites): void {
  const { run, now, storeExists, commands, specials, lookups } = writes;

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

  async function runCart(
    ctx: AppContext,
    uuid: string,
    command: cart.CartCommand,
    status = 200,
  ): Promise<void> {
    const result = await run(ctx, cart.streamId(uuid), cart.decider, command);
    if (!result.state.exists)
      throw new HttpProblem(404, { code: 'cart_not_found', detail: `no cart ${uuid}` });
    answerWrite(ctx, status, await cartBody(result), result);
  }

  router.post('/carts', async (ctx) => {
    const fields = parseBody(ctx, cart.createCartFields);
    // One cart per uuid whatever its letter case: stream ids are case-sensitive.
    const uuid = fields.uuid?.toLowerCase() ?? randomUUID();
    ctx.set('Location', `${PLATFORM_BASE}/carts/${uuid}`);
    await runCart(
      ctx,
      uuid,
      {
        type: 'CreateCart',
        cart_uuid: uuid,
        store_id: fields.store_id,
        source: fields.source,
        user_id: fields.user_id,
        at: now(),
        context: { store_exists: await storeExists(fields.store_id) },
      },
      201,
    );
  });

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

  router.post('/carts/:uuid/items', async (ctx) => {
    const { uuid } = parseParams(ctx.params, cartParams, 404);
    const fields = parseBody(ctx, cart.addCartItemFields);
    const at = now();
    await runCart(ctx, uuid, {
      type: 'AddCartItem',
      ...fields,
      at,
      context: { line: await lineFor(fields.menu_product_id, fields.price_id, at) },
    });
  });

  router.patch('/carts/:uuid/items/:menu_product_id', async (ctx) => {
    const { uuid, menu_product_id } = parseParams(ctx.params, cartLineParams, 404);
    const { count } = parseBody(ctx, cart.changeCartItemQuantityFields);
    await runCart(ctx, uuid, { type: 'ChangeCartItemQuantity', menu_product_id, count, at: now() });
  });

  router.delete('/carts/:uuid/items/:menu_product_id', async (ctx) => {
    const { uuid, menu_product_id } = parseParams(ctx.params, cartLineParams, 404);
    await runCart(ctx, uuid, { type: 'RemoveCartItem', menu_product_id, at: now() });
  });

  router.put('/carts/:uuid/customer', async (ctx) => {
    const { uuid } = parseParams(ctx.params, cartParams, 404);
    const fields = parseBody(ctx, cart.cartCustomerFields);
    await runCart(ctx, uuid, { type: 'IdentifyCartCustomer', ...fields, at: now() });
  });

  router.post('/carts/:uuid/checkout', async (ctx) => {
    const { uuid } = parseParams(ctx.params, cartParams, 404);
    const fields = parseBody(ctx, cart.checkOutCartFields);
    const current = (await commands.load(cart.streamId(uuid), cart.decider)).state;
    const shop = current.exists
      ? await lookups.load(store.streamId(current.store_id), store.decider)
      : undefined;
    await runCart(ctx, uuid, {
      type: 'CheckOutCart',
      ...fields,
      at: now(),
      context: {
        store: shop?.exists
          ? { pickup: shop.pickup, delivery: shop.delivery, curbside_enabled: store.curbsideEnabled(shop) }
          : { pickup: false, delivery: false, curbside_enabled: false },
      },
    });
  });

  router.post('/carts/:uuid/status', async (ctx) => {
    const { uuid } = parseParams(ctx.params, cartParams, 404);
    const fields = parseBody(ctx, cart.changeCartStatusFields);
    await runCart(ctx, uuid, { type: 'ChangeCartStatus', ...fields, at: now() });
  });
}
