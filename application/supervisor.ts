/**
 * Keeps the log's subscriptions alive (docs/operations.md, "Recovery"). A catch-up or persistent
 * subscription that drops (the store restarted, a leader changed, the network blinked, a read store
 * write failed) is opened again after a random pause (jitter, so that many processes do not come back
 * at once) whose ceiling doubles with each failure in a row, from `minDelayMs` up to `maxDelayMs`. A
 * subscription that catches up again starts the doubling afresh.
 *
 * Each one's state is kept here under its name: the composition root turns it into `/readyz` (503
 * naming what is down) and into metrics (drops and resubscriptions).
 */

export type SubscriptionState = 'starting' | 'up' | 'down' | 'stopped';

export interface SubscriptionHealth {
  name: string;
  state: SubscriptionState;
  /** Times the subscription ended with an error. */
  drops: number;
  /** Times it was opened again after a drop. */
  resubscriptions: number;
  /** Why it last dropped, for operators (never a secret: store errors name streams and positions). */
  last_error: string | null;
  /** When it went down, while it is down. */
  down_since: string | null;
}

export interface SupervisorOptions {
  /** First pause after a drop. */
  minDelayMs?: number;
  /** Longest pause. */
  maxDelayMs?: number;
  /** In [0, 1); the jitter's source (a test fixes it). */
  random?: () => number;
  /** Told of every drop, with the pause before the next try. */
  onDrop?(name: string, error: unknown, delayMs: number): void;
}

/** What one subscription reports to its supervisor; `dropped` answers how long to wait before the next try. */
export interface Supervised {
  /** It caught up: it is healthy, and the next drop pauses briefly again. */
  up(): void;
  dropped(error: unknown): number;
  resubscribed(): void;
  stopped(): void;
}

interface Entry {
  health: SubscriptionHealth;
  /** Drops since it was last up. */
  failures: number;
}

export class Supervisor {
  readonly #entries = new Map<string, Entry>();
  readonly #minDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #random: () => number;
  readonly #onDrop: SupervisorOptions['onDrop'];

  constructor(options: SupervisorOptions = {}) {
    this.#minDelayMs = options.minDelayMs ?? 200;
    this.#maxDelayMs = options.maxDelayMs ?? 30_000;
    this.#random = options.random ?? Math.random;
    this.#onDrop = options.onDrop;
  }

  /** Starts keeping the state of the subscription called `name` (a second one of that name replaces it). */
  watch(name: string): Supervised {
    const entry: Entry = {
      health: {
        name,
        state: 'starting',
        drops: 0,
        resubscriptions: 0,
        last_error: null,
        down_since: null,
      },
      failures: 0,
    };
    this.#entries.set(name, entry);
    const h = entry.health;
    return {
      up: () => {
        if (h.state === 'stopped') return;
        h.state = 'up';
        h.down_since = null;
        entry.failures = 0;
      },
      dropped: (error) => {
        h.drops += 1;
        h.last_error = error instanceof Error ? error.message : String(error);
        if (h.state !== 'down') h.down_since = new Date().toISOString();
        h.state = 'down';
        const delay = this.delay(entry.failures);
        entry.failures += 1;
        this.#onDrop?.(name, error, delay);
        return delay;
      },
      resubscribed: () => {
        h.resubscriptions += 1;
      },
      stopped: () => {
        h.state = 'stopped';
        h.down_since = null;
        if (this.#entries.get(name) === entry) this.#entries.delete(name);
      },
    };
  }

  /** The pause before try `failures + 1`: random, from half the first pause up to the doubled ceiling. */
  delay(failures: number): number {
    const ceiling = Math.min(this.#maxDelayMs, this.#minDelayMs * 2 ** Math.min(failures, 30));
    return Math.round(this.#minDelayMs / 2 + this.#random() * (ceiling - this.#minDelayMs / 2));
  }

  health(): SubscriptionHealth[] {
    return [...this.#entries.values()].map((e) => ({ ...e.health }));
  }

  /** Names of the subscriptions that are down now. */
  down(): string[] {
    return [...this.#entries.values()].filter((e) => e.health.state === 'down').map((e) => e.health.name);
  }
}
