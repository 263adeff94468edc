/**
 * The abandonment timer (seed §3, §6; DESIGN §3): a cart holding at least one item, not checked out,
 * `abandonAfterMs` after its first item was placed, gets exactly one `CartAbandoned`.
 *
 * Durable without state of its own: a catch-up subscription on the `cart-` streams, read from the
 * start at every `start()`, rebuilds each open cart's deadline from the events, so a restart or a
 * SIGKILL loses no timer and an overdue cart is abandoned as soon as the timer has caught up.
 *
 * Per open cart it keeps only what the deadline needs (`Tracked`): the stream revision seen, the
 * menu product ids of the lines (to know when the cart empties), when it last went from empty to
 * non-empty, and the id and correlation id of the event that did it. This mirrors the cart decider's
 * `first_item_at`/`abandonmentDeadline` (test/dispatcher/abandonment.test.ts checks the two agree). A
 * cart checked out or abandoned is dropped: it can never be abandoned (again), and events of a cart
 * the timer does not track, other than `CartCreated`, are ignored.
 *
 * The decider stays the authority. When a deadline falls due the timer runs `AbandonCart` through the
 * command handler with `ifMatch` = the revision it saw: if the cart changed meanwhile (or another
 * timer, in another process, abandoned it first) the write is refused and the timer re-reads the
 * stream and re-evaluates instead of appending blindly. Refusals (`abandonment_not_due`,
 * `cart_checked_out`, `cart_already_abandoned`, `cart_empty`) are normal outcomes, not errors.
 */

import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { createCommandHandler, PreconditionFailedError } from '../api/command-handler.ts';
import { decider as cartDecider } from '../domain/cart.ts';
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/decider.ts';
import type { EventRegistry } from '../domain/events.ts';
import { eventRegistry } from '../domain/index.ts';
import type { Actor, EventStore, RecordedEvent } from '../eventstore/port.ts';
import { StreamNotFoundError } from '../eventstore/port.ts';
import { createPositionWaiters } from '../eventstore/position-waiters.ts';
import { createScheduler } from './scheduler.ts';

export const ABANDONMENT_ACTOR: Actor = { type: 'system', id: 'abandonment-timer' };

const PREFIX = 'cart-';

/** What the timer keeps of one open cart (created, neither checked out nor abandoned). */
export interface Tracked {
  /** Revision of the last event of the stream applied. */
  revision: number;
  /** Menu product ids of the cart's lines. */
  lines: number[];
  /** When the cart last went from empty to non-empty (epoch ms); null while empty. */
  firstItemAt: number | null;
  /** Id and correlation id of the event that set `firstItemAt`. */
  causationId: string | null;
  correlationId: string | null;
}

/**
 * Applies one recorded cart event to the cart's tracked state (mutated in place): the new state,
 * `'closed'` when the cart can no longer be abandoned, or undefined for an event of an untracked cart.
 */
export function trackCart(
  tracked: Tracked | undefined,
  event: RecordedEvent,
  registry: EventRegistry = eventRegistry,
): Tracked | 'closed' | undefined {
  if (!tracked) {
    if (event.type !== 'CartCreated') return undefined;
    return { revision: event.revision, lines: [], firstItemAt: null, causationId: null, correlationId: null };
  }
  tracked.revision = event.revision;
  switch (event.type) {
    case 'CartItemAdded': {
      const { data } = registry.read(event.type, event.data, event.metadata.schema_version ?? 1) as {
        data: { menu_product_id: number; added_at: string };
      };
      if (tracked.lines.length === 0) {
        tracked.firstItemAt = Date.parse(data.added_at);
        tracked.causationId = event.id;
        tracked.correlationId = event.metadata.correlation_id;
      }
      if (!tracked.lines.includes(data.menu_product_id)) tracked.lines.push(data.menu_product_id);
      return tracked;
    }
    case 'CartItemRemoved': {
      const { data } = registry.read(event.type, event.data, event.metadata.schema_version ?? 1) as {
        data: { menu_product_id: number };
      };
      tracked.lines = tracked.lines.filter((id) => id !== data.menu_product_id);
      if (tracked.lines.length === 0) {
        tracked.firstItemAt = null;
        tracked.causationId = null;
        tracked.correlationId = null;
      }
      return tracked;
    }
    case 'CartCheckedOut':
    case 'CartAbandoned':
      return 'closed';
    default:
      return tracked;
  }
}

/** When the tracked cart's abandonment falls due (epoch ms), or null when none is pending. */
export function trackedDeadline(tracked: Tracked, abandonAfterMs: number): number | null {
  if (tracked.firstItemAt === null || tracked.lines.length === 0) return null;
  return tracked.firstItemAt + abandonAfterMs;
}

export interface AbandonmentTimerOptions {
  store: EventStore;
  clock: Clock;
  abandonAfterMs: number;
  logger?: Logger;
  registry?: EventRegistry;
  /** Wait before retrying after an unexpected error (store unavailable…). Default 30 s. */
  retryAfterMs?: number;
  /** Longest wait of the real timer. Default 1 h. */
  maxTimerDelayMs?: number;
}

export interface AbandonmentStats {
  /** Carts this timer abandoned. */
  abandoned: number;
  /** AbandonCart refused by the decider (the cart was not abandonable after all). */
  refused: number;
  /** The cart had changed since the timer saw it (expected-revision guard). */
  stale: number;
  errors: number;
}

export interface AbandonmentTimer {
  /** Subscribes; the deadlines are restored when `caughtUp` resolves. */
  start(): void;
  /** Resolves once every cart event that existed at start was applied (rejects if the subscription fails). */
  readonly caughtUp: Promise<void>;
  /** Carts with a pending deadline. */
  pending(): number;
  /** Open carts held in memory (with or without a deadline). */
  tracked(): number;
  /** The pending deadline of a cart stream, if any. */
  dueAt(streamId: string): Date | undefined;
  /** Runs every deadline due now and resolves when they settled (tests drive a manual clock with it). */
  tick(): Promise<number>;
  /** Resolves once every cart event up to the store's current head was applied. */
  settle(timeoutMs?: number): Promise<void>;
  stats(): AbandonmentStats;
  stop(): Promise<void>;
}

export function createAbandonmentTimer(options: AbandonmentTimerOptions): AbandonmentTimer {
  const { store, clock, abandonAfterMs, logger } = options;
  if (!Number.isFinite(abandonAfterMs) || abandonAfterMs <= 0) {
    throw new Error('abandonAfterMs must be a positive number');
  }
  const registry = options.registry ?? eventRegistry;
  const retryAfterMs = options.retryAfterMs ?? 30_000;
  const commands = createCommandHandler(store, registry);
  const scheduler = createScheduler(clock, {
    maxDelayMs: options.maxTimerDelayMs,
    onError: (key, err) => logger?.error({ err, stream: key }, 'abandonment timer failed'),
  });
  const carts = new Map<string, Tracked>();
  const stats: AbandonmentStats = { abandoned: 0, refused: 0, stale: 0, errors: 0 };
  const progress = createPositionWaiters('abandonment timer');
  let subscription: ReturnType<EventStore['subscribeToAll']> | undefined;
  let stopped = false;
  const {
    promise: caughtUp,
    resolve: resolveCaughtUp,
    reject: rejectCaughtUp,
  } = Promise.withResolvers<void>();
  // A rejection nobody awaits must not crash the process; the component reports it.
  caughtUp.catch(() => {});

  function reschedule(streamId: string, tracked: Tracked): void {
    const due = trackedDeadline(tracked, abandonAfterMs);
    if (due === null) {
      scheduler.cancel(streamId);
      return;
    }
    if (scheduler.dueAt(streamId)?.getTime() === due) return;
    scheduler.schedule(streamId, new Date(due), () => fire(streamId));
  }

  function close(streamId: string): void {
    carts.delete(streamId);
    scheduler.cancel(streamId);
  }

  function apply(event: RecordedEvent): void {
    const current = carts.get(event.streamId);
    // Already applied (the stream was re-read after a refused write, ahead of the subscription).
    if (current && event.revision <= current.revision) return;
    const next = trackCart(current, event, registry);
    if (next === undefined) return;
    if (next === 'closed') {
      close(event.streamId);
      return;
    }
    if (!current) carts.set(event.streamId, next);
    reschedule(event.streamId, next);
  }

  /** Re-reads the stream after a refused write and acts on what it holds now. */
  async function reevaluate(streamId: string, attempted: number, refused: boolean): Promise<void> {
    let recorded: RecordedEvent[];
    try {
      recorded = await store.readStream(streamId);
    } catch (err) {
      if (err instanceof StreamNotFoundError) {
        close(streamId);
        return;
      }
      throw err;
    }
    let fresh: Tracked | undefined;
    for (const e of recorded) {
      const next = trackCart(fresh, e, registry);
      if (next === 'closed') {
        close(streamId);
        return;
      }
      fresh = next;
    }
    if (!fresh) {
      close(streamId);
      return;
    }
    const current = carts.get(streamId);
    if (current && current.revision > fresh.revision) return; // the subscription is ahead already
    carts.set(streamId, fresh);
    const due = trackedDeadline(fresh, abandonAfterMs);
    if (refused && fresh.revision === attempted && due !== null && due <= clock.now().getTime()) {
      // The decider refused what this view calls due, on the very same revision: never spin on it.
      logger?.warn({ stream: streamId, revision: attempted }, 'abandonment refused on an unchanged cart');
      scheduler.cancel(streamId);
      return;
    }
    reschedule(streamId, fresh);
  }

  async function fire(streamId: string): Promise<void> {
    const tracked = carts.get(streamId);
    if (!tracked || stopped) return;
    if (trackedDeadline(tracked, abandonAfterMs) === null) return;
    const at = clock.now().toISOString();
    const attempted = tracked.revision;
    try {
      await commands.handle(
        streamId,
        cartDecider,
        { type: 'AbandonCart', at, abandon_after_ms: abandonAfterMs },
        {
          correlationId: tracked.correlationId ?? randomUUID(),
          causationId: tracked.causationId,
          actor: ABANDONMENT_ACTOR,
          at,
        },
        { ifMatch: attempted },
      );
      stats.abandoned += 1;
      logger?.info({ stream: streamId, revision: attempted + 1 }, 'cart abandoned');
      close(streamId);
    } catch (err) {
      if (stopped) return;
      if (err instanceof DomainError) {
        stats.refused += 1;
        logger?.debug({ stream: streamId, code: err.code }, 'abandonment refused');
        const dueAt = err.details?.due_at;
        if (err.code === 'abandonment_not_due' && typeof dueAt === 'string') {
          // Fired early (timer granularity, a clock step): wait for the decider's own deadline.
          scheduler.schedule(streamId, new Date(dueAt), () => fire(streamId));
          return;
        }
        await reevaluate(streamId, attempted, true);
        return;
      }
      if (err instanceof PreconditionFailedError) {
        stats.stale += 1;
        logger?.debug(
          { stream: streamId, expected: attempted, actual: err.actual },
          'cart changed; re-evaluating',
        );
        await reevaluate(streamId, attempted, false);
        return;
      }
      stats.errors += 1;
      logger?.error({ err, stream: streamId }, 'abandonment failed; will retry');
      scheduler.schedule(streamId, new Date(clock.now().getTime() + retryAfterMs), () => fire(streamId));
    }
  }

  return {
    start() {
      if (subscription || stopped) return;
      subscription = store.subscribeToAll(
        { from: 'start', filter: { streamPrefixes: [PREFIX] }, maxBatchSize: 1_000 },
        {
          onEvents(events) {
            for (const e of events) apply(e);
            progress.applied(events[events.length - 1].position);
          },
        },
      );
      subscription.caughtUp.then(resolveCaughtUp, rejectCaughtUp);
      subscription.done.catch((err) => {
        rejectCaughtUp(err);
        if (!stopped) logger?.error({ err }, 'abandonment subscription failed');
      });
    },
    caughtUp,
    pending: () => scheduler.size(),
    tracked: () => carts.size,
    dueAt: (streamId) => scheduler.dueAt(streamId),
    tick: () => scheduler.tick(),
    async settle(timeoutMs = 5_000) {
      await progress.waitFor(await store.headPosition({ streamPrefixes: [PREFIX] }), timeoutMs);
    },
    stats: () => ({ ...stats }),
    async stop() {
      stopped = true;
      scheduler.stop();
      await subscription?.stop();
      carts.clear();
    },
  };
}
