/**
 * Scheduling a delivery the fan-out owes (docs/webhooks.md, "Order, isolation, durability"). It is
 * decided on the queue as stored (its whole stream, so a delivery scheduled before, by a message
 * handed out again after a crash, is found and nothing is written) and appended with the stream's
 * revision. When the new delivery is the queue's head, this worker has nothing of the queue under
 * way, its subscription is enabled and one of its slots is free, the first attempt's start goes in the
 * same append: one commit and one wake-up fewer per webhook. The expected revision still makes one
 * dispatcher the sender, and a crash before the send leaves an attempt in flight whose lease runs out,
 * as any attempt's does.
 */
import { toNewEvents } from '../application/command-handler.ts';
import { readState } from '../application/read-state.ts';
import { DomainError } from '../domain/decider.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import type * as webhooks from '../domain/webhook-subscription.ts';
import { WrongExpectedVersionError } from '../eventstore/port.ts';
import type { WebhookChannel } from '../webhooks/send.ts';
import type { AttemptContext } from './delivery-attempt.ts';
import type { Queue } from './delivery-queues.ts';
import type { ScheduleDeliveryCommand, ScheduleRequest } from './fan-out.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

/** An attempt started in the scheduling append: this worker sends it (`sendStarted`). */
export interface StartedAttempt {
  queue: Queue;
  delivery: delivery.Delivery;
  sub: webhooks.WebhookSubscription;
  channel: WebhookChannel;
}

export type ScheduleOutcome =
  | { written: false }
  | { written: true; queue: Queue; started: StartedAttempt | undefined };

/** Conflicts with this worker's own appends to the queue (an attempt's result) before it gives up. */
const CONFLICT_TRIES = 20;

/**
 * Schedules `request`'s delivery; starts its first attempt too when `mayStart` and the queue allows
 * it. A started attempt holds one of its subscription's slots and leaves its queue busy.
 */
export async function scheduleOnQueue(
  ctx: AttemptContext,
  subscriptions: Pick<SubscriptionTracker, 'current'>,
  request: ScheduleRequest,
  mayStart: boolean,
): Promise<ScheduleOutcome> {
  const { stream, command, metadata } = request;
  for (let tries = 1; ; tries++) {
    const stored = await readState(ctx.store, ctx.registry, stream, delivery.decider);
    const scheduled = delivery.decider.decide(command, stored.state);
    if (scheduled.length === 0) return { written: false };
    const queue = ctx.queues.heldOr(stream, stored.events);
    const start =
      mayStart && !queue.busy ? startNow(ctx, subscriptions, command, stored.state, scheduled) : undefined;
    if (start) {
      queue.busy = true;
      ctx.queues.keepOrDrop(queue);
    }
    const events = [...scheduled, ...(start?.events ?? [])];
    try {
      const result = await ctx.store.append(
        stream,
        [
          ...toNewEvents(ctx.registry, scheduled, metadata),
          ...toNewEvents(ctx.registry, start?.events ?? [], { ...metadata, causationId: null }),
        ],
        { expectedRevision: stored.revision < 0 ? 'no_stream' : stored.revision },
      );
      ctx.queues.recordOwnAfterRead(queue, stored.events, {
        events,
        position: result.position,
        correlationId: metadata.correlationId,
      });
      ctx.queues.keepOrDrop(queue);
    } catch (err) {
      if (start) {
        ctx.limiter.release(start.sub.webhook_id);
        queue.busy = false;
        ctx.queues.keepOrDrop(queue);
      }
      if (err instanceof WrongExpectedVersionError && tries < CONFLICT_TRIES) continue;
      throw err;
    }
    if (!start) return { written: true, queue, started: undefined };
    const started = delivery.findDelivery(queue.state, command.delivery_id) as delivery.Delivery;
    return {
      written: true,
      queue,
      started: { queue, delivery: started, sub: start.sub, channel: start.channel },
    };
  }
}

/**
 * The first attempt's start, when the scheduled delivery is the queue's head, its subscription is
 * enabled, its channel opens and a slot is free (taken here); otherwise the worker starts it as any
 * other attempt, once it can.
 */
function startNow(
  ctx: AttemptContext,
  subscriptions: Pick<SubscriptionTracker, 'current'>,
  command: ScheduleDeliveryCommand,
  state: delivery.DeliveryQueueState,
  scheduled: delivery.WebhookDeliveryEvent[],
):
  | { events: delivery.WebhookDeliveryEvent[]; sub: webhooks.WebhookSubscription; channel: WebhookChannel }
  | undefined {
  const after = scheduled.reduce(delivery.decider.evolve, state);
  if (delivery.head(after)?.delivery_id !== command.delivery_id) return undefined;
  const sub = subscriptions.current(command.webhook_id);
  if (!sub || sub.removed || !sub.enabled) return undefined;
  let channel: WebhookChannel;
  try {
    channel = ctx.sender.open(sub);
  } catch {
    return undefined; // the worker's own attempt meets the same error, and reports it
  }
  if (!ctx.limiter.tryAcquire(sub.webhook_id)) return undefined;
  try {
    const events = delivery.decider.decide(
      {
        type: 'StartAttempt',
        delivery_id: command.delivery_id,
        lease_ms: ctx.leaseMs,
        dispatcher_id: ctx.dispatcherId,
        at: command.at,
      },
      after,
    );
    return { events, sub, channel };
  } catch (err) {
    ctx.limiter.release(sub.webhook_id);
    if (err instanceof DomainError) return undefined;
    throw err;
  }
}
