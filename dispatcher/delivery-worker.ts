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
 * several dispatchers exactly one sends), the request is signed afresh over the stored body and sent
 * (`webhooks/send.ts`, which keeps the secrets out of what it returns), and the result is appended: delivered; 410 → parked and the subscription disabled;
 * 429/503 with `Retry-After` → retried then (clamped); anything else → retried on the schedule with
 * jitter, parked after the last attempt. An attempt whose result never came (the process died) is
 * recorded as `interrupted` when its lease runs out, and retried at once: at-least-once, with the same
 * `X-Service-Webhook-Id`.
 *
 * Isolation: each queue sends one delivery at a time, and each subscription has at most
 * `perSubscriptionConcurrency` requests open, so a slow or dead receiver ties up only its own slots;
 * every other subscription keeps its own.
 */

import type { KeyObject } from 'node:crypto';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { createCommandHandler, toNewEvents } from '../application/command-handler.ts';
import { createDurableFollower } from '../application/durable-follower.ts';
import { domainEventOf } from '../application/read-state.ts';
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/decider.ts';
import type { EventRegistry } from '../domain/events.ts';
import { eventRegistry } from '../domain/index.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import * as webhooks from '../domain/webhook-subscription.ts';
import {
  type EventStore,
  type RecordedEvent,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from '../eventstore/port.ts';
import type { Doc, ReadStore } from '../projections/read-store.ts';
import { type DeliveryResult, isLastAttempt, loadHttpClient, nextAttemptDelay } from '../webhooks/deliver.ts';
import { createWebhookSender } from '../webhooks/send.ts';
import type { Resolver } from '../webhooks/url-guard.ts';
import { DISPATCHER_ACTOR } from './fan-out.ts';
import { createScheduler } from './scheduler.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

/** A queue as stored (`webhook_delivery_queues`): its unsettled deliveries and what attempts need. */
export interface DeliveryQueueDoc extends Doc {
  _id: string;
  revision: number;
  /** Global position of the queue's event at `revision`. */
  position: number;
  deliveries: delivery.Delivery[];
  /** Correlation id of each delivery, by delivery id. */
  correlation: Record<string, string>;
}

/** The worker's durable working set: its checkpoint name, collection, and the documents' shape. */
export const DELIVERY_FOLLOWER = {
  name: 'webhook-delivery-worker',
  collection: 'webhook_delivery_queues',
  version: '1',
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
  /** `PDS_WEBHOOK_TIMEOUT`. */
  timeoutMs: number;
  /** `PDS_WEBHOOK_RETRY_SCHEDULE`: entry n is the wait after attempt n (its length is the attempts). */
  scheduleMs: readonly number[];
  /** Names this process in `AttemptStarted` (for an operator reading the attempts). */
  dispatcherId?: string;
  logger?: Logger;
  registry?: EventRegistry;
  resolve?: Resolver;
  random?: () => number;
  /** Requests open at once per subscription. Default 8. */
  perSubscriptionConcurrency?: number;
  /** Upper bound on a receiver's `Retry-After`. Default 24 h. */
  maxRetryAfterMs?: number;
  /** How long an attempt may be in flight before another dispatcher records it as interrupted. */
  leaseMs?: number;
  /** Wait after an unexpected error (store unavailable…) before the queue is tried again. Default 5 s. */
  errorRetryMs?: number;
  /** Called after every attempt (metrics). */
  onAttempt?(info: { webhookId: string; outcome: delivery.AttemptOutcome; durationMs: number }): void;
}

export interface DeliveryWorkerStats {
  attempts: Record<delivery.AttemptOutcome, number>;
  /** Deliveries this worker parked. */
  parked: number;
  errors: number;
}

export interface PendingSummary {
  /** Deliveries neither delivered nor parked. */
  depth: number;
  /** `scheduled_at` of the oldest of them (ISO 8601), null when none. */
  oldestScheduledAt: string | null;
}

export interface DeliveryWorker {
  /** Restores the working set and subscribes after its checkpoint. */
  start(): void;
  /** Resolves when every delivery event that existed at start is applied (timers restored). */
  readonly caughtUp: Promise<void>;
  /** Queues held (the working set: queues with a delivery neither delivered nor parked). */
  queues(): number;
  /** Where the last start resumed: the checkpoint (0: the first event) and the queues restored. */
  resumed(): { position: number; documents: number };
  /** Runs every attempt due now and resolves when they settled (tests drive a manual clock with it). */
  tick(): Promise<number>;
  /** Resolves once every delivery event up to the store's head is applied. */
  settle(timeoutMs?: number): Promise<void>;
  pending(): PendingSummary;
  stats(): DeliveryWorkerStats;
  stop(): Promise<void>;
}

interface Queue {
  stream: string;
  /** Revision of the last event applied, -1 before the first. */
  revision: number;
  /** Global position of the event at `revision` (0 before the first). */
  position: number;
  state: delivery.DeliveryQueueState;
  /** Correlation id of each unsettled delivery (from its scheduling event), carried into its attempts. */
  correlation: Map<string, string>;
  busy: boolean;
}

/** The queue changed under us (another dispatcher, or an operator): reloaded, decide again. */
class StaleQueue extends Error {}

/** A small per-key semaphore: at most `max` holders per key, the others wait in order. */
function createLimiter(max: number) {
  const active = new Map<string, number>();
  const waiting = new Map<string, Array<() => void>>();
  return {
    async acquire(key: string): Promise<void> {
      const n = active.get(key) ?? 0;
      if (n < max) {
        active.set(key, n + 1);
        return;
      }
      await new Promise<void>((resolve) => {
        const list = waiting.get(key) ?? [];
        list.push(resolve);
        waiting.set(key, list);
      });
    },
    release(key: string): void {
      const next = waiting.get(key)?.shift();
      if (next) {
        next(); // the slot passes straight to the next waiter
        return;
      }
      waiting.delete(key);
      const n = (active.get(key) ?? 1) - 1;
      if (n <= 0) active.delete(key);
      else active.set(key, n);
    },
  };
}

const settled = (d: delivery.Delivery) => d.status === 'delivered' || d.status === 'parked';

export function createDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker {
  const { store, clock, tracker, logger } = options;
  const registry = options.registry ?? eventRegistry;
  const sender = createWebhookSender({
    secretKey: options.secretKey,
    timeoutMs: options.timeoutMs,
    allowPrivate: options.allowPrivate,
    resolve: options.resolve,
    clock,
  });
  const dispatcherId = options.dispatcherId ?? `dispatcher-${randomUUID()}`;
  const leaseMs = options.leaseMs ?? options.timeoutMs * 2 + 1_000;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 24 * 3_600_000;
  const errorRetryMs = options.errorRetryMs ?? 5_000;
  const random = options.random ?? Math.random;
  const limiter = createLimiter(options.perSubscriptionConcurrency ?? 8);
  const commands = createCommandHandler(store, registry);
  const scheduler = createScheduler(clock, {
    onError: (key, err) => logger?.error({ err, stream: key }, 'webhook delivery failed'),
  });
  /** The working set: queues with an unsettled delivery. */
  const queues = new Map<string, Queue>();
  /**
   * Queues that left the working set on events of this worker's own (or a stream read) the log has
   * not handed over yet: those events, when they come, are known already. Bounded by the appends in
   * flight: an entry goes once the log has passed its position.
   */
  const droppedAhead = new Map<string, { revision: number; position: number }>();
  /** Global position of the last event the log handed over. */
  let followed = 0;
  /** Queues found due while a batch of events is applied or restored: started when it is in. */
  const dueNow = new Set<string>();
  let applying = false;
  /** Every delivery event that existed at start is applied. */
  let restored = false;
  function startDue(): void {
    for (const stream of dueNow) void work(stream);
    dueNow.clear();
  }
  const stats: DeliveryWorkerStats = {
    attempts: { delivered: 0, gone: 0, retry_after: 0, failed: 0, interrupted: 0 },
    parked: 0,
    errors: 0,
  };
  let started = false;
  let stopped = false;

  const follower = createDurableFollower<DeliveryQueueDoc>({
    ...DELIVERY_FOLLOWER,
    store,
    readStore: options.readStore,
    clock,
    filter: { streamPrefixes: [delivery.STREAM_PREFIX] },
    logger,
    restore(doc) {
      const queue: Queue = {
        stream: doc._id,
        revision: doc.revision,
        position: doc.position,
        state: { exists: true, deliveries: doc.deliveries },
        correlation: new Map(Object.entries(doc.correlation)),
        busy: false,
      };
      queues.set(queue.stream, queue);
      reschedule(queue);
    },
    async apply(events) {
      applying = true;
      try {
        for (const e of events) await apply(e);
      } finally {
        applying = false;
      }
      followed = events[events.length - 1].position;
      for (const [stream, gone] of droppedAhead) if (gone.position <= followed) droppedAhead.delete(stream);
      // While restoring, a queue's later events may be in a later batch: start once caught up.
      if (restored) startDue();
    },
    save(stream) {
      const queue = queues.get(stream);
      if (!queue?.state.exists) return null;
      return {
        _id: stream,
        revision: queue.revision,
        position: queue.position,
        deliveries: queue.state.deliveries,
        correlation: Object.fromEntries(queue.correlation),
      };
    },
  });
  /** Loads the HTTP client a second after the worker is ready, so the first webhook does not wait for it. */
  let warmUp: NodeJS.Timeout | undefined;
  const caughtUp = follower.caughtUp.then(() => {
    restored = true;
    startDue();
    warmUp = setTimeout(() => void loadHttpClient(), 1_000).unref();
  });
  // A rejection nobody awaits must not crash the process; the component reports it.
  caughtUp.catch(() => {});

  const now = () => clock.now();

  /** Applies one event; `pruneAfter` false while replaying a whole stream (a redelivery may follow a park). */
  function evolve(queue: Queue, event: RecordedEvent, pruneAfter = true): void {
    const domainEvent = domainEventOf(registry, event);
    queue.state = delivery.decider.evolve(queue.state, domainEvent as delivery.WebhookDeliveryEvent);
    queue.revision = event.revision;
    queue.position = event.position;
    if (event.type === 'WebhookDeliveryScheduled') {
      queue.correlation.set(
        (event.data as { delivery_id: string }).delivery_id,
        event.metadata.correlation_id,
      );
    }
    if (pruneAfter) prune(queue);
  }

  /** Forgets settled deliveries: only the head and what follows it matter to the worker. */
  function prune(queue: Queue): void {
    if (!queue.state.exists || !queue.state.deliveries.some(settled)) return;
    for (const d of queue.state.deliveries) if (settled(d)) queue.correlation.delete(d.delivery_id);
    queue.state = { exists: true, deliveries: queue.state.deliveries.filter((d) => !settled(d)) };
  }

  async function reload(queue: Queue): Promise<void> {
    let recorded: RecordedEvent[];
    try {
      recorded = await store.readStream(queue.stream);
    } catch (err) {
      if (err instanceof StreamNotFoundError) recorded = [];
      else throw err;
    }
    queue.state = delivery.decider.initialState;
    queue.revision = -1;
    queue.position = 0;
    queue.correlation.clear();
    for (const e of recorded) evolve(queue, e, false);
    prune(queue);
    follower.changed(queue.stream);
  }

  /**
   * A queue the worker does not hold, as of the event before `revision`: no unsettled delivery (it
   * would be held), so an empty one. Not yet in the working set.
   */
  function emptyQueue(stream: string, revision: number): Queue {
    return {
      stream,
      revision: revision - 1,
      position: 0,
      state: revision === 0 ? delivery.decider.initialState : { exists: true, deliveries: [] },
      correlation: new Map(),
      busy: false,
    };
  }

  /** Keeps the queue in the working set while it holds an unsettled delivery (and while it is worked). */
  function keepOrDrop(queue: Queue): void {
    follower.changed(queue.stream);
    if (queue.busy || delivery.head(queue.state)) {
      queues.set(queue.stream, queue);
      return;
    }
    if (queues.get(queue.stream) === queue) queues.delete(queue.stream);
    scheduler.cancel(queue.stream);
    if (queue.position > followed) {
      droppedAhead.set(queue.stream, { revision: queue.revision, position: queue.position });
    }
  }

  function reschedule(queue: Queue): void {
    if (stopped || queue.busy) return;
    const due = delivery.headDueAt(queue.state);
    if (due === null) {
      scheduler.cancel(queue.stream);
      return;
    }
    const at = new Date(due);
    if (at.getTime() <= now().getTime()) {
      // Due already (a new delivery, the next one of the queue): start now rather than on the next
      // timer turn, which costs a millisecond or more of latency per webhook; while a batch of events
      // is being applied, once the batch is in (later events of the batch may settle the delivery).
      scheduler.cancel(queue.stream);
      if (applying || !restored) dueNow.add(queue.stream);
      else void work(queue.stream);
      return;
    }
    if (scheduler.dueAt(queue.stream)?.getTime() === at.getTime()) return;
    scheduler.schedule(queue.stream, at, () => work(queue.stream));
  }

  async function apply(event: RecordedEvent): Promise<void> {
    let queue = queues.get(event.streamId);
    if (!queue) {
      const gone = droppedAhead.get(event.streamId);
      // Written by this worker (or read) before the queue left the working set: known already.
      if (gone && event.revision <= gone.revision) return;
      droppedAhead.delete(event.streamId);
      // Events of deliveries all settled change nothing; a new delivery or a redelivery does.
      if (event.type !== 'WebhookDeliveryScheduled' && event.type !== 'WebhookRedeliveryRequested') return;
      queue = emptyQueue(event.streamId, event.revision);
    }
    if (event.revision <= queue.revision) return; // written by this worker, applied already
    const data = event.data as { delivery_id?: string };
    const unknownRedelivery =
      event.type === 'WebhookRedeliveryRequested' &&
      data.delivery_id !== undefined &&
      !delivery.findDelivery(queue.state, data.delivery_id);
    if (event.revision !== queue.revision + 1 || unknownRedelivery) {
      // A settled delivery is wanted again (or events were skipped): read the whole queue.
      await reload(queue);
    } else {
      evolve(queue, event);
    }
    keepOrDrop(queue);
    reschedule(queue);
  }

  /** Decides `command` on the queue as this worker holds it and appends with its expected revision. */
  async function decide(queue: Queue, command: delivery.WebhookDeliveryCommand, deliveryId: string) {
    const events = delivery.decider.decide(command, queue.state);
    if (events.length === 0) return;
    const at = command.at;
    const toAppend = toNewEvents(registry, events, {
      correlationId: queue.correlation.get(deliveryId) ?? deliveryId,
      causationId: null,
      actor: DISPATCHER_ACTOR,
      at,
    });
    try {
      const result = await store.append(queue.stream, toAppend, {
        expectedRevision: queue.revision < 0 ? 'no_stream' : queue.revision,
      });
      for (const e of events) if (e.type === 'WebhookDeliveryParked') stats.parked += 1;
      // The catch-up subscription may have applied some of these already while the append returned.
      const first = result.nextExpectedRevision - events.length + 1;
      events.forEach((e, i) => {
        if (first + i <= queue.revision) return;
        queue.state = delivery.decider.evolve(queue.state, e);
        queue.revision = first + i;
        if (first + i === result.nextExpectedRevision) queue.position = result.position;
      });
      prune(queue);
      follower.changed(queue.stream);
    } catch (err) {
      if (err instanceof WrongExpectedVersionError) {
        await reload(queue);
        throw new StaleQueue(`${queue.stream} changed`);
      }
      throw err;
    }
  }

  /** What follows a failed attempt: the next attempt's time, or a park after the last. */
  function plan(
    d: delivery.Delivery,
    result: Pick<DeliveryResult, 'outcome' | 'retryAfterMs'> | { outcome: 'interrupted'; retryAfterMs: null },
  ): { retry_at: string | null; park: delivery.ParkReason | null } {
    if (result.outcome === 'delivered') return { retry_at: null, park: null };
    if (result.outcome === 'gone') return { retry_at: null, park: 'receiver_gone' };
    // cycle_attempts counts the attempt being recorded (its start was applied).
    if (isLastAttempt(d.cycle_attempts, options.scheduleMs))
      return { retry_at: null, park: 'attempts_exhausted' };
    const delay =
      result.outcome === 'interrupted'
        ? 0
        : result.outcome === 'retry_after' && result.retryAfterMs !== null
          ? Math.min(Math.max(result.retryAfterMs, 0), maxRetryAfterMs)
          : nextAttemptDelay(d.cycle_attempts, options.scheduleMs, random);
    return { retry_at: new Date(now().getTime() + delay).toISOString(), park: null };
  }

  async function disableSubscription(webhookId: string): Promise<void> {
    const at = now().toISOString();
    try {
      await commands.handle(
        webhooks.streamId(webhookId),
        webhooks.decider,
        { type: 'DisableWebhookSubscription', reason: 'receiver_gone', at },
        { correlationId: randomUUID(), causationId: null, actor: DISPATCHER_ACTOR, at },
      );
      logger?.warn({ webhook_id: webhookId }, 'receiver answered 410 Gone: webhook subscription disabled');
    } catch (err) {
      // Removed or disabled meanwhile: nothing left to do.
      if (!(err instanceof DomainError)) throw err;
    }
  }

  /** One attempt of the queue's head `d` to subscription `sub`. */
  async function attempt(
    queue: Queue,
    d: delivery.Delivery,
    sub: webhooks.WebhookSubscription,
  ): Promise<void> {
    const channel = sender.open(sub);
    // The slot covers the request only: recording its result does not hold up the next request.
    await limiter.acquire(sub.webhook_id);
    let started: delivery.Delivery;
    let result: DeliveryResult;
    try {
      await decide(
        queue,
        {
          type: 'StartAttempt',
          delivery_id: d.delivery_id,
          lease_ms: leaseMs,
          dispatcher_id: dispatcherId,
          at: now().toISOString(),
        },
        d.delivery_id,
      );
      started = delivery.findDelivery(queue.state, d.delivery_id) as delivery.Delivery;
      result = await channel.send({ webhookId: d.delivery_id, attempt: started.attempts, body: d.body });
    } finally {
      limiter.release(sub.webhook_id);
    }
    const attemptNo = started.attempts;
    stats.attempts[result.outcome] += 1;
    options.onAttempt?.({
      webhookId: sub.webhook_id,
      outcome: result.outcome,
      durationMs: result.durationMs,
    });
    const next = plan(started, result);
    const command: delivery.WebhookDeliveryCommand = {
      type: 'RecordAttempt',
      delivery_id: d.delivery_id,
      attempt: attemptNo,
      outcome: result.outcome,
      status: result.status,
      duration_ms: result.durationMs,
      response_excerpt: result.responseExcerpt,
      error_code: result.errorCode,
      error: result.error,
      ...next,
      at: now().toISOString(),
    };
    // The fan-out appends to the same queue (the cart's next event): on a conflict the queue is
    // reloaded and the result recorded again, as long as the attempt is still ours and in flight.
    for (let tries = 1; ; tries++) {
      try {
        await decide(queue, command, d.delivery_id);
        break;
      } catch (err) {
        const current = delivery.findDelivery(queue.state, d.delivery_id);
        const stillOurs = current?.in_flight?.attempt === attemptNo;
        if (!(err instanceof StaleQueue) || !stillOurs || tries >= 20) throw err;
      }
    }
    if (result.outcome === 'gone') await disableSubscription(sub.webhook_id);
  }

  /** Queue work in progress: a graceful stop lets it finish, so no attempt is left without its result. */
  const working = new Set<Promise<void>>();
  function work(stream: string): Promise<void> {
    const run = workQueue(stream);
    working.add(run);
    void run.finally(() => working.delete(run));
    return run;
  }

  /** Works the queue's head until it waits for a later time or the queue is empty. */
  async function workQueue(stream: string): Promise<void> {
    const queue = queues.get(stream);
    if (!queue || queue.busy || stopped) return;
    queue.busy = true;
    let retryAt: Date | undefined;
    try {
      for (let step = 0; step < 10_000 && !stopped; step++) {
        const d = delivery.head(queue.state);
        if (!d) break;
        const at = now();
        try {
          if (d.in_flight) {
            if (Date.parse(d.in_flight.lease_until) > at.getTime()) break;
            stats.attempts.interrupted += 1;
            options.onAttempt?.({ webhookId: d.webhook_id, outcome: 'interrupted', durationMs: 0 });
            const next = plan(d, { outcome: 'interrupted', retryAfterMs: null });
            await decide(
              queue,
              { type: 'RecordInterruption', delivery_id: d.delivery_id, ...next, at: at.toISOString() },
              d.delivery_id,
            );
            continue;
          }
          if (d.next_attempt_at !== null && Date.parse(d.next_attempt_at) > at.getTime()) break;
          const sub = tracker.current(d.webhook_id);
          if (!sub || sub.removed || !sub.enabled) {
            const reason = !sub || sub.removed ? 'subscription_removed' : 'subscription_disabled';
            await decide(
              queue,
              { type: 'ParkDelivery', delivery_id: d.delivery_id, reason, at: at.toISOString() },
              d.delivery_id,
            );
            continue;
          }
          await attempt(queue, d, sub);
        } catch (err) {
          if (err instanceof StaleQueue) continue;
          throw err;
        }
      }
    } catch (err) {
      if (!stopped) {
        stats.errors += 1;
        logger?.error({ err, stream }, 'webhook delivery failed; retrying the queue later');
        retryAt = new Date(now().getTime() + errorRetryMs);
      }
    } finally {
      queue.busy = false;
      if (retryAt) scheduler.schedule(stream, retryAt, () => work(stream));
      else {
        keepOrDrop(queue);
        reschedule(queue);
      }
    }
  }

  return {
    start() {
      if (started || stopped) return;
      started = true;
      // A failure rejects `caughtUp`, which the component reports.
      follower.start().catch(() => {});
    },
    caughtUp,
    queues: () => queues.size,
    resumed: () => follower.resumed(),
    tick: () => scheduler.tick(),
    settle: (timeoutMs) => follower.settle(timeoutMs),
    pending() {
      let depth = 0;
      let oldest: string | null = null;
      for (const queue of queues.values()) {
        if (!queue.state.exists) continue;
        for (const d of queue.state.deliveries) {
          depth += 1;
          if (oldest === null || Date.parse(d.scheduled_at) < Date.parse(oldest)) oldest = d.scheduled_at;
        }
      }
      return { depth, oldestScheduledAt: oldest };
    },
    stats: () => ({ ...stats, attempts: { ...stats.attempts } }),
    async stop() {
      stopped = true;
      clearTimeout(warmUp);
      scheduler.stop();
      // Attempts under way are sent and recorded (bounded by the webhook timeout); no new one starts.
      await Promise.allSettled([...working]);
      await follower.stop();
    },
  };
}
