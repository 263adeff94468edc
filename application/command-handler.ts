/**
 * Command handling: read the stream, fold it, decide, append with the expected revision.
 * A conflict with a concurrent writer is resolved by re-reading and re-deciding (bounded), never by
 * overwriting. With `ifMatch` (the HTTP `If-Match` header) the write is conditional instead: a stale
 * revision is refused with `PreconditionFailedError` and nothing is retried.
 */

import { LRUCache } from 'lru-cache';
import type { Decider, DomainEvent } from '../domain/decider.ts';
import type { EventRegistry } from '../domain/events.ts';
import {
  type Actor,
  type AppendOptions,
  type AppendResult,
  type EventStore,
  EventStoreUnavailableError,
  type NewEvent,
  newEventId,
  WrongExpectedVersionError,
} from '../eventstore/port.ts';
import { readState, type StreamState } from './read-state.ts';

/** Who asks and why: becomes the metadata of every event the command produces. */
export interface CommandMetadata {
  correlationId: string;
  causationId: string | null;
  actor: Actor;
  /** When the command is decided (ISO 8601), from the injected clock. */
  at: string;
}

/** A stream as the handler decides on it: its state, last revision and position (-1 and 0 when empty). */
export type LoadedStream<S> = StreamState<S>;

export interface CommandResult<S, E extends DomainEvent> {
  state: S;
  /** The events this command appended (empty for a no-op). */
  events: E[];
  revision: number;
  position: number;
  /** Global position of the stream's first event (0 when the stream is still empty): a stable numeric id. */
  firstPosition: number;
}

/** `If-Match` named a revision the stream has moved past. */
export class PreconditionFailedError extends Error {
  override name = 'PreconditionFailedError';
  readonly streamId: string;
  readonly expected: number;
  readonly actual: number;
  constructor(streamId: string, expected: number, actual: number) {
    super(`stream ${streamId} is at revision ${actual}, not ${expected}`);
    this.streamId = streamId;
    this.expected = expected;
    this.actual = actual;
  }
}

/** Gave up after repeated conflicts (a hot stream); the client may retry. */
export class ContentionError extends Error {
  override name = 'ContentionError';
}

const MAX_ATTEMPTS = 25;

/** Pauses before each new try of an append the store refused as unavailable (about a second in all). */
const UNAVAILABLE_PAUSES_MS = [100, 300, 600];
/**
 * No new try once this long has passed since the first: a store that took its time to refuse (SQLite
 * waits out another writer's lock for 5 s, blocking the process) is not asked again at once.
 */
const UNAVAILABLE_BUDGET_MS = 1_500;

/**
 * Appends, and tries the very same append again while the store answers unavailable: the same events
 * with the same ids and expected revision, so a try that did land (its answer lost) makes the next an
 * idempotent repeat, never a second write (docs/operations.md, "Recovery").
 */
export async function appendRetrying(
  store: EventStore,
  streamId: string,
  events: NewEvent[],
  options: AppendOptions,
): Promise<AppendResult> {
  const withIds = events.map((e) => (e.id ? e : { ...e, id: newEventId() }));
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await store.append(streamId, withIds, options);
    } catch (err) {
      const pause = UNAVAILABLE_PAUSES_MS[attempt];
      const late = pause === undefined || Date.now() - started + pause > UNAVAILABLE_BUDGET_MS;
      if (!(err instanceof EventStoreUnavailableError) || late) throw err;
      await new Promise((r) => setTimeout(r, pause));
    }
  }
}

/** Decided events as the store takes them: validated again and given their metadata and schema version. */
export function toNewEvents(
  registry: EventRegistry,
  events: readonly DomainEvent[],
  metadata: CommandMetadata,
): NewEvent[] {
  return events.map((e) => {
    const definition = registry.get(e.type);
    if (!definition) throw new Error(`event type ${e.type} is not registered`);
    return {
      type: e.type,
      // Validated again at the boundary: a decider bug must never write a malformed event.
      data: definition.schema.parse(e.data),
      metadata: {
        correlation_id: metadata.correlationId,
        causation_id: metadata.causationId,
        actor: metadata.actor,
        occurred_at: metadata.at,
        schema_version: definition.version,
      },
    };
  });
}

/** A stream's folded state as this process last wrote it (see `createCommandHandler`). */
interface Snapshot<S> {
  decider: unknown;
  state: S;
  revision: number;
  position: number;
  firstPosition: number;
}

/** Streams whose state a handler keeps after writing them. */
const SNAPSHOT_LIMIT = 5_000;

function snapshotOf<S>(loaded: LoadedStream<S>, decider: unknown): Snapshot<S> {
  return {
    decider,
    state: loaded.state,
    revision: loaded.revision,
    position: loaded.position,
    firstPosition: loaded.events[0]?.position ?? 0,
  };
}

/**
 * Commands on a stream this handler wrote recently start from the state it kept (the most recent
 * `SNAPSHOT_LIMIT` streams) instead of reading and folding the stream again: a cart gets a command per
 * item. Safe with other writers: the append still names the revision the state was folded to, so a
 * stale state ends in a conflict, a re-read and a new decision; a refusal or a no-op decided on a kept
 * state is decided again on a fresh read before it is answered. Lookups (`load`) always read.
 */
export function createCommandHandler(store: EventStore, registry: EventRegistry) {
  // The most recently written streams are kept: a read (`peek`) does not count as a use.
  const snapshots = new LRUCache<string, Snapshot<unknown>>({ max: SNAPSHOT_LIMIT });
  const remember = (streamId: string, snapshot: Snapshot<unknown>) => snapshots.set(streamId, snapshot);
  /** Conflicts resolved by re-reading and re-deciding, for metrics and tests. */
  let conflicts = 0;
  function load<S, E extends DomainEvent>(
    streamId: string,
    decider: Pick<Decider<unknown, E, S>, 'initialState' | 'evolve'>,
  ): Promise<LoadedStream<S>> {
    return readState(store, registry, streamId, decider);
  }

  async function handle<C, E extends DomainEvent, S>(
    streamId: string,
    decider: Decider<C, E, S>,
    command: C,
    metadata: CommandMetadata,
    options: { ifMatch?: number } = {},
  ): Promise<CommandResult<S, E>> {
    for (let attempt = 1; ; attempt++) {
      // The state this process last wrote, unless the request names a revision (then read what is).
      const hit = options.ifMatch === undefined ? snapshots.peek(streamId) : undefined;
      const cached = hit?.decider === decider ? (hit as Snapshot<S>) : undefined;
      const current: Snapshot<S> = cached ?? snapshotOf(await load(streamId, decider), decider);
      if (options.ifMatch !== undefined && options.ifMatch !== current.revision) {
        throw new PreconditionFailedError(streamId, options.ifMatch, current.revision);
      }
      let events: E[];
      try {
        events = decider.decide(command, current.state);
      } catch (err) {
        // A refusal must rest on what the stream holds: another process may have moved it on.
        if (cached) {
          snapshots.delete(streamId);
          continue;
        }
        throw err;
      }
      if (events.length === 0) {
        // So must a no-op (nothing to write because nothing differs).
        if (cached) {
          snapshots.delete(streamId);
          continue;
        }
        return {
          state: current.state,
          events,
          revision: current.revision,
          position: current.position,
          firstPosition: current.firstPosition,
        };
      }
      const toAppend = toNewEvents(registry, events, metadata);
      try {
        const result = await appendRetrying(store, streamId, toAppend, {
          expectedRevision: current.revision === -1 ? 'no_stream' : current.revision,
        });
        const state = events.reduce(decider.evolve, current.state);
        // A new stream's first position: the append's own answer when it wrote one event. A longer
        // first append answers its last event's position (positions need not be contiguous), so its
        // first event is read back, from what the append wrote (docs/operations.md, "EventStoreDB").
        const firstPosition =
          current.revision >= 0
            ? current.firstPosition
            : toAppend.length === 1
              ? result.position
              : (await store.readStream(streamId, { maxCount: 1 }))[0].position;
        remember(streamId, {
          decider,
          state,
          revision: result.nextExpectedRevision,
          position: result.position,
          firstPosition,
        });
        return {
          state,
          events,
          revision: result.nextExpectedRevision,
          position: result.position,
          firstPosition,
        };
      } catch (err) {
        snapshots.delete(streamId);
        if (!(err instanceof WrongExpectedVersionError)) throw err;
        if (options.ifMatch !== undefined) {
          const actual = typeof err.actual === 'number' ? err.actual : -1;
          throw new PreconditionFailedError(streamId, options.ifMatch, actual);
        }
        conflicts += 1;
        if (attempt >= MAX_ATTEMPTS) {
          throw new ContentionError(`stream ${streamId} kept changing; gave up after ${attempt} attempts`);
        }
        // Jittered back-off spreads out writers that collided, so they don't collide again in lockstep.
        await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 * attempt)));
      }
    }
  }

  return { load, handle, conflicts: () => conflicts };
}

export type CommandHandler = ReturnType<typeof createCommandHandler>;
