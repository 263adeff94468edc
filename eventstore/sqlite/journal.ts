/**
 * What this process's connections to the log appended lately, as runs of positions with their stream
 * and event types: this connection's own appends, and those another thread's connection announced
 * (eventstore/sqlite/log.ts), which may arrive after later ones of this connection. Positions are the
 * rowid, so what no run covers (another process's append, an announcement not yet arrived) is a gap.
 * A filtered reader woken by appends asks it first: when every new event is known and none can match
 * its filter, it moves past them without a query. The service runs about ten followers
 * (docs/architecture.md, "Followers"), and every append woke each of them into a read.
 */
import type { EventFilter } from '../port.ts';

/** Runs kept; older ones are forgotten (a reader that far behind queries, as without the journal). */
const MAX_RUNS = 4_096;
/** Forgotten in slices this long: dropping the oldest run at every append moved the whole array each time. */
const FORGET_SLICE = 1_024;

/** Events `first..last` of one append, all to `streamId`. */
export interface JournalRun {
  first: number;
  last: number;
  streamId: string;
  types: readonly string[];
}

export class Journal {
  /** Ordered by position; gaps allowed. */
  #runs: JournalRun[] = [];

  /** Events `first..last` of one append were written to `streamId`. */
  record(first: number, last: number, streamId: string, types: readonly string[]): void {
    let i = this.#runs.length;
    while (i > 0 && this.#runs[i - 1].first > first) i--;
    this.#runs.splice(i, 0, { first, last, streamId, types });
    if (this.#runs.length > MAX_RUNS + FORGET_SLICE) this.#runs.splice(0, this.#runs.length - MAX_RUNS);
  }

  /**
   * True only when every event in `(after, upTo]` is known and none is wanted: none matches `filter`,
   * or the reader reflects it already (`reflects`, its own appends); false when one may be wanted or a
   * position in between is in no run.
   */
  skips(
    after: number,
    upTo: number,
    filter: EventFilter,
    reflects?: (streamId: string, position: number) => boolean,
  ): boolean {
    let need = upTo; // the highest position not yet found in a run
    for (let i = this.#runs.length - 1; i >= 0 && need > after; i--) {
      const run = this.#runs[i];
      if (run.first > need) continue;
      if (run.last < need) return false;
      if (matches(run, filter) && !reflects?.(run.streamId, run.last)) return false;
      need = run.first - 1;
    }
    return need <= after;
  }
}

function matches(run: JournalRun, filter: EventFilter): boolean {
  if ('streamPrefixes' in filter) return filter.streamPrefixes.some((p) => run.streamId.startsWith(p));
  return run.types.some((t) => filter.eventTypes.includes(t));
}
