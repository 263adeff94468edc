/**
 * A follower of the log: the one way the service folds the log into something it keeps
 * (docs/architecture.md, "Followers"). It subscribes after a position, hands `apply` every batch its
 * filter matches, in order, and says how far it is: `caughtUp` once everything that existed when it
 * started is applied, `waitFor(p)` once everything up to position p is, `settle()` once everything up
 * to the head of its filter is.
 *
 * The write side's aggregate indexes, the dispatcher's subscription tracker, its durable working sets
 * (`durable-follower.ts`) and the projector's projections are followers.
 */
import type { CatchUpSubscription, EventFilter, EventStore, RecordedEvent } from '../eventstore/port.ts';
import { createPositionWaiters } from './position-waiters.ts';

export interface FollowerOptions {
  /** Names the follower in errors (a `waitFor` that timed out) and logs. */
  name: string;
  store: EventStore;
  filter: EventFilter;
  /** Largest batch handed to `apply`. */
  maxBatchSize?: number;
  /** Applies a batch in order; the next waits for it. A rejection ends the follower with that error. */
  apply(events: RecordedEvent[]): Promise<void> | void;
  /**
   * The log was read through `position`, past the last event applied, with nothing of the filter in
   * between (a filtered subscription skipping others' events): where a checkpoint may move.
   */
  onProgress?(position: number): Promise<void> | void;
}

export interface Follower {
  /** Subscribes after `position` (0: from the first event). A second call does nothing. */
  start(position?: number): void;
  /** Resolves once every event that existed at start is applied; rejects if the follower ends first. */
  readonly caughtUp: Promise<void>;
  /** Settles when the follower ends: resolves after `stop()`, rejects with what ended it otherwise. */
  readonly done: Promise<void>;
  /** The position everything up to which is applied. */
  position(): number;
  /** Resolves once everything up to `position` is applied; rejects after `timeoutMs`. */
  waitFor(position: number, timeoutMs?: number): Promise<void>;
  /** Resolves once everything of the filter up to the store's head now is applied. */
  settle(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

const DEFAULT_WAIT_MS = 5_000;

export function createFollower(options: FollowerOptions): Follower {
  const { name, store, filter } = options;
  const progress = createPositionWaiters(name);
  const started = Promise.withResolvers<void>();
  const ended = Promise.withResolvers<void>();
  // Rejections nobody awaits must not crash the process: the owner reports them.
  started.promise.catch(() => {});
  ended.promise.catch(() => {});
  let subscription: CatchUpSubscription | undefined;
  let stopped = false;

  return {
    start(position = 0) {
      if (subscription || stopped) return;
      progress.applied(position);
      const onProgress = options.onProgress;
      subscription = store.subscribeToAll(
        { from: position > 0 ? { after: position } : 'start', filter, maxBatchSize: options.maxBatchSize },
        {
          async onEvents(batch) {
            await options.apply(batch);
            progress.applied(batch[batch.length - 1].position);
          },
          ...(onProgress && {
            async onProgress(reached) {
              await onProgress(reached);
              progress.applied(reached);
            },
          }),
        },
      );
      subscription.caughtUp.then(started.resolve, started.reject);
      subscription.done.then(ended.resolve, (err: unknown) => {
        started.reject(err);
        ended.reject(err);
      });
    },
    caughtUp: started.promise,
    done: ended.promise,
    position: () => progress.position,
    waitFor: (position, timeoutMs = DEFAULT_WAIT_MS) => progress.waitFor(position, timeoutMs),
    async settle(timeoutMs = DEFAULT_WAIT_MS) {
      await progress.waitFor(await store.headPosition(filter), timeoutMs);
    },
    async stop() {
      stopped = true;
      if (subscription) {
        await subscription.stop();
        return;
      }
      started.reject(new Error(`${name} stopped before it started`));
      ended.resolve();
    },
  };
}
