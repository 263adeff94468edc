/**
 * The projector: runs read-model projections from catch-up subscriptions.
 *
 * - Each projection starts from its stored checkpoint and receives its events in batches.
 * - A batch is applied through a unit of work: documents are read once (prefetched where the
 *   projection says which it needs), changed in memory, and written with the checkpoint of the last
 *   event they reflect in one read-store `commit`, so a crash leaves a batch wholly stored or not at all
 *   (docs/read-side.md). A flush the projection needs mid-batch is such a commit of its own.
 * - Versions: a checkpoint records the definition (version and indexes) its documents were built by.
 *   At start a projection whose stored definition differs keeps serving its old documents, with the
 *   indexes they have, and is rebuilt into shadows made with the new indexes, promoted together with
 *   the new checkpoint (docs/read-side.md, "Upgrades of read models").
 * - A filtered subscription tells how far it read past others' events (`onProgress`): the checkpoint
 *   moves there, so a restart does not read them again.
 * - Idempotent: every document records `_position`, the global position of the last event applied to
 *   it, and a write for an event the document already reflects is dropped. A batch replayed after a
 *   crash therefore changes nothing.
 * - A live projection whose subscription drops (the store went away, a commit failed) is `failed`
 *   with the reason and subscribes again from its stored checkpoint after a pause (docs/operations.md,
 *   "Recovery"); it is `live` again once caught up. A rebuild's copy that drops ends the rebuild
 *   instead: its shadows are dropped, the status keeps the failure, and the operator can start it
 *   again; a rebuild of another version is tried again after a pause while the lease is held. A batch
 *   the store refuses as too large for one commit is applied in halves
 *   (docs/read-side.md, "Oversized batches").
 * - One projector at a time: it writes only while it holds the read store's lease, every write under
 *   its fence; another stands by and takes over (docs/read-side.md, "One projector at a time").
 * - Rebuild without downtime: the projection is replayed from the start into fresh shadow copies
 *   while the live copies keep serving; when the copy has caught up, the live projection pauses, the
 *   copy drains the last events, the shadows are promoted and the live projection resumes.
 *
 * This module starts and stops the projections as the lease comes and goes, and answers for them;
 * following the log into collections is `projector-follow.ts`, a projection's live copy
 * `projector-live.ts`, a rebuild `projector-rebuild.ts`, the lease `projector-lease.ts`.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Supervisor } from '../application/supervisor.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventStore } from '../eventstore/port.ts';
import { ProjectionLags } from './lag.ts';
import type { Projection, ProjectionStatus } from './projection.ts';
import type { ProjectorContext } from './projector-follow.ts';
import { DEFAULT_LEASE_MS, type LeaseOptions, type LeaseState, ProjectorLease } from './projector-lease.ts';
import {
  checkpointFromStore,
  definitionOf,
  openCollections,
  type Running,
  startLive,
  statusOf,
} from './projector-live.ts';
import { rebuild, upgrade } from './projector-rebuild.ts';
import type { Fence, ReadStore } from './read-store.ts';

export type { Projection, ProjectionStatus, ProjectionTx, RebuildProgress } from './projection.ts';
export type { LeaseState } from './projector-lease.ts';

export interface ProjectorOptions {
  store: EventStore;
  readStore: ReadStore;
  projections: readonly Projection[];
  /**
   * Largest batch of events applied in one unit of work (default 5,000). A catch-up fills its batches; a
   * document many of a batch's events change is written once per batch, so larger batches rebuild
   * faster (1,000,000 events: 27.9 s at 1,000, 24.2 s at 5,000, 23.5 s at 10,000) for the memory of
   * the batch's events and the documents they change. A live projection's batches are what arrived.
   */
  batchSize?: number;
  onError?(projection: string, error: Error): void;
  /** Paces the live projections' resubscriptions and reports their health. */
  supervisor?: Supervisor;
  /** Told of rebuilds (a version change at start, a finished rebuild) and of dropped shadows. */
  logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
  /**
   * The lease that lets one projector at a time write the read models
   * (docs/read-side.md, "One projector at a time"): who this projector is (by default a name of its
   * own), how long an acquisition or renewal holds it (15 s by default), and how to tell a holder
   * that has ended (by default none is known to have).
   */
  lease?: Partial<LeaseOptions>;
  /** Times the age of the oldest event a projection has not applied (`lag_seconds`). */
  clock?: Clock;
}

export interface Projector {
  /**
   * Acquires the lease and starts every projection, or stands by while another projector holds it
   * (and keeps trying); resolves after the first attempt.
   */
  start(): Promise<void>;
  /** Resolves when every projection has caught up with the log (once, after it first held the lease). */
  readonly caughtUp: Promise<void>;
  /**
   * Whether it holds the lease and every projection has caught up with the log since it took it: false
   * again while the projections catch up after the lease was lost and taken back.
   */
  isCaughtUp(): boolean;
  /** Each projection's state; `standby`, with the store's checkpoint, while another holds the lease. */
  status(): Promise<ProjectionStatus[]>;
  /**
   * Rebuilds into fresh copies while the live ones serve; resolves when the copies are live. Refused
   * (`ProjectorStandingByError`) while this projector stands by.
   */
  rebuild(name: string): Promise<void>;
  names(): string[];
  /** Whether this projector holds the lease (and its token), or stands by (and who holds it). */
  lease(): LeaseState;
  /** Stops every projection and lets the lease go, so a projector standing by takes over at once. */
  stop(): Promise<void>;
}

/** A rebuild asked of a projector that stands by: the one that holds the lease rebuilds. */
export class ProjectorStandingByError extends Error {
  constructor(holder: string | null) {
    super(
      `this projector stands by while another holds the read store's projector lease${holder ? ` (${holder})` : ''}: ` +
        'ask the projector that holds it',
    );
    this.name = 'ProjectorStandingByError';
  }
}

export function createProjector(options: ProjectorOptions): Projector {
  const lags = new ProjectionLags(options.store, { clock: options.clock });
  const base: ProjectorContext = {
    store: options.store,
    readStore: options.readStore,
    batchSize: options.batchSize ?? 5_000,
    logger: options.logger,
    onError: options.onError,
    supervisor: options.supervisor,
    clock: options.clock,
  };
  const { readStore, logger } = base;
  const running = new Map<string, Running>(
    options.projections.map((projection) => [
      projection.name,
      {
        projection,
        state: 'starting',
        collections: {},
        checkpoint: 0,
        events: 0,
        lastRecordedAt: undefined,
        error: null,
        progress: null,
        definition: definitionOf(projection),
        storedVersion: null,
        rebuildFailure: null,
      },
    ]),
  );
  const caughtUp = Promise.withResolvers<void>();
  /**
   * What runs under the lease this projector holds, the switch that ends it, and whether every
   * projection has caught up since it was taken.
   */
  let active: { ctx: ProjectorContext; abort: AbortController; caughtUp: boolean } | undefined;

  /** The lease is this projector's: drop what a crashed rebuild left, then run every projection. */
  async function activate(fence: Fence): Promise<void> {
    const abort = new AbortController();
    const ctx: ProjectorContext = {
      ...base,
      fence,
      signal: abort.signal,
      // Another holds the lease: what runs under it ends at once, and stops in turn (`deactivate`).
      onLeaseLost: () => {
        abort.abort(new Error('the projector no longer holds the lease'));
        lease.refused(fence);
      },
    };
    const activation = { ctx, abort, caughtUp: false };
    active = activation;
    // Shadows of a rebuild a crash interrupted: no other projector writes while this one holds the lease.
    const orphans = await readStore.dropOrphanShadows(fence);
    if (orphans > 0) logger?.info({ shadows: orphans }, 'dropped shadows of an unfinished rebuild');
    for (const r of running.values()) {
      if (abort.signal.aborted) return;
      Object.assign(r, { state: 'starting', error: null, progress: null, rebuildFailure: null });
      r.collections = await openCollections(ctx, r);
      await startLive(ctx, r);
      // Lost while this one started (a write of another refused): it stops too, and the rest never start.
      if (abort.signal.aborted) {
        await r.stopSubscription?.().catch(() => undefined);
        return;
      }
    }
    // Ready once every live copy has caught up; rebuilds of another version go on behind it.
    // A projection that failed is never caught up: its state says why, and readiness stays false.
    Promise.all([...running.values()].map((r) => r.caughtUp)).then(
      () => {
        activation.caughtUp = true;
        caughtUp.resolve();
      },
      () => undefined,
    );
    if (abort.signal.aborted) return;
    for (const r of running.values()) {
      if (r.storedVersion === r.definition) continue;
      logger?.warn(
        { projection: r.projection.name, stored: r.storedVersion, version: r.definition },
        'projection stored by another version: rebuilding it while the old copy serves',
      );
      upgrade(ctx, r, (onCopied) => startRebuild(ctx, r, onCopied)).catch(() => undefined);
    }
  }

  /** The lease is lost, or the projector stops: every projection and rebuild stops at once. */
  async function deactivate(): Promise<void> {
    const current = active;
    active = undefined;
    if (!current) return;
    current.abort.abort(new Error('the projector no longer holds the lease'));
    for (const r of running.values()) {
      await r.stopSubscription?.().catch(() => undefined);
      r.stopSubscription = undefined;
    }
    for (const r of running.values()) await r.rebuilding?.catch(() => undefined);
  }

  function startRebuild(ctx: ProjectorContext, r: Running, onCopied?: () => void): Promise<void> {
    return rebuild(ctx, r, onCopied).catch((err: Error) => {
      if (!ctx.signal?.aborted) {
        logger?.error({ err, projection: r.projection.name }, 'projection rebuild failed');
        options.onError?.(r.projection.name, err);
      }
      throw err;
    });
  }

  const lease = new ProjectorLease(
    readStore,
    {
      owner: options.lease?.owner ?? `projector-${randomUUID()}`,
      ttlMs: options.lease?.ttlMs ?? DEFAULT_LEASE_MS,
      holderGone: options.lease?.holderGone,
    },
    { acquired: activate, lost: deactivate },
    logger,
  );

  return {
    start: () => lease.start(),
    caughtUp: caughtUp.promise,
    isCaughtUp: () => active !== undefined && !active.abort.signal.aborted && active.caughtUp,
    async status() {
      const holding = active !== undefined && !active.abort.signal.aborted;
      const all = [...running.values()];
      if (!holding) for (const r of all) await checkpointFromStore(r, readStore);
      // One read of the log's head for every projection's lag.
      const measured = await lags.of(
        all.map((r) => ({ name: r.projection.name, filter: r.projection.filter, checkpoint: r.checkpoint })),
      );
      return all.map((r, i) => statusOf(r, holding, measured[i]));
    },
    rebuild(name) {
      const r = running.get(name);
      if (!r) return Promise.reject(new Error(`no projection named ${name}`));
      if (!active || active.abort.signal.aborted) {
        return Promise.reject(new ProjectorStandingByError(lease.state().holder));
      }
      return rebuild(active.ctx, r);
    },
    names: () => [...running.keys()],
    lease: () => lease.state(),
    stop: () => lease.stop(),
  };
}
