/**
 * What this process appended lately, as runs of positions with their stream and event types, while
 * that is everything the log got (positions are the rowid, so another process's append shows as a
 * gap). A filtered reader woken by appends asks it first: when none of the new events can match its
 * filter, it moves past them without a query. The service runs about ten followers (docs/architecture.md,
 * "Followers"), and every append woke each of them into a read.
 */
import type { EventFilter } from '../port.ts';

/** Runs kept; older ones are forgotten (a reader that far behind queries, as without the journal). */
const MAX_RUNS = 4_096;

interface Run {
  first: number;
  last: number;
  streamId: string;
  types: readonly string[];
}

export class Journal {
  #runs: Run[] = [];
  /** Every position after this one, up to the last run's end, is in the runs. */
  #from = Number.POSITIVE_INFINITY;

  /** Events `first..last` of one append were written to `streamId`. */
  record(first: number, last: number, streamId: string, types: readonly string[]): void {
    const end = this.#runs.at(-1)?.last;
    if (end === undefined || first !== end + 1) {
      // The first, or after a gap (another process appended): complete from here on.
      this.#runs = [];
      this.#from = first - 1;
    }
    this.#runs.push({ first, last, streamId, types });
    if (this.#runs.length > MAX_RUNS) {
      const dropped = this.#runs.splice(0, this.#runs.length - MAX_RUNS);
      this.#from = dropped[dropped.length - 1].last;
    }
  }

  /**
   * True only when every event in `(after, upTo]` is known and none matches `filter`; false when one
   * may match or the journal does not know them all.
   */
  skips(after: number, upTo: number, filter: EventFilter): boolean {
    const end = this.#runs.at(-1)?.last;
    if (end === undefined || after < this.#from || upTo > end) return false;
    for (let i = this.#runs.length - 1; i >= 0; i--) {
      const run = this.#runs[i];
      if (run.last <= after) break;
      if (run.first > upTo) continue;
      if (matches(run, filter)) return false;
    }
    return true;
  }
}

function matches(run: Run, filter: EventFilter): boolean {
  if ('streamPrefixes' in filter) return filter.streamPrefixes.some((p) => run.streamId.startsWith(p));
  return run.types.some((t) => filter.eventTypes.includes(t));
}
