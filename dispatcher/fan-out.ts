/**
 * Fan-out (docs/webhooks.md): a persistent subscription group on the event store receives every
 * `CartStatusChanged` (checkout included) and `CartAbandoned`. For each, it schedules the deliveries
 * the event owes (`fan-out-schedule.ts`), then acknowledges. A crash before the ack redelivers the
 * message; scheduling is idempotent (the delivery id is derived from subscription and event, and
 * decided on the queue as stored), so nothing is lost and nothing is owed twice.
 *
 * One cart's events are handled in order, and one that fails is tried again in place until it
 * succeeds, never parked (`fan-out-handling.ts`). The group is found, updated or made at start (a
 * migration from a group of another definition waiting, in the background, for that group's
 * checkpoint), and what earlier versions left parked is handled, then replayed to clear it
 * (`fan-out-group.ts`; docs/operations.md, "The fan-out's group"). The queue also orders by the cart event's revision,
 * whatever the write order.
 */
import type { Logger } from 'pino';
import { Supervisor } from '../application/supervisor.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventRegistry } from '../domain/events.ts';
import { eventRegistry } from '../domain/index.ts';
import {
  type EventStore,
  MAX_RETRY_COUNT,
  type PersistentConsumer,
  type PersistentMessage,
  type RecordedEvent,
} from '../eventstore/port.ts';
import { FAN_OUT_DEFINITION, FAN_OUT_GROUP } from '../webhooks/fan-out-group.ts';
import {
  type FanOutGroupSettings,
  type PreparedGroup,
  prepareFanOutGroup,
  prepareWhenCheckpointed,
  retireGroups,
  settleParkedMessages,
} from './fan-out-group.ts';
import { createHandlings, type HandlingStats, KEPT } from './fan-out-handling.ts';
import { skippingOld } from './fan-out-retention.ts';
import { type RetryingView, type RetryPacing, retryPause } from './fan-out-retry.ts';
import { createOwedDeliveries, type DeliveryScheduling } from './fan-out-schedule.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

/** The group's settings, checked at every start and updated in place when they differ: it never parks. */
const GROUP_SETTINGS: FanOutGroupSettings = { maxRetryCount: MAX_RETRY_COUNT, messageTimeoutMs: 30_000 };

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
  /** The group's message timeout (30 s): a message held longer is handed out again. */
  messageTimeoutMs?: number;
  /** The pauses between tries of a cart event that failed. */
  retry?: RetryPacing;
  /** Joins the group again after a drop, paced, and reports the consumer's health. */
  supervisor?: Supervisor;
  /** Seals the customer in each body before it is scheduled (`fan-out-schedule.ts`). */
  sealBody?: (body: string) => Promise<string>;
  /**
   * `PDS_DELIVERY_LOG_RETENTION`: cart events older than this (less a margin) are acknowledged unsent,
   * their deliveries possibly pruned already (`fan-out-retention.ts`). None: every event is fanned out.
   */
  deliveryLogRetentionMs?: number;
  /** Told of each cart event skipped as older than the retention (a metric). */
  onSkipped?(event: RecordedEvent): void;
}

export type FanOutStats = HandlingStats & {
  /** Cart events acknowledged unsent, older than the deliveries' retention. */
  skipped: number;
};

export interface FanOut {
  start(): Promise<void>;
  stats(): FanOutStats;
  /** The cart events being tried again, for `/metrics`. */
  retrying(): RetryingView;
  /** Runs the retries due on the clock (tests that move it; a real timer otherwise). */
  tick(): Promise<number>;
  stop(): Promise<void>;
}

/** A parked message, handled as the group would hand it out; answers whether it was. */
function parkedHandler(handlings: ReturnType<typeof createHandlings>) {
  return async (event: RecordedEvent): Promise<boolean> => {
    let acked = false;
    const message: PersistentMessage = {
      event,
      retryCount: 0,
      ack: async () => {
        acked = true;
      },
      nack: async () => {},
    };
    await handlings.receive(message, KEPT).run;
    return acked;
  };
}

export function createFanOut(options: FanOutOptions): FanOut {
  const { store, clock, tracker, deliveries, logger } = options;
  const registry = options.registry ?? eventRegistry;
  const base = options.group ?? FAN_OUT_GROUP;
  const owed = skippingOld(
    createOwedDeliveries({ store, registry, clock, tracker, deliveries, sealBody: options.sealBody }),
    {
      clock,
      retentionMs: options.deliveryLogRetentionMs,
      logger,
      onSkipped: options.onSkipped,
    },
  );
  const handlings = createHandlings({
    scheduleOwed: owed.schedule,
    clock,
    logger,
    pacing: options.retry,
  });
  let group = '';
  let consumer: PersistentConsumer | undefined;
  let generation = KEPT;
  let retry: NodeJS.Timeout | undefined;
  /** Work at start that may have to wait for the store: handling parked messages, retiring other groups. */
  const background: Promise<void>[] = [];
  let stopped = false;
  const health = (options.supervisor ?? new Supervisor()).watch('webhook fan-out');

  /**
   * Joins the group; when the connection drops, joins again after a pause (docs/operations.md,
   * "Recovery"). The group hands out again whatever was not acked, so nothing is lost.
   */
  function consume(): void {
    const joined = ++generation;
    const current = store.subscribeToPersistent(
      group,
      (message) => {
        const { joined: copy, run } = handlings.receive(message, joined);
        // A copy joined to its handling frees its place in the consumer's buffer at once.
        return copy ? undefined : run;
      },
      { bufferSize: options.bufferSize ?? 32 },
    );
    consumer = current;
    handlings.setLive(joined);
    health.up();
    current.done.catch((err: unknown) => {
      if (stopped || consumer !== current) return;
      handlings.setLive(undefined);
      retry = setTimeout(() => {
        retry = undefined;
        if (stopped) return;
        health.resubscribed();
        consume();
      }, health.dropped(err));
    });
  }

  const handleParked = parkedHandler(handlings);

  const groupOptions = {
    store,
    base,
    definition: FAN_OUT_DEFINITION,
    settings: {
      ...GROUP_SETTINGS,
      messageTimeoutMs: options.messageTimeoutMs ?? GROUP_SETTINGS.messageTimeoutMs,
    },
    logger,
  };

  /** Runs `work` until it succeeds or the fan-out stops, pausing longer after each failure. */
  function keepTrying(what: string, work: () => Promise<unknown>): void {
    const run = async () => {
      for (let failures = 0; !stopped; failures++) {
        try {
          await work();
          return;
        } catch (err) {
          const pauseMs = retryPause(failures, options.retry);
          logger?.warn({ err, group, pause_ms: pauseMs }, `${what} failed; trying again`);
          await handlings.pause(`start:${what}`, pauseMs);
        }
      }
    };
    background.push(run());
  }

  /** Joins the group, and hands what is parked (in it, or in groups of another definition) to the fan-out. */
  function begin(prepared: PreparedGroup): void {
    group = prepared.group;
    consume();
    if (prepared.parked > 0) {
      logger?.warn(
        { group, parked: prepared.parked },
        'webhook fan-out group holds parked messages: scheduling their webhooks',
      );
    }
    // Parked before the group was set never to park (or by hand): their webhooks are owed. Looked
    // for whatever the group's count said, which EventStoreDB shows as 0 while it loads the group.
    keepTrying('handling the parked messages of the webhook fan-out group', () =>
      settleParkedMessages(store, group, handleParked, logger),
    );
    if (prepared.retired.length > 0) {
      keepTrying('retiring a webhook fan-out group of another definition', () =>
        retireGroups(store, prepared.retired, handleParked, logger),
      );
    }
  }

  return {
    async start() {
      const since = clock.now().getTime();
      const prepared = await prepareFanOutGroup(groupOptions);
      if (!('waiting' in prepared)) {
        begin(prepared);
        return;
      }
      // Not joined yet: the group of this definition is made once the other's checkpoint shows.
      group = prepared.group;
      keepTrying('migrating from a webhook fan-out group of another definition', async () => {
        const checkpointed = await prepareWhenCheckpointed(prepared, {
          ...groupOptions,
          clock,
          since,
          pacing: options.retry,
          pause: (ms) => handlings.pause('start:checkpoint', ms),
          stopped: () => stopped,
        });
        if (checkpointed && !stopped) begin(checkpointed);
      });
    },
    stats: () => ({ ...handlings.stats, skipped: owed.skipped() }),
    retrying: () => handlings.retrying(),
    tick: () => handlings.tick(),
    async stop() {
      stopped = true;
      health.stopped();
      clearTimeout(retry);
      const stopping = handlings.stop();
      await consumer?.stop().catch(() => {});
      await stopping;
      // Work in the background may have started more (a migration that waited begins the rest).
      while (background.length > 0) await Promise.allSettled(background.splice(0));
    },
  };
}
