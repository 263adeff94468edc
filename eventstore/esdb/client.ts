/**
 * What the parts of the EventStoreDB adapter share: the connection, the adapter's constants and the
 * client record shape it reads, and small helpers of its subscriptions.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { PersistentAction, Position } from '@eventstore/db-client';
import { EventStoreDBClient, NotLeaderError, PARK, RETRY, SKIP } from '@eventstore/db-client';
import { EventStoreError, type NackAction } from '../port.ts';

export const DEFAULT_BATCH_SIZE = 500;
export const DEFAULT_BUFFER_SIZE = 10;
export const DEFAULT_MAX_RETRY = 10;
export const DEFAULT_MESSAGE_TIMEOUT_MS = 30_000;
/** Checkpoint soon after acks, so a restarted consumer redelivers little. */
export const CHECKPOINT_AFTER_MS = 250;
/**
 * The longest an append may take, connecting included. Beyond the client's own call deadline (10 s by
 * default, `defaultDeadline` in the connection string), which bounds only the gRPC call itself.
 */
export const APPEND_TIMEOUT_MS = 15_000;
/** The longest a filtered `headPosition` searches back from the end of `$all` (see read-all.ts). */
export const HEAD_SEARCH_MS = 10_000;
/** Raw `$all` page bounds: system events (projection links, metadata) sit between ours. */
export const PAGE_MIN = 128;
export const PAGE_MAX = 2_048;
/** -1 as u64: what the server reports for a position it does not know. */
export const NO_POSITION = 0xffff_ffff_ffff_ffffn;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A .NET regex no stream name or event type matches (an empty filter list matches nothing). */
export const MATCH_NOTHING = '^(?!)';

export const NACK_ACTIONS: Record<NackAction, PersistentAction> = { park: PARK, retry: RETRY, skip: SKIP };

/** The fields of a client event record this adapter reads. */
export interface EsdbRecord {
  id: string;
  streamId: string;
  type: string;
  revision: bigint;
  created: Date;
  isJson: boolean;
  data: unknown;
  metadata: unknown;
  position?: Position;
}

/** Records read from `$all` always carry their position. */
export type AllRecord = EsdbRecord & { position: Position };

/** Lets `stop()` called from inside a handler skip waiting for that very handler (it would deadlock). */
export const handlerScope = new AsyncLocalStorage<object>();

// ---- connection ------------------------------------------------------------------------------------

/**
 * The 6.x client only knows the `esdb` schemes; KurrentDB's names mean the same connection strings.
 * `throwOnAppendFailure=false` is refused: with it the client answers an append refused for its
 * expected revision as a success, and a conflict would pass for a write (docs/operations.md,
 * "EventStoreDB").
 */
export function connect(connectionString: string): EventStoreDBClient {
  const normalized = connectionString.replace(/^(?:kurrentdb|kurrent)(\+discover)?:\/\//, 'esdb$1://');
  let client: EventStoreDBClient;
  try {
    client = EventStoreDBClient.connectionString(normalized);
  } catch (err) {
    throw new EventStoreError(`invalid EventStoreDB connection string: ${(err as Error).message}`, {
      cause: err,
    });
  }
  // What the client's appends read (its dist/streams/appendToStream/append.js); protected in its types.
  if (!(client as unknown as { throwOnAppendFailure: boolean }).throwOnAppendFailure) {
    throw new EventStoreError(
      'invalid EventStoreDB connection string: throwOnAppendFailure=false is not supported (the client ' +
        'would report an append refused for its expected revision as written); remove the option',
    );
  }
  return client;
}

// ---- small helpers ---------------------------------------------------------------------------------

/** A promise settled from outside; marked handled so an unobserved rejection does not crash the process. */
export function settleable() {
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  promise.catch(() => {});
  return { promise, resolve: () => resolve(), reject: (err: Error) => reject(err) };
}

/**
 * `work`, or the error `timedOut()` makes once `ms` have passed, whichever comes first. A rejection of
 * `work` after that is handled here, so it does not reach the process as an unhandled rejection.
 */
export function withTimeout<T>(work: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  work.catch(() => {});
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** Subscriptions and consumers that `close()` stops. */
export type Running = Set<{ stop(): Promise<void> }>;

/**
 * Tries of a read refused by a follower: the first one moves the client to the leader the refusal
 * names; one more covers a leader that changed meanwhile.
 */
const LEADER_TRIES = 3;

/**
 * Runs a read that asks for the leader (`requires-leader`), again when a follower refused it with
 * NotLeader: the client then moves its whole connection to the leader the refusal names, in its own
 * handler of the error, which is let run first (docs/operations.md, "EventStoreDB").
 */
export async function onLeader<T>(read: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await read();
    } catch (err) {
      if (!(err instanceof NotLeaderError) || tries >= LEADER_TRIES) throw err;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}
