/**
 * The state of one aggregate as its stream says, now or as of an earlier point: the command handler
 * decides on the state now, a webhook body renders the cart as of the event it stands for and the
 * store as of that event's position (docs/webhooks.md), an operator's test request the store now.
 *
 * Events were validated when appended (application/command-handler.ts): current-version data is taken
 * as is, older versions are upcast and validated by the registry.
 */
import { LRUCache } from 'lru-cache';
import { type Decider, type DomainEvent, fold } from '../domain/decider.ts';
import type { EventRegistry } from '../domain/events.ts';
import {
  type EventStore,
  type ReadStreamOptions,
  type RecordedEvent,
  StreamNotFoundError,
} from '../eventstore/port.ts';

/** The domain event a recorded event holds, at the schema version the code reads. */
export function domainEventOf<E extends DomainEvent = DomainEvent>(
  registry: EventRegistry,
  event: RecordedEvent,
): E {
  return registry.read(event.type, event.data, event.metadata.schema_version ?? 1) as unknown as E;
}

export interface StreamState<S> {
  state: S;
  /** Last revision folded, -1 when none. */
  revision: number;
  /** Global position of the last event folded, 0 when none. */
  position: number;
  /** The recorded events folded. */
  events: RecordedEvent[];
}

/** A stream's events as `readStream` reads them; a stream never written has none. */
async function eventsOf(
  store: EventStore,
  streamId: string,
  options?: ReadStreamOptions,
): Promise<RecordedEvent[]> {
  try {
    return await store.readStream(streamId, options);
  } catch (err) {
    if (err instanceof StreamNotFoundError) return [];
    throw err;
  }
}

/** Where to stop: after the event at `revision` of the stream, or after its last event at or before `position`. */
export type UpTo = { revision: number } | { position: number };

/** Folds a stream with the aggregate's `evolve`; a stream never written gives the initial state. */
export async function readState<S, E extends DomainEvent>(
  store: EventStore,
  registry: EventRegistry,
  streamId: string,
  decider: Pick<Decider<unknown, E, S>, 'initialState' | 'evolve'>,
  options: { upTo?: UpTo } = {},
): Promise<StreamState<S>> {
  const { upTo } = options;
  let recorded = await eventsOf(
    store,
    streamId,
    upTo && 'revision' in upTo ? { maxCount: upTo.revision + 1 } : undefined,
  );
  if (upTo && 'position' in upTo) recorded = recorded.filter((e) => e.position <= upTo.position);
  const last = recorded[recorded.length - 1];
  return {
    state: fold(
      decider,
      recorded.map((e) => domainEventOf<E>(registry, e)),
    ),
    revision: last?.revision ?? -1,
    position: last?.position ?? 0,
    events: recorded,
  };
}

/** A stream folded up to one of its events (its first `revision + 1` events; none at -1). */
interface Prefix<S> {
  state: S;
  revision: number;
  position: number;
}

/**
 * Streams' states as of a global position (`upTo: { position }`), for readers that ask for the same
 * streams again and again: each stream's last fold is kept, so a position at or after it reads only
 * the events appended since (none, mostly: one indexed query), not the whole stream. An earlier
 * position reads the stream from its start, as `readState` does. A webhook body's store is read this
 * way (docs/webhooks.md): its cost follows the store's changes, not its history.
 */
export function createStatesAsOf<S, E extends DomainEvent>(
  store: EventStore,
  registry: EventRegistry,
  decider: Pick<Decider<unknown, E, S>, 'initialState' | 'evolve'>,
  options: { max?: number } = {},
): { asOf(streamId: string, position: number): Promise<S> } {
  const kept = new LRUCache<string, Prefix<S>>({ max: options.max ?? 1_000 });
  const none: Prefix<S> = { state: decider.initialState, revision: -1, position: 0 };
  return {
    async asOf(streamId, position) {
      const hit = kept.get(streamId);
      const from = hit && hit.position <= position ? hit : none;
      const recorded = await eventsOf(store, streamId, { fromRevision: from.revision + 1 });
      let folded = from;
      // A stream's positions grow with its revisions: the first event past `position` ends the fold.
      for (const e of recorded) {
        if (e.position > position) break;
        folded = {
          state: decider.evolve(folded.state, domainEventOf<E>(registry, e)),
          revision: e.revision,
          position: e.position,
        };
      }
      // A fold behind the one kept (an earlier position asked for) does not replace it.
      if (!hit || folded.revision >= hit.revision) kept.set(streamId, folded);
      return folded.state;
    },
  };
}
