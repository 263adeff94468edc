/**
 * The delivery worker (docs/webhooks.md): sends what the fan-out scheduled, one (subscription, cart) queue at
 * a time per queue and many queues at once.
 *
 * Its working set is the queues holding a delivery neither delivered nor parked, each with only those
 * deliveries (and their correlation ids); the head of each (its first unsettled delivery) gets a timer
 * for its next attempt. The working set is durable (`durable-follower.ts`: one document per queue in
 * `webhook_delivery_queues`, committed together with the checkpoint of the events applied), so a
 * start reads the pending queues and the delivery events written since, not every delivery ever
 * made, and a restart or a SIGKILL loses no pending delivery and no retry. A queue whose deliveries
 * are all settled leaves the working set; a redelivery of one of them reloads its stream.
 *
 * Per attempt: `WebhookDeliveryAttemptStarted` is appended with the queue's expected revision (so of
 * several dispatchers exactly one sends; in the append of the delivery's scheduling, or of the
 * previous delivery's result, when it can leave at once: `headStart`), the request is signed afresh
 * over the stored body and sent (`webhooks/send.ts`, which keeps the secrets out of what it returns),
 * and the result is appended: delivered; 410 → parked and the subscription disabled;
 * 429/503 with `Retry-After` → retried then (clamped); anything else → retried on the schedule with
 * jitter, parked after the last attempt. An attempt whose result never came (the process died) is
 * recorded as `interrupted` when its lease runs out, and retried at once: at-least-once, with the same
 * `X-Service-Webhook-Id`.
 *
 * Isolation and bounds: each queue sends one delivery at a time, each subscription has at most
 * `perSubscriptionConcurrency` requests open, so a slow or dead receiver ties up only its own slots,
 * and the worker at most `maxInFlight` (`dispatcher/slots.ts`). A due queue that finds no slot waits
 * in its subscription's ready list, as its stream name; a freed slot goes to the next subscription's
 * turn (docs/webhooks.md, "Scale").
 */

import type { KeyObject } from 'node:crypto';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { createCommandHandler } from '../application/command-handler.ts';
import { createDurableFollower, type DurableFollower } from '../application/durable-follower.ts';
import type { Supervisor } from '../application/supervisor.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventRegistry } from '../domain/events.ts';
import { eventRegistry } from '../domain/index.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { ReadStore } from '../projections/read-store.ts';
import { loadHttpClient } from '../webhooks/deliver.ts';
import { createWebhookSender } from '../webhooks/send.ts';
import type { Resolver } from '../webhooks/url-guard.ts';
import { QUEUE_INDEXES, UPGRADED_FROM, upgradedDocument } from './cold-queues.ts';
import { type AttemptContext, type DeliveryWorkerStats, emptyStats } from './delivery-attempt.ts';
import type { DeliveryQueueDoc, DeliveryQueues, PendingSummary, Queue } from './delivery-queues.ts';
import type { ScheduleRequest } from './fan-out-schedule.ts';
import { createQueueRuns, subscriptionOf } from './queue-runs.ts';
import { createWindowedQueues } from './queue-window.ts';
import { scheduleOnQueue } from './schedule-delivery.ts';
import { scheduleElsewhere } from './schedule-elsewhere.ts';
import { createScheduler } from './scheduler.ts';
import { ownsStream, type Shard, shardCheckpoint, takeLayout } from './shards.ts';
import { createSlots, type InFlightBudget, type Slots } from './slots.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

export type { DeliveryWorkerStats } from './delivery-attempt.ts';
export type { DeliveryQueueDoc, PendingSummary } from './delivery-queues.ts';

/**
 * The worker's durable working set: its checkpoint name, collection, and the documents' shape
 * (version 2: `due_at` and `queued_since`, indexed; the documents of version 1 are upgraded in place).
 */
export const DELIVERY_FOLLOWER = {
  name: 'webhook-delivery-worker',
  collection: 'webhook_delivery_queues',
  version: '2',
} as const;

export interface DeliveryWorkerOptions {
  store: EventStore;
  /** Where the working set and its checkpoint are kept. */
  readStore: ReadStore;
  clock: Clock;
  tracker: SubscriptionTracker;
  /** `PDS_SECRET_KEY`: decrypts the auth token and signing secret at each attempt. */
  secretKey: Buffer | KeyObject;
  /** `PDS_ALLOW_PRIVATE_WEBHOOK_URLS`. */
  allowPrivate: boolean;
  /** Opens a body whose customer is sealed, at each attempt (`webhooks/send.ts`). */
  openBody?: (body: string) => Promise<string>;
  /** `PDS_WEBHOOK_TIMEOUT`. */
  timeoutMs: number;
  /** `PDS_WEBHOOK_RETRY_SCHEDULE`: entry n is the wait after attempt n (its length is the attempts). */
  scheduleMs: readonly number[];
  /** Names this process in `AttemptStarted` (for an operator reading the attempts). */
  dispatcherId?: string;
  logger?: Logger;
  registry?: EventRegistry;
  resolve?: Resolver;
  /** Paces resubscriptions after a drop and reports the worker's health. */
  supervisor?: Supervisor;
  random?: () => number;
  /** Requests open at once per subscription. Default 8. */
  perSubscriptionConcurrency?: number;
  /**
   * `PDS_WEBHOOK_MAX_IN_FLIGHT`: requests open at once in the whole worker, or a budget it shares with
   * the other workers of its process (`slots.ts`). Default 256.
   */
  maxInFlight?: number | InFlightBudget;
  /**
   * Queues held in memory; the others wait in the store. Default 10,000. A shard's worker gets its part
   * of `PDS_WEBHOOK_QUEUE_WINDOW` (`shardWindow`, dispatcher/shards.ts).
   */
  queueWindow?: number;
  /** Upper bound on a receiver's `Retry-After`. Default 24 h. */
  maxRetryAfterMs?: number;
  /** How long an attempt may be in flight before another dispatcher records it as interrupted. */
  leaseMs?: number;
  /** Wait after an unexpected error (store unavailable…) before the queue is tried again. Default 5 s. */
  errorRetryMs?: number;
  /**
   * The worker's part of the queues when several workers share them (dispatcher/shards.ts): it follows,
   * restores and sends only those, and schedules on the others for their owners. Default: all of them.
   */
  shard?: Shard;
  /** Called after every attempt (metrics). */
  onAttempt?(info: { webhookId: string; outcome: delivery.AttemptOutcome; durationMs: number }): void;
}

export interface DeliveryWorker {
  /** Restores the working set and subscribes after its checkpoint. */
  start(): void;
  /**
   * Schedules a delivery the fan-out owes, and starts its first attempt at once when the queue
   * allows it (dispatcher/schedule-delivery.ts). Answers whether it was written (not found scheduled).
   */
  schedule(request: ScheduleRequest): Promise<boolean>;
  /** Resolves when every delivery event that existed at start is applied (timers restored). */
  readonly caughtUp: Promise<void>;
  /** Queues held in memory (at most the window; the other queues with a pending delivery are cold). */
  queues(): number;
  /** Where the last start resumed: the checkpoint (0: the first event) and the queues restored. */
  resumed(): { position: number; documents: number };
  /** Runs every attempt due now and resolves when they settled (tests drive a manual clock with it). */
  tick(): Promise<number>;
  /** Resolves once every delivery event up to the store's head is applied. */
  settle(timeoutMs?: number): Promise<void>;
  pending(): PendingSummary;
  /** Requests open (slots taken), and due queues waiting in a ready list for a slot. */
  slots(): { inFlight: number; waiting: number };
  stats(): DeliveryWorkerStats;
  stop(): Promise<void>;
}

/** What the worker's attempts need, from its options. */
function attemptContext(
  options: DeliveryWorkerOptions,
  parts: {
    queues: DeliveryQueues;
    slots: Slots;
    stats: DeliveryWorkerStats;
    now(): Date;
    registry: EventRegistry;
  },
): AttemptContext {
  const { store, clock, logger } = options;
  const { queues, slots, stats, now, registry } = parts;
  return {
    store,
    registry,
    queues,
    sender: createWebhookSender({
      secretKey: options.secretKey,
      timeoutMs: options.timeoutMs,
      allowPrivate: options.allowPrivate,
      resolve: options.resolve,
      clock,
      openBody: options.openBody,
    }),
    openBody: options.openBody,
    slots,
    commands: createCommandHandler(store, registry),
    now,
    dispatcherId: options.dispatcherId ?? `dispatcher-${randomUUID()}`,
    leaseMs: options.leaseMs ?? options.timeoutMs * 2 + 1_000,
    scheduleMs: options.scheduleMs,
    maxRetryAfterMs: options.maxRetryAfterMs ?? 24 * 3_600_000,
    random: options.random ?? Math.random,
    stats,
    onAttempt: options.onAttempt,
    logger,
  };
}

/**
 * Takes the shards' layout over when it changed (dispatcher/shards.ts), then starts following; a
 * worker stopped meanwhile says so through `caughtUp`, as its follower would.
 */
async function startShard(
  options: DeliveryWorkerOptions,
  parts: { shard: Shard; follower: DurableFollower; stopped(): boolean },
) {
  const { readStore, clock, logger } = options;
  await takeLayout({
    ...DELIVERY_FOLLOWER,
    upgrade: { from: UPGRADED_FROM, document: upgradedDocument },
    indexes: QUEUE_INDEXES,
    readStore,
    count: parts.shard.count,
    clock,
    logger,
  });
  if (parts.stopped()) throw new Error('the delivery worker stopped before it caught up');
  await parts.follower.start();
}

/** What a shard's worker follows, and where it keeps its working set and checkpoint. */
function followed(options: DeliveryWorkerOptions, shard: Shard) {
  const { store, readStore, clock, logger, supervisor } = options;
  return {
    ...DELIVERY_FOLLOWER,
    ...shardCheckpoint(DELIVERY_FOLLOWER, shard),
    ...{ store, readStore, clock, logger, supervisor },
    filter: { streamPrefixes: [delivery.STREAM_PREFIX] },
  };
}

export function createDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker {
  const { store, clock, tracker, logger } = options;
  const registry = options.registry ?? eventRegistry;
  const scheduler = createScheduler(clock, {
    onError: (key, err) => logger?.error({ err, stream: key }, 'webhook delivery failed'),
  });
  const stats = emptyStats();
  const now = () => clock.now();
  /** Queues found due while a batch of events is applied or restored: started when it is in. */
  const dueNow = new Set<string>();
  let applying = false;
  /** Every delivery event that existed at start is applied. */
  let restored = false;
  let started = false;
  let stopped = false;
  const shard = options.shard ?? { index: 0, count: 1 };
  const owns = ownsStream(shard);
  const layout = Promise.withResolvers<void>();

  const { queues, window, stored } = createWindowedQueues({
    store,
    registry,
    window: options.queueWindow ?? 10_000,
    scheduler,
    now,
    reschedule,
    stopped: () => stopped,
    errorRetryMs: options.errorRetryMs ?? 5_000,
    logger,
    changed: (stream) => follower.changed(stream),
    dropped(stream) {
      scheduler.cancel(stream);
      const key = subscriptionOf(stream);
      if (key) slots.forget(key, stream);
    },
  });
  const follower = createDurableFollower<DeliveryQueueDoc>({
    ...followed(options, shard),
    ...stored,
    restore: (doc) => reschedule(queues.restore(doc)),
    async apply(batch) {
      // Other shards' queues are skipped before they are folded.
      const events = shard.count === 1 ? batch : batch.filter((event) => owns(event.streamId));
      // Only other shards' events: the log is followed past them all the same.
      if (events.length === 0) return queues.followedTo(batch[batch.length - 1].position);
      applying = true;
      try {
        await queues.applyAll(events, reschedule);
      } finally {
        applying = false;
      }
      // While restoring, a queue's later events may be in a later batch: start once caught up.
      if (restored) startDue();
    },
  });
  const slots = createSlots(
    { perKey: options.perSubscriptionConcurrency ?? 8, total: options.maxInFlight ?? 256 },
    (key, stream) => {
      if (!work(stream, undefined, key)) slots.release(key);
    },
  );
  const ctx = attemptContext(options, { queues, slots, stats, now, registry });
  const { work, settled } = createQueueRuns({
    ctx,
    tracker,
    scheduler,
    errorRetryMs: options.errorRetryMs ?? 5_000,
    stopped: () => stopped,
    after: reschedule,
  });

  function startDue(): void {
    for (const stream of dueNow) void work(stream);
    dueNow.clear();
  }
  /** Loads the HTTP client a second after the worker is ready, so the first webhook does not wait for it. */
  let warmUp: NodeJS.Timeout | undefined;
  const caughtUp = Promise.all([layout.promise, follower.caughtUp]).then(() => {
    restored = true;
    startDue();
    window.ready();
    warmUp = setTimeout(() => void loadHttpClient(), 1_000).unref();
  });
  // A rejection nobody awaits must not crash the process; the component reports it.
  caughtUp.catch(() => {});

  function reschedule(queue: Queue): void {
    // A cold queue has no timer of its own (dispatcher/queue-window.ts).
    if (stopped || queue.busy || queues.held.get(queue.stream) !== queue) return;
    const due = delivery.headDueAt(queue.state);
    const key = subscriptionOf(queue.stream);
    const waiting = key !== undefined && slots.has(key, queue.stream);
    const at = due === null ? null : new Date(due);
    if (waiting && (at === null || at.getTime() > now().getTime())) slots.forget(key, queue.stream);
    if (at === null) {
      scheduler.cancel(queue.stream);
      return;
    }
    if (at.getTime() <= now().getTime()) {
      // Due already (a new delivery, the next one of the queue): start now rather than on the next
      // timer turn, which costs a millisecond or more of latency per webhook; while a batch of events
      // is being applied, once the batch is in (later events of the batch may settle the delivery).
      // A queue waiting for a slot is started by the pump when one frees.
      scheduler.cancel(queue.stream);
      if (waiting) return;
      if (applying || !restored) dueNow.add(queue.stream);
      else void work(queue.stream);
      return;
    }
    // Waiting for a later time: its room goes to cold queues due sooner, if any.
    if (window.yieldsTo(queue, at)) return;
    if (scheduler.dueAt(queue.stream)?.getTime() === at.getTime()) return;
    scheduler.schedule(queue.stream, at, () => work(queue.stream));
  }

  return {
    start() {
      if (started || stopped) return;
      started = true;
      // A failure rejects `caughtUp`, which the component reports.
      startShard(options, { shard, follower, stopped: () => stopped }).then(layout.resolve, layout.reject);
    },
    async schedule(request) {
      if (!owns(request.stream)) return scheduleElsewhere(store, registry, request);
      const outcome = await scheduleOnQueue(ctx, tracker, request, restored && !stopped);
      if (!outcome.written) return false;
      if (outcome.started) void work(request.stream, outcome.started);
      else reschedule(outcome.queue);
      return true;
    },
    caughtUp,
    queues: () => queues.held.size,
    resumed: () => follower.resumed(),
    tick: () => scheduler.tick(),
    settle: (timeoutMs) => follower.settle(timeoutMs),
    pending: () => queues.pending(),
    slots: () => ({ inFlight: slots.inFlight(), waiting: slots.waiting() }),
    stats: () => ({ ...stats, attempts: { ...stats.attempts } }),
    async stop() {
      stopped = true;
      slots.close();
      clearTimeout(warmUp);
      scheduler.stop();
      // Attempts under way are sent and recorded (bounded by the webhook timeout); no new one starts.
      await settled();
      await window.idle();
      await follower.stop();
    },
  };
}
