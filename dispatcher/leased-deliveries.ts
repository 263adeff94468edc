/**
 * A dispatcher process's deliveries on the split deployment (docs/webhooks.md, "Scale"): a delivery
 * worker for each shard it holds the lease of (`shard-leases.ts`), started when the shard is taken and
 * stopped when it is given back. Seen from the fan-out and the metrics it is one delivery worker: a
 * delivery of a held shard is scheduled by that shard's worker (its first attempt in the scheduling's
 * append), one of another shard is appended alone for its owner (`schedule-elsewhere.ts`), and the
 * counts are the sums of the workers'. Its workers share one budget of requests open
 * (`PDS_WEBHOOK_MAX_IN_FLIGHT`, `slots.ts`), so however the shards held change, the process never has
 * more open.
 */
import type { EventRegistry } from '../domain/events.ts';
import { parseStreamId } from '../domain/webhook-delivery/vocabulary.ts';
import type { EventStore } from '../eventstore/port.ts';
import { emptyStats } from './delivery-attempt.ts';
import type { DeliveryWorker } from './delivery-worker.ts';
import { scheduleElsewhere } from './schedule-elsewhere.ts';
import { createShardLeases, type ShardLeases, type ShardLeasesOptions } from './shard-leases.ts';
import { type Shard, shardOf } from './shards.ts';
import { createInFlightBudget, type InFlightBudget } from './slots.ts';

export interface LeasedDeliveriesOptions extends Omit<ShardLeasesOptions, 'take' | 'give'> {
  store: EventStore;
  registry: EventRegistry;
  /** `PDS_WEBHOOK_MAX_IN_FLIGHT`: requests open at once over every shard this process holds. */
  maxInFlight: number;
  /** A delivery worker for `shard`, not started, taking its request slots from `budget`. */
  worker(shard: Shard, budget: InFlightBudget): DeliveryWorker;
}

export interface LeasedDeliveries extends DeliveryWorker {
  readonly leases: ShardLeases;
}

export function createLeasedDeliveries(options: LeasedDeliveriesOptions): LeasedDeliveries {
  const { shards } = options;
  const workers = new Map<number, DeliveryWorker>();
  const budget = createInFlightBudget(options.maxInFlight);
  const leases = createShardLeases({
    ...options,
    async take(index) {
      const w = options.worker({ index, count: shards }, budget);
      workers.set(index, w);
      w.start();
      await w.caughtUp;
    },
    async give(index) {
      const w = workers.get(index);
      workers.delete(index);
      await w?.stop();
    },
  });
  const { promise: caughtUp, resolve, reject } = Promise.withResolvers<void>();
  caughtUp.catch(() => {});
  const all = () => [...workers.values()];

  return {
    leases,
    start() {
      leases.start().then(resolve, reject);
    },
    async schedule(request) {
      const webhookId = parseStreamId(request.stream)?.webhook_id;
      const w = webhookId === undefined ? undefined : workers.get(shardOf(webhookId, shards));
      return w ? w.schedule(request) : scheduleElsewhere(options.store, options.registry, request);
    },
    caughtUp,
    queues: () => all().reduce((sum, w) => sum + w.queues(), 0),
    resumed() {
      const each = all().map((w) => w.resumed());
      return {
        position: each.length === 0 ? 0 : Math.min(...each.map((r) => r.position)),
        documents: each.reduce((sum, r) => sum + r.documents, 0),
      };
    },
    async tick() {
      let ran = 0;
      for (const w of all()) ran += await w.tick();
      return ran;
    },
    async settle(timeoutMs) {
      await Promise.all(all().map((w) => w.settle(timeoutMs)));
    },
    pending() {
      const each = all().map((w) => w.pending());
      const since = each.map((p) => p.oldestQueuedSince).filter((s): s is string => s !== null);
      return {
        depth: each.reduce((sum, p) => sum + p.depth, 0),
        oldestQueuedSince: since.length === 0 ? null : since.reduce((a, b) => (a < b ? a : b)),
      };
    },
    slots() {
      const each = all().map((w) => w.slots());
      return {
        inFlight: each.reduce((sum, s) => sum + s.inFlight, 0),
        waiting: each.reduce((sum, s) => sum + s.waiting, 0),
      };
    },
    stats() {
      const total = emptyStats();
      for (const s of all().map((w) => w.stats())) {
        for (const outcome of Object.keys(total.attempts) as Array<keyof typeof total.attempts>)
          total.attempts[outcome] += s.attempts[outcome];
        total.parked += s.parked;
        total.errors += s.errors;
      }
      return total;
    },
    stop: () => leases.stop(),
  };
}
