/**
 * One projector at a time (docs/read-side.md, "One projector at a time"). Two projectors on one read
 * store (a rolling deploy, two `projector` processes on one `read.db`) would both write the read
 * models, and two read-modify-writes of one document lose one of them. Every projector competes for
 * one lease in the read store: the one that holds it projects, with its fence on every write, and
 * renews it every third of its time; the others stand by and try again as often, taking it over once
 * its holder has let it go (a clean stop) or stopped renewing it (a crash) and its time has run out.
 *
 * A holder that learns it lost the lease (a renewal refused, a write refused under its fence) stops
 * its projections at once; one that cannot renew at all (the store unreachable) stops before its time
 * could run out. The fence makes the store refuse whatever a holder that does not know yet still
 * writes.
 *
 * Every transition (starting the projections, stopping them, a renewal, an acquisition, the stop) runs
 * on one queue, one after another: projections that still stop are never started again beside
 * themselves, and a stop ends only once they have stopped. A write refused under the fence forgets
 * the lease at once, so nothing new starts under it, and stops the projections in turn.
 */
import type { Logger } from 'pino';
import type { Fence, ReadStore } from './read-store.ts';

/** The lease every projector of a read store competes for. */
export const PROJECTOR_LEASE = 'projector';

/** How long an acquisition or renewal holds the lease by default (`PDS_PROJECTOR_LEASE`). */
export const DEFAULT_LEASE_MS = 15_000;

export interface LeaseOptions {
  /** Who this projector is, as the lease records it: a process (a thread started again is the same). */
  owner: string;
  /** How long an acquisition or renewal holds the lease. */
  ttlMs: number;
  /**
   * Whether a holder, by its name, is known to have ended (a process of this machine that is gone):
   * then the lease is taken over from it at once, instead of when it runs out. Never, by default.
   */
  holderGone?(holder: string): boolean;
}

/** What the projector does as the lease comes and goes; called one at a time, in order. */
export interface LeaseHandlers {
  /** The lease is this projector's: start writing under `fence`. A rejection lets the lease go. */
  acquired(fence: Fence): Promise<void>;
  /** Another holds it, it could not be renewed in time, or the projector stops: stop writing. */
  lost(why: string): Promise<void>;
}

export interface LeaseState {
  holding: boolean;
  /** The fence's token while holding. */
  token: number | null;
  /**
   * Who holds it while this projector stands by; null when holding, and when it stands by for no
   * one (not tried yet, the store did not answer, or its projections did not start).
   */
  holder: string | null;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class ProjectorLease {
  readonly #readStore: ReadStore;
  readonly #options: LeaseOptions;
  readonly #handlers: LeaseHandlers;
  readonly #logger: Pick<Logger, 'info' | 'warn' | 'error'> | undefined;
  /** How often it renews while holding, and tries while standing by. */
  readonly #everyMs: number;
  /** The lease this projector holds; forgotten at once when a write is refused under it. */
  #fence: Fence | undefined;
  /** Whether the projections were started under a lease (`acquired`) and not stopped since (`lost`). */
  #projecting = false;
  /** Why the lease was forgotten, for the projections' stop. */
  #lostWhy = 'the lease was lost';
  #holder: string | null = null;
  /** When (performance.now()) the last acquisition or renewal that went through was asked. */
  #heldSince = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Transitions, one at a time. */
  #queue: Promise<void> = Promise.resolve();

  constructor(
    readStore: ReadStore,
    options: LeaseOptions,
    handlers: LeaseHandlers,
    logger?: Pick<Logger, 'info' | 'warn' | 'error'>,
  ) {
    this.#readStore = readStore;
    this.#options = options;
    this.#handlers = handlers;
    this.#logger = logger;
    this.#everyMs = Math.max(1, Math.floor(options.ttlMs / 3));
  }

  /** Tries once (and starts projecting if it acquired the lease); then keeps renewing or trying. */
  async start(): Promise<void> {
    await this.#enqueue(() => this.#turn());
    this.#schedule();
  }

  state(): LeaseState {
    return { holding: this.#fence !== undefined, token: this.#fence?.token ?? null, holder: this.#holder };
  }

  /**
   * A write under `fence` was refused: the lease is lost now, not at the next renewal (and not behind
   * a renewal still waiting for the store). It is forgotten at once; the projections stop, and it
   * looks who holds the lease now, in turn with the other transitions.
   */
  refused(fence: Fence): void {
    if (this.#fence?.token !== fence.token) return;
    this.#forget('a write was refused under its fence');
    void this.#enqueue(async () => {
      await this.#standBy().catch((err: unknown) => {
        this.#logger?.error({ err }, 'projections did not stop cleanly');
      });
      await this.#turn(); // who holds it now: standing by for it
    }).catch(() => undefined);
  }

  /** Stops projecting and lets the lease go, so a projector standing by takes over at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#enqueue(async () => {
      const fence = this.#fence;
      this.#forget('the projector stops');
      try {
        await this.#standBy();
      } finally {
        if (fence) {
          await this.#readStore.releaseLease(fence).catch((err: unknown) => {
            this.#logger?.warn({ err }, 'projector lease not released: it runs out by itself');
          });
        }
      }
    });
  }

  #enqueue(step: () => Promise<void>): Promise<void> {
    const run = this.#queue.then(step);
    this.#queue = run.catch((err: unknown) => {
      this.#logger?.error({ err }, 'projector lease step failed');
    });
    return run;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      void this.#enqueue(() => this.#turn())
        .catch(() => undefined)
        .finally(() => this.#schedule());
    }, this.#everyMs);
    this.#timer.unref();
  }

  async #turn(): Promise<void> {
    if (this.#stopped) return;
    if (this.#fence) {
      await this.#renew(this.#fence);
      return;
    }
    // Projections of a lease forgotten since (a write refused) stop before any start again.
    await this.#standBy();
    await this.#acquire();
  }

  async #acquire(): Promise<void> {
    const asked = performance.now();
    const { owner, ttlMs } = this.#options;
    let attempt: Awaited<ReturnType<ReadStore['acquireLease']>>;
    try {
      attempt = await this.#readStore.acquireLease(PROJECTOR_LEASE, owner, ttlMs);
      if (!attempt.acquired && this.#options.holderGone?.(attempt.holder)) {
        const gone = attempt.holder;
        attempt = await this.#readStore.acquireLease(PROJECTOR_LEASE, owner, ttlMs, gone);
        if (attempt.acquired)
          this.#logger?.info({ holder: gone }, "the lease's holder has ended: taking over");
      }
    } catch (err) {
      this.#holder = null; // not standing by for anyone: the store did not answer
      if (!this.#stopped) {
        this.#logger?.warn({ err }, 'projector lease not acquired: the read store failed; trying again');
      }
      return;
    }
    if (this.#stopped) {
      // Stopped while the store answered: nothing starts, and a lease just acquired is let go.
      if (attempt.acquired) await this.#readStore.releaseLease(attempt.fence).catch(() => undefined);
      return;
    }
    if (!attempt.acquired) {
      if (this.#holder !== attempt.holder) {
        this.#logger?.info(
          { holder: attempt.holder, expires_in_ms: attempt.expiresInMs },
          'another projector holds the lease: standing by',
        );
      }
      this.#holder = attempt.holder;
      return;
    }
    this.#fence = attempt.fence;
    this.#heldSince = asked;
    this.#holder = null;
    this.#logger?.info({ token: attempt.fence.token, owner }, 'projector lease acquired: projecting');
    this.#projecting = true;
    try {
      await this.#handlers.acquired(attempt.fence);
    } catch (err) {
      this.#logger?.error({ err }, 'projections did not start: letting the lease go');
      await this.#lose(`the projections did not start: ${message(err)}`);
      await this.#readStore.releaseLease(attempt.fence).catch(() => undefined);
    }
  }

  async #renew(fence: Fence): Promise<void> {
    const asked = performance.now();
    // Whether it still holds the lease is not known until the store answers: it stops a third of the
    // lease before it could run out, however long the store takes.
    const deadline = this.#heldSince + this.#options.ttlMs - this.#everyMs;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('no answer')), Math.max(0, deadline - asked));
    });
    let renewed: boolean;
    try {
      renewed = await Promise.race([this.#readStore.renewLease(fence, this.#options.ttlMs), late]);
    } catch (err) {
      if (performance.now() < deadline) {
        this.#logger?.warn({ err }, 'projector lease not renewed: trying again');
        return;
      }
      await this.#lose(`the lease could not be renewed before it ran out: ${message(err)}`);
      return;
    } finally {
      clearTimeout(timer);
    }
    if (this.#fence?.token !== fence.token) return; // lost meanwhile (a write was refused)
    if (renewed) {
      this.#heldSince = asked;
    } else {
      await this.#lose('another projector acquired the lease');
      await this.#acquire(); // who holds it now: standing by for it
    }
  }

  /** The lease is lost: forgotten, and the projections stop. */
  async #lose(why: string): Promise<void> {
    this.#forget(why);
    await this.#standBy();
  }

  /** Forgets the lease at once, so that nothing new starts under it (the projections stop in turn). */
  #forget(why: string): void {
    const fence = this.#fence;
    if (!fence) return;
    this.#fence = undefined;
    this.#lostWhy = why;
    if (!this.#stopped) this.#logger?.warn({ token: fence.token, why }, 'projector lease lost: standing by');
  }

  /** Stops the projections started under a lease since forgotten, if they run. */
  async #standBy(): Promise<void> {
    if (!this.#projecting || this.#fence) return;
    this.#projecting = false;
    await this.#handlers.lost(this.#lostWhy);
  }
}
