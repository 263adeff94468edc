/**
 * Admin routes for webhook deliveries (docs/webhooks.md, "Operators"), mounted on the admin
 * router next to the subscription routes:
 *
 * - `GET /webhooks/{id}/deliveries?status=&limit=&cursor=` → 200 {deliveries, next_cursor}: the
 *   subscription's deliveries with every attempt, newest first (`scheduled_at` descending, then delivery
 *   id). `status` is one status or a comma-separated list (pending, in_flight, failed, delivered,
 *   parked); `limit` 1–500 (default 100); `cursor` is the `next_cursor` of the previous page (also in a
 *   `Link: rel="next"` header, filters kept). 404 `webhook_not_found` for an unknown or removed
 *   subscription.
 *   Each delivery says which one it waits behind in its queue, `waiting_behind` (`admin-delivery-queue.ts`).
 * - `GET /webhooks/deliveries/{delivery_id}` → 200 {delivery}; 404 `delivery_not_found` (never scheduled,
 *   or pruned: finished before `pruned_before`, docs/operations.md, "Retention"). A delivery finished
 *   before `pruned_before` is answered so, and left out of the lists and `recover`, whether or not it
 *   is gone yet.
 * - `POST /webhooks/deliveries/{delivery_id}/redeliver` (no body) → 202 {delivery, revision, position}:
 *   the delivery is pending again and the dispatcher sends it with the same `X-Service-Webhook-Id` and
 *   the next `X-Service-Delivery-Attempt`, its retry schedule starting over. 404 `delivery_not_found`;
 *   409 `delivery_in_progress` while it is pending or in flight; 409 `webhook_disabled` /
 *   `webhook_removed` when its subscription cannot receive it (it would only be parked again).
 * - `POST /webhooks/{id}/recover` {since: ISO 8601 date-time with offset} → 202 {webhook_id, since
 *   (as UTC), recovered, delivery_ids, truncated, limit}: redelivers every failed or parked delivery
 *   of the subscription scheduled at or after `since`, oldest first, at most `limit` (10,000) per
 *   call; `truncated: true` says more remain (call again: the redelivered ones are pending now and not
 *   matched twice). A delivery that started again meanwhile is skipped. 404 `webhook_not_found`;
 *   409 `webhook_disabled`.
 * - `POST /webhooks/{id}/test` {event?: cart_status_updated | cart_abandoned} → 200 {result, sample}:
 *   sends one signed request now, to the subscription's URL, with a body of the chosen kind (default
 *   `cart_status_updated`) in the exact docs/webhooks.md shape, built from a sample cart (fixed uuid
 *   `SAMPLE_CART_UUID`, sample customer and product, the subscription's first store). Headers as for a
 *   real delivery (a fresh `X-Service-Webhook-Id`, attempt 1) plus `X-Service-Test: true`. Bounded by
 *   `PDS_WEBHOOK_TIMEOUT`, checked by the dispatcher's URL guard; not recorded as a delivery, so a 410
 *   answer does not disable the subscription. Works on a disabled subscription too (to check a receiver
 *   before enabling it again). `result` is {outcome, status, duration_ms, response_excerpt, error_code,
 *   error}; `sample` is {event, webhook_id (the header), body}.
 *
 * - `GET /webhooks/{id}/health?window=1h|24h`: the subscription's health (`admin-webhook-health.ts`).
 *
 * Writes go through the command handler on the delivery's own stream (the decider refuses what the
 * delivery's real state does not allow, whatever the read model shows) and wait, bounded, until the
 * `webhook_deliveries` read model holds them, so a following GET shows the delivery pending.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/decider.ts';
import { isoDateTime } from '../domain/schemas.ts';
import * as storeDomain from '../domain/store.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import * as webhooks from '../domain/webhook-subscription.ts';
import {
  type DeliveryCursor,
  deliveryById,
  failedOrParkedSince,
  listDeliveries,
  toDeliveryRecord,
  WEBHOOK_DELIVERIES,
  WEBHOOK_DELIVERIES_PROJECTION,
  type WebhookDeliveryDoc,
} from '../projections/read-models/webhook-deliveries.ts';
import { finishedBefore, prunedBefore } from '../projections/read-models/webhook-retention.ts';
import type { Collection } from '../projections/read-store.ts';
import { cartAbandonedBody, cartStatusUpdatedBody, type WebhookStore } from '../webhooks/body.ts';
import { attemptFields } from '../webhooks/deliver.ts';
import { createWebhookSender } from '../webhooks/send.ts';
import { withQueuePlaces } from './admin-delivery-queue.ts';
import { deliveryPage, deliveryRedelivered, deliveryShown, recovery, webhookTest } from './admin-records.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import { ADMIN_BASE, waitForProjection } from './admin-support.ts';
import { webhookHealthRoutes } from './admin-webhook-health.ts';
import { sampleCart } from './admin-webhook-sample.ts';
import type { WebhookAdminDeps } from './admin-webhooks.ts';
import { type AppContext, HttpProblem } from './http.ts';
import { operatorOf, requestActor } from './operator-auth.ts';
import { actorNamer, withRequesterNames } from './operator-names.ts';
import { pathUuid } from './validation.ts';
import { answerWrite, commandMetadata } from './write-support.ts';

/** Most deliveries one `recover` call redelivers. */
export const RECOVER_LIMIT = 10_000;
/** Delivery streams a `recover` call appends to at once (deliveries of one stream go one by one). */
const RECOVER_CONCURRENCY = 8;

export { SAMPLE_CART_UUID } from './admin-webhook-sample.ts';
export const HEADER_TEST = 'X-Service-Test';

// Strict: a misspelt filter (`?stauts=`) is a 400, not a silently unfiltered list.
const listQuery = z.strictObject({
  status: z
    .string()
    .max(200)
    .transform((s) => [...new Set(s.split(',').map((x) => x.trim()))])
    .pipe(z.array(delivery.deliveryStatus).min(1))
    .optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z.string().max(300).optional(),
});
const recoverBody = z
  .strictObject({ since: isoDateTime.describe('With an offset, e.g. `2026-03-01T00:00:00Z`.') })
  .meta({ id: 'Recover' });
const testBody = z
  .strictObject({ event: webhooks.webhookEventKind.optional().describe('Default `cart_status_updated`.') })
  .meta({ id: 'WebhookTestRequest' });
const noBody = z.strictObject({});
export const webhookParams = z.object({ id: pathUuid });
const deliveryParams = z.object({ delivery_id: pathUuid });
const cursorValues = z.tuple([isoDateTime, z.uuid()]);

/** A deliveries page's `next_cursor`: the sort values of its last delivery. */
export function encodeCursor(doc: WebhookDeliveryDoc): string {
  return Buffer.from(JSON.stringify([doc.scheduled_at, doc.delivery_id])).toString('base64url');
}

/** A `cursor` parameter back into sort values; 400 `invalid_cursor` for one this API did not give out. */
export function decodeCursor(cursor: string): DeliveryCursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const values = cursorValues.safeParse(parsed);
  if (!values.success) {
    throw new HttpProblem(400, { code: 'invalid_cursor', detail: 'the cursor is not one this API gave out' });
  }
  return { scheduled_at: values.data[0], delivery_id: values.data[1] };
}

/** Runs `work` on every item, at most `concurrency` at once. */
async function pool<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next];
      next += 1;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/** The delivery routes of the admin router (after the subscription routes). */
export function webhookDeliveryRoutes(deps: WebhookAdminDeps): AdminRoute[] {
  const shared = deliveryShared(deps);
  return [
    ...deliveryViewRoutes(shared),
    ...webhookHealthRoutes(deps, shared),
    ...resendRoutes(shared),
    ...testSendRoutes(shared),
  ];
}

type DeliveryShared = ReturnType<typeof deliveryShared>;

/** What the routes below share. */
function deliveryShared(deps: WebhookAdminDeps) {
  const { commands, readStore } = deps;
  const clock: Clock = deps.clock;
  const settings = deps.webhooks;
  // The worker's send path: the same signature, and the same secrets struck from the answer.
  // Built at the first test request: the admin API's document builds the tables without the secret key.
  let built: ReturnType<typeof createWebhookSender> | undefined;
  const sender = () => {
    built ??= createWebhookSender({
      secretKey: settings.secretKey,
      timeoutMs: settings.timeoutMs,
      allowPrivate: settings.allowPrivateWebhookUrls,
      resolve: settings.resolve,
      clock,
    });
    return built;
  };
  const meta = (ctx: AppContext) => commandMetadata(ctx, requestActor(ctx), clock);
  const seen = (position: number) => waitForProjection(readStore, WEBHOOK_DELIVERIES_PROJECTION, position);
  const named = actorNamer(readStore);
  /**
   * Delivery records as answered: each redelivery with the name of who asked for it, and the delivery
   * it waits behind in its queue (`admin-delivery-queue.ts`).
   */
  const records = async (docs: readonly WebhookDeliveryDoc[]) =>
    withQueuePlaces(await deliveries(), await withRequesterNames(named, docs.map(toDeliveryRecord)));
  let collection: Collection<WebhookDeliveryDoc> | undefined;
  const deliveries = async () => {
    collection ??= await readStore.collection<WebhookDeliveryDoc>(WEBHOOK_DELIVERIES);
    return collection;
  };

  /** The subscription as its stream says now; 404 when it never existed or was removed. */
  async function loadWebhook(id: string): Promise<webhooks.WebhookSubscription> {
    const { state } = await commands.load(webhooks.streamId(id), webhooks.decider);
    if (!state.exists || state.removed) {
      throw new HttpProblem(404, { code: 'webhook_not_found', detail: `no webhook subscription ${id}` });
    }
    return state;
  }

  /** Refuses a redelivery its subscription would only park again. */
  async function mustReceive(webhookId: string): Promise<void> {
    const { state } = await commands.load(webhooks.streamId(webhookId), webhooks.decider);
    if (!state.exists || state.removed) {
      throw new HttpProblem(409, {
        code: 'webhook_removed',
        detail: `webhook subscription ${webhookId} was removed: its deliveries cannot be sent again`,
        extensions: { webhook_id: webhookId },
      });
    }
    if (!state.enabled) {
      throw new HttpProblem(409, {
        code: 'webhook_disabled',
        detail: `webhook subscription ${webhookId} is disabled (${state.disabled_reason ?? 'disabled'}): enable it first`,
        extensions: { webhook_id: webhookId, disabled_reason: state.disabled_reason },
      });
    }
  }

  /** Deliveries finished before `pruned_before` are answered as pruned, whether or not they are gone yet. */
  const kept = (docs: WebhookDeliveryDoc[]) => {
    const before = prunedBefore(clock.now(), settings.deliveryLogRetentionMs);
    return docs.filter((doc) => !finishedBefore(doc, before));
  };

  async function findDelivery(deliveryId: string): Promise<WebhookDeliveryDoc> {
    const found = await deliveryById(await deliveries(), deliveryId);
    const before = prunedBefore(clock.now(), settings.deliveryLogRetentionMs);
    // Pruned, about to be, or never scheduled: nothing tells them apart once a delivery is pruned, so
    // both are said; one finished before `pruned_before` is answered alike whether it is gone yet or not.
    const doc = found && !finishedBefore(found, before) ? found : null;
    if (!doc) {
      throw new HttpProblem(404, {
        code: 'delivery_not_found',
        detail:
          `no webhook delivery ${deliveryId}: none was scheduled with this id, or it finished before ` +
          `${before} and was pruned (PDS_DELIVERY_LOG_RETENTION)`,
        extensions: { pruned_before: before },
      });
    }
    return doc;
  }

  const redeliver = (
    doc: WebhookDeliveryDoc,
    reason: delivery.RedeliveryReason,
    metadata: ReturnType<typeof meta>,
  ) =>
    commands.handle(
      delivery.streamId(doc.webhook_id, doc.cart_uuid),
      delivery.decider,
      { type: 'RequestRedelivery', delivery_id: doc.delivery_id, reason, at: clock.now().toISOString() },
      metadata,
    );
  return {
    clock,
    settings,
    sender,
    meta,
    seen,
    deliveries,
    loadWebhook,
    mustReceive,
    findDelivery,
    kept,
    redeliver,
    records,
    commands,
    readStore,
  };
}

/** Deliveries of a subscription, and one delivery with its attempts. */
function deliveryViewRoutes(shared: DeliveryShared): AdminRoute[] {
  const { deliveries, loadWebhook, findDelivery, kept, records } = shared;
  const list = adminRoute({
    method: 'get',
    path: '/webhooks/{id}/deliveries',
    operationId: 'listDeliveries',
    summary: "A subscription's deliveries, with every attempt",
    description:
      'Newest first (`scheduled_at` descending, then delivery id). `status` is one status or a ' +
      'comma-separated list.',
    params: webhookParams,
    query: listQuery,
    response: { status: 200, description: 'A page of deliveries.', schema: deliveryPage },
    problems: [404],
    async handler(ctx, { params, query }) {
      const { id } = params;
      const after = query.cursor ? decodeCursor(query.cursor) : undefined;
      await loadWebhook(id);
      const found = await listDeliveries(await deliveries(), id, {
        statuses: query.status,
        limit: query.limit + 1,
        after,
      });
      const page = found.slice(0, query.limit);
      const next = found.length > query.limit ? encodeCursor(page[page.length - 1]) : null;
      if (next) {
        // The next page keeps the filter.
        const link = new URLSearchParams({ limit: String(query.limit), cursor: next });
        if (query.status) link.set('status', query.status.join(','));
        ctx.set('Link', `<${ADMIN_BASE}/webhooks/${id}/deliveries?${link}>; rel="next"`);
      }
      // A page may hold fewer than `limit`: those finished before `pruned_before` are left out.
      ctx.body = { deliveries: await records(kept(page)), next_cursor: next };
    },
  });

  const show = adminRoute({
    method: 'get',
    path: '/webhooks/deliveries/{delivery_id}',
    operationId: 'getDelivery',
    summary: 'One delivery, with every attempt',
    description:
      '404 `delivery_not_found` for one never scheduled, or pruned: finished before `pruned_before` ' +
      '(docs/operations.md, "Retention").',
    params: deliveryParams,
    response: { status: 200, description: 'The delivery.', schema: deliveryShown },
    problems: [404],
    async handler(ctx, { params }) {
      const doc = await findDelivery(params.delivery_id);
      ctx.body = { delivery: (await records([doc]))[0] };
    },
  });
  return [list, show];
}

/** Resend: one delivery, or every failed or parked one since a time. */
function resendRoutes(shared: DeliveryShared): AdminRoute[] {
  const { meta, seen, deliveries, loadWebhook, mustReceive, findDelivery, kept, redeliver, records } = shared;
  const resend = adminRoute({
    method: 'post',
    path: '/webhooks/deliveries/{delivery_id}/redeliver',
    operationId: 'redeliver',
    summary: 'Send a delivery again',
    description:
      'It is pending again: the dispatcher sends it with the same `X-Service-Webhook-Id` and the next ' +
      '`X-Service-Delivery-Attempt`, its retry schedule starting over. 409 `delivery_in_progress` while ' +
      'it is pending or in flight; 409 `webhook_disabled` or `webhook_removed` when its subscription ' +
      'cannot receive it.',
    params: deliveryParams,
    body: noBody,
    response: { status: 202, description: 'The delivery, pending again.', schema: deliveryRedelivered },
    problems: [404, 409],
    async handler(ctx, { params }) {
      const doc = await findDelivery(params.delivery_id);
      await mustReceive(doc.webhook_id);
      const result = await redeliver(doc, 'redeliver', meta(ctx));
      await seen(result.position);
      const [record] = await records([await findDelivery(params.delivery_id)]);
      answerWrite(ctx, 202, { delivery: record }, result);
    },
  });

  const recover = adminRoute({
    method: 'post',
    path: '/webhooks/{id}/recover',
    operationId: 'recoverDeliveries',
    summary: 'Send every failed or parked delivery since a time again',
    description:
      `Oldest first, at most ${RECOVER_LIMIT} per call; \`truncated: true\` says more remain (call ` +
      'again: those sent again are pending and not matched twice). 409 `webhook_disabled`.',
    params: webhookParams,
    body: recoverBody,
    response: { status: 202, description: 'What was sent again.', schema: recovery },
    problems: [404, 409],
    async handler(ctx, { params, body }) {
      const { id } = params;
      await loadWebhook(id);
      await mustReceive(id);
      const since = new Date(body.since).toISOString();
      const found = await failedOrParkedSince(await deliveries(), id, since, RECOVER_LIMIT + 1);
      // Parked before `pruned_before`: pruned, or about to be, from the log too; not sent again.
      const chosen = kept(found.slice(0, RECOVER_LIMIT));
      // One stream at a time per cart (its deliveries share a stream), several carts at once.
      const byStream = new Map<string, WebhookDeliveryDoc[]>();
      for (const doc of chosen) {
        const key = delivery.streamId(doc.webhook_id, doc.cart_uuid);
        byStream.set(key, [...(byStream.get(key) ?? []), doc]);
      }
      const metadata = meta(ctx);
      const recovered = new Set<string>();
      let position = 0;
      await pool([...byStream.values()], RECOVER_CONCURRENCY, async (docs) => {
        for (const doc of docs) {
          try {
            const result = await redeliver(doc, 'recover', metadata);
            recovered.add(doc.delivery_id);
            position = Math.max(position, result.position);
          } catch (err) {
            // Started again since the read model saw it (another operator, a retry): nothing to recover.
            if (err instanceof DomainError && err.code === 'delivery_in_progress') continue;
            throw err;
          }
        }
      });
      if (position > 0) await seen(position);
      ctx.status = 202;
      ctx.body = {
        webhook_id: id,
        since,
        recovered: recovered.size,
        // In the order they were found: oldest scheduled first.
        delivery_ids: chosen.filter((d) => recovered.has(d.delivery_id)).map((d) => d.delivery_id),
        truncated: found.length > RECOVER_LIMIT,
        limit: RECOVER_LIMIT,
      };
    },
  });
  return [resend, recover];
}

/** A signed sample request of either kind, sent now and recorded nowhere. */
function testSendRoutes(shared: DeliveryShared): AdminRoute[] {
  const { clock, sender, loadWebhook, commands } = shared;
  const send = adminRoute({
    method: 'post',
    path: '/webhooks/{id}/test',
    operationId: 'testWebhook',
    summary: 'Send a signed sample request to the receiver now',
    description:
      'A body of the chosen kind (default `cart_status_updated`) in the exact shape of a real one, ' +
      'from a sample cart, signed, with `X-Service-Test: true`. Not recorded as a delivery (a 410 does ' +
      'not disable the subscription); works on a disabled subscription too.',
    params: webhookParams,
    body: testBody,
    response: { status: 200, description: "The receiver's answer, and what was sent.", schema: webhookTest },
    problems: [404],
    async handler(ctx, { params, body }) {
      const { id } = params;
      const sub = await loadWebhook(id);
      const kind = body.event ?? 'cart_status_updated';
      const now = clock.now();
      const storeId = sub.store_ids[0];
      const { state: storeState } = await commands.load(storeDomain.streamId(storeId), storeDomain.decider);
      const storeInfo: WebhookStore = storeState.exists
        ? {
            id: storeId,
            name: storeState.name,
            display_name: storeState.display_name,
            store_url: storeState.store_url,
          }
        : { id: storeId, name: '', display_name: null, store_url: null };
      const sample = sampleCart(storeId, now, kind);
      const rendered =
        kind === 'cart_status_updated'
          ? cartStatusUpdatedBody(sample, 1, storeInfo.name)
          : cartAbandonedBody(sample, storeInfo);
      const text = JSON.stringify(rendered);
      const webhookId = randomUUID();
      const result = await sender()
        .open(sub)
        .send({ webhookId, attempt: 1, body: text, headers: { [HEADER_TEST]: 'true' } });
      // Recorded nowhere else: who sent a test request to which receiver, and what came of it.
      ctx.state.log.info(
        { webhook_id: id, operator_id: operatorOf(ctx).operator_id, outcome: result.outcome },
        'webhook test request sent',
      );
      ctx.body = {
        webhook_id: id,
        result: attemptFields(result),
        sample: { event: kind, webhook_id: webhookId, body: rendered },
      };
    },
  });
  return [send];
}
