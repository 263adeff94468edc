/**
 * Catch-up subscriptions of the embedded event store: from a position, in batches with back-pressure,
 * live once caught up (woken by appends, never polling), telling a filtered reader how far it read past
 * the events it skips (`onProgress`, docs/read-side.md).
 */
import type { CatchUpHandlers, CatchUpSubscription, CatchUpSubscriptionOptions } from '../port.ts';
import type { Log } from './log.ts';
import type { ReadRoute, Reads } from './reads.ts';
import { toRecorded } from './rows.ts';

/** How far a filtered subscription reads past skipped events before it tells `onProgress`. */
const PROGRESS_EVERY = 100_000;

export function subscribeToAll(
  log: Log,
  reads: Reads,
  opts: CatchUpSubscriptionOptions,
  handlers: CatchUpHandlers,
): CatchUpSubscription {
  const { nextChunk, headSync, startPosition } = reads;
  const maxBatch = opts.maxBatchSize ?? 500;
  let stopped = false;
  let last: number | undefined;
  let resolveCaughtUp!: () => void;
  const caughtUp = new Promise<void>((r) => {
    resolveCaughtUp = r;
  });
  let isCaughtUp = false;
  log.retainWatcher();

  const run = async (): Promise<void> => {
    let position = startPosition(opts.from);
    let reported = position;
    const route: ReadRoute = {};
    let yieldedAt = performance.now();
    try {
      while (!stopped) {
        const { rows, reached } = nextChunk(position, opts.filter, maxBatch, route, opts.known);
        if (rows.length > 0) {
          const events = rows.map(toRecorded);
          await handlers.onEvents(events);
          last = events[events.length - 1].position;
        }
        position = reached;
        // Events skipped by the filter: told when caught up, and every PROGRESS_EVERY positions.
        if (handlers.onProgress && reached > Math.max(last ?? 0, reported)) {
          if (reached >= headSync() || reached - reported >= PROGRESS_EVERY) {
            reported = reached;
            await handlers.onProgress(reached);
          }
        }
        // Reads are synchronous and handlers often settle in microtasks: a long catch-up would hold
        // the event loop (no HTTP, no timers) until it ends. Let the loop turn every ~20 ms.
        if (performance.now() - yieldedAt > 20) {
          await new Promise((resolve) => setImmediate(resolve));
          yieldedAt = performance.now();
        }
        if (reached >= headSync()) {
          if (!isCaughtUp) {
            isCaughtUp = true;
            resolveCaughtUp();
            handlers.onCaughtUp?.();
          }
          // Reads are synchronous: no append of this process can slip between the check and the wait.
          if (!stopped && reached >= headSync()) await log.appended.wait();
        }
      }
    } finally {
      log.releaseWatcher();
    }
  };
  const done = run();
  done.catch(() => {});
  return {
    caughtUp,
    done,
    lastPosition: () => last,
    async stop() {
      stopped = true;
      log.appended.fire();
      await done.catch(() => {});
    },
  };
}
