/**
 * Scheduling a delivery on a queue another delivery worker owns (docs/webhooks.md, "Scale"): the
 * fan-out's worker appends the `Scheduled` event alone, decided on the queue as stored and appended with
 * its revision as any scheduling is, and the owning worker, following the log, picks it up and sends
 * it. No attempt starts in the append: only the owner starts attempts on its queues.
 */
import { toNewEvents } from '../application/command-handler.ts';
import { readState } from '../application/read-state.ts';
import type { EventRegistry } from '../domain/events.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import { type EventStore, WrongExpectedVersionError } from '../eventstore/port.ts';
import type { ScheduleRequest } from './fan-out-schedule.ts';

/** Conflicts (the owner appending an attempt's start or result meanwhile) before it gives up. */
const CONFLICT_TRIES = 20;

/** Appends `request`'s delivery unless the queue has it already; answers whether it was written. */
export async function scheduleElsewhere(
  store: EventStore,
  registry: EventRegistry,
  request: ScheduleRequest,
): Promise<boolean> {
  const { stream, command, metadata } = request;
  for (let tries = 1; ; tries++) {
    const stored = await readState(store, registry, stream, delivery.decider);
    const scheduled = delivery.decider.decide(command, stored.state);
    if (scheduled.length === 0) return false;
    try {
      await store.append(stream, toNewEvents(registry, scheduled, metadata), {
        expectedRevision: stored.revision < 0 ? 'no_stream' : stored.revision,
      });
      return true;
    } catch (err) {
      if (err instanceof WrongExpectedVersionError && tries < CONFLICT_TRIES) continue;
      throw err;
    }
  }
}
