/**
 * Fan-out (docs/webhooks.md): a persistent subscription group on the event store receives every
 * `CartStatusChanged` (checkout included) and `CartAbandoned`. For each, and each enabled subscription
 * that covered the cart's store and the event kind at that event's position, it schedules a durable
 * delivery in the (subscription, cart) queue with a stable id, then acknowledges. A crash before the
 * ack redelivers the message; scheduling is idempotent (the delivery id is derived from subscription
 * and event), so nothing is lost and nothing is owed twice.
 *
 * Events of one cart are handled one after another, in the order the group hands them out, so a
 * queue receives its deliveries in cart order; other carts proceed concurrently (the consumer's
 * buffer). The queue also orders by the cart event's revision, whatever the write order.
 */
import type { Logger } from 'pino';
import { toNewEvents } from '../application/command-handler.ts';
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
import { renderWebhook, webhookKindOf } from '../webhooks/body.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

export const FAN_OUT_GROUP = 'webhook-fan-out';
export const DISPATCHER_ACTOR: Actor = { type: 'system', id: 'webhook-dispatcher' };

/** Handler attempts before a message is handed back to the group (which retries it, then parks it). */
const HANDLER_ATTEMPTS = 5;

export interface FanOutOptions {
  store: EventStore;
  clock: Clock;
  tracker: SubscriptionTracker;
  logger?: Logger;
  registry?: EventRegistry;
  group?: string;
  /** Messages handled at once (different carts). */
  bufferSize?: number;
}

export interface FanOutStats {
  /** Cart events handled (acknowledged). */
  events: number;
  /** Deliveries scheduled (a repeat after a crash counts again; the store writes it once). */
  scheduled: number;
  errors: number;
}

export interface FanOut {
  start(): Promise<void>;
  stats(): FanOutStats;
  stop(): Promise<void>;
}

export function createFanOut(options: FanOutOptions): FanOut {
  const { store, clock, tracker, logger } = options;
  const registry = options.registry ?? eventRegistry;
  const group = options.group ?? FAN_OUT_GROUP;
  const stats: FanOutStats = { events: 0, scheduled: 0, errors: 0 };
  /** The last handling queued per cart stream: the next event of that cart waits for it. */
  const chains = new Map<string, Promise<void>>();
  let consumer: PersistentConsumer | undefined;
  let stopped = false;

  async function schedule(message: PersistentMessage): Promise<void> {
    const event = message.event;
    const kind = webhookKindOf(event.type);
    if (!kind || !event.streamId.startsWith('cart-')) return;
    await tracker.ready(event.position);
    if (!tracker.any()) return; // nobody subscribes to anything: no need to render
    const rendered = await renderWebhook(store, event, registry);
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
      const id = delivery.deliveryId(subscription.webhook_id, event.id);
      const scheduled = delivery.decider.decide(
        {
          type: 'ScheduleDelivery',
          delivery_id: id,
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
        delivery.decider.initialState,
      );
      // The event id is the delivery id: a repeated fan-out (after a crash) is an idempotent re-append,
      // and no expected revision is needed, so the fan-out never contends with the worker's writes to
      // the same queue (the worker re-reads and re-decides when it meets one of these).
      const [newEvent] = toNewEvents(registry, scheduled, metadata);
      await store.append(
        delivery.streamId(subscription.webhook_id, rendered.cart_uuid),
        [{ ...newEvent, id }],
        {
          expectedRevision: 'any',
        },
      );
      stats.scheduled += 1;
    }
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
      consumer = store.subscribeToPersistent(
        group,
        (message) => {
          const key = message.event.streamId;
          const run = (chains.get(key) ?? Promise.resolve()).then(() => handle(message));
          chains.set(key, run);
          void run.finally(() => {
            if (chains.get(key) === run) chains.delete(key);
          });
          return run;
        },
        { bufferSize: options.bufferSize ?? 32 },
      );
      consumer.done.catch((err) => {
        if (!stopped) logger?.error({ err }, 'webhook fan-out consumer failed');
      });
    },
    stats: () => ({ ...stats }),
    async stop() {
      stopped = true;
      await consumer?.stop();
      await Promise.allSettled([...chains.values()]);
    },
  };
}
