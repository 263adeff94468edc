/**
 * The abandonment timer (docs/write-side.md, "Abandonment"): a cart holding at least one item, not checked out,
 * `abandonAfterMs` after its first item was placed, gets exactly one `CartAbandoned`.
 *
 * Its working set is the carts with a pending deadline, and only those: per cart what the deadline
 * needs (`Tracked`: the stream revision seen, the menu product ids of the lines, when it last went
 * from empty to non-empty, and the id and correlation id of the event that did it). This mirrors the
 * cart decider's `first_item_at`/`abandonmentDeadline` (test/dispatcher/abandonment.test.ts checks the
 * two agree). The working set is durable (`durable-follower.ts`: one document per pending cart in
 * `abandonment_pending_carts`, committed together with the checkpoint of the events applied), so a start
 * reads the pending carts and the cart events written since, not every cart ever made; a restart or a
 * SIGKILL loses no timer, and an overdue cart is abandoned as soon as the timer has caught up.
 *
 * A cart leaves the working set when it empties, is checked out or abandoned. An event of a cart the
 * timer does not hold changes no deadline, except a `CartItemAdded`: the cart was empty then (or
 * abandoned: the decider lets an abandoned cart take items, and never abandons it twice). Carts seen
 * created (or emptied) and not abandoned since are remembered for a while (`FRESH_CARTS`, the common
 * case: a first item follows its cart's creation); for any other, the cart's stream is read.
 *
 * The decider stays the authority. When a deadline falls due the timer runs `AbandonCart` through the
 * command handler with `ifMatch` = the revision it saw: if the cart changed meanwhile (or another
 * timer, in another process, abandoned it first) the write is refused and the timer re-reads the
 * stream and re-evaluates instead of appending blindly. Refusals (`abandonment_not_due`,
 * `cart_checked_out`, `cart_already_abandoned`, `cart_empty`) are normal outcomes, not errors.
 */

import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { createCommandHandler, PreconditionFailedError } from '../application/command-handler.ts';
import { createDurableFollower } from '../application/durable-follower.ts';
import { domainEventOf } from '../application/read-state.ts';
import type { Supervisor } from '../application/supervisor.ts';
import { type CartEvent, decider as cartDecider } from '../domain/cart.ts';
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/decider.ts';
import type { EventRegistry } from '../domain/events.ts';
import { eventRegistry } from '../domain/index.ts';
import type { Actor, EventStore, RecordedEvent } from '../eventstore/port.ts';
import { StreamNotFoundError } from '../eventstore/port.ts';
import type { Doc, ReadStore } from '../projections/read-store.ts';
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
      const { data } = domainEventOf<Extract<CartEvent, { type: 'CartItemAdded' }>>(registry, event);
      if (tracked.lines.length === 0) {
        tracked.firstItemAt = Date.parse(data.added_at);
        tracked.causationId = event.id;
        tracked.correlationId = event.metadata.correlation_id;
      }
      if (!tracked.lines.includes(data.menu_product_id)) tracked.lines.push(data.menu_product_id);
      return tracked;
    }
    case 'CartItemRemoved': {
      const { data } = domainEventOf<Extract<CartEvent, { type: 'CartItemRemoved' }>>(registry, event);
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

/** A pending cart as stored (`abandonment_pending_carts`): its `Tracked` state. */
export interface PendingCartDoc extends Doc {
  _id: string;
  revision: number;
  lines: number[];
  first_item_at: number;
  causation_id: string | null;
  correlation_id: string | null;
}

/** The timer's durable working set: its checkpoint name, collection, and the documents' shape. */
export const ABANDONMENT_FOLLOWER = {
  name: 'abandonment-timer',
  collection: 'abandonment_pending_carts',
  version: '1',
} as const;

/** Carts remembered as open, empty and never abandoned, so their first item needs no stream read. */
export const FRESH_CARTS = 10_000;

export interface AbandonmentTimerOptions {
  store: EventStore;
  /** Where the working set and its checkpoint are kept. */
  readStore: ReadStore;
  clock: Clock;
  abandonAfterMs: number;
  logger?: Logger;
  registry?: EventRegistry;
  /** Wait before retrying after an unexpected error (store unavailable…). Default 30 s. */
  retryAfterMs?: number;
  /** Longest wait of the real timer. Default 1 h. */
  maxTimerDelayMs?: number;
  /** Paces resubscriptions after a drop and reports the timer's health. */
  supervisor?: Supervisor;
}

export interface AbandonmentStats {
  /** Carts this timer abandoned. */
  abandoned: number;
  /** AbandonCart refused by the decider (the cart was not abandonable after all). */
  refused: number;
  /** The cart had changed since the timer saw it (expected-revision guard). */
  stale: number;
  errors: number;
  /** Cart streams read to learn whether a cart taking its first item had been abandoned. */
  streamReads: number;
}

export interface AbandonmentTimer {
  /** Restores the working set and subscribes; the deadlines are restored when `caughtUp` resolves. */
  start(): void;
  /** Resolves once every cart event that existed at start was applied (rejects if the timer fails). */
  readonly caughtUp: Promise<void>;
  /** Carts with a pending deadline. */
  pending(): number;
  /** Carts held (the working set: carts with items, neither checked out nor abandoned). */
  tracked(): number;
  /** The pending deadline of a cart stream, if any. */
  dueAt(streamId: string): Date | undefined;
  /** Where the last start resumed: the checkpoint (0: the first event) and the carts restored. */
  resumed(): { position: number; documents: number };
  /** Runs every deadline due now and resolves when they settled (tests drive a manual clock with it). */
  tick(): Promise<number>;
  /** Resolves once every cart event up to the store's current head was applied. */
  settle(timeoutMs?: number): Promise<void>;
  stats(): AbandonmentStats;
  stop(): Promise<void>;
}

const emptyCart = (revision: number): Tracked => ({
  revision,
  lines: [],
  firstItemAt: null,
  causationId: null,
  correlationId: null,
});

/** A stored pending cart, as the timer holds it. */
function trackedOf(doc: PendingCartDoc): Tracked {
  return {
    revision: doc.revision,
    lines: [...doc.lines],
    firstItemAt: doc.first_item_at,
    causationId: doc.causation_id,
    correlationId: doc.correlation_id,
  };
}

/** The document a pending cart is stored as; none for a cart without a deadline (no item). */
function pendingDocOf(streamId: string, t: Tracked): PendingCartDoc | null {
  if (t.firstItemAt === null) return null;
  return {
    _id: streamId,
    revision: t.revision,
    lines: [...t.lines],
    first_item_at: t.firstItemAt,
    causation_id: t.causationId,
    correlation_id: t.correlationId,
  };
}

/**
 * The timer's working set: the open carts holding items (with what their deadline needs), and the
 * open, empty, never abandoned ones seen lately (`FRESH_CARTS`), so a first item needs no stream read.
 */
class PendingCarts {
  /** The working set: carts with items. */
  readonly carts = new Map<string, Tracked>();
  /** Open, empty, never abandoned (as of the events applied); oldest first, at most FRESH_CARTS. */
  private readonly fresh = new Set<string>();
  private readonly store: EventStore;
  private readonly registry: EventRegistry;
  /** A cart changed: its document is written (or deleted) with the next checkpoint. */
  private readonly onChanged: (streamId: string) => void;
  /** A cart holds items: its deadline is (re)scheduled. */
  private readonly onHeld: (streamId: string, tracked: Tracked) => void;
  /** A cart left the working set: nothing of it is due. */
  private readonly onClosed: (streamId: string) => void;
  /** A cart's stream had to be read. */
  private readonly onStreamRead: () => void;

  constructor(options: {
    store: EventStore;
    registry: EventRegistry;
    onChanged(streamId: string): void;
    onHeld(streamId: string, tracked: Tracked): void;
    onClosed(streamId: string): void;
    onStreamRead(): void;
  }) {
    this.store = options.store;
    this.registry = options.registry;
    this.onChanged = options.onChanged;
    this.onHeld = options.onHeld;
    this.onClosed = options.onClosed;
    this.onStreamRead = options.onStreamRead;
  }

  clear(): void {
    this.carts.clear();
    this.fresh.clear();
  }

  rememberFresh(streamId: string): void {
    this.fresh.delete(streamId);
    this.fresh.add(streamId);
    if (this.fresh.size > FRESH_CARTS) this.fresh.delete(this.fresh.values().next().value as string);
  }

  /** Holds an open cart while it has items; an emptied one leaves the working set (and is this.fresh). */
  hold(streamId: string, tracked: Tracked): void {
    this.onChanged(streamId);
    if (tracked.lines.length === 0) {
      this.carts.delete(streamId);
      this.onClosed(streamId);
      this.rememberFresh(streamId);
      return;
    }
    this.carts.set(streamId, tracked);
    this.onHeld(streamId, tracked);
  }

  /** The cart can no longer be abandoned (again). */
  close(streamId: string): void {
    this.fresh.delete(streamId);
    if (this.carts.delete(streamId)) this.onChanged(streamId);
    this.onClosed(streamId);
  }

  /** The cart as its stream holds it now: open (`Tracked`), `'closed'`, or undefined when absent. */
  async readCart(streamId: string): Promise<Tracked | 'closed' | undefined> {
    let recorded: RecordedEvent[];
    try {
      recorded = await this.store.readStream(streamId);
    } catch (err) {
      if (err instanceof StreamNotFoundError) return undefined;
      throw err;
    }
    let state: Tracked | undefined;
    for (const e of recorded) {
      const next = trackCart(state, e, this.registry);
      if (next === 'closed') return 'closed';
      state = next;
    }
    return state;
  }

  /** Takes the cart's state from its stream, unless the working set is further along already. */
  async resolve(streamId: string): Promise<Tracked | undefined> {
    const state = await this.readCart(streamId);
    if (state === undefined || state === 'closed') {
      this.close(streamId);
      return undefined;
    }
    const current = this.carts.get(streamId);
    if (current && current.revision > state.revision) return current;
    this.hold(streamId, state);
    return state;
  }

  /** Applies one cart event; a promise when the cart's stream has to be read. */
  apply(event: RecordedEvent): Promise<unknown> | undefined {
    const id = event.streamId;
    const current = this.carts.get(id);
    if (current) {
      // Already applied (the stream was re-read after a refused write, ahead of the subscription).
      if (event.revision <= current.revision) return undefined;
      const next = trackCart(current, event, this.registry);
      if (next === 'closed') this.close(id);
      else if (next) this.hold(id, next);
      return undefined;
    }
    switch (event.type) {
      case 'CartCreated':
        this.rememberFresh(id);
        return undefined;
      case 'CartCheckedOut':
      case 'CartAbandoned':
        this.fresh.delete(id);
        return undefined;
      case 'CartItemAdded':
        if (this.fresh.has(id)) {
          this.fresh.delete(id);
          this.hold(id, trackCart(emptyCart(event.revision - 1), event, this.registry) as Tracked);
          return undefined;
        }
        // Empty or abandoned? Only the stream tells (read once; later events of it are then skipped).
        this.onStreamRead();
        return this.resolve(id);
      default:
        // Events of an empty or closed cart change no deadline.
        return undefined;
    }
  }
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
  const stats: AbandonmentStats = { abandoned: 0, refused: 0, stale: 0, errors: 0, streamReads: 0 };
  let stopped = false;

  const pending: PendingCarts = new PendingCarts({
    store,
    registry,
    onChanged: (streamId) => follower.changed(streamId),
    onHeld: (streamId, tracked) => reschedule(streamId, tracked),
    onClosed: (streamId) => scheduler.cancel(streamId),
    onStreamRead: () => {
      stats.streamReads += 1;
    },
  });
  const { carts } = pending;

  const follower = createDurableFollower<PendingCartDoc>({
    ...ABANDONMENT_FOLLOWER,
    store,
    readStore: options.readStore,
    clock,
    filter: { streamPrefixes: [PREFIX] },
    logger,
    supervisor: options.supervisor,
    restore(doc) {
      const tracked = trackedOf(doc);
      carts.set(doc._id, tracked);
      reschedule(doc._id, tracked);
    },
    async apply(events) {
      for (const e of events) {
        const reading = pending.apply(e);
        if (reading) await reading;
      }
    },
    save(streamId) {
      const t = carts.get(streamId);
      return t ? pendingDocOf(streamId, t) : null;
    },
  });

  function reschedule(streamId: string, tracked: Tracked): void {
    const due = trackedDeadline(tracked, abandonAfterMs);
    if (due === null) {
      scheduler.cancel(streamId);
      return;
    }
    if (scheduler.dueAt(streamId)?.getTime() === due) return;
    scheduler.schedule(streamId, new Date(due), () => fire(streamId));
  }

  /** Re-reads the stream after a refused write and acts on what it holds now. */
  async function reevaluate(streamId: string, attempted: number, refused: boolean): Promise<void> {
    const state = await pending.resolve(streamId);
    if (!state) return;
    const due = trackedDeadline(state, abandonAfterMs);
    if (refused && state.revision === attempted && due !== null && due <= clock.now().getTime()) {
      // The decider refused what this view calls due, on the very same revision: never spin on it.
      logger?.warn({ stream: streamId, revision: attempted }, 'abandonment refused on an unchanged cart');
      scheduler.cancel(streamId);
    }
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
      pending.close(streamId);
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

  let started = false;
  return {
    start() {
      if (started || stopped) return;
      started = true;
      // A failure rejects `caughtUp`, which the component reports.
      follower.start().catch(() => {});
    },
    caughtUp: follower.caughtUp,
    pending: () => scheduler.size(),
    tracked: () => carts.size,
    dueAt: (streamId) => scheduler.dueAt(streamId),
    resumed: () => follower.resumed(),
    tick: () => scheduler.tick(),
    settle: (timeoutMs) => follower.settle(timeoutMs),
    stats: () => ({ ...stats }),
    async stop() {
      stopped = true;
      scheduler.stop();
      await follower.stop();
      pending.clear();
    },
  };
}
