/**
 * A build's progress towards the log's head: a rebuild's copy, or a projection catching up at a
 * start (docs/operations.md, "Projections"). The rate is of the last 30 s, not since the build
 * began, so the time left follows a build whose events cost more as it goes (the catalog's events
 * cost several times the carts'), and the time left is the positions still to read at the rate
 * positions went by: a projection that reads only its own streams passes over the others' events.
 */
import { type Clock, systemClock } from '../domain/clock.ts';
import type { RebuildProgress } from './projection.ts';

/** How far back the rate looks. */
export const RATE_WINDOW_MS = 30_000;

export interface ProgressTracker {
  /** The figures shown (`GET /admin/v1/projections`), updated in place. */
  readonly progress: RebuildProgress;
  /** The build stored `applied` more events, up to position `reached`. */
  advance(reached: number, applied: number): void;
  /** The build is done: 100%, nothing left. */
  finish(): void;
  /** The build stopped (its subscription dropped) and will resume: no rate, no time left meanwhile. */
  stall(): void;
}

interface Sample {
  at: number;
  events: number;
  position: number;
}

/** Progress of a build from position `from` towards `target` (the log's head when it began). */
export function trackProgress(from: number, target: number, clock: Clock = systemClock): ProgressTracker {
  const began = clock.now().getTime();
  const progress: RebuildProgress = {
    started_at: new Date(began).toISOString(),
    events_done: 0,
    target_position: target,
    position: from,
    percent: target <= from ? 100 : 0,
    rate_per_second: 0,
    eta_seconds: null,
  };
  // The samples of the window, and the last one before it (the rate's starting point).
  const samples: Sample[] = [{ at: began, events: 0, position: from }];
  let stalled = false;
  return {
    progress,
    advance(reached, applied) {
      const at = clock.now().getTime();
      progress.events_done += applied;
      // A subscription that resumes from its stored checkpoint may tell a position again.
      if (reached < progress.position) return;
      progress.position = reached;
      if (stalled) {
        // The first batch after a pause: the rate starts from here, not from before the pause.
        stalled = false;
        samples.splice(0, samples.length, { at, events: progress.events_done, position: reached });
        return;
      }
      // New events arrive meanwhile: the head it must reach follows them.
      progress.target_position = Math.max(progress.target_position, reached);
      const span = Math.max(1, progress.target_position - from);
      progress.percent = Math.min(100, Math.round(((reached - from) / span) * 1000) / 10);
      samples.push({ at, events: progress.events_done, position: reached });
      while (samples.length > 2 && samples[1].at <= at - RATE_WINDOW_MS) samples.shift();
      const first = samples[0];
      const seconds = Math.max(at - first.at, 1) / 1000;
      progress.rate_per_second = Math.round((progress.events_done - first.events) / seconds);
      const positionsPerSecond = (reached - first.position) / seconds;
      const left = progress.target_position - reached;
      progress.eta_seconds =
        positionsPerSecond > 0 ? Math.round((left / positionsPerSecond) * 10) / 10 : null;
    },
    finish() {
      progress.percent = 100;
      progress.eta_seconds = 0;
    },
    stall() {
      progress.rate_per_second = 0;
      progress.eta_seconds = null;
      stalled = true;
    },
  };
}
