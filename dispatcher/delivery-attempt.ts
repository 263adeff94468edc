/**
 * One attempt of a queue's head delivery (docs/webhooks.md, "Outcomes and retries"):
 * `WebhookDeliveryAttemptStarted` is appended with the queue's expected revision (so of several
 * dispatchers exactly one sends), the request is signed and sent through `webhooks/send.ts`, and the
 * result is appended with what follows it: nothing (delivered), a retry time, or a park.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { type CommandHandler, toNewEvents } from '../application/command-handler.ts';
import { DomainError } from '../domain/decider.ts';
import type { EventRegistry } from '../domain/events.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import * as webhooks from '../domain/webhook-subscription.ts';
import { type EventStore, WrongExpectedVersionError } from '../eventstore/port.ts';
import { attemptFields, type DeliveryResult, isLastAttempt, nextAttemptDelay } from '../webhooks/deliver.ts';
import type { WebhookChannel, WebhookSender } from '../webhooks/send.ts';
import type { DeliveryQueues, Queue } from './delivery-queues.ts';
import { DISPATCHER_ACTOR } from './fan-out.ts';
import type { Limiter } from './limiter.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

export interface DeliveryWorkerStats {
  attempts: Record<delivery.AttemptOutcome, number>;
  /** Deliveries this worker parked. */
  parked: number;
  errors: number;
}

export function emptyStats(): DeliveryWorkerStats {
  return {
    attempts: { delivered: 0, gone: 0, retry_after: 0, failed: 0, interrupted: 0 },
    parked: 0,
    errors: 0,
  };
}

/** What an attempt needs of the worker running it. */
export interface AttemptContext {
  store: EventStore;
  registry: EventRegistry;
  queues: DeliveryQueues;
  sender: WebhookSender;
  /** Requests open at once per subscription. */
  limiter: Limiter;
  commands: CommandHandler;
  now(): Date;
  /** Names this process in `AttemptStarted`. */
  dispatcherId: string;
  /** How long an attempt may be in flight before another dispatcher records it as interrupted. */
  leaseMs: number;
  /** `PDS_WEBHOOK_RETRY_SCHEDULE`: entry n is the wait after attempt n (its length is the attempts). */
  scheduleMs: readonly number[];
  /** Upper bound on a receiver's `Retry-After`. */
  maxRetryAfterMs: number;
  random: () => number;
  stats: DeliveryWorkerStats;
  onAttempt?(info: { webhookId: string; outcome: delivery.AttemptOutcome; durationMs: number }): void;
  logger?: Logger;
}

/** The queue changed under us (another dispatcher, or an operator): reloaded, decide again. */
export class StaleQueue extends Error {}

/** Decides `command` on the queue as this worker holds it and appends with its expected revision. */
export async function decideOnQueue(
  ctx: AttemptContext,
  queue: Queue,
  command: delivery.WebhookDeliveryCommand,
  deliveryId: string,
): Promise<void> {
  const events = delivery.decider.decide(command, queue.state);
  if (events.length === 0) return;
  const toAppend = toNewEvents(ctx.registry, events, {
    correlationId: queue.correlation.get(deliveryId) ?? deliveryId,
    causationId: null,
    actor: DISPATCHER_ACTOR,
    at: command.at,
  });
  try {
    const result = await ctx.store.append(queue.stream, toAppend, {
      expectedRevision: queue.revision < 0 ? 'no_stream' : queue.revision,
    });
    for (const e of events) if (e.type === 'WebhookDeliveryParked') ctx.stats.parked += 1;
    const first = result.nextExpectedRevision - events.length + 1;
    ctx.queues.recordOwn(queue, events, first, result.position);
  } catch (err) {
    if (err instanceof WrongExpectedVersionError) {
      await ctx.queues.reload(queue);
      throw new StaleQueue(`${queue.stream} changed`);
    }
    throw err;
  }
}

/** What follows a failed attempt: the next attempt's time, or a park after the last. */
export function plan(
  ctx: AttemptContext,
  d: delivery.Delivery,
  result: Pick<DeliveryResult, 'outcome' | 'retryAfterMs'> | { outcome: 'interrupted'; retryAfterMs: null },
): { retry_at: string | null; park: delivery.ParkReason | null } {
  if (result.outcome === 'delivered') return { retry_at: null, park: null };
  if (result.outcome === 'gone') return { retry_at: null, park: 'receiver_gone' };
  // cycle_attempts counts the attempt being recorded (its start was applied).
  if (isLastAttempt(d.cycle_attempts, ctx.scheduleMs)) return { retry_at: null, park: 'attempts_exhausted' };
  const delay =
    result.outcome === 'interrupted'
      ? 0
      : result.outcome === 'retry_after' && result.retryAfterMs !== null
        ? Math.min(Math.max(result.retryAfterMs, 0), ctx.maxRetryAfterMs)
        : nextAttemptDelay(d.cycle_attempts, ctx.scheduleMs, ctx.random);
  return { retry_at: new Date(ctx.now().getTime() + delay).toISOString(), park: null };
}

/** A receiver answered 410 Gone: its subscription is disabled (docs/webhooks.md). */
async function disableSubscription(ctx: AttemptContext, webhookId: string): Promise<void> {
  const at = ctx.now().toISOString();
  try {
    await ctx.commands.handle(
      webhooks.streamId(webhookId),
      webhooks.decider,
      { type: 'DisableWebhookSubscription', reason: 'receiver_gone', at },
      { correlationId: randomUUID(), causationId: null, actor: DISPATCHER_ACTOR, at },
    );
    ctx.logger?.warn({ webhook_id: webhookId }, 'receiver answered 410 Gone: webhook subscription disabled');
  } catch (err) {
    // Removed or disabled meanwhile: nothing left to do.
    if (!(err instanceof DomainError)) throw err;
  }
}

/** Starts, sends and records one attempt of the queue's head `d` to subscription `sub`. */
export async function attempt(
  ctx: AttemptContext,
  queue: Queue,
  d: delivery.Delivery,
  sub: webhooks.WebhookSubscription,
): Promise<void> {
  const channel = ctx.sender.open(sub);
  await ctx.limiter.acquire(sub.webhook_id);
  try {
    await decideOnQueue(
      ctx,
      queue,
      {
        type: 'StartAttempt',
        delivery_id: d.delivery_id,
        lease_ms: ctx.leaseMs,
        dispatcher_id: ctx.dispatcherId,
        at: ctx.now().toISOString(),
      },
      d.delivery_id,
    );
  } catch (err) {
    ctx.limiter.release(sub.webhook_id);
    throw err;
  }
  await sendStarted(ctx, queue, d, sub, channel);
}

/**
 * Sends the attempt of `d` this worker started (holding one of the subscription's slots, released
 * once the answer is in) over the subscription's `channel`, and records its result.
 */
export async function sendStarted(
  ctx: AttemptContext,
  queue: Queue,
  d: delivery.Delivery,
  sub: webhooks.WebhookSubscription,
  channel: WebhookChannel,
): Promise<void> {
  let started: delivery.Delivery;
  let result: DeliveryResult;
  try {
    started = delivery.findDelivery(queue.state, d.delivery_id) as delivery.Delivery;
    result = await channel.send({ webhookId: d.delivery_id, attempt: started.attempts, body: d.body });
  } finally {
    // The slot covers the request only: recording its result does not hold up the next request.
    ctx.limiter.release(sub.webhook_id);
  }
  const attemptNo = started.attempts;
  ctx.stats.attempts[result.outcome] += 1;
  ctx.onAttempt?.({ webhookId: sub.webhook_id, outcome: result.outcome, durationMs: result.durationMs });
  const command: delivery.WebhookDeliveryCommand = {
    type: 'RecordAttempt',
    delivery_id: d.delivery_id,
    attempt: attemptNo,
    ...attemptFields(result),
    ...plan(ctx, started, result),
    at: ctx.now().toISOString(),
  };
  // The fan-out appends to the same queue (the cart's next event): on a conflict the queue is
  // reloaded and the result recorded again, as long as the attempt is still ours and in flight.
  for (let tries = 1; ; tries++) {
    try {
      await decideOnQueue(ctx, queue, command, d.delivery_id);
      break;
    } catch (err) {
      const current = delivery.findDelivery(queue.state, d.delivery_id);
      const stillOurs = current?.in_flight?.attempt === attemptNo;
      if (!(err instanceof StaleQueue) || !stillOurs || tries >= 20) throw err;
    }
  }
  if (result.outcome === 'gone') await disableSubscription(ctx, sub.webhook_id);
}

/**
 * Does what the queue's head delivery `d` needs now: records an attempt whose lease ran out as
 * interrupted, parks it when its subscription is gone or disabled, or attempts it when it is due.
 * `wait` when nothing is due yet (an attempt in flight, or a retry time ahead).
 */
export async function workHead(
  ctx: AttemptContext,
  queue: Queue,
  d: delivery.Delivery,
  subscriptions: Pick<SubscriptionTracker, 'current'>,
): Promise<'wait' | 'next'> {
  const at = ctx.now();
  if (d.in_flight) {
    if (Date.parse(d.in_flight.lease_until) > at.getTime()) return 'wait';
    ctx.stats.attempts.interrupted += 1;
    ctx.onAttempt?.({ webhookId: d.webhook_id, outcome: 'interrupted', durationMs: 0 });
    const next = plan(ctx, d, { outcome: 'interrupted', retryAfterMs: null });
    await decideOnQueue(
      ctx,
      queue,
      { type: 'RecordInterruption', delivery_id: d.delivery_id, ...next, at: at.toISOString() },
      d.delivery_id,
    );
    return 'next';
  }
  if (d.next_attempt_at !== null && Date.parse(d.next_attempt_at) > at.getTime()) return 'wait';
  const sub = subscriptions.current(d.webhook_id);
  if (!sub || sub.removed || !sub.enabled) {
    const reason = !sub || sub.removed ? 'subscription_removed' : 'subscription_disabled';
    await decideOnQueue(
      ctx,
      queue,
      { type: 'ParkDelivery', delivery_id: d.delivery_id, reason, at: at.toISOString() },
      d.delivery_id,
    );
    return 'next';
  }
  await attempt(ctx, queue, d, sub);
  return 'next';
}

/** Works the queue's head until it waits for a later time, the queue is empty, or the worker stops. */
export async function workHeads(
  ctx: AttemptContext,
  queue: Queue,
  subscriptions: Pick<SubscriptionTracker, 'current'>,
  stopped: () => boolean,
): Promise<void> {
  for (let step = 0; step < 10_000 && !stopped(); step++) {
    const d = delivery.head(queue.state);
    if (!d) return;
    try {
      if ((await workHead(ctx, queue, d, subscriptions)) === 'wait') return;
    } catch (err) {
      if (err instanceof StaleQueue) continue;
      throw err;
    }
  }
}
