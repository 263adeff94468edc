/**
 * Retention (docs/operations.md, "Retention"): the maintenance job that drops what operational
 * records have outlived, apart from the projections (a projection's answer never depends on when it
 * runs: the `webhook_deliveries` projection prunes its own documents by its events' times). Each run
 * drops the event store's expired events (idempotency records: on the embedded store, deleted; on
 * EventStoreDB the server does so itself at a scavenge), then, given `deliveries`, deletes the
 * delivery queues finished before `PDS_DELIVERY_LOG_RETENTION` (`delivery-retention.ts`).
 */
import type { Clock } from '../domain/clock.ts';
import type { DroppedEvents, EventStore } from '../eventstore/port.ts';
import {
  type DeliveryRetentionOptions,
  type PrunedDeliveries,
  pruneFinishedDeliveries,
} from './delivery-retention.ts';

/** How often the job runs: records outlive their time by an hour at most, and a run finds little to do. */
export const RETENTION_EVERY_MS = 3_600_000;

export interface RetentionOptions {
  store: EventStore;
  clock: Clock;
  /** Finished webhook deliveries' retention: where its cursor is kept, and for how long they are kept. */
  deliveries?: Pick<DeliveryRetentionOptions, 'state' | 'registry' | 'retentionMs' | 'queuesPerRun'>;
  /** Told what each run dropped (logs, metrics). */
  onRun?(dropped: RetentionRun): void;
}

/** What one run dropped: expired events, and finished deliveries' queues (none without `deliveries`). */
export interface RetentionRun extends DroppedEvents {
  deliveries: PrunedDeliveries;
}

export interface Retention {
  /** Runs the job when it is due on the clock (at once the first time); resolves with how many runs it made. */
  tick(): Promise<number>;
  /** Runs it now. */
  run(): Promise<RetentionRun>;
}

export function createRetention(options: RetentionOptions): Retention {
  const { store, clock } = options;
  let due = clock.now().getTime();
  let running: Promise<RetentionRun> | undefined;
  const once = async (): Promise<RetentionRun> => {
    const dropped = await store.dropExpired();
    const deliveries = options.deliveries
      ? await pruneFinishedDeliveries({ ...options.deliveries, store, clock })
      : { queues: 0, deliveries: 0, events: 0 };
    return { ...dropped, deliveries };
  };
  const run = async (): Promise<RetentionRun> => {
    // One run at a time: a tick while one is under way waits for it instead of starting another.
    running ??= once().finally(() => {
      running = undefined;
    });
    const dropped = await running;
    options.onRun?.(dropped);
    return dropped;
  };
  return {
    async tick() {
      const now = clock.now().getTime();
      if (now < due) return 0;
      due = now + RETENTION_EVERY_MS;
      await run();
      return 1;
    },
    run,
  };
}
