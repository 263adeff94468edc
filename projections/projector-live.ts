/**
 * A projection as the projector runs it, and its live copy: opened from the stored checkpoint,
 * following the log into the live collections, and how far behind the log it is.
 */
import { createHash } from 'node:crypto';
import { trackProgress } from './build-progress.ts';
import type { Lag } from './lag.ts';
import type { Projection, ProjectionStatus, RebuildFailure, RebuildProgress } from './projection.ts';
import { follow, type ProjectorContext } from './projector-follow.ts';
import { LeaseLostError, type ReadStore } from './read-store.ts';
import type { Collections } from './unit-of-work.ts';

/** A projection as the projector runs it. */
export interface Running {
  projection: Projection;
  state: ProjectionStatus['state'];
  collections: Collections;
  checkpoint: number;
  events: number;
  lastRecordedAt: string | undefined;
  error: string | null;
  stopSubscription?: () => Promise<void>;
  caughtUp?: Promise<void>;
  /** Settles once the live subscription has caught up, or has dropped (it then recovers by itself). */
  liveSettled?: Promise<unknown>;
  progress: RebuildProgress | null;
  rebuilding?: Promise<void>;
  /** The last rebuild's failure, until a rebuild succeeds. */
  rebuildFailure: RebuildFailure | null;
  /** What this code builds (`definitionOf`), and what the live documents were built by (null: unknown). */
  definition: string;
  storedVersion: string | null;
}

/**
 * The definition a projection's documents are built by: its version and its collections' indexes.
 * Which indexes a build keeps while applying (`readWhileApplying`) changes how a build runs, not what
 * it stores: left out, so marking one rebuilds nothing.
 */
export function definitionOf(projection: Projection): string {
  const stored = JSON.stringify(projection.collections, (key, value) =>
    key === 'readWhileApplying' ? undefined : value,
  );
  const indexes = createHash('sha256').update(stored).digest('hex');
  return `v${projection.version}+${indexes.slice(0, 12)}`;
}

/**
 * Opens the live collections. Only a projection whose documents are of this code's definition (or
 * that has none stored yet) declares its indexes there: the collections of another definition keep
 * the indexes they have while they serve, and its rebuild brings the new ones with the shadows
 * (docs/read-side.md, "Upgrades of read models").
 */
export async function openCollections(ctx: ProjectorContext, r: Running): Promise<Collections> {
  const saved = await ctx.readStore.getCheckpoint(r.projection.name);
  const ours = saved === undefined || saved.version === r.definition;
  const out: Collections = {};
  for (const [name, indexes] of Object.entries(r.projection.collections)) {
    out[name] = await ctx.readStore.collection(name, ours ? indexes : []);
  }
  return out;
}

/**
 * Follows the log into the live collections from the stored checkpoint. A checkpoint of another
 * definition keeps its version (the documents are still of that one) until a rebuild replaces them.
 */
export async function startLive(ctx: ProjectorContext, r: Running): Promise<void> {
  const saved = await ctx.readStore.getCheckpoint(r.projection.name);
  r.checkpoint = saved?.position ?? 0;
  r.events = saved?.events ?? 0;
  r.storedVersion = saved ? (saved.version ?? null) : r.definition;
  const version = r.storedVersion ?? r.definition;
  // A start that catches up (a first start builds every read model) shows its progress as a rebuild
  // does, until it has caught up (docs/operations.md, "Projections"). An event store out of reach is
  // the subscription's to retry: the start goes on, without progress.
  const head = r.state === 'starting' ? await ctx.store.headPosition().catch(() => undefined) : undefined;
  const start = head === undefined ? undefined : trackProgress(r.checkpoint, head, ctx.clock);
  if (start) r.progress = start.progress;
  const catchingUp = () => start !== undefined && r.progress === start.progress;
  const dropped = Promise.withResolvers<void>();
  const subscription = follow(
    ctx,
    r.projection,
    r.collections,
    r.projection.name,
    saved,
    version,
    (position, applied, lastRecordedAt) => {
      r.checkpoint = position;
      r.events += applied;
      if (lastRecordedAt) r.lastRecordedAt = lastRecordedAt;
      if (catchingUp()) start?.advance(position, applied);
    },
    {
      supervisor: ctx.supervisor,
      onDrop(err) {
        // Another projector holds the lease: this one stands by (the projector stops it), not failed.
        if (err instanceof LeaseLostError) {
          ctx.onLeaseLost?.();
          dropped.resolve();
          return;
        }
        r.state = 'failed';
        r.error = err instanceof Error ? err.message : String(err);
        // No rate and no time left while it does not run; they come back with its next batch.
        if (catchingUp()) start?.stall();
        ctx.onError?.(r.projection.name, err instanceof Error ? err : new Error(r.error));
        dropped.resolve();
      },
      onCaughtUp() {
        if (r.state === 'starting' || r.state === 'failed') r.state = 'live';
        r.error = null;
        if (catchingUp()) r.progress = null;
      },
    },
  );
  r.stopSubscription = () => subscription.stop();
  r.caughtUp = subscription.caughtUp;
  r.liveSettled = Promise.race([r.caughtUp, dropped.promise]).catch(() => undefined);
}

/**
 * A projection's status: as this projector runs it while `holding` the lease, or, while another
 * holds it, `standby` at the checkpoint the store has; with its lag behind the log.
 */
/** While another projector writes: how far the store says a projection is. */
export async function checkpointFromStore(r: Running, readStore: ReadStore): Promise<void> {
  const saved = await readStore.getCheckpoint(r.projection.name);
  r.checkpoint = saved?.position ?? 0;
  r.events = saved?.events ?? 0;
}

export function statusOf(r: Running, holding: boolean, l: Lag): ProjectionStatus {
  return {
    name: r.projection.name,
    state: holding ? r.state : 'standby',
    checkpoint: r.checkpoint,
    events_applied: r.events,
    lag_events: l.events,
    lag_seconds: Math.round(l.seconds * 1000) / 1000,
    error: holding ? r.error : null,
    progress: holding && r.progress ? { ...r.progress } : null,
    rebuild_failure: holding && r.rebuildFailure ? { ...r.rebuildFailure } : null,
  };
}
