/**
 * The delivery worker's request slots (docs/webhooks.md, "Scale"): at most `perKey` requests open per
 * subscription, so a slow or dead receiver holds only its own, and at most `total` open in the whole
 * worker, so a backlog over many subscriptions opens a bounded number of sockets. A request takes a
 * slot of both or of neither. The total may be a budget shared by several workers (the shard workers
 * of a dispatcher process, `InFlightBudget`): then it bounds their requests together.
 *
 * A queue that is due while no slot is free waits in its subscription's *ready list* (its stream name,
 * in the order it found no slot), not as a suspended attempt: a `Set` entry per waiting queue. When a
 * slot frees, it is handed on round-robin over the subscriptions with a ready queue and a free slot
 * of their own, so a subscription with thousands of due queues takes its turn like one with a single
 * queue; with a shared budget, round-robin over the workers first, so that no worker keeps for its own
 * queues every slot it frees.
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
 * Requests open over every worker that shares it: each worker's slots take from it, and a slot given
 * back is offered to the workers with a waiting queue in turn.
 */
export interface InFlightBudget {
  readonly total: number;
  /** Slots taken over all the workers sharing it. */
  inFlight(): number;
}

/** A worker's slots as the budget sees them. */
interface Member {
  /** Hands one free slot to its next waiting queue; answers whether it had one waiting. */
  serve(): boolean;
}

class SharedBudget implements InFlightBudget {
  taken = 0;
  readonly members: Member[] = [];
  /** Whose turn it is to be offered a free slot. */
  private next = 0;
  private offering = false;
  private offeredAgain = false;
  readonly total: number;
  constructor(total: number) {
    this.total = total;
  }

  inFlight = () => this.taken;
  free = () => this.taken < this.total;
  leave(member: Member): void {
    const at = this.members.indexOf(member);
    if (at >= 0) this.members.splice(at, 1);
  }

  /**
   * Hands the free slots to waiting queues, one member's turn after another, until none is free or
   * none waits. A member whose start throws has the error thrown from here once the others are served.
   */
  offer(): void {
    if (this.offering) {
      // A slot given back while a queue is started: the loop below goes on.
      this.offeredAgain = true;
      return;
    }
    this.offering = true;
    let failure: { error: unknown } | undefined;
    try {
      for (let idle = 0; this.free() && idle < this.members.length; ) {
        const member = this.members[this.next % this.members.length];
        this.next = (this.next + 1) % this.members.length;
        let served: boolean;
        try {
          served = member.serve();
        } catch (error) {
          failure ??= { error };
          served = true;
        }
        idle = served || this.offeredAgain ? 0 : idle + 1;
        this.offeredAgain = false;
      }
    } finally {
      this.offering = false;
    }
    if (failure) throw failure.error;
  }
}

/** A budget of `total` requests open, to share among the workers of one process. */
export function createInFlightBudget(total: number): InFlightBudget {
  return new SharedBudget(total);
}

/**
 * `start` is handed each slot given to a waiting queue: it owns it from then on (and gives it back
 * with `release` once the request is answered, or at once when the queue has nothing to send). A
 * `start` that throws owns nothing: the slot comes back and its queue leaves the ready list, the
 * other waiting queues are handed the slots free, and the error is thrown from the `release` or
 * `wait` that handed it out.
 */
export function createSlots(
  limits: { perKey: number; total: number | InFlightBudget },
  start: (key: string, stream: string) => void,
): Slots {
  const budget = (
    typeof limits.total === 'number' ? new SharedBudget(limits.total) : limits.total
  ) as SharedBudget;
  const active = new Map<string, number>();
  /** This worker's slots taken (the budget counts every worker's). */
  let taken = 0;
  /** Waiting queues, by subscription, in the order they found no slot. */
  const ready = new Map<string, Set<string>>();
  let waitingCount = 0;
  /**
   * The subscriptions with a waiting queue and a free slot of their own, in turn order (a `Set` keeps
   * insertion order: a subscription served goes to the back).
   */
  const turns = new Set<string>();
  let closed = false;

  const hasOwnSlot = (key: string) => (active.get(key) ?? 0) < limits.perKey;
  const take = (key: string) => {
    active.set(key, (active.get(key) ?? 0) + 1);
    taken += 1;
    budget.taken += 1;
  };
  /** Gives a slot `key` holds back; answers false, changing nothing, when it holds none. */
  const giveBack = (key: string): boolean => {
    const held = active.get(key);
    if (held === undefined) return false;
    if (held <= 1) active.delete(key);
    else active.set(key, held - 1);
    taken -= 1;
    budget.taken -= 1;
    if (ready.has(key)) turns.add(key);
    return true;
  };

  /** Hands a free slot to the queue waiting first of the subscription whose turn it is. */
  const member: Member = {
    serve() {
      const key = closed ? undefined : turns.values().next().value;
      if (key === undefined) return false;
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
        throw error;
      }
      return true;
    },
  };
  budget.members.push(member);

  return {
    tryAcquire(key) {
      if (closed || !budget.free() || !hasOwnSlot(key)) return false;
      take(key);
      if (!hasOwnSlot(key)) turns.delete(key);
      return true;
    },
    release(key) {
      if (giveBack(key)) budget.offer();
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
      budget.offer();
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
      budget.leave(member);
    },
    waiting: () => waitingCount,
    inFlight: () => taken,
  };
}
