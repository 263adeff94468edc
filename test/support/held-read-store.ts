/**
 * A read store around the embedded one whose commits for one projection can be held: while held, a
 * commit (or a checkpoint alone) naming that projection's checkpoint waits, as on a MongoDB whose
 * writes hang, so the projection stops applying and its lag grows while every other one goes on.
 * `release()` lets the waiting commits through. Everything else passes through.
 */
import type { Commit, ReadStore } from '../../projections/read-store.ts';

export interface HeldReadStore extends ReadStore {
  /** Holds the commits of projection `name` until `release()`. */
  hold(name: string): void;
  release(): void;
  /** Commits waiting now. */
  readonly waiting: number;
}

export function heldReadStore(inner: ReadStore): HeldReadStore {
  let held: string | null = null;
  let gate: { promise: Promise<void>; open: () => void } | null = null;
  let waiting = 0;
  const pass = async (name: string | undefined) => {
    if (!gate || name !== held) return;
    waiting += 1;
    await gate.promise;
    waiting -= 1;
  };
  const named = (c: Commit) => c.checkpoints?.find((x) => x.name === held)?.name;
  const store: HeldReadStore = {
    kind: inner.kind,
    hold(name) {
      held = name;
      let open = () => {};
      const promise = new Promise<void>((resolve) => {
        open = resolve;
      });
      gate = { promise, open };
    },
    release() {
      gate?.open();
      gate = null;
      held = null;
    },
    get waiting() {
      return waiting;
    },
    collection: (name, indexes) => inner.collection(name, indexes),
    createShadow: (name, indexes, options) => inner.createShadow(name, indexes, options),
    finishBulk: (shadow, fence) => inner.finishBulk(shadow, fence),
    promote: (shadows, checkpoints, fence) => inner.promote(shadows, checkpoints, fence),
    dropShadow: (shadow, fence) => inner.dropShadow(shadow, fence),
    dropOrphanShadows: (fence) => inner.dropOrphanShadows(fence),
    getCheckpoint: (name) => inner.getCheckpoint(name),
    async setCheckpoint(name, checkpoint, fence) {
      await pass(name);
      return inner.setCheckpoint(name, checkpoint, fence);
    },
    async commit(c) {
      await pass(named(c));
      return inner.commit(c);
    },
    acquireLease: (lease, owner, ttlMs, from) => inner.acquireLease(lease, owner, ttlMs, from),
    renewLease: (fence, ttlMs) => inner.renewLease(fence, ttlMs),
    releaseLease: (fence) => inner.releaseLease(fence),
    ...(inner.ping && { ping: () => inner.ping?.() ?? Promise.resolve() }),
    close: () => inner.close(),
  };
  return store;
}
