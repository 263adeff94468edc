/**
 * A delivery worker alone on a service's data, as the dispatcher process runs it, with a store wrapper
 * that counts and can hold what the store hands it, and the scheduling requests the fan-out makes.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { ExecutionContext } from 'ava';
import { loadConfig } from '../../cli/config.ts';
import { createDeliveryWorker, type DeliveryWorkerOptions } from '../../dispatcher/delivery-worker.ts';
import { createFanOut, type FanOutOptions } from '../../dispatcher/fan-out.ts';
import type { ScheduleRequest } from '../../dispatcher/fan-out-schedule.ts';
import { createSubscriptionTracker } from '../../dispatcher/subscription-tracker.ts';
import { type Clock, systemClock } from '../../domain/clock.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';

/** Waits until `count` delivery attempts are recorded (in one queue, when given). */
export async function attempts(store: EventStore, count: number, stream?: string): Promise<void> {
  for (let i = 0; ; i++) {
    const recorded = stream
      ? await store.readStream(stream)
      : await store.readAll({ filter: { eventTypes: ['WebhookDeliveryAttempted'] } });
    const events = recorded.filter((e) => e.type === 'WebhookDeliveryAttempted');
    if (events.length >= count) return;
    if (i > 250) throw new Error(`${events.length} of ${count} attempts recorded`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A store wrapper counting (and typing) the events handed to subscriptions and the streams read, noting the event
 * types of each append by stream; deliveries can be held.
 */
export function observe(store: EventStore) {
  const counted = { events: 0, streamReads: 0 };
  /** The type of every event handed to a subscription, in order. */
  const handed: string[] = [];
  const appends = new Map<string, string[][]>();
  let gate: Promise<void> = Promise.resolve();
  let open: () => void = () => {};
  let arrived = Promise.withResolvers<void>();
  const observed: EventStore = Object.create(store);
  observed.subscribeToAll = (options, handlers) =>
    store.subscribeToAll(options, {
      ...handlers,
      async onEvents(batch) {
        arrived.resolve();
        await gate;
        counted.events += batch.length;
        handed.push(...batch.map((e) => e.type));
        return handlers.onEvents(batch);
      },
    });
  observed.readStream = (streamId, options) => {
    counted.streamReads += 1;
    return store.readStream(streamId, options);
  };
  /** Appends the store refused (a wrong expected revision…), as `<types> <error name>`. */
  const refused: string[] = [];
  observed.append = async (streamId, events, options) => {
    const types = events.map((e) => e.type);
    try {
      const result = await store.append(streamId, events, options);
      appends.set(streamId, [...(appends.get(streamId) ?? []), types]);
      return result;
    } catch (err) {
      refused.push(`${types.join(',')} ${(err as Error).name}`);
      throw err;
    }
  };
  const hold = () => {
    arrived = Promise.withResolvers<void>();
    gate = new Promise((r) => {
      open = r;
    });
  };
  return {
    store: observed,
    counted,
    handed,
    /** The event types of each append that succeeded, by stream. */
    appendsTo: (streamId: string) => appends.get(streamId) ?? [],
    refused,
    hold,
    /** Resolves once a batch waits at the gate. */
    held: () => arrived.promise,
    /** Lets the batch at the gate through and holds the next one. */
    step() {
      const previous = open;
      hold();
      previous();
    },
    release: () => open(),
  };
}

/**
 * A delivery worker alone on a service's data (as the dispatcher process would run it); `wrap` puts a
 * store of the test's around the service's (one that fails some appends…), under the counting one.
 */
export async function workerOn(
  t: ExecutionContext,
  dataDir: string,
  clock: Clock,
  env: Record<string, string>,
  workerOptions: Pick<
    DeliveryWorkerOptions,
    | 'perSubscriptionConcurrency'
    | 'maxInFlight'
    | 'leaseMs'
    | 'openBody'
    | 'shard'
    | 'dispatcherId'
    | 'queueWindow'
    | 'random'
  > & { wrap?: (store: EventStore) => EventStore } = {},
) {
  const { wrap = (store: EventStore) => store, ...options } = workerOptions;
  const config = await loadConfig({ PDS_DATA_DIR: dataDir, ...env });
  const store = await openSqliteEventStore(path.join(dataDir, 'events.db'));
  const readStore = openSqliteReadStore(path.join(dataDir, 'dispatcher.db'));
  t.teardown(async () => {
    await readStore.close();
    await store.close();
  });
  const o = observe(wrap(store));
  const tracker = createSubscriptionTracker({ store });
  tracker.start();
  await tracker.caughtUp;
  t.teardown(() => tracker.stop());
  const worker = createDeliveryWorker({
    store: o.store,
    readStore,
    clock,
    tracker,
    secretKey: config.secretKey,
    allowPrivate: config.allowPrivateWebhookUrls,
    timeoutMs: 5_000,
    scheduleMs: config.webhookRetryScheduleMs,
    ...options,
  });
  t.teardown(() => worker.stop());
  return { ...o, worker, store, readStore };
}

/**
 * The dispatcher's webhook components alone on `store` (as a dispatcher process runs them): the
 * subscription tracker, a delivery worker on a store of its own in memory, and the fan-out with the
 * test's options, both on `clock` (the system's by default; `tick()` runs what fell due on a manual
 * one). `stop()` stops them (once; the test's teardown calls it too).
 */
export async function standaloneFanOut(
  t: ExecutionContext,
  store: EventStore,
  dataDir: string,
  options: Pick<FanOutOptions, 'bufferSize' | 'messageTimeoutMs' | 'retry' | 'group'> & {
    clock?: Clock;
  } = {},
) {
  const { clock = systemClock, ...fanOutOptions } = options;
  const config = await loadConfig({ PDS_DATA_DIR: dataDir });
  const readStore = openSqliteReadStore(':memory:');
  const tracker = createSubscriptionTracker({ store });
  tracker.start();
  await tracker.caughtUp;
  const worker = createDeliveryWorker({
    store,
    readStore,
    clock,
    tracker,
    secretKey: config.secretKey,
    allowPrivate: true,
    timeoutMs: 5_000,
    scheduleMs: config.webhookRetryScheduleMs,
  });
  worker.start();
  await worker.caughtUp;
  const fanOut = createFanOut({ store, clock, tracker, deliveries: worker, ...fanOutOptions });
  await fanOut.start();
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await fanOut.stop();
      await worker.stop();
      await tracker.stop();
      await readStore.close();
    })());
  t.teardown(stop);
  const tick = async () => (await fanOut.tick()) + (await worker.tick());
  return { fanOut, tick, stop };
}

/**
 * What the fan-out asks of the worker for the cart event at `revision` of `cartUuid`, owed to
 * subscription `webhookId`: a body naming the revision, so a receiver can tell the order.
 */
export function scheduleRequest(
  webhookId: string,
  cartUuid: string,
  revision: number,
  clock: Clock,
): ScheduleRequest {
  const at = clock.now().toISOString();
  const sourceEventId = randomUUID();
  return {
    stream: delivery.streamId(webhookId, cartUuid),
    command: {
      type: 'ScheduleDelivery',
      delivery_id: delivery.deliveryId(webhookId, sourceEventId),
      webhook_id: webhookId,
      event_kind: 'cart_status_updated',
      cart_uuid: cartUuid,
      store_id: 1,
      source_event_id: sourceEventId,
      source_revision: revision,
      source_position: revision + 1,
      body: JSON.stringify({ revision }),
      at,
    },
    metadata: {
      correlationId: randomUUID(),
      causationId: sourceEventId,
      actor: { type: 'system', id: 'test' },
      at,
    },
  };
}

/** The delivery ids scheduled on `hook`'s queue of cart `cartUuid`, in the queue's order. */
export async function scheduledDeliveryIds(
  store: EventStore,
  hook: string,
  cartUuid: string,
): Promise<string[]> {
  const queue = await store.readStream(delivery.streamId(hook, cartUuid));
  return queue
    .filter((e) => e.type === 'WebhookDeliveryScheduled')
    .map((e) => (e.data as { delivery_id: string }).delivery_id);
}
