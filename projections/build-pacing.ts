/**
 * Pacing a rebuild's copy by how the partner APIs are being served
 * (docs/read-side.md, "Serving during a rebuild"): the thread that serves them tells, every second, the 99th percentile of its
 * event loop's delay over that second; while it is above `SERVING_DELAY_TARGET_MS`, the copy works a
 * share of the time (its duty) and rests the rest, after each batch. The duty is the target over the
 * delay (half the time at twice the target), never under `LEAST_DUTY`, so a rebuild always ends. A
 * report older than `SERVING_DELAY_STALE_MS` counts as none: a build is never held back by a thread
 * that stopped telling.
 */

/** The serving thread's event-loop delay (p99 over a second, ms) a build leaves alone. */
export const SERVING_DELAY_TARGET_MS = 20;
/** The least share of the time a build works, however slow serving is. */
export const LEAST_DUTY = 0.25;
/** How long a report of the serving delay holds. */
export const SERVING_DELAY_STALE_MS = 3_000;

/** The share of the time a build may work while serving sees `delayMs` of event-loop delay. */
export function buildDuty(delayMs: number | undefined, targetMs = SERVING_DELAY_TARGET_MS): number {
  if (delayMs === undefined || !(delayMs > targetMs)) return 1;
  return Math.max(LEAST_DUTY, targetMs / delayMs);
}

/** How long a build rests after a batch that worked `batchMs`, to work `duty` of the time. */
export function restAfter(batchMs: number, duty: number): number {
  return duty >= 1 ? 0 : Math.round(Math.max(0, batchMs) * (1 / duty - 1));
}

export interface BuildPacer {
  /** The serving thread's event-loop delay over its last second (p99, ms). */
  servingDelay(delayMs: number): void;
  /** Runs one batch of a build, then rests as its duty says. */
  paced<T>(batch: () => Promise<T>): Promise<T>;
  /** The delay last reported while it holds, and the duty it gives a build now. */
  state(): { delayMs: number | undefined; duty: number };
}

export interface PacerTiming {
  /** Milliseconds, monotonic. */
  now(): number;
  sleep(ms: number): Promise<void>;
}

const systemTiming: PacerTiming = {
  now: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

export function createBuildPacer(timing: PacerTiming = systemTiming): BuildPacer {
  let reported: { delayMs: number; at: number } | undefined;
  const fresh = (at: number) =>
    reported && at - reported.at <= SERVING_DELAY_STALE_MS ? reported.delayMs : undefined;
  return {
    servingDelay(delayMs) {
      reported = { delayMs, at: timing.now() };
    },
    async paced(batch) {
      const began = timing.now();
      const result = await batch();
      const ended = timing.now();
      const rest = restAfter(ended - began, buildDuty(fresh(ended)));
      if (rest > 0) await timing.sleep(rest);
      return result;
    },
    state() {
      const delayMs = fresh(timing.now());
      return { delayMs, duty: buildDuty(delayMs) };
    },
  };
}
