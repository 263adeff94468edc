/**
 * How the projector follows the log into a projection's collections: a follower whose batches are
 * applied through units of work, each commit storing its writes with the checkpoint of the last event
 * they reflect; progress past other streams' events stored at most once a second
 * (docs/read-side.md, "Projections and checkpoints").
 */
import type { Logger } from 'pino';
import { createFollower, type FollowerOptions } from '../application/follower.ts';
import type { Supervisor } from '../application/supervisor.ts';
import type { EventStore, RecordedEvent } from '../eventstore/port.ts';
import type { Projection } from './projection.ts';
import type { Checkpoint, ReadStore } from './read-store.ts';
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
}

/**
 * Subscribes an applier to the log after a checkpoint: every commit stores its writes with the
 * checkpoint `checkpointKey` of the last event they reflect, stamped with `version`; a position the
 * log was read through past others' events is stored too.
 */
export function follow(
  ctx: ProjectorContext,
  projection: Projection,
  collections: Collections,
  checkpointKey: string,
  from: Checkpoint | undefined,
  version: string,
  onProgress: (position: number, events: RecordedEvent[]) => void,
  health: Pick<FollowerOptions, 'onDrop' | 'onCaughtUp' | 'supervisor'> = {},
) {
  let events = from?.events ?? 0;
  const checkpoint = (position: number, updatedAt: string): Checkpoint => ({
    position,
    events,
    updated_at: updatedAt,
    version,
  });
  const commitWork: CommitWork = async (writes, last, applied) => {
    events += applied;
    await ctx.readStore.commit({
      writes,
      checkpoints: [{ name: checkpointKey, checkpoint: checkpoint(last.position, last.recordedAt) }],
    });
    progress.stored(last.position);
  };
  const progress = new ProgressCheckpoints(ctx.readStore, checkpointKey, (position) =>
    checkpoint(position, new Date().toISOString()),
  );
  const follower = createFollower({
    name: `projection ${checkpointKey}`,
    store: ctx.store,
    filter: projection.filter,
    maxBatchSize: ctx.batchSize,
    async apply(batch) {
      await applyBatch(projection, collections, commitWork, batch);
      onProgress(batch[batch.length - 1].position, batch);
    },
    onProgress(reached) {
      progress.moved(reached);
      onProgress(reached, []);
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
      await progress.flush();
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
  readonly #checkpoint: (position: number) => Checkpoint;
  #pending: number | undefined;
  #lastStoredAt = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(readStore: ReadStore, name: string, checkpoint: (position: number) => Checkpoint) {
    this.#readStore = readStore;
    this.#name = name;
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
    await this.#readStore.setCheckpoint(this.#name, this.#checkpoint(position));
  }
}

/** A rebuild's copy ends at its first drop (`dropped` rejects with why), instead of subscribing again. */
export function endOnDrop(): { dropped: Promise<never>; onDrop(err: unknown): void } {
  const d = Promise.withResolvers<never>();
  d.promise.catch(() => {});
  return { dropped: d.promise, onDrop: (err) => d.reject(err) };
}
