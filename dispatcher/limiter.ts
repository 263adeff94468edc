/**
 * A small per-key semaphore: at most `max` holders per key, the others wait in order. The delivery
 * worker holds one slot per request to a subscription, so a slow or dead receiver holds only its own
 * (docs/webhooks.md, "Order, isolation, durability").
 */
export interface Limiter {
  acquire(key: string): Promise<void>;
  /** Takes a slot only if one is free now; answers whether it did. (While one is free, nobody waits.) */
  tryAcquire(key: string): boolean;
  release(key: string): void;
}

export function createLimiter(max: number): Limiter {
  const active = new Map<string, number>();
  const waiting = new Map<string, Array<() => void>>();
  return {
    async acquire(key) {
      const n = active.get(key) ?? 0;
      if (n < max) {
        active.set(key, n + 1);
        return;
      }
      await new Promise<void>((resolve) => {
        const list = waiting.get(key) ?? [];
        list.push(resolve);
        waiting.set(key, list);
      });
    },
    tryAcquire(key) {
      const n = active.get(key) ?? 0;
      if (n >= max) return false;
      active.set(key, n + 1);
      return true;
    },
    release(key) {
      const next = waiting.get(key)?.shift();
      if (next) {
        next(); // the slot passes straight to the next waiter
        return;
      }
      waiting.delete(key);
      const n = (active.get(key) ?? 1) - 1;
      if (n <= 0) active.delete(key);
      else active.set(key, n);
    },
  };
}
