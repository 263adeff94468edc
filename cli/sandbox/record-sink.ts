/**
 * Where the sandbox seeder (`seed.ts`) sends the records it decides: the event store, through the
 * command handler the platform routes use, or nowhere (every record decided and validated, nothing
 * written), which proves a data set seeds without the time writing it takes.
 */
import { missingIds } from '../../api/admin-support.ts';
import {
  type CommandMetadata,
  createCommandHandler,
  toNewEvents,
} from '../../application/command-handler.ts';
import type { Decider, DomainEvent } from '../../domain/decider.ts';
import { eventRegistry } from '../../domain/index.ts';
import { type EventStore, type NewEvent, WrongExpectedVersionError } from '../../eventstore/port.ts';

/** Where `writeSandbox` sends the records it decides. */
export interface RecordSink {
  /** Decides a command on its stream's current state and records what it decided. */
  run<C, E extends DomainEvent, S>(
    streamId: string,
    decider: Decider<C, E, S>,
    command: C,
    metadata: CommandMetadata,
  ): Promise<{ events: readonly E[]; state: S }>;
  /** Records a new stream's events; false when the stream exists already (nothing is recorded). */
  create(streamId: string, events: NewEvent[]): Promise<boolean>;
  /** The ids that have no stream under the prefix. */
  missing(prefix: string, ids: readonly number[]): Promise<number[]>;
}

/** The event store, through the command handler the platform routes use. */
export function eventStoreSink(es: EventStore): RecordSink {
  const commands = createCommandHandler(es, eventRegistry);
  return {
    run: (streamId, decider, command, metadata) => commands.handle(streamId, decider, command, metadata),
    async create(streamId, events) {
      try {
        await es.append(streamId, events, { expectedRevision: 'no_stream' });
        return true;
      } catch (err) {
        if (!(err instanceof WrongExpectedVersionError)) throw err;
        return false;
      }
    },
    missing: (prefix, ids) => missingIds(es, prefix, ids),
  };
}

/**
 * Nowhere: every command is decided and its events validated as for the store, on the states this
 * sink keeps, and nothing is written. It proves a data set seeds without the time writing it takes.
 */
export function decidingOnlySink(): RecordSink {
  /** Each stream's state as decided so far (a created cart stream only needs to exist). */
  const states = new Map<string, unknown>();
  return {
    async run<C, E extends DomainEvent, S>(
      streamId: string,
      decider: Decider<C, E, S>,
      command: C,
      metadata: CommandMetadata,
    ) {
      const before = states.has(streamId) ? (states.get(streamId) as S) : decider.initialState;
      const events = decider.decide(command, before);
      toNewEvents(eventRegistry, events, metadata);
      const state = events.reduce(decider.evolve, before);
      if (events.length > 0) states.set(streamId, state);
      return { events, state };
    },
    async create(streamId) {
      if (states.has(streamId)) return false;
      states.set(streamId, true);
      return true;
    },
    async missing(prefix, ids) {
      return ids.filter((id) => !states.has(`${prefix}${id}`));
    },
  };
}
