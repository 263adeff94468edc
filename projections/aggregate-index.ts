/**
 * An in-memory index of every aggregate of one stream prefix, folded with the aggregate's own
 * `evolve` from a catch-up subscription. The write side uses it for lookups that must not scan the
 * event store (API key hash → partner, a store's specials). It reads no clock, so a restart rebuilds
 * exactly the same index from the events; `waitFor(position)` gives a writer read-your-writes.
 */

import type { Decider, DomainEvent } from '../domain/decider.ts';
import type { EventRegistry } from '../domain/events.ts';
import type { EventStore, RecordedEvent } from '../eventstore/port.ts';
import { createPositionWaiters } from '../eventstore/position-waiters.ts';

export interface AggregateIndex<S> {
  get(id: string): S | undefined;
  values(): IterableIterator<S>;
  /** Resolves once every event up to `position` is reflected. */
  waitFor(position: number, timeoutMs?: number): Promise<void>;
  readonly caughtUp: Promise<void>;
  /** Global position of the last event applied. */
  position(): number;
  stop(): Promise<void>;
}

export interface AggregateIndexOptions<E extends DomainEvent, S> {
  /** Stream prefix, e.g. `partner-`; the rest of the stream id is the aggregate id. */
  prefix: string;
  decider: Pick<Decider<unknown, E, S>, 'initialState' | 'evolve'>;
  /** Told of every change, for secondary indexes kept beside this one. */
  onChange?(id: string, before: S | undefined, after: S): void;
}

export function createAggregateIndex<E extends DomainEvent, S>(
  store: EventStore,
  registry: EventRegistry,
  options: AggregateIndexOptions<E, S>,
): AggregateIndex<S> {
  const states = new Map<string, S>();
  const progress = createPositionWaiters(`the index of ${options.prefix} streams`);

  function apply(event: RecordedEvent): void {
    if (!registry.has(event.type)) return;
    const id = event.streamId.slice(options.prefix.length);
    const before = states.get(id);
    const domainEvent = registry.read(event.type, event.data, event.metadata.schema_version) as E;
    const after = options.decider.evolve(before ?? options.decider.initialState, domainEvent);
    states.set(id, after);
    options.onChange?.(id, before, after);
  }

  const subscription = store.subscribeToAll(
    { from: 'start', filter: { streamPrefixes: [options.prefix] } },
    {
      onEvents(events) {
        for (const e of events) apply(e);
        progress.applied(events[events.length - 1].position);
      },
    },
  );

  return {
    get: (id) => states.get(id),
    values: () => states.values(),
    waitFor: (position, timeoutMs = 5_000) => progress.waitFor(position, timeoutMs),
    caughtUp: subscription.caughtUp,
    position: () => progress.position,
    stop: () => subscription.stop(),
  };
}
