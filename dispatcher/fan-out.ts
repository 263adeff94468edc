/**
 * Fan-out (docs/webhooks.md): a persistent subscription group on the event store receives every
 * `CartStatusChanged` (checkout included) and `CartAbandoned`. For each, and each enabled subscription
 * that covered the cart's store and the event kind at that event's position, it schedules a durable
 * delivery in the (subscription, cart) queue with a stable id, then acknowledges. A crash before the
 * ack redelivers the message; scheduling is idempotent (the delivery id is derived from subscription
 * and event, and decided on the queue as stored), so nothing is lost and nothing is owed twice.
 *
 * Events of one cart are handled one after another, in the order the group hands them out, so a
 * queue receives its deliveries in cart order; other carts proceed concurrently (the consumer's
 * buffer). The queue also orders by the cart event's revision, whatever the write order.
 */
import type { Logger } from 'pino';
import type { CommandMetadata } from '../application/command-handler.ts';
import { Supervisor } from '../application/supervisor.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventRegistry } from '../domain/events.ts';
import { eventRegistry } from '../domain/index.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import {
  type Actor,
  type EventStore,
  type PersistentConsumer,
  type PersistentMessage,
  PersistentSubscriptionExistsError,
} from '../eventstore/port.ts';
import { createWebhookRenderer, webhookKindOf } from '../webhooks/body.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

export const FAN_OUT_GROUP = 'webhook-fan-out';
export const DISPATCHER_ACTOR: Actor = { type: 'system', id: 'webhook-dispatcher' };

/** Handler attempts before a message is handed back to the group (which retries it, then parks it). */
const HANDLER_ATTEMPTS = 5;

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

export interface FanOutOptions {
  store: EventStore;
  clock: Clock;
  tracker: SubscriptionTracker;
  /** Schedules each delivery owed (and starts its first attempt when it can): the delivery worker. */
  deliveries: DeliveryScheduling;
  logger?: Logger;
  registry?: EventRegistry;
  group?: string;
  /** Messages handled at once (different carts). */
  bufferSize?: number;
  /** Joins the group again after a drop, paced, and reports the consumer's health. */
  supervisor?: Supervisor;
}

export interface FanOutStats {
  /** Cart events handled (acknowledged). */
  events: number;
  /** Deliveries scheduled (written: a repeat after a crash finds its delivery and writes nothing). */
  scheduled: number;
  errors: number;
}

export interface FanOut {
  start(): Promise<void>;
  stats(): FanOutStats;
  stop(): Promise<void>;
}

export function createFanOut(options: FanOutOptions): FanOut {
  const { store, clock, tracker, deliveries, logger } = options;
  const registry = options.registry ?? eventRegistry;
  const group = options.group ?? FAN_OUT_GROUP;
  const stats: FanOutStats = { events: 0, scheduled: 0, errors: 0 };
  const renderWebhook = createWebhookRenderer(store, registry);
  /** The last handling queued per cart stream: the next event of that cart waits for it. */
  const chains = new Map<string, Promise<void>>();
  let consumer: PersistentConsumer | undefined;
  let retry: NodeJS.Timeout | undefined;
  let stopped = false;
  const health = (options.supervisor ?? new Supervisor()).watch('webhook fan-out');

  async function schedule(message: PersistentMessage): Promise<void> {
    const event = message.event;
    const kind = webhookKindOf(event.type);
    if (!kind || !event.streamId.startsWith('cart-')) return;
    await tracker.ready(event.position);
    if (!tracker.any()) return; // nobody subscribes to anything: no need to render
    const rendered = await renderWebhook(event);
    const owed = tracker.covering(rendered.store_id, kind, event.position);
    if (owed.length === 0) return;
    const body = JSON.stringify(rendered.body);
    const at = clock.now().toISOString();
    const metadata = {
      correlationId: event.metadata.correlation_id,
      causationId: event.id,
      actor: DISPATCHER_ACTOR,
      at,
    };
    for (const subscription of owed) {
      // Decided on the queue as stored and appended with its revision: a delivery scheduled before
      // (a message handed out again after a crash or a store restart) is found and nothing is
      // written. EventStoreDB's event-id check alone is not enough: it only remembers recent ids
      // when no revision is expected (docs/webhooks.md, "Order, isolation, durability").
      const written = await deliveries.schedule({
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
      });
      if (written) stats.scheduled += 1;
    }
  }

  /** One cart's events one after another, other carts' beside them. */
  function receive(message: PersistentMessage): Promise<void> {
    const key = message.event.streamId;
    const run = (chains.get(key) ?? Promise.resolve()).then(() => handle(message));
    chains.set(key, run);
    void run.finally(() => {
      if (chains.get(key) === run) chains.delete(key);
    });
    return run;
  }

  /**
   * Joins the group; when the connection drops, joins again after a pause (docs/operations.md,
   * "Recovery"). The group hands out again whatever was not acked, so nothing is lost.
   */
  function consume(): void {
    const current = store.subscribeToPersistent(group, receive, { bufferSize: options.bufferSize ?? 32 });
    consumer = current;
    health.up();
    current.done.catch((err: unknown) => {
      if (stopped || consumer !== current) return;
      retry = setTimeout(() => {
        retry = undefined;
        if (stopped) return;
        health.resubscribed();
        consume();
      }, health.dropped(err));
    });
  }

  async function handle(message: PersistentMessage): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (stopped) return; // not acked: the group hands it out again
      try {
        await schedule(message);
        await message.ack();
        stats.events += 1;
        return;
      } catch (err) {
        stats.errors += 1;
        if (attempt >= HANDLER_ATTEMPTS) {
          logger?.error({ err, event: message.event.id }, 'webhook fan-out failed; handing the event back');
          await message.nack('retry', err instanceof Error ? err.message : String(err));
          return;
        }
        logger?.warn({ err, event: message.event.id, attempt }, 'webhook fan-out failed; retrying');
        await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
      }
    }
  }

  return {
    async start() {
      try {
        await store.createPersistentSubscription(group, {
          from: 'start',
          filter: { eventTypes: ['CartStatusChanged', 'CartAbandoned'] },
        });
      } catch (err) {
        if (!(err instanceof PersistentSubscriptionExistsError)) throw err;
      }
      consume();
    },
    stats: () => ({ ...stats }),
    async stop() {
      stopped = true;
      health.stopped();
      clearTimeout(retry);
      await consumer?.stop().catch(() => {});
      await Promise.allSettled([...chains.values()]);
    },
  };
}
