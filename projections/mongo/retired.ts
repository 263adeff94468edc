/**
 * The collections of the MongoDB read store that promotes replaced: kept for a grace period for
 * readers still on the old pointers, then dropped (why the grace period: live-names.ts).
 */
import type { Db, Collection as MongoCollection } from 'mongodb';
import type { Clock } from '../../domain/clock.ts';
import { FROM_PRIMARY } from './connection.ts';
import { POINTERS_ID, type PointerDoc } from './live-names.ts';

export class RetiredCollections {
  private readonly db: Db;
  private readonly pointers: MongoCollection<PointerDoc>;
  private readonly clock: Clock;
  private readonly graceMs: number;
  private readonly sweeps = new Set<NodeJS.Timeout>();

  constructor(db: Db, pointers: MongoCollection<PointerDoc>, clock: Clock, graceMs: number) {
    this.db = db;
    this.pointers = pointers;
    this.clock = clock;
    this.graceMs = graceMs;
  }

  /** Drops retired collections whose grace period has passed (never one that is live). */
  async drop(): Promise<string[]> {
    const doc = await this.pointers.findOne({ _id: POINTERS_ID }, FROM_PRIMARY);
    if (!doc) return [];
    const now = this.clock.now().getTime();
    const live = new Set(doc.live.map((l) => l.physical));
    const dropped: string[] = [];
    for (const { physical, since } of doc.retired) {
      if (now - Date.parse(since) < this.graceMs) continue;
      if (!live.has(physical)) await this.db.dropCollection(physical); // a missing one is no error
      await this.pointers.updateOne({ _id: POINTERS_ID }, { $pull: { retired: { physical } } });
      dropped.push(physical);
    }
    return dropped;
  }

  /**
   * Cleanup that must not fail a start or a promote: an entry left in `retired` is retried by the
   * next sweep (another process may be dropping the same collection at the same time).
   */
  sweepQuietly(): Promise<void> {
    return this.drop().then(
      () => undefined,
      () => undefined,
    );
  }

  sweepAfterGrace(): void {
    const timer = setTimeout(() => {
      this.sweeps.delete(timer);
      void this.sweepQuietly();
    }, this.graceMs + 1);
    timer.unref();
    this.sweeps.add(timer);
  }

  /** Cancels the sweeps still waiting (the store is closing). */
  stop(): void {
    for (const timer of this.sweeps) clearTimeout(timer);
    this.sweeps.clear();
  }
}
