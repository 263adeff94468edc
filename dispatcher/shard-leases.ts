/**
 * Delivery shards leased among dispatcher processes (docs/webhooks.md, "Scale"): on the split
 * deployment the `PDS_WEBHOOK_DELIVERY_SHARDS` shards of the delivery queues (`shards.ts`) are leased in
 * the dispatcher store, as the projector's lease is (docs/read-side.md, "One projector at a time").
 *
 * Each process says it is there (a document in `webhook_delivery_dispatchers` with the time it
 * lasts until, renewed each round) and, each round, takes shards while it holds fewer than its fair
 * share (the shards ÷ the dispatchers there, rounded up), renews the ones it holds, and gives back
 * those above its share, so that a dispatcher that joins gets its share from the others. A shard
 * whose lease was not renewed (a dead or paused process) is taken once the lease runs out. Giving a
 * shard back stops its worker first (its attempts under way are recorded), then releases the lease. A
 * lease lost meanwhile is harmless for the deliveries: the expected revision on `AttemptStarted` keeps
 * one sender per attempt whoever follows a queue, and an attempt whose result never came is recorded
 * `interrupted` by the next owner once its own lease runs out.
 */
import type { Logger } from 'pino';
import type { Clock } from '../domain/clock.ts';
import type { Fence, ReadStore } from '../projections/read-store.ts';
import { fnv1a, type Shard } from './shards.ts';

/** Where the dispatchers say they are there. */
export const DISPATCHERS_COLLECTION = 'webhook_delivery_dispatchers';

/** The lease of a shard. */
export const shardLease = (shard: Shard): string =>
  `webhook-delivery-shard/${shard.index + 1}-of-${shard.count}`;

export interface ShardLeasesOptions {
  readStore: ReadStore;
  /** Who this process is in the leases (`cli/lease-owner.ts`). */
  owner: string;
  /** How many shards the queues are split into. */
  shards: number;
  /** How long a lease, and a dispatcher's presence, holds unrenewed; a round runs every third of it. */
  ttlMs: number;
  clock: Clock;
  logger?: Logger;
  /** Starts following a shard taken; resolves once its worker caught up. */
  take(index: number): Promise<void>;
  /** Stops following a shard given back or lost; resolves once its worker has stopped. */
  give(index: number): Promise<void>;
}

export interface ShardLeases {
  /** One round: presence, renewals, shards given back and taken. Tests on a manual clock call it. */
  round(): Promise<void>;
  /** Runs a round now and then every third of the lease, until `stop`. */
  start(): Promise<void>;
  /** The shards this process holds, in order. */
  held(): number[];
  /** Resolves once the shards being given back are (their workers stopped, their leases released). */
  givenBack(): Promise<void>;
  /** Resolves once the workers of the shards taken have caught up. */
  taken(): Promise<void>;
  /** Gives every shard back and says this process is gone. */
  stop(): Promise<void>;
}

export function createShardLeases(options: ShardLeasesOptions): ShardLeases {
  const { readStore, owner, shards, ttlMs, clock, logger } = options;
  const held = new Map<number, Fence>();
  /** Shards being given back: not taken again until their worker stopped. */
  const giving = new Map<number, Promise<void>>();
  /** Workers of shards taken, until they caught up. */
  const starting = new Set<Promise<void>>();
  /** Where this process starts looking for free shards: dispatchers spread over the shards. */
  const first = fnv1a(owner) % shards;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = false;

  /**
   * Says this process is there; answers how many dispatchers are (itself included). A dispatcher gone
   * without saying so (killed, crashed) is deleted once its presence ran out, so that the
   * collection holds the dispatchers there, not every one that ever ran; one only paused says it is
   * there again at its next round.
   */
  async function present(): Promise<number> {
    const c = await readStore.collection(DISPATCHERS_COLLECTION);
    const now = clock.now().getTime();
    await c.bulkWrite([
      {
        replaceOne: { filter: { _id: owner }, replacement: { _id: owner, until: now + ttlMs }, upsert: true },
      },
      { deleteMany: { filter: { until: { $lte: now } } } },
    ]);
    const there = await c.find({ until: { $gt: now } });
    return Math.max(1, there.length);
  }

  /** Stops the shard's worker, then releases its lease (when still ours). */
  function giveBack(index: number, fence: Fence | undefined, why: string): void {
    held.delete(index);
    logger?.info({ shard: index + 1, of: shards, why }, 'delivery shard given back');
    const done = options
      .give(index)
      .then(() => (fence ? readStore.releaseLease(fence) : undefined))
      .catch((err: unknown) => logger?.warn({ err, shard: index + 1 }, 'delivery shard not released'))
      .finally(() => giving.delete(index));
    giving.set(index, done);
  }

  /**
   * Takes free shards up to the fair share; their workers start in the background (a catch-up must not
   * hold up the renewals of the shards held), and are in `starting` until they caught up.
   */
  async function takeShards(fair: number): Promise<void> {
    for (let i = 0; i < shards && held.size < fair && !stopped; i++) {
      const index = (first + i) % shards;
      if (held.has(index) || giving.has(index)) continue;
      const attempt = await readStore.acquireLease(shardLease({ index, count: shards }), owner, ttlMs);
      if (!attempt.acquired) continue;
      const { fence } = attempt;
      held.set(index, fence);
      logger?.info({ shard: index + 1, of: shards }, 'delivery shard taken');
      const started = options.take(index).catch((err: unknown) => {
        logger?.error({ err, shard: index + 1 }, 'delivery shard worker did not start');
        // Given back, for this or another dispatcher (unless it was given back meanwhile).
        if (held.get(index) === fence) giveBack(index, fence, 'its worker did not start');
      });
      starting.add(started);
      void started.finally(() => starting.delete(started));
    }
  }

  async function round(): Promise<void> {
    if (stopped) return;
    const fair = Math.ceil(shards / (await present()));
    for (const [index, fence] of [...held]) {
      if (!(await readStore.renewLease(fence, ttlMs))) giveBack(index, undefined, 'lease lost');
    }
    // Above the fair share (a dispatcher joined): the last taken go back first.
    for (const index of [...held.keys()].reverse().slice(0, Math.max(0, held.size - fair)))
      giveBack(index, held.get(index), 'above the fair share');
    await takeShards(fair);
  }

  function runRound(): Promise<void> {
    running = running
      .then(round)
      .catch((err: unknown) => logger?.warn({ err }, 'delivery shard leases not renewed; tried again'));
    return running;
  }

  return {
    round: runRound,
    async start() {
      await runRound();
      // Renewed while the first round's workers catch up; ready once they follow their shards.
      timer = setInterval(() => void runRound(), Math.max(1, Math.floor(ttlMs / 3)));
      timer.unref();
      await Promise.all(starting);
    },
    held: () => [...held.keys()].sort((a, b) => a - b),
    givenBack: async () => {
      await Promise.all(giving.values());
    },
    taken: async () => {
      await Promise.all(starting);
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
      await Promise.all(starting);
      for (const [index, fence] of [...held]) giveBack(index, fence, 'stopping');
      await Promise.all(giving.values());
      const c = await readStore.collection(DISPATCHERS_COLLECTION);
      await c.bulkWrite([{ deleteOne: { filter: { _id: owner } } }]).catch(() => {});
    },
  };
}
