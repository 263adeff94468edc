/**
 * The delivery worker's runs on its queues (docs/webhooks.md, "Order, isolation, durability"): at most
 * one per queue at a time (`busy`), each working the queue's head until it waits for a later time or a
 * request slot, or the queue is empty. A run that meets an unexpected error (the store unavailable…)
 * has its queue tried again `errorRetryMs` later; any other run ends by telling `after`, which decides
 * when the queue is next due.
 */
import * as delivery from '../domain/webhook-delivery.ts';
import { type AttemptContext, type StartedAttempt, workHeads } from './delivery-attempt.ts';
import type { Queue } from './delivery-queues.ts';
import type { Scheduler } from './scheduler.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

/** The subscription of a delivery queue's stream: its request slots' key (`dispatcher/slots.ts`). */
export const subscriptionOf = (stream: string) => delivery.parseStreamId(stream)?.webhook_id;

export interface QueueRuns {
  /**
   * Starts a run on the queue of `stream` unless it has none to make (held no more, a run under way,
   * the worker stopped): answered undefined then, and a slot of subscription `slot` it was given is
   * the caller's to give back. First sends `started`, an attempt begun with the delivery's scheduling,
   * which left the queue busy.
   */
  work(stream: string, started?: StartedAttempt, slot?: string): Promise<void> | undefined;
  /** Resolves once the runs under way have ended (a graceful stop: no attempt left without its result). */
  settled(): Promise<void>;
}

export function createQueueRuns(parts: {
  ctx: AttemptContext;
  tracker: Pick<SubscriptionTracker, 'current' | 'ready'>;
  scheduler: Scheduler;
  errorRetryMs: number;
  stopped(): boolean;
  after(queue: Queue): void;
}): QueueRuns {
  const { ctx, tracker, scheduler, errorRetryMs, stopped, after } = parts;
  const working = new Set<Promise<void>>();

  function work(stream: string, started?: StartedAttempt, slot?: string): Promise<void> | undefined {
    const queue = started?.queue ?? ctx.queues.held.get(stream);
    if (!queue || (!started && (queue.busy || stopped()))) return undefined;
    queue.busy = true;
    const key = subscriptionOf(stream);
    if (key) ctx.slots.forget(key, stream);
    const run = runOn(queue, started, slot ?? null);
    working.add(run);
    void run.finally(() => working.delete(run));
    return run;
  }

  async function runOn(queue: Queue, started: StartedAttempt | undefined, slot: string | null) {
    const { stream } = queue;
    let retryAt: Date | undefined;
    try {
      await workHeads(ctx, queue, tracker, stopped, started, { held: slot });
    } catch (err) {
      if (!stopped()) {
        ctx.stats.errors += 1;
        ctx.logger?.error({ err, stream }, 'webhook delivery failed; retrying the queue later');
        retryAt = new Date(ctx.now().getTime() + errorRetryMs);
      }
    } finally {
      queue.busy = false;
      if (retryAt) scheduler.schedule(stream, retryAt, () => work(stream));
      else {
        ctx.queues.keepOrDrop(queue);
        after(queue);
      }
    }
  }

  return {
    work,
    settled: async () => {
      await Promise.allSettled([...working]);
    },
  };
}
