/**
 * Rebuilding a projection without downtime (docs/read-side.md, "Projections and checkpoints"): the
 * projection is replayed from the start into fresh shadow copies while the live copies keep serving;
 * when the copy has caught up, the live projection pauses, the copy drains the last events, the
 * shadows are promoted with their checkpoint and the live projection resumes. A copy that drops ends
 * the rebuild instead: its shadows are dropped, the failure is kept in the projection's status until a
 * rebuild succeeds, and the operator can start it again. A rebuild an upgrade asked for is tried again
 * by itself (`upgrade`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Follower } from '../application/follower.ts';
import { Supervisor } from '../application/supervisor.ts';
import { trackProgress } from './build-progress.ts';
import { endOnDrop, follow, type ProjectorContext, whenAborted } from './projector-follow.ts';
import { type Running, startLive } from './projector-live.ts';
import type { Collections } from './unit-of-work.ts';

/**
 * Rebuilds a projection into fresh copies while its live ones serve, then switches over: the live
 * projection pauses, the copy drains what it still lacks, and the copies and their checkpoint are
 * promoted in one step. Resolves when the copies are live; `onCopied` is told when the copy has caught
 * up with the log, before the switch.
 */
export function rebuild(ctx: ProjectorContext, r: Running, onCopied?: () => void): Promise<void> {
  if (r.rebuilding) return r.rebuilding;
  const name = r.projection.name;
  const key = `${name}#rebuild`;
  const { fence } = ctx;
  // A lost lease (or a stop) ends the rebuild at once: its shadows are the next holder's orphans.
  const aborted = whenAborted(ctx.signal);
  const work = (async () => {
    const shadows: Collections = {};
    const copies: Follower[] = [];
    /** Whether the live projection was paused for the switch-over (else it still runs). */
    let paused = false;
    try {
      for (const [c, indexes] of Object.entries(r.projection.collections)) {
        // A build: the indexes the projection does not read while applying are built after the load.
        shadows[c] = await ctx.readStore.createShadow(c, indexes, { bulk: true });
      }
      const started = { position: 0, events: 0, updated_at: new Date().toISOString() };
      await ctx.readStore.setCheckpoint(key, started, fence);
      // The log's head, one event read: the copy's checkpoint follows the log's progress up to it, and
      // a search back for the filter's last event could walk the whole log.
      const tracker = trackProgress(0, await ctx.store.headPosition(), ctx.clock);
      const { progress } = tracker;
      r.progress = progress;
      r.state = 'rebuilding';
      const onBatch = (reached: number, applied: number) => tracker.advance(reached, applied);
      const copyDrop = endOnDrop();
      const copy = follow(ctx, r.projection, shadows, key, undefined, r.definition, onBatch, copyDrop);
      copies.push(copy);
      await Promise.race([copy.caughtUp, copyDrop.dropped, aborted]);
      // The deferred indexes, each built in one pass now that the documents are in; the copy's later
      // writes, and the drain's, update them (docs/read-side.md, "How a build writes its shadows").
      for (const shadow of Object.values(shadows)) await ctx.readStore.finishBulk(shadow, fence);
      onCopied?.();
      // Switch over: pause the live projection, let the copy drain what it still lacks, promote.
      // Not before the live copy has caught up: readiness at start waits for it (a copy of a short
      // log can finish first, and a live subscription stopped before catching up never would).
      await Promise.race([r.liveSettled, aborted]);
      paused = true;
      await r.stopSubscription?.();
      await copy.stop();
      await copy.done;
      const drained = await ctx.readStore.getCheckpoint(key);
      const drainDrop = endOnDrop();
      const drain = follow(ctx, r.projection, shadows, key, drained, r.definition, onBatch, drainDrop);
      copies.push(drain);
      await Promise.race([drain.caughtUp, drainDrop.dropped, aborted]);
      await drain.stop();
      await drain.done;
      const final = (await ctx.readStore.getCheckpoint(key)) ?? started;
      // The copies and their checkpoint, of this code's definition, become live in one step.
      await ctx.readStore.promote(
        Object.values(shadows),
        [{ name, checkpoint: { ...final, version: r.definition } }],
        fence,
      );
      tracker.finish();
      r.rebuildFailure = null;
      ctx.logger?.info(
        {
          projection: name,
          events: progress.events_done,
          ms: (ctx.clock?.now().getTime() ?? Date.now()) - Date.parse(progress.started_at),
          version: r.definition,
        },
        'projection rebuilt: the new copy is live',
      );
    } catch (err) {
      for (const c of copies) await c.stop().catch(() => undefined);
      for (const s of Object.values(shadows)) await ctx.readStore.dropShadow(s, fence).catch(() => undefined);
      // Nothing of it runs any more: no progress to show. A lost lease is no failure of the rebuild.
      r.progress = null;
      if (!ctx.signal?.aborted) {
        r.rebuildFailure = {
          error: err instanceof Error ? err.message : String(err),
          at: new Date().toISOString(),
        };
      }
      throw err;
    } finally {
      r.rebuilding = undefined;
      // Under a lost lease the projection stands by: nothing starts again here. Otherwise the live
      // projection goes on: resumed if it was paused, as it was if the rebuild ended before.
      const standingBy = ctx.signal?.aborted === true;
      if (!standingBy && paused) {
        r.state = 'live';
        await startLive(ctx, r);
      } else if (!standingBy && r.state === 'rebuilding') {
        r.state = 'live';
      }
    }
  })();
  r.rebuilding = work;
  return work;
}

/**
 * Rebuilds a projection whose stored definition is not this code's
 * (docs/read-side.md, "Upgrades of read models") until the new copy is live, while the lease is held:
 * `attempt` runs one rebuild. One that fails (an event too large to commit even alone, the store out
 * of reach) is tried again after a pause of the supervisor's, doubling up to its ceiling, under the
 * health `projection <name> rebuild`: down (in `/readyz` and `pds_subscription_up`) from a failure
 * until a try has copied the log up to its head again. A version that does not take effect is never
 * forgotten until a restart.
 */
export async function upgrade(
  ctx: ProjectorContext,
  r: Running,
  attempt: (onCopied: () => void) => Promise<void>,
): Promise<void> {
  const health = (ctx.supervisor ?? new Supervisor()).watch(`projection ${r.projection.name} rebuild`);
  try {
    while (!ctx.signal?.aborted && r.storedVersion !== r.definition) {
      try {
        await attempt(() => health.up());
        return;
      } catch (err) {
        if (ctx.signal?.aborted) return;
        const pause = health.dropped(err);
        await sleep(pause, undefined, { signal: ctx.signal }).catch(() => undefined);
        if (!ctx.signal?.aborted) health.resubscribed();
      }
    }
  } finally {
    health.stopped();
  }
}
