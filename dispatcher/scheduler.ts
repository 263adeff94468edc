/**
 * A small timer queue on an injected clock: one entry per key, kept in a binary min-heap by due time,
 * and one real `setTimeout` armed for the earliest entry (capped at `maxDelayMs`, then re-armed), so
 * a million pending timers cost one Node timer and no polling loop. The timer is unref'd: pending
 * entries never keep the process alive.
 *
 * `tick()` runs every entry due at `clock.now()` (each removed before it runs, so it runs once) and
 * resolves when they, and any run the real timer started, have settled. Tests drive a manual clock and
 * call `tick()`; in production the real timer calls it. A function that schedules its own key again
 * for a time already due is run again in the same `tick()` (bounded, see `MAX_PASSES`).
 */
import type { Clock } from '../domain/clock.ts';

export type ScheduledFn = () => void | Promise<void>;

export interface Scheduler {
  /** Schedules `fn` at `at`, replacing any entry of the same key. A time already past runs at the next tick. */
  schedule(key: string, at: Date, fn: ScheduledFn): void;
  /** Removes the key's entry; true when there was one. */
  cancel(key: string): boolean;
  /** When the key's entry is due, or undefined. */
  dueAt(key: string): Date | undefined;
  /** Runs everything due now; resolves with how many entries ran, once they (and runs in flight) settled. */
  tick(): Promise<number>;
  size(): number;
  /** Disarms the real timer and drops every entry (runs in flight finish on their own). */
  stop(): void;
}

export interface SchedulerOptions {
  /** Longest single wait of the real timer (the clock may jump, a laptop may sleep). Default 1 h. */
  maxDelayMs?: number;
  /** A scheduled function threw or rejected. Default: ignored. */
  onError?(key: string, err: unknown): void;
}

interface Entry {
  key: string;
  at: number;
  fn: ScheduledFn;
  /** Position in the heap array. */
  index: number;
}

/** Bound on re-runs within one tick, so a function that keeps rescheduling itself "now" cannot spin. */
const MAX_PASSES = 100;

export function createScheduler(clock: Clock, options: SchedulerOptions = {}): Scheduler {
  const maxDelayMs = options.maxDelayMs ?? 3_600_000;
  const heap: Entry[] = [];
  const byKey = new Map<string, Entry>();
  const inFlight = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | undefined;
  /** Clock time the armed timer was set for (Infinity when none is armed). */
  let armedFor = Number.POSITIVE_INFINITY;
  let stopped = false;

  const less = (a: Entry, b: Entry) => a.at < b.at;
  function swap(i: number, j: number): void {
    const a = heap[i];
    const b = heap[j];
    heap[i] = b;
    heap[j] = a;
    b.index = i;
    a.index = j;
  }
  function up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(heap[i], heap[parent])) return;
      swap(i, parent);
      i = parent;
    }
  }
  function down(i: number): void {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      if (l < heap.length && less(heap[l], heap[smallest])) smallest = l;
      if (r < heap.length && less(heap[r], heap[smallest])) smallest = r;
      if (smallest === i) return;
      swap(i, smallest);
      i = smallest;
    }
  }
  function remove(entry: Entry): void {
    const last = heap.pop() as Entry;
    byKey.delete(entry.key);
    if (last === entry) return;
    heap[entry.index] = last;
    last.index = entry.index;
    down(last.index);
    up(last.index);
  }

  function disarm(): void {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    armedFor = Number.POSITIVE_INFINITY;
  }
  /** Arms the real timer for the earliest entry, unless it is already armed for that time or sooner. */
  function arm(): void {
    if (stopped || heap.length === 0) return;
    const next = heap[0].at;
    if (timer !== undefined && armedFor <= next) return;
    disarm();
    const delay = Math.min(Math.max(0, next - clock.now().getTime()), maxDelayMs);
    armedFor = next;
    timer = setTimeout(() => {
      timer = undefined;
      armedFor = Number.POSITIVE_INFINITY;
      void tick();
    }, delay);
    timer.unref();
  }

  function run(entry: Entry): Promise<void> {
    const p = (async () => {
      try {
        await entry.fn();
      } catch (err) {
        options.onError?.(entry.key, err);
      }
    })();
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
    return p;
  }

  async function tick(): Promise<number> {
    let ran = 0;
    for (let pass = 0; pass < MAX_PASSES && !stopped; pass++) {
      const now = clock.now().getTime();
      const due: Entry[] = [];
      while (heap.length > 0 && heap[0].at <= now) {
        const entry = heap[0];
        remove(entry);
        due.push(entry);
      }
      for (const entry of due) void run(entry);
      ran += due.length;
      // Waits for these and for any run the real timer started, so a caller sees their effects.
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
      if (heap.length === 0 || heap[0].at > clock.now().getTime()) break;
    }
    arm();
    return ran;
  }

  return {
    schedule(key, at, fn) {
      if (stopped) return;
      const time = at.getTime();
      if (Number.isNaN(time)) throw new Error(`schedule ${key}: invalid date`);
      const existing = byKey.get(key);
      if (existing) {
        existing.fn = fn;
        const earlier = time < existing.at;
        existing.at = time;
        if (earlier) up(existing.index);
        else down(existing.index);
      } else {
        const entry: Entry = { key, at: time, fn, index: heap.length };
        heap.push(entry);
        byKey.set(key, entry);
        up(entry.index);
      }
      arm();
    },
    cancel(key) {
      const entry = byKey.get(key);
      if (!entry) return false;
      remove(entry);
      // The armed timer may now wake for nothing; it then re-arms for the new earliest entry.
      if (heap.length === 0) disarm();
      return true;
    },
    dueAt(key) {
      const entry = byKey.get(key);
      return entry ? new Date(entry.at) : undefined;
    },
    tick,
    size: () => heap.length,
    stop() {
      stopped = true;
      disarm();
      heap.length = 0;
      byKey.clear();
    },
  };
}
