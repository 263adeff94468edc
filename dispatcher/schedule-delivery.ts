/**
 * Scheduling a delivery the fan-out owes (docs/webhooks.md, "Order, isolation, durability"). It is
 * decided on the queue as stored (its whole stream, so a delivery scheduled before, by a message
 * handed out again after a crash, is found and nothing is written) and appended with the stream's
 * revision. When this worker has nothing of the queue under way and the queue's head can leave at
 * once (`headStart`: mostly the new delivery itself, its subscription enabled, one of its slots free),
 * that attempt's start goes in the same append: one commit and one wake-up fewer per webhook. The
 * expected revision still makes one dispatcher the sender, and a crash before the send leaves an
 * attempt in flight whose lease runs out, as any attempt's does.
 */
import { toNewEvents } from '../application/command-handler.ts';
import { readState } from '../application/read-state.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import { type AppendResult, WrongExpectedVersionError } from '../eventstore/port.ts';
import {
  type AttemptContext,
  appendWithStart,
  headStart,
  type StartedAttempt,
  startedOf,
} from './delivery-attempt.ts';
import type { Queue } from './delivery-queues.ts';
import type { ScheduleRequest } from './fan-out-schedule.ts';
import type { SubscriptionTracker } from './subscription-tracker.ts';

export type ScheduleOutcome =
  | { written: false }
  | { written: true; queue: Queue; started: StartedAttempt | undefined };

/** Conflicts with this worker's own appends to the queue (an attempt's result) before it gives up. */
const CONFLICT_TRIES = 20;

/**
 * Schedules `request`'s delivery; starts the queue's head too when `mayStart` and the queue allows
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
    const queue = await ctx.queues.heldOr(stream, stored);
    // A queue that would not fit the window goes cold: its first attempt waits for a fill.
    const fits = ctx.queues.held.get(stream) === queue || ctx.queues.hasRoom();
    const start =
      mayStart && fits && !queue.busy
        ? headStart(ctx, subscriptions, scheduled.reduce(delivery.decider.evolve, stored.state), command.at)
        : undefined;
    if (start) {
      queue.busy = true;
      ctx.queues.keepOrDrop(queue);
    }
    const events = [...scheduled, ...(start?.events ?? [])];
    // A start carries its own delivery's correlation: the new one's, or that of an earlier one held.
    const correlationId = (start && queue.correlation.get(start.deliveryId)) ?? metadata.correlationId;
    const toAppend = [
      ...toNewEvents(ctx.registry, scheduled, metadata),
      ...toNewEvents(ctx.registry, start?.events ?? [], { ...metadata, correlationId, causationId: null }),
    ];
    let result: AppendResult;
    try {
      result = await appendWithStart(ctx, stream, toAppend, stored.revision, start);
    } catch (err) {
      if (start) {
        queue.busy = false;
        ctx.queues.keepOrDrop(queue);
      }
      if (err instanceof WrongExpectedVersionError && tries < CONFLICT_TRIES) continue;
      throw err;
    }
    ctx.queues.recordOwnAfterRead(queue, stored, {
      events,
      revision: result.nextExpectedRevision,
      position: result.position,
      correlationId: metadata.correlationId,
    });
    ctx.queues.keepOrDrop(queue);
    return { written: true, queue, started: start && startedOf(queue, start) };
  }
}
