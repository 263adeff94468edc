/**
 * How far each projection is behind the log, for `/metrics` and `GET /admin/v1/projections`, at a cost
 * that does not grow with the log (docs/operations.md, "Projections"). The log's head is read at most
 * once an interval, for every projection together. A projection whose checkpoint is at that head
 * lags by nothing and costs no read: its checkpoint follows the log's progress past other streams'
 * events (docs/read-side.md, "Progress past other streams' events"). One behind it is measured (its
 * oldest event not applied, and their count up to 10,001: "more than 10,000") at most once an
 * interval; on EventStoreDB the count is a filtered read, whose server walks the log from the
 * checkpoint: a cost of how far behind the projection is (one stuck on a failed event: growing), never
 * of the history before it.
 */
import { type Clock, systemClock } from '../domain/clock.ts';
import type { EventFilter, EventStore } from '../eventstore/port.ts';

export interface Lag {
  /** Events of the projection's filter after its checkpoint, up to 10,001. */
  events: number;
  /** Age of the oldest of them, in seconds. */
  seconds: number;
}

/** What a lag is measured for: a projection's name, filter and checkpoint. */
export interface LagOf {
  name: string;
  filter: EventFilter;
  checkpoint: number;
}

/** How long a head or a measured lag is used before it is read again. */
export const LAG_INTERVAL_MS = 1_000;
const COUNT_UP_TO = 10_001;
const NONE: Lag = { events: 0, seconds: 0 };

export class ProjectionLags {
  readonly #store: EventStore;
  readonly #clock: Clock;
  readonly #intervalMs: number;
  #head: { position: number; at: number } | undefined;
  #reading: Promise<number> | undefined;
  readonly #measured = new Map<string, { checkpoint: number; at: number; lag: Lag }>();

  constructor(store: EventStore, options: { clock?: Clock; intervalMs?: number } = {}) {
    this.#store = store;
    this.#clock = options.clock ?? systemClock;
    this.#intervalMs = options.intervalMs ?? LAG_INTERVAL_MS;
  }

  async of(projection: LagOf): Promise<Lag> {
    const now = this.#clock.now().getTime();
    if ((await this.#headAt(now)) <= projection.checkpoint) return NONE;
    const kept = this.#measured.get(projection.name);
    if (kept && kept.checkpoint === projection.checkpoint && this.#fresh(kept.at, now)) return kept.lag;
    const lag = await this.#measure(projection, now);
    this.#measured.set(projection.name, { checkpoint: projection.checkpoint, at: now, lag });
    return lag;
  }

  #fresh(at: number, now: number): boolean {
    return now >= at && now - at < this.#intervalMs;
  }

  /** The log's head, read at most once an interval; callers meanwhile share one read. */
  async #headAt(now: number): Promise<number> {
    if (this.#head && this.#fresh(this.#head.at, now)) return this.#head.position;
    this.#reading ??= this.#store.headPosition().finally(() => {
      this.#reading = undefined;
    });
    const position = await this.#reading;
    this.#head = { position, at: now };
    return position;
  }

  async #measure({ filter, checkpoint }: LagOf, now: number): Promise<Lag> {
    const [oldest] = await this.#store.readAll({ after: checkpoint, maxCount: 1, filter });
    if (!oldest) return NONE;
    const events = await this.#store.countAll({ after: checkpoint, filter, max: COUNT_UP_TO });
    return { events, seconds: Math.max(0, (now - Date.parse(oldest.recordedAt)) / 1000) };
  }
}
