/**
 * How far each projection is behind the log, for `/metrics` and `GET /admin/v1/projections`, at a cost
 * that does not grow with the log (docs/operations.md, "Projections"). The log's head is read once for
 * all projections (one event). A projection whose checkpoint is at that head lags by nothing and costs
 * no more: its checkpoint follows the log's progress past other streams' events
 * (docs/read-side.md, "Progress past other streams' events"). One behind it is measured: its oldest
 * event not applied, and their count up to 10,001 ("more than 10,000"), kept while neither its
 * checkpoint nor the head moves; the age is that event's, at every call, so a projection stuck
 * behind a quiet log lags more as time goes on. Finding that event reads the log from the checkpoint
 * on (on EventStoreDB too: a filtered read whose server walks it): a cost of how far behind the
 * projection is, never of the history before it. That is the whole log for a projection that builds
 * and whose next event is far ahead (a first start, whose threads report their metrics every second):
 * so a measure is also kept, whatever moves, for twenty times what it took, and measuring takes at most
 * a twentieth of the time (docs/operations.md, "Projections"). Near the head a
 * measure takes a millisecond and is taken afresh at every call. A lag of 0 always means caught up
 * with the head now.
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

const COUNT_UP_TO = 10_001;
/** A measure is kept for this many times what it took (see above). */
const KEPT_FOR_TIMES_ITS_COST = 20;
const NONE: Lag = { events: 0, seconds: 0 };

export class ProjectionLags {
  readonly #store: EventStore;
  readonly #clock: Clock;
  readonly #measured = new Map<
    string,
    { checkpoint: number; head: number; events: number; oldestAt: number | null; keptUntil: number }
  >();

  constructor(store: EventStore, options: { clock?: Clock } = {}) {
    this.#store = store;
    this.#clock = options.clock ?? systemClock;
  }

  /** The lag of each projection, against one read of the log's head. */
  async of(projections: readonly LagOf[]): Promise<Lag[]> {
    const head = await this.#store.headPosition();
    const out: Lag[] = [];
    for (const projection of projections) {
      if (head <= projection.checkpoint) {
        out.push(NONE);
        continue;
      }
      let kept = this.#measured.get(projection.name);
      const moved = kept?.checkpoint !== projection.checkpoint || kept?.head !== head;
      if (!kept || (moved && this.#now() >= kept.keptUntil)) {
        const began = this.#now();
        const measured = await this.#measure(projection);
        const took = this.#now() - began;
        kept = {
          checkpoint: projection.checkpoint,
          head,
          ...measured,
          keptUntil: began + took * KEPT_FOR_TIMES_ITS_COST,
        };
        this.#measured.set(projection.name, kept);
      }
      if (kept.oldestAt === null) {
        out.push(NONE);
        continue;
      }
      const now = this.#now();
      out.push({ events: kept.events, seconds: Math.max(0, (now - kept.oldestAt) / 1000) });
    }
    return out;
  }

  #now(): number {
    return this.#clock.now().getTime();
  }

  /** The projection's events not applied, and when the oldest of them was recorded (null: none). */
  async #measure({ filter, checkpoint }: LagOf): Promise<{ events: number; oldestAt: number | null }> {
    const [oldest] = await this.#store.readAll({ after: checkpoint, maxCount: 1, filter });
    if (!oldest) return { events: 0, oldestAt: null };
    const events = await this.#store.countAll({ after: checkpoint, filter, max: COUNT_UP_TO });
    return { events, oldestAt: Date.parse(oldest.recordedAt) };
  }
}
