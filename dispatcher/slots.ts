/**
 * The delivery worker's request slots (docs/webhooks.md, "Scale"): at most `perKey` requests open per
 * subscription, so a slow or dead receiver holds only its own, and at most `total` open in the whole
 * worker, so a backlog over many subscriptions opens a bounded number of sockets. A request takes a
 * slot of both or of neither.
 *
 * A queue that is due while no slot is free waits in its subscription's *ready list* (its stream name,
 * in the order it found no slot), not as a suspended attempt: a `Set` entry per waiting queue. When a
 * slot frees, `pump` hands it on, round-robin over the subscriptions with a ready queue and a free slot
 * of their own, so a subscription with thousands of due queues takes its turn like one with a single
 * queue.
 */
export interface Slots {
  /** Takes a slot of `key` and of the total only if both are free now; answers whether it did. */
  tryAcquire(key: string): boolean;
  /**
   * Gives a slot of `key` back, and hands the freed slots to waiting queues. A key holding no slot
   * has none to give: nothing changes (the total is never lowered for a slot nobody took).
   */
  release(key: string): void;
  /** `stream` of subscription `key` is due and found no slot: it waits in the ready list. */
  wait(key: string, stream: string): void;
  /** Whether `stream` of subscription `key` waits in the ready list. */
  has(key: string, stream: string): boolean;
  /** `stream` no longer waits (under way, or out of the working set). */
  forget(key: string, stream: string): void;
  /** Forgets every waiting queue and hands out nothing more (the worker stops). */
  close(): void;
  /** Queues waiting for a slot. */
  waiting(): number;
  /** Slots taken: requests open (or about to be). */
  inFlight(): number;
}

/**
 * `start` is handed each slot given to a waiting queue: it owns it from then on (and gives it back
 * with `release` once the request is answered, or at once when the queue has nothing to send). A
 * `start` that throws owns nothing: the slot comes back and its queue leaves the ready list, the
 * other waiting queues are handed the slots free, and the error is thrown from the `release` or
 * `wait` that handed it out.
 */
export function createSlots(
  limits: { perKey: number; total: number },
  start: (key: string, stream: string) => void,
): Slots {
  const active = new Map<string, number>();
  let taken = 0;
  /** Waiting queues, by subscription, in the order they found no slot. */
  const ready = new Map<string, Set<string>>();
  let waitingCount = 0;
  /**
   * The subscriptions with a waiting queue and a free slot of their own, in turn order (a `Set` keeps
   * insertion order: a subscription served goes to the back).
   */
  const turns = new Set<string>();
  let pumping = false;
  let closed = false;

  const hasOwnSlot = (key: string) => (active.get(key) ?? 0) < limits.perKey;
  const take = (key: string) => {
    active.set(key, (active.get(key) ?? 0) + 1);
    taken += 1;
  };
  /** Gives a slot `key` holds back; answers false, changing nothing, when it holds none. */
  const giveBack = (key: string): boolean => {
    const held = active.get(key);
    if (held === undefined) return false;
    if (held <= 1) active.delete(key);
    else active.set(key, held - 1);
    taken -= 1;
    if (ready.has(key)) turns.add(key);
    return true;
  };

  /** Hands free slots to waiting queues, one subscription's turn after another. */
  function pump(): void {
    if (pumping) return; // a slot given back while a queue is started: the loop below goes on
    pumping = true;
    let failure: { error: unknown } | undefined;
    try {
      while (!closed && taken < limits.total) {
        const key = turns.values().next().value;
        if (key === undefined) break;
        turns.delete(key);
        const list = ready.get(key) as Set<string>;
        const stream = list.values().next().value as string;
        list.delete(stream);
        waitingCount -= 1;
        if (list.size === 0) ready.delete(key);
        take(key);
        if (list.size > 0 && hasOwnSlot(key)) turns.add(key);
        try {
          start(key, stream);
        } catch (error) {
          // The slot just taken comes back, and the other queues still get theirs.
          giveBack(key);
          failure ??= { error };
        }
      }
    } finally {
      pumping = false;
    }
    if (failure) throw failure.error;
  }

  return {
    tryAcquire(key) {
      if (closed || taken >= limits.total || !hasOwnSlot(key)) return false;
      take(key);
      if (!hasOwnSlot(key)) turns.delete(key);
      return true;
    },
    release(key) {
      if (giveBack(key)) pump();
    },
    wait(key, stream) {
      if (closed) return;
      let list = ready.get(key);
      if (!list) {
        list = new Set();
        ready.set(key, list);
      }
      if (list.has(stream)) return; // keeps its place
      list.add(stream);
      waitingCount += 1;
      if (hasOwnSlot(key)) turns.add(key);
      pump();
    },
    has: (key, stream) => ready.get(key)?.has(stream) === true,
    forget(key, stream) {
      const list = ready.get(key);
      if (!list?.delete(stream)) return;
      waitingCount -= 1;
      if (list.size === 0) {
        ready.delete(key);
        turns.delete(key);
      }
    },
    close() {
      closed = true;
      ready.clear();
      turns.clear();
      waitingCount = 0;
    },
    waiting: () => waitingCount,
    inFlight: () => taken,
  };
}
