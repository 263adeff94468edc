/**
 * The event store every component of the service works through (docs/operations.md,
 * "Customer data"): appends seal the personal data of their events under the cart's key, and every read
 * (streams, the whole log, catch-up and persistent subscriptions, parked messages) opens it, or shows
 * it erased once an erasure destroyed the key. Whatever reads the log therefore never sees another form.
 *
 * Data that does not open (the key store unreachable, a key missing) fails the read: a catch-up
 * subscription drops and its follower subscribes again, paced by its supervisor; a persistent message
 * is handed back to its group only after a pause that grows with its retry count, since the group would
 * hand it out again at once.
 */
import type { EventStore, PersistentMessage, RecordedEvent } from '../eventstore/port.ts';
import type { CustomerData } from './customer-data.ts';
import { Supervisor } from './supervisor.ts';

export interface ProtectionOptions {
  /** The pause after a persistent message failed to open `retryCount` times before (the supervisor's). */
  retryDelay?: (retryCount: number) => number;
  /** Waits `ms` (a test waits for nothing). */
  sleep?: (ms: number) => Promise<void>;
}

const sleepFor = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

/** Event types whose data may be sealed: the rest pass through untouched, at no cost. */
const SEALED_TYPES = new Set([
  'CartCustomerIdentified',
  'CurbsideArrivalPosted',
  'WebhookDeliveryScheduled',
  'IdempotentResponseRecorded',
]);

export function protectCustomerData(
  store: EventStore,
  data: CustomerData,
  options: ProtectionOptions = {},
): EventStore {
  const fallback = new Supervisor();
  const retryDelay = options.retryDelay ?? ((n: number) => fallback.delay(n));
  const sleep = options.sleep ?? sleepFor;
  const openAll = async (events: RecordedEvent[]): Promise<RecordedEvent[]> => {
    if (!events.some((e) => SEALED_TYPES.has(e.type))) return events;
    return Promise.all(events.map((e) => (SEALED_TYPES.has(e.type) ? data.open(e) : e)));
  };
  return {
    kind: store.kind,
    async append(streamId, events, options) {
      const sealed = events.some((e) => SEALED_TYPES.has(e.type))
        ? await Promise.all(events.map((e) => (SEALED_TYPES.has(e.type) ? data.seal(streamId, e) : e)))
        : events;
      return store.append(streamId, sealed, options);
    },
    async readStream(streamId, options) {
      return openAll(await store.readStream(streamId, options));
    },
    async readAll(options) {
      return openAll(await store.readAll(options));
    },
    headPosition: (filter) => store.headPosition(filter),
    countAll: (options) => store.countAll(options),
    subscribeToAll(options, handlers) {
      return store.subscribeToAll(options, {
        ...handlers,
        onEvents: async (events) => handlers.onEvents(await openAll(events)),
      });
    },
    createPersistentSubscription: (group, settings) => store.createPersistentSubscription(group, settings),
    updatePersistentSubscription: (group, settings) => store.updatePersistentSubscription(group, settings),
    deletePersistentSubscription: (group) => store.deletePersistentSubscription(group),
    getPersistentSubscriptionInfo: (group) => store.getPersistentSubscriptionInfo(group),
    listPersistentSubscriptions: () => store.listPersistentSubscriptions(),
    subscribeToPersistent(group, handler, options) {
      return store.subscribeToPersistent(
        group,
        async (message: PersistentMessage) => {
          if (!SEALED_TYPES.has(message.event.type)) return handler(message);
          let event: RecordedEvent;
          try {
            event = await data.open(message.event);
          } catch (error) {
            await sleep(retryDelay(message.retryCount));
            throw error;
          }
          return handler({
            event,
            retryCount: message.retryCount,
            ack: () => message.ack(),
            nack: (action, reason) => message.nack(action, reason),
          });
        },
        options,
      );
    },
    async listParkedMessages(group, options) {
      const parked = await store.listParkedMessages(group, options);
      return Promise.all(parked.map(async (p) => ({ ...p, event: (await openAll([p.event]))[0] })));
    },
    replayParkedMessages: (group) => store.replayParkedMessages(group),
    dropExpired: () => store.dropExpired(),
    close: () => store.close(),
  };
}
