/**
 * What role `all`'s main thread, which serves the APIs, tells its projector thread every second: the
 * delay of its event loop, by which the projector paces its rebuilds
 * (docs/read-side.md, "Serving during a rebuild"; `projections/build-pacing.ts`).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Component } from './compose.ts';
import type { RoleThread, ToThread } from './role-thread.ts';

/** How often the delay is told, and how often the event loop is sampled. */
const SERVING_DELAY_EVERY_MS = 1_000;
const SERVING_DELAY_RESOLUTION_MS = 10;

/**
 * The delay of the event loop over a report's span, ms: the 99th percentile of how late the sampling
 * timer ran (the histogram holds the whole intervals, the resolution included); undefined when it
 * holds no sample.
 */
export function servingDelayOf(
  histogram: { count: number; percentile(p: number): number },
  resolutionMs = SERVING_DELAY_RESOLUTION_MS,
): number | undefined {
  if (histogram.count === 0) return undefined;
  return Math.max(0, Math.round(histogram.percentile(99) / 1e6 - resolutionMs));
}

/** Tells `projector`'s running thread this thread's event-loop delay every second. */
export function servingDelay(projector: Pick<RoleThread, 'worker'>): Component {
  const histogram = monitorEventLoopDelay({ resolution: SERVING_DELAY_RESOLUTION_MS });
  let timer: NodeJS.Timeout | undefined;
  return {
    name: 'serving-delay',
    roles: ['projector'],
    async start() {
      histogram.enable();
      timer = setInterval(() => {
        const delayMs = servingDelayOf(histogram);
        histogram.reset();
        if (delayMs !== undefined)
          projector.worker?.postMessage({ type: 'serving-delay', delayMs } satisfies ToThread);
      }, SERVING_DELAY_EVERY_MS);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      histogram.disable();
    },
  };
}
