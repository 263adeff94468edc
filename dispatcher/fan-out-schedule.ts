/**
 * What the fan-out does with one cart event (docs/webhooks.md, "Order, isolation, durability"): for
 * each enabled subscription that covered the cart's store and the event kind at that event's
 * position, it schedules a durable delivery in the (subscription, cart) queue with a stable id. A
 * repeat (the message handed out again after a crash or a store restart) finds the delivery
 * scheduled and writes nothing.
 */
import type { CommandMetadata } from '../application/command-handler.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventRegistry } from '../domain/events.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import type { Actor, EventStore, RecordedEvent } from '../eventstore/port.ts';
import { createWebhookRenderer, webhookKindOf } from '../webhooks/body.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

export const DISPATCHER_ACTOR: Actor = { type: 'system', id: 'webhook-dispatcher' };

/**
 * Schedules under way at once in the whole fan-out, at most, whatever the cart events it handles
 * together: a bound on the appends EventStoreDB is sent at once over its one connection; on the
 * embedded store, those requested in one turn share a commit.
 */
export const FAN_OUT_PARALLEL = 256;

export type ScheduleDeliveryCommand = Extract<delivery.WebhookDeliveryCommand, { type: 'ScheduleDelivery' }>;

export interface ScheduleRequest {
  /** The (subscription, cart) queue's stream. */
  stream: string;
  command: ScheduleDeliveryCommand;
  /** The cart event's correlation, that event as the cause. */
  metadata: CommandMetadata;
}

/** Where the fan-out hands each delivery it owes: the delivery worker (dispatcher/schedule-delivery.ts). */
export interface DeliveryScheduling {
  /** Answers whether the delivery was written (not found scheduled already). */
  schedule(request: ScheduleRequest): Promise<boolean>;
}

export interface OwedDeliveriesOptions {
  store: EventStore;
  registry: EventRegistry;
  clock: Clock;
  tracker: SubscriptionTracker;
  deliveries: DeliveryScheduling;
  /** Seals the customer in a body before it is scheduled (docs/operations.md, "Customer data"). */
  sealBody?: (body: string) => Promise<string>;
}

/** Schedules the deliveries a cart event owes; answers how many were written (0 for a repeat). */
export function createOwedDeliveries(
  options: OwedDeliveriesOptions,
): (event: RecordedEvent) => Promise<number> {
  const { clock, tracker, deliveries } = options;
  const renderWebhook = createWebhookRenderer(options.store, options.registry);
  // One gate for every cart event handled at once (the group hands out up to 32): the bound is the
  // dispatcher's, not each event's.
  const gate = createGate(FAN_OUT_PARALLEL);
  return async function scheduleOwed(event) {
    const kind = webhookKindOf(event.type);
    if (!kind || !event.streamId.startsWith('cart-')) return 0;
    await tracker.ready(event.position);
    if (!tracker.any()) return 0; // nobody subscribes to anything: no need to render
    const rendered = await renderWebhook(event);
    const owed = tracker.covering(rendered.store_id, kind, event.position);
    if (owed.length === 0) return 0;
    const text = JSON.stringify(rendered.body);
    const body = options.sealBody ? await options.sealBody(text) : text;
    const at = clock.now().toISOString();
    const metadata = {
      correlationId: event.metadata.correlation_id,
      causationId: event.id,
      actor: DISPATCHER_ACTOR,
      at,
    };
    // Decided on the queue as stored and appended with its revision: a delivery scheduled before
    // (a message handed out again after a crash or a store restart) is found and nothing is
    // written. EventStoreDB's event-id check alone is not enough: it only remembers recent ids
    // when no revision is expected (docs/webhooks.md, "Order, isolation, durability").
    const requests = owed.map(
      (subscription): ScheduleRequest => ({
        stream: delivery.streamId(subscription.webhook_id, rendered.cart_uuid),
        command: {
          type: 'ScheduleDelivery',
          delivery_id: delivery.deliveryId(subscription.webhook_id, event.id),
          webhook_id: subscription.webhook_id,
          event_kind: kind,
          cart_uuid: rendered.cart_uuid,
          store_id: rendered.store_id,
          source_event_id: event.id,
          source_revision: event.revision,
          source_position: event.position,
          body,
          at,
        },
        metadata,
      }),
    );
    // Each subscription's queue is a stream of its own, so nothing orders them: requested together,
    // the embedded store commits their appends together and EventStoreDB takes them over one channel
    // (docs/webhooks.md, "How a delivery flows"). The cart's next event waits for this one's handling
    // (fan-out-handling.ts), so each queue still gets the cart's events in order. Every request under
    // way is settled before the answer: a failure is thrown only once none is, and the retry finds the
    // deliveries written (decided on the stream) and writes the rest. Once one has failed, those still
    // waiting for the gate are not started: the retry decides them anyway, and with the store out of
    // reach each would only wait for a failure of its own.
    let failed = false;
    const outcomes = await Promise.allSettled(
      requests.map((request) =>
        gate.run(async () => {
          if (failed) return NOT_STARTED;
          try {
            return await deliveries.schedule(request);
          } catch (err) {
            failed = true;
            throw err;
          }
        }),
      ),
    );
    const failure = outcomes.find((o) => o.status === 'rejected');
    if (failure) throw failure.reason;
    return outcomes.filter((o) => o.status === 'fulfilled' && o.value === true).length;
  };
}

/** A schedule left for the retry: one before it in the same handling failed. */
const NOT_STARTED = Symbol('not started');

/** Runs the functions it is given with at most `limit` under way, the others waiting their turn in order. */
function createGate(limit: number): { run<R>(task: () => Promise<R>): Promise<R> } {
  let free = limit;
  const waiting: (() => void)[] = [];
  return {
    async run(task) {
      if (free > 0) free -= 1;
      else await new Promise<void>((resolve) => waiting.push(resolve));
      try {
        return await task();
      } finally {
        // The slot passes straight to the next in line, so a newcomer cannot jump the queue.
        const next = waiting.shift();
        if (next) next();
        else free += 1;
      }
    },
  };
}
