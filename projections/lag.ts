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
 * so the measure of a projection far behind is also kept, whatever moves, for twenty times what it
 * took, until it reaches the head measured at: measuring takes at most a twentieth of its time
 * (docs/operations.md, "Projections"). One that found none stays true while the head stays, and once
 * it moves only the events after the head measured at are read. Near the head a measure takes a
 * millisecond and is taken afresh at every call. A lag of 0 always means caught up with the head now.
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

/** A projection's measure: at which checkpoint and head, what it found, and until when it is kept. */
interface Kept {
  checkpoint: number;
  head: number;
  events: number;
  oldestAt: number | null;
  keptUntil: number;
}

const COUNT_UP_TO = 10_001;
/** A measure is kept for this many times what it took (see above). */
const KEPT_FOR_TIMES_ITS_COST = 20;
/** However long a measure took (a paused machine): kept no longer than this. */
const KEPT_AT_MOST_MS = 300_000;
/** Positions behind the head past which a projection's measure reads far (see above). */
const FAR_BEHIND = 100_000;
const NONE: Lag = { events: 0, seconds: 0 };

export class ProjectionLags {
  readonly #store: EventStore;
  readonly #clock: Clock;
  readonly #farBehind: number;
  readonly #measured = new Map<string, Kept>();
  /** Measures being taken, by projection: a call at the same checkpoint and head waits for it. */
  readonly #taking = new Map<string, { checkpoint: number; head: number; measure: Promise<Kept> }>();

  /** `farBehind`: positions behind the head from which a measure is kept on time (tests set it low). */
  constructor(store: EventStore, options: { clock?: Clock; farBehind?: number } = {}) {
    this.#store = store;
    this.#clock = options.clock ?? systemClock;
    this.#farBehind = options.farBehind ?? FAR_BEHIND;
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
      const kept = await this.#answering(projection, head);
      if (kept.oldestAt === null) {
        out.push(NONE);
        continue;
      }
      const now = this.#now();
      out.push({ events: kept.events, seconds: Math.max(0, (now - kept.oldestAt) / 1000) });
    }
    return out;
  }

  /**
   * The measure that answers for this checkpoint and head: the one kept, the one another call is
   * taking at the same checkpoint and head (concurrent status reads and scrapes share it instead of
   * each reading the log), or a new one. A measure is kept unless one at a later head already is.
   */
  async #answering(projection: LagOf, head: number): Promise<Kept> {
    const { name, checkpoint } = projection;
    const kept = this.#measured.get(name);
    if (kept && this.#stillAnswers(kept, checkpoint, head)) return kept;
    const pending = this.#taking.get(name);
    if (pending && pending.checkpoint === checkpoint && pending.head === head) return pending.measure;
    const measure = this.#take(projection, head, kept);
    this.#taking.set(name, { checkpoint, head, measure });
    try {
      const taken = await measure;
      const current = this.#measured.get(name);
      if (!current || current.head <= taken.head) this.#measured.set(name, taken);
      return taken;
    } finally {
      if (this.#taking.get(name)?.measure === measure) this.#taking.delete(name);
    }
  }

  /** A new measure at this head, kept for twenty times what it took. */
  async #take(projection: LagOf, head: number, kept: Kept | undefined): Promise<Kept> {
    const { checkpoint } = projection;
    // None in (its checkpoint, the head it was measured at]: only what came after needs reading.
    const none = kept?.oldestAt === null && checkpoint >= kept.checkpoint && head >= kept.head;
    const from = none && kept ? Math.max(checkpoint, kept.head) : checkpoint;
    const began = this.#now();
    const measured = await this.#measure(projection.filter, from);
    const keptFor = Math.min((this.#now() - began) * KEPT_FOR_TIMES_ITS_COST, KEPT_AT_MOST_MS);
    return { checkpoint, head, ...measured, keptUntil: began + keptFor };
  }

  /**
   * Whether a kept measure still answers for this checkpoint and head: exactly while neither moved; one
   * that found no event while the head stays (a later checkpoint has none either); one that found
   * events of a projection far behind (`farBehind` positions or more), however the checkpoint and head
   * moved, for twenty times what it took (at most five minutes), until the checkpoint reaches the head
   * it was measured at. A checkpoint gone back (a rebuild promoted) is measured afresh.
   */
  #stillAnswers(kept: Kept, checkpoint: number, head: number): boolean {
    if (kept.checkpoint === checkpoint && kept.head === head) return true;
    if (checkpoint < kept.checkpoint) return false;
    if (kept.oldestAt === null) return kept.head === head;
    // Far behind the head it was measured at, and not past it: not caught up since.
    const far = kept.head - kept.checkpoint >= this.#farBehind && checkpoint < kept.head;
    return far && this.#now() < kept.keptUntil;
  }

  #now(): number {
    return this.#clock.now().getTime();
  }

  /** The projection's events not applied, and when the oldest of them was recorded (null: none). */
  async #measure(filter: EventFilter, after: number): Promise<{ events: number; oldestAt: number | null }> {
    const [oldest] = await this.#store.readAll({ after, maxCount: 1, filter });
    if (!oldest) return { events: 0, oldestAt: null };
    const events = await this.#store.countAll({ after, filter, max: COUNT_UP_TO });
    return { events, oldestAt: Date.parse(oldest.recordedAt) };
  }
}
