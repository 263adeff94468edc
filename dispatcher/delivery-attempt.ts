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
import {
  type AppendResult,
  type EventStore,
  type NewEvent,
  WrongExpectedVersionError,
} from '../eventstore/port.ts';
import { attemptFields, type DeliveryResult, isLastAttempt, nextAttemptDelay } from '../webhooks/deliver.ts';
import type { WebhookChannel, WebhookSender } from '../webhooks/send.ts';
import type { DeliveryQueues, Queue } from './delivery-queues.ts';
import { DISPATCHER_ACTOR } from './fan-out-schedule.ts';
import type { Slots } from './slots.ts';
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
  /** Requests open at once, per subscription and in all (`dispatcher/slots.ts`). */
  slots: Slots;
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
  /** Opens a sealed body as the sender will (docs/operations.md, "Customer data"). */
  openBody?: (body: string) => Promise<string>;
}

/** The queue changed under us (another dispatcher, or an operator): reloaded, decide again. */
export class StaleQueue extends Error {}

/** An attempt this worker started, with another event of its queue in the same append: sent next. */
export interface StartedAttempt {
  queue: Queue;
  delivery: delivery.Delivery;
  sub: webhooks.WebhookSubscription;
  channel: WebhookChannel;
}

/** The start of a queue's head, to append with what precedes it (`headStart`); it holds a slot. */
export interface HeadStart {
  events: delivery.WebhookDeliveryEvent[];
  deliveryId: string;
  sub: webhooks.WebhookSubscription;
  channel: WebhookChannel;
}

/**
 * The start of the head of `state` (a queue as the events being decided leave it), to go in the same
 * append, when that head is due and not in flight, its subscription enabled, its channel opens and one
 * of its slots is free (taken here: the caller releases it if the append fails); otherwise the worker
 * starts it as any other attempt, once it can.
 */
export function headStart(
  ctx: AttemptContext,
  subscriptions: Pick<SubscriptionTracker, 'current'>,
  state: delivery.DeliveryQueueState,
  at: string,
): HeadStart | undefined {
  const next = delivery.head(state);
  if (!next || next.in_flight) return undefined;
  if (next.next_attempt_at !== null && Date.parse(next.next_attempt_at) > Date.parse(at)) return undefined;
  const sub = subscriptions.current(next.webhook_id);
  if (!sub || sub.removed || !sub.enabled) return undefined;
  let channel: WebhookChannel;
  try {
    channel = ctx.sender.open(sub);
  } catch {
    return undefined; // the worker's own attempt meets the same error, and reports it
  }
  if (!ctx.slots.tryAcquire(sub.webhook_id)) return undefined;
  const command = {
    type: 'StartAttempt' as const,
    delivery_id: next.delivery_id,
    lease_ms: ctx.leaseMs,
    dispatcher_id: ctx.dispatcherId,
    at,
  };
  try {
    return { events: delivery.decider.decide(command, state), deliveryId: next.delivery_id, sub, channel };
  } catch (err) {
    ctx.slots.release(sub.webhook_id);
    if (err instanceof DomainError) return undefined;
    throw err;
  }
}

/**
 * Appends to a queue's stream at its revision (-1: none yet); the slot of a head's `start` going with
 * the events is given back when the append fails.
 */
export async function appendWithStart(
  ctx: AttemptContext,
  stream: string,
  events: NewEvent[],
  revision: number,
  start: HeadStart | undefined,
): Promise<AppendResult> {
  try {
    return await ctx.store.append(stream, events, {
      expectedRevision: revision < 0 ? 'no_stream' : revision,
    });
  } catch (err) {
    if (start) ctx.slots.release(start.sub.webhook_id);
    throw err;
  }
}

/**
 * Decides `command` on the queue as this worker holds it and appends with its expected revision;
 * with `startNext`, also the start of the queue's head as the command leaves it, when it answers one
 * (answered, to be sent).
 */
export async function decideOnQueue(
  ctx: AttemptContext,
  queue: Queue,
  command: delivery.WebhookDeliveryCommand,
  deliveryId: string,
  startNext?: (after: delivery.DeliveryQueueState) => HeadStart | undefined,
): Promise<HeadStart | undefined> {
  const events = delivery.decider.decide(command, queue.state);
  if (events.length === 0) return undefined;
  const next = startNext?.(events.reduce(delivery.decider.evolve, queue.state));
  const metadata = (id: string) => ({
    correlationId: queue.correlation.get(id) ?? id,
    causationId: null,
    actor: DISPATCHER_ACTOR,
    at: command.at,
  });
  const all = [...events, ...(next?.events ?? [])];
  const toAppend = [
    ...toNewEvents(ctx.registry, events, metadata(deliveryId)),
    ...(next ? toNewEvents(ctx.registry, next.events, metadata(next.deliveryId)) : []),
  ];
  let result: AppendResult;
  try {
    result = await appendWithStart(ctx, queue.stream, toAppend, queue.revision, next);
  } catch (err) {
    if (err instanceof WrongExpectedVersionError) {
      await ctx.queues.reload(queue);
      throw new StaleQueue(`${queue.stream} changed`);
    }
    throw err;
  }
  for (const e of all) if (e.type === 'WebhookDeliveryParked') ctx.stats.parked += 1;
  ctx.queues.recordOwn(queue, all, result.nextExpectedRevision - all.length + 1, result.position);
  return next;
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
async function disableSubscription(
  ctx: AttemptContext,
  webhookId: string,
  subscriptions: Pick<SubscriptionTracker, 'ready'>,
): Promise<void> {
  const at = ctx.now().toISOString();
  let position: number;
  try {
    ({ position } = await ctx.commands.handle(
      webhooks.streamId(webhookId),
      webhooks.decider,
      { type: 'DisableWebhookSubscription', reason: 'receiver_gone', at },
      { correlationId: randomUUID(), causationId: null, actor: DISPATCHER_ACTOR, at },
    ));
    ctx.logger?.warn({ webhook_id: webhookId }, 'receiver answered 410 Gone: webhook subscription disabled');
  } catch (err) {
    // Removed or disabled meanwhile: nothing left to do.
    if (!(err instanceof DomainError)) throw err;
    return;
  }
  // The queue's next delivery is worked right after: it must find the subscription disabled, not
  // the tracker's view from before the disable (docs/webhooks.md, "Outcomes and retries").
  await subscriptions.ready(position);
}

/**
 * Starts, sends and records one attempt of the queue's head `d` to subscription `sub`, on a slot of
 * the subscription the caller took for it (given back here if the attempt does not start); answers
 * the next delivery's attempt when its start went with this one's result (`sendStarted`).
 */
export async function attempt(
  ctx: AttemptContext,
  queue: Queue,
  d: delivery.Delivery,
  sub: webhooks.WebhookSubscription,
  subscriptions: Pick<SubscriptionTracker, 'current' | 'ready'>,
  stopped: () => boolean,
): Promise<StartedAttempt | undefined> {
  let channel: WebhookChannel;
  try {
    // A body that cannot be opened now (the key store down) starts no attempt, so an outage does not
    // use up the delivery's attempts: the queue is tried again later.
    if (ctx.openBody) await ctx.openBody(d.body);
    channel = ctx.sender.open(sub);
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
    ctx.slots.release(sub.webhook_id);
    throw err;
  }
  const started = delivery.findDelivery(queue.state, d.delivery_id) as delivery.Delivery;
  return sendStarted(ctx, { queue, delivery: started, sub, channel }, subscriptions, stopped);
}

/**
 * Sends an attempt this worker started (holding one of the subscription's slots, released once the
 * answer is in) and records its result. A delivered webhook's result goes with the start of the
 * queue's next delivery when that one can leave at once (`headStart`), unless the worker stops: that
 * attempt is answered, to be sent next (docs/webhooks.md, "Order, isolation, durability").
 */
export async function sendStarted(
  ctx: AttemptContext,
  started: StartedAttempt,
  subscriptions: Pick<SubscriptionTracker, 'current' | 'ready'>,
  stopped: () => boolean,
): Promise<StartedAttempt | undefined> {
  const { queue, delivery: d, sub } = started;
  let result: DeliveryResult;
  try {
    result = await started.channel.send({ webhookId: d.delivery_id, attempt: d.attempts, body: d.body });
  } finally {
    // The slot covers the request only: recording its result does not hold up the next request.
    ctx.slots.release(sub.webhook_id);
  }
  const attemptNo = d.attempts;
  ctx.stats.attempts[result.outcome] += 1;
  ctx.onAttempt?.({ webhookId: sub.webhook_id, outcome: result.outcome, durationMs: result.durationMs });
  const command: delivery.WebhookDeliveryCommand = {
    type: 'RecordAttempt',
    delivery_id: d.delivery_id,
    attempt: attemptNo,
    ...attemptFields(result),
    ...plan(ctx, d, result),
    at: ctx.now().toISOString(),
  };
  // Only a delivered result starts the next delivery: otherwise the queue is not even folded for it.
  const startNext =
    result.outcome === 'delivered'
      ? (after: delivery.DeliveryQueueState) =>
          stopped() ? undefined : headStart(ctx, subscriptions, after, command.at)
      : undefined;
  // The fan-out appends to the same queue (the cart's next event): on a conflict the queue is
  // reloaded and the result recorded again, as long as the attempt is still ours and in flight.
  let next: HeadStart | undefined;
  for (let tries = 1; ; tries++) {
    try {
      next = await decideOnQueue(ctx, queue, command, d.delivery_id, startNext);
      break;
    } catch (err) {
      const current = delivery.findDelivery(queue.state, d.delivery_id);
      const stillOurs = current?.in_flight?.attempt === attemptNo;
      if (!(err instanceof StaleQueue) || !stillOurs || tries >= 20) throw err;
    }
  }
  if (result.outcome === 'gone') await disableSubscription(ctx, sub.webhook_id, subscriptions);
  return next && startedOf(queue, next);
}

/** The attempt `start` began, as its queue now holds it. */
export function startedOf(queue: Queue, start: HeadStart): StartedAttempt {
  const d = delivery.findDelivery(queue.state, start.deliveryId) as delivery.Delivery;
  return { queue, delivery: d, sub: start.sub, channel: start.channel };
}

/** The slot the pump gave a queue's work (`dispatcher/slots.ts`): its subscription, until an attempt takes it. */
export interface SlotGrant {
  held: string | null;
}

/**
 * Does what the queue's head delivery `d` needs now: records an attempt whose lease ran out as
 * interrupted, parks it when its subscription is gone or disabled, or attempts it when it is due,
 * on the slot `grant` holds or one free now; with none free the queue waits in its subscription's
 * ready list. `wait` when nothing is due yet (an attempt in flight, or a retry time ahead) or no
 * slot is free; the next delivery's attempt when it was started with this one's result.
 */
export async function workHead(
  ctx: AttemptContext,
  queue: Queue,
  d: delivery.Delivery,
  subscriptions: Pick<SubscriptionTracker, 'current' | 'ready'>,
  stopped: () => boolean,
  grant: SlotGrant = { held: null },
): Promise<'wait' | 'next' | StartedAttempt> {
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
  if (grant.held !== sub.webhook_id && !ctx.slots.tryAcquire(sub.webhook_id)) {
    ctx.slots.wait(sub.webhook_id, queue.stream);
    return 'wait';
  }
  grant.held = null; // the attempt's now
  return (await attempt(ctx, queue, d, sub, subscriptions, stopped)) ?? 'next';
}

/**
 * Works the queue's head until it waits for a later time or a slot, the queue is empty, or the
 * worker stops; first sends `started`, an attempt begun with the delivery's scheduling. An attempt
 * already started is sent even when the worker stops, so that none is left without its result. A
 * slot the queue was given (`grant`) and no attempt took is given back at the end.
 */
export async function workHeads(
  ctx: AttemptContext,
  queue: Queue,
  subscriptions: Pick<SubscriptionTracker, 'current' | 'ready'>,
  stopped: () => boolean,
  started?: StartedAttempt,
  grant: SlotGrant = { held: null },
): Promise<void> {
  let next = started;
  try {
    for (let step = 0; step < 10_000; step++) {
      try {
        if (next) {
          next = await sendStarted(ctx, next, subscriptions, stopped);
          continue;
        }
        const d = delivery.head(queue.state);
        if (!d || stopped()) return;
        const done = await workHead(ctx, queue, d, subscriptions, stopped, grant);
        if (done === 'wait') return;
        if (done !== 'next') next = done;
      } catch (err) {
        next = undefined;
        if (err instanceof StaleQueue) continue;
        throw err;
      }
    }
  } finally {
    if (grant.held !== null) {
      const key = grant.held;
      grant.held = null;
      ctx.slots.release(key);
    }
  }
}
