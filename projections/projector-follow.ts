/**
 * How the projector follows the log into a projection's collections: a follower whose batches are
 * applied through units of work, each commit storing its writes with the checkpoint of the last event
 * they reflect; progress past other streams' events stored at most once a second
 * (docs/read-side.md, "Projections and checkpoints").
 */

import type { Logger } from 'pino';
import { createFollower, type FollowerOptions } from '../application/follower.ts';
import type { Supervisor } from '../application/supervisor.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventStore, RecordedEvent } from '../eventstore/port.ts';
import type { Projection } from './projection.ts';
import {
  type Checkpoint,
  CommitTooLargeError,
  type Fence,
  LeaseLostError,
  type ReadStore,
} from './read-store.ts';
import { applyBatch, type Collections, type CommitWork } from './unit-of-work.ts';

/** Shortest time between two stores of a checkpoint moved past other streams' events. */
const PROGRESS_COMMIT_MS = 1_000;

/** What the projector's parts share. */
export interface ProjectorContext {
  store: EventStore;
  readStore: ReadStore;
  /** Largest batch of events applied in one unit of work. */
  batchSize: number;
  logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
  onError?(projection: string, error: Error): void;
  supervisor?: Supervisor;
  /** The lease this projector holds: every write carries it (docs/read-side.md, "One projector at a time"). */
  fence?: Fence;
  /** Aborted when the lease is lost or the projector stops: what was started under it ends. */
  signal?: AbortSignal;
  /** A write was refused under `fence` (LeaseLostError): another projector holds the lease. */
  onLeaseLost?(): void;
  /** Times builds' progress (`build-progress.ts`); tests inject theirs. */
  clock?: Clock;
}

/** Rejects once `signal` is aborted (never without one): for races with what a lease started. */
export function whenAborted(signal: AbortSignal | undefined): Promise<never> {
  const aborted = Promise.withResolvers<never>();
  aborted.promise.catch(() => {});
  if (signal?.aborted) aborted.reject(signal.reason);
  else signal?.addEventListener('abort', () => aborted.reject(signal.reason), { once: true });
  return aborted.promise;
}

/**
 * Subscribes an applier to the log after a checkpoint: every commit stores its writes with the
 * checkpoint `checkpointKey` of the last event they reflect, stamped with `version`, and tells
 * `onProgress` how many events it stored; a position the log was read through past others' events is
 * stored too (and told with none).
 */
export function follow(
  ctx: ProjectorContext,
  projection: Projection,
  collections: Collections,
  checkpointKey: string,
  from: Checkpoint | undefined,
  version: string,
  onProgress: (position: number, applied: number, lastRecordedAt?: string) => void,
  health: Pick<FollowerOptions, 'onDrop' | 'onCaughtUp' | 'supervisor'> = {},
) {
  let events = from?.events ?? 0;
  /** The position of the last event a commit stored. */
  let committed = from?.position ?? 0;
  const checkpoint = (position: number, updatedAt: string, count = events): Checkpoint => ({
    position,
    events: count,
    updated_at: updatedAt,
    version,
  });
  const commitWork: CommitWork = async (writes, last, applied) => {
    await ctx.readStore.commit({
      writes,
      checkpoints: [
        { name: checkpointKey, checkpoint: checkpoint(last.position, last.recordedAt, events + applied) },
      ],
      fence: ctx.fence,
    });
    // Counted once stored: the events of a refused commit are applied (and counted) again.
    events += applied;
    committed = last.position;
    progress.stored(last.position);
    onProgress(last.position, applied, last.recordedAt);
  };
  const parts = new BatchParts(
    projection.name,
    (batch) => applyBatch(projection, collections, commitWork, batch),
    () => committed,
  );
  const progress = new ProgressCheckpoints(ctx.readStore, checkpointKey, ctx.fence, (position) =>
    checkpoint(position, new Date().toISOString()),
  );
  const follower = createFollower({
    name: `projection ${checkpointKey}`,
    store: ctx.store,
    filter: projection.filter,
    maxBatchSize: ctx.batchSize,
    // Each commit tells its progress (`commitWork`): a batch in parts is stored part by part.
    apply: (batch) => parts.apply(batch),
    onProgress(reached) {
      progress.moved(reached);
      onProgress(reached, 0);
    },
    // A batch may be stored in part (a flush mid-batch): resume after what the store holds.
    resumeAfter: async () => (await ctx.readStore.getCheckpoint(checkpointKey))?.position ?? 0,
    ...health,
  });
  follower.start(from?.position ?? 0);
  return {
    ...follower,
    async stop() {
      await follower.stop();
      // Refused when the lease is lost: what it would store is read again by the next holder.
      await progress.flush().catch((err: unknown) => {
        if (!(err instanceof LeaseLostError)) throw err;
      });
    },
  };
}

/**
 * The checkpoint of a projection moved past other streams' events (`onProgress`) is stored at most
 * once a second: every append to the log would otherwise cost each projection it skips a read-store
 * commit. A crash before it is stored only means those events are read (and skipped) again.
 */
class ProgressCheckpoints {
  readonly #readStore: ReadStore;
  readonly #name: string;
  readonly #fence: Fence | undefined;
  readonly #checkpoint: (position: number) => Checkpoint;
  #pending: number | undefined;
  #lastStoredAt = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readStore: ReadStore,
    name: string,
    fence: Fence | undefined,
    checkpoint: (position: number) => Checkpoint,
  ) {
    this.#readStore = readStore;
    this.#name = name;
    this.#fence = fence;
    this.#checkpoint = checkpoint;
  }

  moved(position: number): void {
    this.#pending = position;
    if (this.#timer) return;
    const wait = Math.max(0, this.#lastStoredAt + PROGRESS_COMMIT_MS - Date.now());
    this.#timer = setTimeout(() => void this.flush().catch(() => {}), wait);
    this.#timer.unref();
  }

  /** A batch's commit stored the checkpoint at `position`: a pending one not past it is not needed. */
  stored(position: number): void {
    if (this.#pending !== undefined && this.#pending <= position) this.#pending = undefined;
  }

  async flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const position = this.#pending;
    if (position === undefined) return;
    this.#pending = undefined;
    this.#lastStoredAt = Date.now();
    await this.#readStore.setCheckpoint(this.#name, this.#checkpoint(position), this.#fence);
  }
}

/**
 * An event whose own writes the read store refuses to commit as too large, even alone: its projection
 * is failed, naming the event, until the store takes it (docs/read-side.md, "Oversized batches").
 */
export class EventTooLargeError extends Error {
  readonly eventId: string;
  constructor(projection: string, event: RecordedEvent, cause: CommitTooLargeError) {
    super(
      `projection ${projection}: event ${event.id} (${event.type} at position ${event.position}) ` +
        `cannot be committed even alone: ${cause.message}`,
      { cause },
    );
    this.name = 'EventTooLargeError';
    this.eventId = event.id;
  }
}

/**
 * Applies batches through units of work, in smaller parts while the read store refuses a commit as
 * too large (docs/read-side.md, "Oversized batches"): the events of a refused batch that no commit
 * stored yet are applied again in two halves, each halved again while refused, down to one event. An
 * event refused alone throws EventTooLargeError: the follower drops, and subscribes again after its
 * supervisor's pause, when that event goes alone first, one commit per try, until the store takes it.
 */
class BatchParts {
  readonly #projection: string;
  readonly #applyUnit: (events: RecordedEvent[]) => Promise<void>;
  readonly #committed: () => number;
  /** The event last refused alone. */
  #refusedAlone: string | undefined;

  constructor(
    projection: string,
    applyUnit: (events: RecordedEvent[]) => Promise<void>,
    committed: () => number,
  ) {
    this.#projection = projection;
    this.#applyUnit = applyUnit;
    this.#committed = committed;
  }

  async apply(batch: RecordedEvent[]): Promise<void> {
    if (batch.length > 1 && batch[0].id === this.#refusedAlone) {
      await this.#part(batch.slice(0, 1));
      await this.#part(batch.slice(1));
    } else {
      await this.#part(batch);
    }
  }

  async #part(events: RecordedEvent[]): Promise<void> {
    try {
      await this.#applyUnit(events);
    } catch (err) {
      if (!(err instanceof CommitTooLargeError)) throw err;
      // A commit mid-batch may have stored the first events: the rest is what is left to apply.
      const rest = events.filter((e) => e.position > this.#committed());
      if (rest.length === 0) throw err;
      if (rest.length === 1) {
        this.#refusedAlone = rest[0].id;
        throw new EventTooLargeError(this.#projection, rest[0], err);
      }
      const half = Math.ceil(rest.length / 2);
      await this.#part(rest.slice(0, half));
      await this.#part(rest.slice(half));
      return;
    }
    if (events.length === 1 && events[0].id === this.#refusedAlone) this.#refusedAlone = undefined;
  }
}

/** A rebuild's copy ends at its first drop (`dropped` rejects with why), instead of subscribing again. */
export function endOnDrop(): { dropped: Promise<never>; onDrop(err: unknown): void } {
  const d = Promise.withResolvers<never>();
  d.promise.catch(() => {});
  return { dropped: d.promise, onDrop: (err) => d.reject(err) };
}
