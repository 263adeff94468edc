/**
 * What every follower of the log (a catch-up subscription that folds events into memory) offers its
 * callers: "resolve once you have applied everything up to position p", bounded by a timeout. The
 * follower reports each batch with `applied(position)`.
 */
export interface PositionWaiters {
  /** The last position applied. */
  readonly position: number;
  /** Records that every event up to `position` is applied; resolves the waiters it satisfies. */
  applied(position: number): void;
  /** Resolves once `position` is applied; rejects after `timeoutMs` with `what` in the message. */
  waitFor(position: number, timeoutMs: number): Promise<void>;
}

export function createPositionWaiters(what: string): PositionWaiters {
  let applied = 0;
  const waiters = new Set<{ position: number; resolve: () => void }>();
  return {
    get position() {
      return applied;
    },
    applied(position) {
      applied = Math.max(applied, position);
      for (const w of waiters) if (w.position <= applied) w.resolve();
    },
    waitFor(position, timeoutMs) {
      if (position <= applied) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const waiter = {
          position,
          resolve: () => {
            waiters.delete(waiter);
            clearTimeout(timer);
            resolve();
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`${what} did not reach position ${position} in ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
  };
}
