/**
 * The delivery worker's window of queues (docs/webhooks.md, "Scale"): at most `PDS_WEBHOOK_QUEUE_WINDOW`
 * queues held, the others cold in `webhook_delivery_queues` (`dispatcher/cold-queues.ts`).
 *
 * - *Filling*: when the window has room (a queue settled or left it) and a cold queue is due, the due
 *   cold documents are loaded in due order, as many as the room (one walk of the `due_at` index,
 *   resumed after the held queues due first: `ColdQueues.due`).
 *   Room freed one queue at a time is gathered to a sixteenth of the window first, so a full window
 *   draining a backlog walks the index once per batch, not once per delivery; but when cold queues
 *   are due and every held queue is due too (none to make room with), the first queue to leave fills.
 * - *One timer* for the earliest cold queue due later, not one per cold queue.
 * - *Making room*: while cold queues are due, a held queue that waits for a later time (a retry, a
 *   lease) leaves the window for them, so queues in retry behind a dead receiver do not keep the
 *   others' due deliveries out.
 */
import type { Logger } from 'pino';
import type { DurableFollowerOptions } from '../application/durable-follower.ts';
import type { EventRegistry } from '../domain/events.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Collection } from '../projections/read-store.ts';
import {
  ColdQueues,
  countedIn,
  type DeliveryQueueDoc,
  earliest,
  PENDING_FIELD,
  QUEUE_GUARD,
  QUEUE_INDEXES,
  UPGRADED_FROM,
  upgradedDocument,
} from './cold-queues.ts';
import { DeliveryQueues, type Queue } from './delivery-queues.ts';
import type { Scheduler } from './scheduler.ts';

/** The scheduler's key of the window's one timer (a stream id never starts with `$`). */
const COLD_TIMER = '$cold-queues';

export interface QueueWindow {
  /** Takes back the queues due first, up to the window, at start; answers how many. */
  restore(collection: Collection<DeliveryQueueDoc>): Promise<number>;
  /** The worker is ready (every event that existed at start applied): fills what room is left. */
  ready(): void;
  /** A queue went cold, due at `dueAt` (null: never). */
  cooled(dueAt: string | null): void;
  /** A queue left the window: its room may take a due cold one. */
  freed(): void;
  /** Whether the held `queue`, next due at `at`, leaves the window for cold queues due sooner (and left). */
  yieldsTo(queue: Queue, at: Date): boolean;
  /** The fill under way, if any, has ended (tests, and a stop). */
  idle(): Promise<void>;
}

export function createQueueWindow(parts: {
  queues: DeliveryQueues;
  cold: ColdQueues;
  scheduler: Scheduler;
  now(): Date;
  /** Decides when a queue taken into the window is worked. */
  reschedule(queue: Queue): void;
  stopped(): boolean;
  errorRetryMs: number;
  logger?: Logger;
}): QueueWindow {
  const { queues, cold, scheduler, now, reschedule, stopped, logger } = parts;
  const batch = Math.max(1, Math.ceil(queues.window / 16));
  /** The earliest due time known of a cold queue (null: none known). */
  let coldDueAt: string | null = null;
  let ready = false;
  let filling: Promise<void> | undefined;
  let again = false;
  /** The earliest due time of the queues that went cold while a fill walked the index (it may miss them). */
  let cooledDuringFill: string | null = null;
  /** The last look for held queues to make room found none: none until one waits for a later time. */
  let nothingToYield = false;
  /** Cold queues are due and the window is full of queues due too: the first queue to leave fills. */
  let waitingForRoom = false;

  const room = () => queues.window - queues.held.size;
  const dueNow = (at: string | null) => at !== null && Date.parse(at) <= now().getTime();

  /** The one timer, at the earliest cold due time: now, when one is due and nothing else will fill. */
  function arm(at: string | null): void {
    coldDueAt = at;
    waitingForRoom = false;
    if (at === null || stopped()) {
      scheduler.cancel(COLD_TIMER);
      return;
    }
    // Due already, and no room nor a held queue to make room with: the next queue to leave fills.
    if (dueNow(at) && room() <= 0 && nothingToYield) {
      scheduler.cancel(COLD_TIMER);
      waitingForRoom = true;
      return;
    }
    const when = new Date(Math.max(Date.parse(at), now().getTime()));
    if (scheduler.dueAt(COLD_TIMER)?.getTime() === when.getTime()) return;
    scheduler.schedule(COLD_TIMER, when, () => fill());
  }

  /** Held queues waiting for a later time leave the window, up to `wanted` of them. */
  function makeRoom(wanted: number): void {
    const at = now().getTime();
    let left = 0;
    for (const queue of [...queues.held.values()]) {
      if (left >= wanted) break;
      const due = delivery.headDueAt(queue.state);
      if (queue.busy || due === null || Date.parse(due) <= at) continue;
      queues.evict(queue);
      left += 1;
    }
    nothingToYield = left === 0;
  }

  function fill(): Promise<void> {
    if (!ready || stopped()) return Promise.resolve();
    if (filling) {
      again = true;
      return filling;
    }
    // Set before the first step runs: what that step frees asks again rather than starting another.
    const { promise, resolve } = Promise.withResolvers<void>();
    filling = promise;
    void (async () => {
      try {
        do {
          again = false;
          cooledDuringFill = null;
          if (room() <= 0 && dueNow(coldDueAt) && !nothingToYield) makeRoom(batch);
          const { docs, next } = await cold.due(now(), Math.max(0, room()), (s) => queues.held.has(s));
          for (const doc of docs) {
            if (queues.held.has(doc._id)) continue;
            // Not taken: the next walk of the index must find it again.
            if (room() <= 0 || stopped()) cold.rewind();
            else reschedule(queues.restore(doc));
          }
          arm(earliest(next, cooledDuringFill));
        } while (again && !stopped() && room() > 0);
      } catch (err) {
        logger?.error({ err }, 'due delivery queues not read from the dispatcher store; tried again later');
        arm(new Date(now().getTime() + parts.errorRetryMs).toISOString());
      } finally {
        filling = undefined;
        resolve();
      }
    })();
    return promise;
  }

  function freed(): void {
    // Room is gathered to a batch while the timer will fill; without it, the due cold queues would wait.
    if (dueNow(coldDueAt) && (room() >= batch || (waitingForRoom && room() > 0))) void fill();
  }

  return {
    async restore(collection) {
      cold.attach(collection, await ColdQueues.storedPending(collection));
      const { docs } = await cold.due(new Date(8.64e15), queues.window, () => false);
      for (const doc of docs) reschedule(queues.restore(doc));
      await cold.refreshOldest();
      return docs.length;
    },
    ready() {
      ready = true;
      void fill();
    },
    cooled(dueAt) {
      if (dueAt === null) return;
      if (dueNow(dueAt)) nothingToYield = false;
      if (filling) cooledDuringFill = earliest(cooledDuringFill, dueAt);
      arm(earliest(coldDueAt, dueAt));
    },
    freed,
    yieldsTo(queue, at) {
      nothingToYield = false;
      if (room() > 0 || coldDueAt === null || queue.busy) return false;
      if (Date.parse(coldDueAt) >= at.getTime()) return false;
      queues.evict(queue);
      freed();
      return true;
    },
    idle: async () => {
      await filling;
    },
  };
}

/** The working set, its window, and what its durable follower stores of it. */
export function createWindowedQueues(parts: {
  store: EventStore;
  registry: EventRegistry;
  /** `PDS_WEBHOOK_QUEUE_WINDOW`. */
  window: number;
  scheduler: Scheduler;
  now(): Date;
  reschedule(queue: Queue): void;
  stopped(): boolean;
  errorRetryMs: number;
  logger?: Logger;
  /** A queue changed: its document is written with the next checkpoint. */
  changed(stream: string): void;
  /** A queue left the window: nothing of it is due in this worker any more. */
  dropped(stream: string): void;
}) {
  const cold = new ColdQueues();
  const queues = new DeliveryQueues({
    store: parts.store,
    registry: parts.registry,
    cold,
    window: parts.window,
    onChanged: parts.changed,
    onDropped: (stream) => {
      parts.dropped(stream);
      window.freed();
    },
    onCold: (dueAt) => window.cooled(dueAt),
  });
  const window = createQueueWindow({ ...parts, queues, cold });
  const stored = {
    indexes: QUEUE_INDEXES,
    restoreFrom: (collection) => window.restore(collection),
    guard: QUEUE_GUARD,
    guardFields: () => ({ [PENDING_FIELD]: queues.pending().depth }),
    committed(saved) {
      cold.committed(saved);
      window.freed();
    },
    upgrade: { from: UPGRADED_FROM, document: upgradedDocument, summary: countedIn },
    save: (stream) => queues.save(stream),
    known: (stream, position) => queues.knows(stream, position),
    passed: (position) => queues.followedTo(position),
  } satisfies Partial<DurableFollowerOptions<DeliveryQueueDoc>>;
  return { queues, window, stored };
}
