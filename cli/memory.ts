/**
 * Gives back the memory a catch-up took (docs/read-side.md, "Memory after the first start"): a full
 * garbage collection of this thread's V8 isolate that also returns its freed pages to the system.
 *
 * A catch-up (the projector building every read model at a first start, the dispatcher following a
 * long log, the sandbox's seeding) grows an isolate's heap to hundreds of MB, almost all of it garbage
 * once the work ends. An ordinary collection frees the objects but keeps the pages for reuse; V8 gives
 * them back only in a collection that reduces memory, which an idle isolate runs on its own only after
 * about 100 s, and one that keeps allocating a little (a thread reporting its metrics every second)
 * runs later still. V8's "last resort" collection is the one that gives the pages back at once.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

let collect: Collect | undefined;

/**
 * The isolate's `gc` function: the global one where the process runs with `--expose-gc`, else one
 * made in a context of its own once the flag is set (the flag exposes it to contexts made after it).
 */
function collector(): Collect {
  if (collect) return collect;
  const exposed = (globalThis as { gc?: Collect }).gc;
  if (exposed) collect = exposed;
  else {
    // Set only as long as it takes to make one: left on, every context made later would get `gc` too.
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as Collect;
    setFlagsFromString('--no-expose-gc');
  }
  return collect;
}

/** The message of the log line each thread writes once it gave back the memory its start took. */
export const CATCH_UP_MEMORY_GIVEN_BACK = 'gave back the memory of the catch-up';

/** The main thread's, once a start has gone a second without being ready (`pds serve`). */
export const START_MEMORY_GIVEN_BACK =
  'gave back the memory of loading the program, while the start catches up';

/** The isolate's heap before and after, MB, and how long the thread was paused for it (what a log line reports). */
export interface MemoryGivenBack {
  heap_mb_before: number;
  heap_mb_after: number;
  pause_ms: number;
}

const mb = (bytes: number) => Math.round(bytes / 1_048_576);

/** Collects this thread's garbage and returns the freed pages to the system; blocks the thread for it. */
export function giveMemoryBack(): MemoryGivenBack {
  const before = getHeapStatistics().total_heap_size;
  const began = performance.now();
  collector()({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return {
    heap_mb_before: mb(before),
    heap_mb_after: mb(getHeapStatistics().total_heap_size),
    pause_ms: Math.round(performance.now() - began),
  };
}
