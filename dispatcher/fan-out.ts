/**
 * Fan-out (docs/webhooks.md): a persistent subscription group on the event store receives every
 * `CartStatusChanged` (checkout included) and `CartAbandoned`. For each, it schedules the deliveries
 * the event owes (`fan-out-schedule.ts`), then acknowledges. A crash before the ack redelivers the
 * message; scheduling is idempotent (the delivery id is derived from subscription and event, and
 * decided on the queue as stored), so nothing is lost and nothing is owed twice. The group is found,
 * updated or made at start (`fan-out-group.ts`).
 *
 * Events of one cart are handled one after another, in the order the group hands them out, so a
 * queue receives its deliveries in cart order; other carts proceed concurrently (the consumer's
 * buffer). The queue also orders by the cart event's revision, whatever the write order.
 */
import type { Logger } from 'pino';
import { Supervisor } from '../application/supervisor.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventRegistry } from '../domain/events.ts';
import { eventRegistry } from '../domain/index.ts';
import type {
  EventStore,
  PersistentConsumer,
  PersistentMessage,
  PersistentSubscriptionInfo,
  RecordedEvent,
} from '../eventstore/port.ts';
import { FAN_OUT_DEFINITION, FAN_OUT_GROUP } from '../webhooks/fan-out-group.ts';
import { type FanOutGroupSettings, prepareFanOutGroup, retireGroups } from './fan-out-group.ts';
import { createOwedDeliveries, type DeliveryScheduling } from './fan-out-schedule.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

/** The group's settings: checked at every start and updated in place when they differ. */
const GROUP_SETTINGS: FanOutGroupSettings = { maxRetryCount: 10, messageTimeoutMs: 30_000 };

/** Handler attempts before a message is handed back to the group (which retries it, then parks it). */
const HANDLER_ATTEMPTS = 5;

export interface FanOutOptions {
  store: EventStore;
  clock: Clock;
  tracker: SubscriptionTracker;
  /** Schedules each delivery owed (and starts its first attempt when it can): the delivery worker. */
  deliveries: DeliveryScheduling;
  logger?: Logger;
  registry?: EventRegistry;
  /** The base of the group's name (`webhook-fan-out`); the name carries the group's definition. */
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
  const base = options.group ?? FAN_OUT_GROUP;
  let group = '';
  const stats: FanOutStats = { events: 0, scheduled: 0, errors: 0 };
  const scheduleOwed = createOwedDeliveries({ store, registry, clock, tracker, deliveries });
  /** The last handling queued per cart stream: the next event of that cart waits for it. */
  const chains = new Map<string, Promise<void>>();
  let consumer: PersistentConsumer | undefined;
  let retry: NodeJS.Timeout | undefined;
  /** Groups of other definitions being drained of their parked messages, then deleted. */
  let retiring: Promise<void> | undefined;
  let stopped = false;
  const health = (options.supervisor ?? new Supervisor()).watch('webhook fan-out');

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
        stats.scheduled += await scheduleOwed(message.event);
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

  /** A parked message of a retired group, handled as the group would hand it out; answers whether it was. */
  function handleParked(event: RecordedEvent): Promise<boolean> {
    const { promise, resolve } = Promise.withResolvers<boolean>();
    const message: PersistentMessage = {
      event,
      retryCount: 0,
      ack: async () => resolve(true),
      nack: async () => resolve(false),
    };
    receive(message).then(
      () => resolve(false),
      () => resolve(false),
    );
    return promise;
  }

  /** Pauses still running, woken at once by stop(). */
  const sleeping = new Set<() => void>();
  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        sleeping.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      sleeping.add(wake);
    });
  }

  /** Retires the groups of other definitions, trying again after a pause while the store fails. */
  async function retire(retired: PersistentSubscriptionInfo[]): Promise<void> {
    for (let failures = 0; !stopped; failures++) {
      try {
        await retireGroups(store, retired, handleParked, logger);
        return;
      } catch (err) {
        const pauseMs = Math.min(30_000, 200 * 2 ** failures);
        logger?.warn({ err, pauseMs }, 'retiring a webhook fan-out group failed; trying again');
        await sleep(pauseMs);
      }
    }
  }

  return {
    async start() {
      const prepared = await prepareFanOutGroup({
        store,
        base,
        definition: FAN_OUT_DEFINITION,
        settings: GROUP_SETTINGS,
        logger,
      });
      group = prepared.group;
      consume();
      if (prepared.retired.length > 0) retiring = retire(prepared.retired);
    },
    stats: () => ({ ...stats }),
    async stop() {
      stopped = true;
      health.stopped();
      clearTimeout(retry);
      for (const wake of [...sleeping]) wake();
      await consumer?.stop().catch(() => {});
      await Promise.allSettled([...chains.values()]);
      await retiring;
    },
  };
}
