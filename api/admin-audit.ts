/**
 * A cart's audit (docs/write-side.md, "Auditors"), on the admin router:
 *
 * - `GET /carts/{uuid}/history` → 200 {cart_uuid, events}: every event of the cart's stream, in
 *   order, from the event store (the source of truth): type, revision, global position, times,
 *   actor (with the person's name), correlation and causation ids, schema version, data, and
 *   `changes`, what it changed in the cart (`domain/cart/changes.ts`). 404 `cart_not_found`. The
 *   history holds the customer's personal data, so each answered read is recorded first, as
 *   `CartHistoryViewed` with the reader as actor (`domain/operator-activity.ts`); who read it is
 *   `GET /carts/{uuid}/views` (`admin-cart-views.ts`).
 * - `GET /carts/{uuid}/webhooks?limit=&cursor=` → 200 {cart_uuid, deliveries, next_cursor, pruned_before}: the
 *   webhook deliveries the cart's events produced, to every subscription, oldest first, each with its
 *   `source_event_id` (the event it stands for), status and every attempt; from the
 *   `webhook_deliveries` read model, so a delivery scheduled a moment ago may not be listed yet.
 *   `limit` 1–500 (default 100); `cursor` as for a subscription's deliveries. 404 `cart_not_found`.
 */
import { z } from 'zod';
import { appendRetrying, toNewEvents } from '../application/command-handler.ts';
import { domainEventOf } from '../application/read-state.ts';
import * as cart from '../domain/cart.ts';
import type { Clock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import { cartHistoryViewed, cartViewsStreamId } from '../domain/operator-activity.ts';
import { type Actor, type EventStore, StreamNotFoundError } from '../eventstore/port.ts';
import {
  deliveriesOfCart,
  toDeliveryRecord,
  WEBHOOK_DELIVERIES,
  type WebhookDeliveryDoc,
} from '../projections/read-models/webhook-deliveries.ts';
import { finishedBefore, prunedBefore } from '../projections/read-models/webhook-retention.ts';
import type { Collection, ReadStore } from '../projections/read-store.ts';
import { withQueuePlaces } from './admin-delivery-queue.ts';
import { cartDeliveries, cartHistory as cartHistoryAnswer } from './admin-records.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import { ADMIN_BASE } from './admin-support.ts';
import { decodeCursor, encodeCursor } from './admin-webhook-deliveries.ts';
import { type AppContext, HttpProblem } from './http.ts';
import { requestActor } from './operator-auth.ts';
import { actorNamer, type NamedActor, withRequesterNames } from './operator-names.ts';
import { pathUuid } from './validation.ts';
import { commandMetadata } from './write-support.ts';

/** One event of a cart's history, as auditors read it. */
export interface HistoryEntry {
  revision: number;
  position: number;
  type: string;
  event_id: string;
  occurred_at: string;
  recorded_at: string;
  /** Who caused it, with the person's name where it was a person. */
  actor: NamedActor;
  correlation_id: string;
  causation_id: string | null;
  schema_version: number;
  data: unknown;
  /** What the event changed in the cart. */
  changes: cart.CartChange[];
}

/** An entry as the store has it: the actor without a name. */
type StoredEntry = Omit<HistoryEntry, 'actor'> & { actor: Actor };

/** Every event of a cart's stream, in order, with what each changed; undefined when the cart does not exist. */
export async function cartHistory(store: EventStore, uuid: string): Promise<StoredEntry[] | undefined> {
  let events: Awaited<ReturnType<EventStore['readStream']>>;
  try {
    events = await store.readStream(cart.streamId(uuid));
  } catch (err) {
    if (err instanceof StreamNotFoundError) return undefined;
    throw err;
  }
  let state: cart.CartState = cart.decider.initialState;
  return events.map((e) => {
    const before = state;
    state = cart.decider.evolve(state, domainEventOf<cart.CartEvent>(eventRegistry, e));
    return {
      revision: e.revision,
      position: e.position,
      type: e.type,
      event_id: e.id,
      occurred_at: e.metadata.occurred_at,
      recorded_at: e.recordedAt,
      actor: e.metadata.actor,
      correlation_id: e.metadata.correlation_id,
      causation_id: e.metadata.causation_id,
      schema_version: e.metadata.schema_version,
      data: e.data,
      changes: cart.cartChanges(before, state),
    };
  });
}

const cartParams = z.object({ uuid: pathUuid });
// Strict: a misspelt parameter is a 400, not silently ignored.
const webhooksQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z.string().max(300).optional(),
});

/** A cart's audit: its history (each read on record) and the webhook deliveries its events produced. */
export function auditRoutes(deps: {
  store: EventStore;
  readStore: ReadStore;
  clock: Clock;
  webhooks?: { deliveryLogRetentionMs?: number };
}): AdminRoute[] {
  const { store, readStore, clock } = deps;
  const retentionMs = deps.webhooks?.deliveryLogRetentionMs;
  const named = actorNamer(readStore);
  /** The reader, on record before the history leaves: no unrecorded look at a customer's data. */
  const recordView = async (ctx: AppContext, uuid: string) => {
    const metadata = commandMetadata(ctx, requestActor(ctx), clock);
    const events = toNewEvents(eventRegistry, [cartHistoryViewed(uuid, metadata.at)], metadata);
    await appendRetrying(store, cartViewsStreamId(uuid), events, { expectedRevision: 'any' });
  };
  const notFound = (uuid: string) =>
    new HttpProblem(404, { code: 'cart_not_found', detail: `no cart ${uuid}` });
  let collection: Collection<WebhookDeliveryDoc> | undefined;
  const deliveries = async () => {
    collection ??= await readStore.collection<WebhookDeliveryDoc>(WEBHOOK_DELIVERIES);
    return collection;
  };

  const history = adminRoute({
    method: 'get',
    path: '/carts/{uuid}/history',
    operationId: 'getCartHistory',
    summary: "A cart's history, event by event",
    description:
      "Every event of the cart's stream, in order, from the event store: who caused it (with the " +
      "person's name), its ids, its data and what it changed in the cart. It holds the customer's " +
      'personal data, so each answered read is on record first (`GET /carts/{uuid}/views`).',
    params: cartParams,
    response: { status: 200, description: "The cart's events.", schema: cartHistoryAnswer },
    problems: [404],
    async handler(ctx, { params }) {
      const { uuid } = params;
      const events = await cartHistory(store, uuid);
      if (!events) throw notFound(uuid);
      const name = await named(events.map((e) => e.actor));
      // A HEAD sends no history: nobody looked at the customer's data.
      if (ctx.method !== 'HEAD') await recordView(ctx, uuid);
      ctx.body = { cart_uuid: uuid, events: events.map((e) => ({ ...e, actor: name(e.actor) })) };
    },
  });

  const webhooks = adminRoute({
    method: 'get',
    path: '/carts/{uuid}/webhooks',
    operationId: 'listCartDeliveries',
    summary: "The webhook deliveries a cart's events produced",
    description:
      'To every subscription, oldest first, each with the event it stands for, its status and every ' +
      'attempt; from the `webhook_deliveries` read model, so one scheduled a moment ago may not be ' +
      'listed yet. Deliveries finished before `pruned_before` are pruned (docs/operations.md, "Retention").',
    params: cartParams,
    query: webhooksQuery,
    response: { status: 200, description: "A page of the cart's deliveries.", schema: cartDeliveries },
    problems: [404],
    async handler(ctx, { params, query }) {
      const { uuid } = params;
      const after = query.cursor ? decodeCursor(query.cursor) : undefined;
      try {
        await store.readStream(cart.streamId(uuid), { direction: 'backwards', maxCount: 1 });
      } catch (err) {
        if (err instanceof StreamNotFoundError) throw notFound(uuid);
        throw err;
      }
      const found = await deliveriesOfCart(await deliveries(), uuid, { limit: query.limit + 1, after });
      const page = found.slice(0, query.limit);
      const next = found.length > query.limit ? encodeCursor(page[page.length - 1]) : null;
      if (next) {
        const link = new URLSearchParams({ limit: String(query.limit), cursor: next });
        ctx.set('Link', `<${ADMIN_BASE}/carts/${uuid}/webhooks?${link}>; rel="next"`);
      }
      // Deliveries finished before it are pruned (docs/operations.md, "Retention"): an older cart's list
      // lacks them (those not gone yet left out alike), and says from when it is whole.
      const pruned_before = prunedBefore(clock.now(), retentionMs);
      const shown = page.filter((doc) => !finishedBefore(doc, pruned_before));
      const records = await withQueuePlaces(
        await deliveries(),
        await withRequesterNames(named, shown.map(toDeliveryRecord)),
      );
      ctx.body = { cart_uuid: uuid, deliveries: records, next_cursor: next, pruned_before };
    },
  });
  return [history, webhooks];
}
