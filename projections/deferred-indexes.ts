/**
 * The indexes a build defers, and the queries a bulk shadow refuses meanwhile
 * (docs/read-side.md, "How a build writes its shadows"): one rule for every adapter, so a read model
 * that builds on the embedded store builds on MongoDB too.
 */
import { fieldConditions } from './documents.ts';
import { DeferredIndexError, type Filter, type IndexSpec, type SortSpec } from './read-store.ts';

/** Whether a build leaves this index for after its load: every index not read while applying. */
export const isDeferred = (spec: IndexSpec): boolean => spec.readWhileApplying !== true;

/**
 * Refuses a query on a bulk shadow that needs a deferred index (`DeferredIndexError`): one of them
 * serves it and no live index does, nor `_id` equality. An index serves a query when the filter pins
 * its first field (an equality, `$in` or a range) or the query sorts by that field first: every index
 * plan of either store starts so.
 */
export function assertNoDeferredIndexNeeded(
  collection: string,
  live: readonly IndexSpec[],
  deferred: readonly IndexSpec[],
  filter: Filter,
  sort?: SortSpec,
): void {
  if (deferred.length === 0) return;
  const conditions = fieldConditions(filter);
  if (conditions.get('_id')?.eq) return;
  const pinned = new Set([...conditions].filter(([, c]) => c.eq || c.low || c.high).map(([f]) => f));
  const serves = (index: IndexSpec) => {
    const [first] = index.keys[0];
    return pinned.has(first) || sort?.[0]?.[0] === first;
  };
  if (live.some(serves)) return;
  const needed = deferred.find(serves);
  if (needed) throw new DeferredIndexError(collection, needed);
}
