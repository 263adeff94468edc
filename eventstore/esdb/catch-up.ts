import type { AllStreamResolvedEvent, EventStoreDBClient } from '@eventstore/db-client';
import {
  type CatchUpHandlers,
  type CatchUpSubscription,
  type CatchUpSubscriptionOptions,
  EventStoreError,
  EventStoreUnavailableError,
  type RecordedEvent,
} from '../port.ts';
import { DEFAULT_BATCH_SIZE, handlerScope, type Running, settleable } from './client.ts';
import { mapError } from './errors.ts';
import { isBeyond, positionOf, readPositionOf, serverFilter, toRecorded, visible } from './translate.ts';

export function createCatchUp(client: EventStoreDBClient, running: Running) {
  function subscribeToAll(
    options: CatchUpSubscriptionOptions,
    handlers: CatchUpHandlers,
  ): CatchUpSubscription {
    const maxBatch = Math.max(1, options.maxBatchSize ?? DEFAULT_BATCH_SIZE);
    const from = options.from ?? 'start';
    const after = typeof from === 'object' ? positionOf(from.after) : undefined;
    const caughtUp = settleable();
    const done = settleable();
    const scope = {};
    const sub = client.subscribeToAll({
      fromPosition: readPositionOf(from),
      filter: serverFilter(options.filter),
    });

    // Every item the stream hands over gets a sequence number; an item is settled once it was
    // delivered (its handler call resolved) or dropped by the filters here.
    let received = 0;
    let settled = 0;
    /** Items that must be settled before caught up: those the server sent before its caught-up signal. */
    let caughtUpAt: number | undefined;
    let isCaughtUp = false;
    const queue: Array<{ seq: number; event: RecordedEvent }> = [];
    let pumping: Promise<void> | undefined;
    let lastPosition: number | undefined;
    let stopped = false;
    const entry = { stop };
    running.add(entry);

    sub.on('data', (resolved: AllStreamResolvedEvent) => {
      if (stopped) return;
      const seq = ++received;
      const event = resolved.event;
      try {
        if (event && (!after || isBeyond(event.position, after, true)) && visible(event, options.filter)) {
          queue.push({ seq, event: toRecorded(event) });
          // Back-pressure: hold the stream once a full batch waits for the handler.
          if (queue.length >= maxBatch) sub.pause();
          if (!pumping) pumping = pump();
        } else if (queue.length === 0 && !pumping) {
          settled = seq;
          checkCaughtUp();
        }
      } catch (err) {
        fail(mapError(err));
      }
    });
    sub.on('caughtUp', () => {
      // Events the server sent before the signal were handed over or still sit in the stream buffer.
      caughtUpAt ??= received + sub.readableLength;
      checkCaughtUp();
    });
    sub.on('error', (err) => fail(mapError(err)));
    sub.on('close', () =>
      fail(new EventStoreUnavailableError('the $all subscription was closed by the server')),
    );

    async function pump(): Promise<void> {
      // Yield once so `pumping` is set before anything below can clear it.
      await Promise.resolve();
      try {
        // The loop test and the `finally` run in one turn: an item queued meanwhile is never stranded.
        while (queue.length > 0 && !stopped) {
          const batch = queue.splice(0, maxBatch);
          if (sub.isPaused()) sub.resume();
          await handlerScope.run(scope, () => handlers.onEvents(batch.map((b) => b.event)));
          if (stopped) return;
          lastPosition = batch[batch.length - 1].event.position;
          settled = queue.length > 0 ? queue[0].seq - 1 : received;
          checkCaughtUp();
        }
      } catch (err) {
        // A handler error ends the subscription with that very error.
        fail(err instanceof Error ? err : new Error(String(err)));
      } finally {
        pumping = undefined;
      }
    }

    function checkCaughtUp(): void {
      if (isCaughtUp || stopped || caughtUpAt === undefined || settled < caughtUpAt) return;
      isCaughtUp = true;
      try {
        handlers.onCaughtUp?.();
      } catch (err) {
        fail(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      caughtUp.resolve();
    }

    function end(err?: Error): void {
      stopped = true;
      running.delete(entry);
      queue.length = 0;
      void sub.unsubscribe().catch(() => {});
      caughtUp.reject(err ?? new EventStoreError('the subscription stopped before it caught up'));
      if (err) done.reject(err);
      else done.resolve();
    }

    function fail(err: Error): void {
      if (!stopped) end(err);
    }

    async function stop(): Promise<void> {
      const current = pumping;
      if (!stopped) end();
      if (current && handlerScope.getStore() !== scope) await current;
    }

    return {
      caughtUp: caughtUp.promise,
      done: done.promise,
      lastPosition: () => lastPosition,
      stop,
    };
  }

  return { subscribeToAll };
}
