/**
 * How the fan-out retries a cart event it failed to handle
 * (docs/operations.md, "The fan-out's group"): in place, never handing it back to the group to be
 * parked, after pauses that double up to a cap, on the dispatcher's clock. What is being retried is
 * kept for `/metrics`.
 */
import type { Clock } from '../domain/clock.ts';
import type { RecordedEvent } from '../eventstore/port.ts';
import { createScheduler } from './scheduler.ts';

export interface RetryPacing {
  /** The first pause's ceiling (100 ms). */
  baseMs?: number;
  /** The longest pause (30 s). */
  capMs?: number;
  /** [0, 1); a pause is between half its ceiling and its ceiling. */
  random?: () => number;
}

/**
 * The pause after the `n`th failure in a row (from 0): between half and all of its ceiling, which
 * doubles from `baseMs` up to `capMs`. `n` counts the times the group handed the message out before
 * (its retry count) too, so a dispatcher restarted on an event that keeps failing does not start again
 * from the shortest pause; the jitter keeps the carts an outage held from being tried all at once.
 */
export function retryPause(n: number, pacing: RetryPacing = {}): number {
  const base = pacing.baseMs ?? 100;
  const cap = pacing.capMs ?? 30_000;
  const ceiling = Math.min(cap, base * 2 ** Math.min(n, 40));
  return Math.round(ceiling / 2 + ((pacing.random ?? Math.random)() * ceiling) / 2);
}

/** Pauses on the clock: tests move the clock and `tick()`; in production a real timer does. */
export function createPauses(clock: Clock) {
  const scheduler = createScheduler(clock);
  const waiting = new Map<string, () => void>();
  let woken = false;
  return {
    /** Resolves after `ms` on the clock, or at `wakeAll()` (at once after it). One pause per key at a time. */
    pause(key: string, ms: number): Promise<void> {
      if (woken) return Promise.resolve();
      return new Promise((resolve) => {
        const wake = () => {
          waiting.delete(key);
          resolve();
        };
        waiting.set(key, wake);
        scheduler.schedule(key, new Date(clock.now().getTime() + ms), wake);
      });
    },
    tick: () => scheduler.tick(),
    /** Ends every pause at once (the fan-out is stopping). */
    wakeAll(): void {
      woken = true;
      scheduler.stop();
      for (const wake of [...waiting.values()]) wake();
    },
  };
}

/** What `/metrics` shows of the retries. */
export interface RetryingView {
  /** Cart events whose fan-out failed and is being tried again. */
  events: number;
  /** When the oldest of them was recorded, or null. */
  oldestRecordedAt: string | null;
}

/** The cart events being retried, by id. */
export function createRetrying() {
  const events = new Map<string, RecordedEvent>();
  return {
    add: (event: RecordedEvent) => events.set(event.id, event),
    delete: (eventId: string) => events.delete(eventId),
    view(): RetryingView {
      let oldest: string | null = null;
      for (const e of events.values()) if (oldest === null || e.recordedAt < oldest) oldest = e.recordedAt;
      return { events: events.size, oldestRecordedAt: oldest };
    },
  };
}
