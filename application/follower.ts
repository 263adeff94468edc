/**
 * A follower of the log: the one way the service folds the log into something it keeps
 * (docs/architecture.md, "Followers"). It subscribes after a position, hands `apply` every batch its
 * filter matches, in order, and says how far it is: `caughtUp` once everything that existed when it
 * started is applied, `waitFor(p)` once everything up to position p is, `settle()` once everything of
 * its filter up to the log's head now is (the follower then stands at that head).
 *
 * The write side's aggregate indexes, the dispatcher's subscription tracker, its durable working sets
 * (`durable-follower.ts`) and the projector's projections are followers.
 *
 * A follower outlives its subscription: when the subscription ends with an error (the store dropped
 * it, or `apply` failed), the follower subscribes again after everything it applied, paced by its
 * supervisor (`supervisor.ts`), until `stop()`. Nothing is skipped and nothing applied twice.
 */
import type { CatchUpSubscription, EventFilter, EventStore, RecordedEvent } from '../eventstore/port.ts';
import { createPositionWaiters } from './position-waiters.ts';
import { Supervisor } from './supervisor.ts';

export interface FollowerOptions {
  /** Names the follower in errors (a `waitFor` that timed out) and logs. */
  name: string;
  store: EventStore;
  filter: EventFilter;
  /** Largest batch handed to `apply`. */
  maxBatchSize?: number;
  /**
   * Whether the owner reflects already the events of `streamId` up to `position` (its own appends):
   * the store may then pass over them, telling `onProgress` (docs/read-side.md, "Own appends").
   */
  known?(streamId: string, position: number): boolean;
  /**
   * Applies a batch in order; the next waits for it. A rejection ends the subscription: the follower
   * subscribes again after the last batch applied, and hands this batch again.
   */
  apply(events: RecordedEvent[]): Promise<void> | void;
  /**
   * The log was read through `position`, past the last event applied, with nothing of the filter in
   * between (a filtered subscription skipping others' events): where a checkpoint may move.
   */
  onProgress?(position: number): Promise<void> | void;
  /** Paces resubscriptions and reports this follower's health under `name`; one of its own by default. */
  supervisor?: Supervisor;
  /**
   * Where to subscribe again after a drop: after the position it answers. Default: the last position
   * applied. An owner whose `apply` may have stored part of a batch answers its stored checkpoint.
   */
  resumeAfter?(): Promise<number> | number;
  /** The subscription dropped; it is opened again after a pause. */
  onDrop?(error: unknown): void;
  /** The subscription caught up: at start, and again after each drop. */
  onCaughtUp?(): void;
}

export interface Follower {
  /** Subscribes after `position` (0: from the first event). A second call does nothing. */
  start(position?: number): void;
  /** Resolves once every event that existed at start is applied; rejects if it is stopped first. */
  readonly caughtUp: Promise<void>;
  /** Resolves when the follower ends, after `stop()`. */
  readonly done: Promise<void>;
  /** The position everything up to which is applied. */
  position(): number;
  /** Resolves once everything up to `position` is applied; rejects after `timeoutMs`. */
  waitFor(position: number, timeoutMs?: number): Promise<void>;
  /**
   * Resolves once everything of the filter up to the store's head now is applied; the follower's
   * position is then at least that head.
   */
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
  const health = (options.supervisor ?? new Supervisor()).watch(name);
  let subscription: CatchUpSubscription | undefined;
  let retry: NodeJS.Timeout | undefined;
  let stopped = false;

  const handlers = {
    async onEvents(batch: RecordedEvent[]) {
      await options.apply(batch);
      progress.applied(batch[batch.length - 1].position);
    },
    // Every follower takes the store's progress past other events, whether or not its owner stores it:
    // a follower of rare streams then knows it has seen the log up to near its head, and `settle`
    // searches only the stretch after that (docs/read-side.md, "Progress past other streams' events").
    async onProgress(reached: number) {
      await options.onProgress?.(reached);
      progress.applied(reached);
    },
  };

  function subscribe(position: number): void {
    const current = store.subscribeToAll(
      {
        from: position > 0 ? { after: position } : 'start',
        filter,
        maxBatchSize: options.maxBatchSize,
        known: options.known,
      },
      handlers,
    );
    subscription = current;
    current.caughtUp.then(
      () => {
        if (stopped || subscription !== current) return;
        health.up();
        started.resolve();
        options.onCaughtUp?.();
      },
      () => {},
    );
    current.done.then(
      () => {
        if (stopped) ended.resolve();
      },
      (err: unknown) => {
        if (stopped) {
          ended.resolve();
          return;
        }
        options.onDrop?.(err);
        retry = setTimeout(() => void resubscribe(), health.dropped(err));
      },
    );
  }

  async function resubscribe(): Promise<void> {
    retry = undefined;
    if (stopped) return;
    let position: number;
    try {
      position = options.resumeAfter ? await options.resumeAfter() : progress.position;
    } catch (err) {
      // Where to resume is not known yet (the read store is down too): another pause.
      options.onDrop?.(err);
      retry = setTimeout(() => void resubscribe(), health.dropped(err));
      return;
    }
    if (stopped) return;
    health.resubscribed();
    progress.applied(position);
    subscribe(position);
  }

  /**
   * Waits until everything of the filter up to the log's head now is applied, then says the follower
   * has seen the log up to that head. It reads the head (one event) and searches forward for a match
   * only after the follower's own position, never back from the end: a search back for the last match
   * of a rare filter walks the whole log (docs/read-side.md, "Progress past other streams' events").
   */
  async function settle(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const head = await store.headPosition();
    while (progress.position < head) {
      const [next] = await store.readAll({ after: progress.position, filter, maxCount: 1 });
      if (!next || next.position > head) {
        progress.applied(head);
        return;
      }
      await progress.waitFor(next.position, Math.max(0, deadline - Date.now()));
    }
  }

  return {
    start(position = 0) {
      if (subscription || stopped) return;
      progress.applied(position);
      subscribe(position);
    },
    caughtUp: started.promise,
    done: ended.promise,
    position: () => progress.position,
    waitFor: (position, timeoutMs = DEFAULT_WAIT_MS) => progress.waitFor(position, timeoutMs),
    settle: (timeoutMs = DEFAULT_WAIT_MS) => settle(timeoutMs),
    async stop() {
      stopped = true;
      health.stopped();
      clearTimeout(retry);
      started.reject(new Error(`${name} stopped before it caught up`));
      if (subscription) await subscription.stop().catch(() => {});
      ended.resolve();
    },
  };
}
