/**
 * Retention (docs/operations.md, "Retention"): the maintenance job that drops what operational
 * records have outlived, apart from the projections (a projection's answer never depends on when it
 * runs). Each run drops the event store's expired events: on the embedded store, deleted; on
 * EventStoreDB the server does so itself at a scavenge.
 */
import type { Clock } from '../domain/clock.ts';
import type { DroppedEvents, EventStore } from '../eventstore/port.ts';

/** How often the job runs: records outlive their time by an hour at most, and a run finds little to do. */
export const RETENTION_EVERY_MS = 3_600_000;

export interface RetentionOptions {
  store: EventStore;
  clock: Clock;
  /** Told what each run dropped (logs, metrics). */
  onRun?(dropped: DroppedEvents): void;
}

export interface Retention {
  /** Runs the job when it is due on the clock (at once the first time); resolves with how many runs it made. */
  tick(): Promise<number>;
  /** Runs it now. */
  run(): Promise<DroppedEvents>;
}

export function createRetention(options: RetentionOptions): Retention {
  const { store, clock } = options;
  let due = clock.now().getTime();
  let running: Promise<DroppedEvents> | undefined;
  const run = async (): Promise<DroppedEvents> => {
    // One run at a time: a tick while one is under way waits for it instead of starting another.
    running ??= store.dropExpired().finally(() => {
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
