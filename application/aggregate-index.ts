/**
 * An in-memory index of every aggregate of one stream prefix, folded with the aggregate's own
 * `evolve` from a catch-up subscription. The write side uses it for lookups that must not scan the
 * event store (API key hash → partner, a store's specials). It reads no clock, so a restart rebuilds
 * exactly the same index from the events; `waitFor(position)` gives a writer read-your-writes.
 */

import type { Decider, DomainEvent } from '../domain/decider.ts';
import type { EventRegistry } from '../domain/events.ts';
import type { EventStore, RecordedEvent } from '../eventstore/port.ts';
import { createFollower } from './follower.ts';
import { domainEventOf } from './read-state.ts';
import type { Supervisor } from './supervisor.ts';

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
  /** Paces resubscriptions after a drop and reports the index's health. */
  supervisor?: Supervisor;
  /** The subscription dropped; it is opened again after a pause. */
  onDrop?(error: unknown): void;
}

export function createAggregateIndex<E extends DomainEvent, S>(
  store: EventStore,
  registry: EventRegistry,
  options: AggregateIndexOptions<E, S>,
): AggregateIndex<S> {
  const states = new Map<string, S>();

  function apply(event: RecordedEvent): void {
    if (!registry.has(event.type)) return;
    const id = event.streamId.slice(options.prefix.length);
    const before = states.get(id);
    const after = options.decider.evolve(
      before ?? options.decider.initialState,
      domainEventOf<E>(registry, event),
    );
    states.set(id, after);
    options.onChange?.(id, before, after);
  }

  const follower = createFollower({
    name: `index of ${options.prefix} streams`,
    store,
    filter: { streamPrefixes: [options.prefix] },
    supervisor: options.supervisor,
    apply(events) {
      for (const e of events) apply(e);
    },
    onDrop: options.onDrop,
  });
  follower.start();

  return {
    get: (id) => states.get(id),
    values: () => states.values(),
    waitFor: (position, timeoutMs) => follower.waitFor(position, timeoutMs),
    caughtUp: follower.caughtUp,
    position: () => follower.position(),
    stop: () => follower.stop(),
  };
}
