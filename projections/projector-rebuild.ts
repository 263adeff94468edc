/**
 * Rebuilding a projection without downtime (docs/read-side.md, "Projections and checkpoints"): the
 * projection is replayed from the start into fresh shadow copies while the live copies keep serving;
 * when the copy has caught up, the live projection pauses, the copy drains the last events, the
 * shadows are promoted with their checkpoint and the live projection resumes. A copy that drops ends
 * the rebuild instead: its shadows are dropped and the operator can start it again.
 */
import type { Follower } from '../application/follower.ts';
import type { RebuildProgress } from './projection.ts';
import { endOnDrop, follow, type ProjectorContext } from './projector-follow.ts';
import { type Running, startLive } from './projector-live.ts';
import type { Collections } from './unit-of-work.ts';

/**
 * Rebuilds a projection into fresh copies while its live ones serve, then switches over: the live
 * projection pauses, the copy drains what it still lacks, and the copies and their checkpoint are
 * promoted in one step. Resolves when the copies are live.
 */
export function rebuild(ctx: ProjectorContext, r: Running): Promise<void> {
  if (r.rebuilding) return r.rebuilding;
  const name = r.projection.name;
  const work = (async () => {
    const shadows: Collections = {};
    for (const [c, indexes] of Object.entries(r.projection.collections)) {
      shadows[c] = await ctx.readStore.createShadow(c, indexes);
    }
    const key = `${name}#rebuild`;
    await ctx.readStore.setCheckpoint(key, { position: 0, events: 0, updated_at: new Date().toISOString() });
    const startedAt = Date.now();
    const target = await ctx.store.headPosition(r.projection.filter);
    const progress: RebuildProgress = {
      started_at: new Date(startedAt).toISOString(),
      events_done: 0,
      target_position: target,
      position: 0,
      percent: target === 0 ? 100 : 0,
      rate_per_second: 0,
      eta_seconds: null,
    };
    r.progress = progress;
    r.state = 'rebuilding';
    let position = 0;
    const copies: Follower[] = [];
    const onBatch = (reached: number, applied: number) => {
      position = reached;
      progress.events_done += applied;
      progress.position = position;
      progress.target_position = Math.max(progress.target_position, position);
      progress.percent = Math.min(
        100,
        Math.round((position / Math.max(1, progress.target_position)) * 1000) / 10,
      );
      const seconds = (Date.now() - startedAt) / 1000;
      progress.rate_per_second = Math.round(progress.events_done / Math.max(seconds, 0.001));
      const remaining = progress.target_position - position;
      progress.eta_seconds =
        progress.rate_per_second > 0 ? Math.round((remaining / progress.rate_per_second) * 10) / 10 : null;
    };
    try {
      const copyDrop = endOnDrop();
      const copy = follow(ctx, r.projection, shadows, key, undefined, r.definition, onBatch, copyDrop);
      copies.push(copy);
      await Promise.race([copy.caughtUp, copyDrop.dropped]);
      // Switch over: pause the live projection, let the copy drain what it still lacks, promote.
      // Not before the live copy has caught up: readiness at start waits for it (a copy of a short
      // log can finish first, and a live subscription stopped before catching up never would).
      await r.liveSettled;
      await r.stopSubscription?.();
      await copy.stop();
      await copy.done;
      const drained = await ctx.readStore.getCheckpoint(key);
      const drainDrop = endOnDrop();
      const drain = follow(ctx, r.projection, shadows, key, drained, r.definition, onBatch, drainDrop);
      copies.push(drain);
      await Promise.race([drain.caughtUp, drainDrop.dropped]);
      await drain.stop();
      await drain.done;
      const final = (await ctx.readStore.getCheckpoint(key)) ?? {
        position: 0,
        events: 0,
        updated_at: new Date().toISOString(),
      };
      // The copies and their checkpoint, of this code's definition, become live in one step.
      await ctx.readStore.promote(Object.values(shadows), [
        { name, checkpoint: { ...final, version: r.definition } },
      ]);
      progress.percent = 100;
      progress.eta_seconds = 0;
      ctx.logger?.info(
        {
          projection: name,
          events: progress.events_done,
          ms: Date.now() - startedAt,
          version: r.definition,
        },
        'projection rebuilt: the new copy is live',
      );
    } catch (err) {
      for (const c of copies) await c.stop();
      for (const s of Object.values(shadows)) await ctx.readStore.dropShadow(s).catch(() => undefined);
      throw err;
    } finally {
      r.rebuilding = undefined;
      r.state = 'live';
      await startLive(ctx, r);
    }
  })();
  r.rebuilding = work;
  return work;
}
