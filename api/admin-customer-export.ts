/**
 * `POST /admin/v1/customers/export` {customer: <user id | email | cart uuid>, or several}: everything the service
 * holds about one customer, as one JSON document (docs/operations.md, "Customer data"): each of their
 * carts as the log folds it (the customer, the lines, the curbside arrivals and their answers), and
 * every webhook each cart produced, with the body it sends. Each cart's read is on record first, as a
 * history read is (`CartHistoryViewed`); the answer is never kept for an idempotent replay, so a
 * request with an `Idempotency-Key` is refused (`api/admin.ts`).
 */
import { z } from 'zod';
import { appendRetrying, toNewEvents } from '../application/command-handler.ts';
import { type CustomerData, userIdOf } from '../application/customer-data.ts';
import { readState } from '../application/read-state.ts';
import * as cart from '../domain/cart.ts';
import type { Clock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import { cartHistoryViewed, cartViewsStreamId } from '../domain/operator-activity.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import type { EventStore } from '../eventstore/port.ts';
import { CARTS, type CartDoc } from '../projections/read-models/carts.ts';
import {
  deliveriesOfCart,
  WEBHOOK_DELIVERIES,
  type WebhookDeliveryDoc,
} from '../projections/read-models/webhook-deliveries.ts';
import type { ReadStore } from '../projections/read-store.ts';
import { customerTargets } from './admin-customers.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import type { AppContext } from './http.ts';
import { requestActor } from './operator-auth.ts';
import { commandMetadata } from './write-support.ts';

export interface CustomerExportDeps {
  customerData: CustomerData;
  store: EventStore;
  readStore: ReadStore;
  clock: Clock;
}

/** The answer's one field: the idempotency middleware never records it (`api/admin.ts`). */
export const EXPORT_FIELD = 'export';
/** Why an export takes no `Idempotency-Key`. */
export const EXPORT_UNKEPT =
  'an export is personal data and never kept, so no replay could answer it; send it again without a key';

const exportedWebhook = z.object({
  delivery_id: z.string(),
  webhook_id: z.string(),
  event_kind: z.string(),
  status: z.string(),
  scheduled_at: z.string(),
  /** The body as each attempt sends it (the customer left out once erased). */
  body: z.unknown(),
});
const exportAnswer = z.object({
  export: z.object({
    exported_at: z.string(),
    carts: z.array(z.object({ cart: z.unknown(), webhooks: z.array(exportedWebhook) })),
  }),
});

/** A cart's deliveries, all of them, oldest first. */
async function allDeliveries(readStore: ReadStore, uuid: string): Promise<WebhookDeliveryDoc[]> {
  const collection = await readStore.collection<WebhookDeliveryDoc>(WEBHOOK_DELIVERIES);
  const all: WebhookDeliveryDoc[] = [];
  for (;;) {
    const last = all[all.length - 1];
    const page = await deliveriesOfCart(collection, uuid, { limit: 500, ...(last && { after: last }) });
    all.push(...page);
    if (page.length < 500) return all;
  }
}

/**
 * The carts of the user ids among the targets, from the carts read model: also those never identified
 * with a customer, which hold no key but are still that user's orders.
 */
async function cartsOfUsers(readStore: ReadStore, targets: readonly string[]): Promise<string[]> {
  const userIds = targets.map(userIdOf).filter((id): id is number => id !== null);
  if (userIds.length === 0) return [];
  const carts = await readStore.collection<CartDoc>(CARTS);
  const uuids: string[] = [];
  for (const userId of new Set(userIds)) {
    for (const doc of await carts.find({ _user_id: userId }, { sort: [['id', 1]] })) {
      uuids.push(doc._id);
    }
  }
  return uuids;
}

/** The body a delivery sends, read from its queue's log: opened, or without the customer once erased. */
async function sentBody(deps: CustomerExportDeps, doc: WebhookDeliveryDoc): Promise<unknown> {
  const events = await deps.store.readStream(delivery.streamId(doc.webhook_id, doc.cart_uuid));
  const scheduled = events.find(
    (e) =>
      e.type === 'WebhookDeliveryScheduled' &&
      (e.data as { delivery_id: string }).delivery_id === doc.delivery_id,
  );
  if (!scheduled) return null;
  return JSON.parse(await deps.customerData.openBody((scheduled.data as { body: string }).body));
}

async function exportCart(ctx: AppContext, deps: CustomerExportDeps, uuid: string) {
  const { state } = await readState(deps.store, eventRegistry, cart.streamId(uuid), cart.decider);
  if (!state.exists) return null;
  // On record before the data leaves, as a history read is.
  const metadata = commandMetadata(ctx, requestActor(ctx), deps.clock);
  const viewed = toNewEvents(eventRegistry, [cartHistoryViewed(uuid, metadata.at)], metadata);
  await appendRetrying(deps.store, cartViewsStreamId(uuid), viewed, { expectedRevision: 'any' });
  const webhooks = [];
  for (const doc of await allDeliveries(deps.readStore, uuid)) {
    webhooks.push({
      delivery_id: doc.delivery_id,
      webhook_id: doc.webhook_id,
      event_kind: doc.event_kind,
      status: doc.status,
      scheduled_at: doc.scheduled_at,
      body: await sentBody(deps, doc),
    });
  }
  return { cart: state, webhooks };
}

export function customerExportRoutes(deps: CustomerExportDeps): AdminRoute[] {
  return [
    adminRoute({
      method: 'post',
      path: '/customers/export',
      operationId: 'exportCustomer',
      summary: 'Everything held about a customer',
      description:
        'The carts a user id, an email address or a cart uuid names (as an erasure finds them; `customer` one of them or an array of several), ' +
        'and for a user id also every cart created with it, identified with a customer or not, ' +
        'each as the log folds it, with every webhook it produced and the body that webhook sends. Each cart read is recorded as a history read.',
      body: z.strictObject({ customer: customerTargets }),
      response: { status: 200, description: 'The customer’s data.', schema: exportAnswer },
      // 422 also for an Idempotency-Key: an export is never kept for a replay.
      problems: [422],
      async handler(ctx, { body }) {
        const targets = typeof body.customer === 'string' ? [body.customer] : body.customer;
        const found = await deps.customerData.resolve(targets);
        const uuids = new Set([...found.cart_uuids, ...(await cartsOfUsers(deps.readStore, targets))]);
        const carts = [];
        for (const uuid of [...uuids].sort()) {
          const exported = await exportCart(ctx, deps, uuid);
          if (exported) carts.push(exported);
        }
        ctx.body = { [EXPORT_FIELD]: { exported_at: deps.clock.now().toISOString(), carts } };
      },
    }),
  ];
}
