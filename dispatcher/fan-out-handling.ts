/**
 * How the fan-out handles the messages its group hands out
 * (docs/operations.md, "The fan-out's group"). Events of one cart are handled one after another, in
 * the order the group hands them out, so a queue receives its deliveries in cart order; other carts
 * proceed beside them (the consumer's buffer).
 *
 * Nothing is parked. A cart event whose deliveries cannot be scheduled (the store failing, a bug the
 * next deploy fixes) is tried again in place, after pauses that double up to a cap
 * (`fan-out-retry.ts`), until it succeeds: handing it back to the group would let the cart's later
 * events pass it, and the group would park it after its retries, where nothing sends it. Held past the
 * group's message timeout, the message is handed out again by the group (its retry count grows; the
 * group's bound on it is the largest there is, so it is never reached): such a copy joins the handling
 * under way instead of starting another or taking a place in the cart's line, and is acknowledged
 * with it (at once, when it joins while the handling's acknowledgements are under way). A handling
 * whose every copy came from a consumer that has since dropped ends unacknowledged: the group hands
 * the event out again, to the consumer that joins next.
 */
import type { Logger } from 'pino';
import type { Clock } from '../domain/clock.ts';
import type { PersistentMessage, RecordedEvent } from '../eventstore/port.ts';
import {
  createPauses,
  createRetrying,
  type RetryingView,
  type RetryPacing,
  retryPause,
} from './fan-out-retry.ts';

/** The consumer a copy came from: a number per consumer joined, `KEPT` for one alive until stop. */
export type Generation = number;
export const KEPT: Generation = 0;

export interface HandlingStats {
  /** Cart events handled (acknowledged). */
  events: number;
  /** Deliveries scheduled (written: a repeat after a crash finds its delivery and writes nothing). */
  scheduled: number;
  /** Attempts that failed. */
  errors: number;
}

export interface HandlingOptions {
  /** Schedules the deliveries an event owes; answers how many were written. */
  scheduleOwed(event: RecordedEvent): Promise<number>;
  clock: Clock;
  logger?: Logger;
  pacing?: RetryPacing;
}

interface Handling {
  event: RecordedEvent;
  copies: Array<{ message: PersistentMessage; generation: Generation }>;
  run: Promise<void>;
  /** Its deliveries are scheduled and its copies are being acknowledged: a copy that joins now is acked at once. */
  acknowledging: boolean;
}

export function createHandlings(options: HandlingOptions) {
  const { scheduleOwed, logger } = options;
  const stats: HandlingStats = { events: 0, scheduled: 0, errors: 0 };
  /** The last handling queued per cart stream: the next event of that cart waits for it. */
  const chains = new Map<string, Promise<void>>();
  /** Handlings queued or under way, by event id: a copy handed out again joins its handling. */
  const handlings = new Map<string, Handling>();
  const pauses = createPauses(options.clock);
  const retrying = createRetrying();
  /** The consumer whose copies can still be acknowledged (none while it is down). */
  let live: Generation | undefined;
  let stopped = false;

  const alive = (h: Handling) =>
    !stopped && h.copies.some((c) => c.generation === KEPT || c.generation === live);

  /**
   * Acknowledges every copy; false when none could be (its consumer is gone). A copy that joins while
   * the acks are under way is acknowledged by `receive` itself.
   */
  async function acknowledge(h: Handling): Promise<boolean> {
    h.acknowledging = true;
    const answers = await Promise.allSettled(h.copies.map((c) => c.message.ack()));
    if (answers.some((a) => a.status === 'fulfilled')) return true;
    const failed = answers.find((a) => a.status === 'rejected');
    logger?.warn(
      { err: failed?.reason, event: h.event.id },
      'webhook fan-out: the acknowledgement failed; the group hands the event out again',
    );
    return false;
  }

  async function handle(h: Handling): Promise<void> {
    const { event } = h;
    const handedOutBefore = h.copies[0].message.retryCount;
    try {
      for (let attempt = 0; alive(h); attempt++) {
        let written: number;
        try {
          written = await scheduleOwed(event);
        } catch (err) {
          stats.errors += 1;
          retrying.add(event);
          const pauseMs = retryPause(handedOutBefore + attempt, options.pacing);
          logger?.warn(
            { err, event: event.id, stream: event.streamId, attempt: attempt + 1, pause_ms: pauseMs },
            'webhook fan-out of a cart event failed; trying it again (it is never parked)',
          );
          await pauses.pause(event.id, pauseMs);
          continue;
        }
        stats.scheduled += written;
        if (!(await acknowledge(h))) return;
        stats.events += 1;
        if (attempt > 0) {
          logger?.info(
            { event: event.id, stream: event.streamId, attempts: attempt + 1 },
            'webhook fan-out of a cart event succeeded after failures',
          );
        }
        return;
      }
    } finally {
      handlings.delete(event.id);
      retrying.delete(event.id);
    }
  }

  return {
    stats,
    /**
     * Takes a message the group handed out: queued behind its cart's earlier events, or joined to its
     * handling under way. Returns the handling's end for a first copy, at once for a copy joined.
     */
    receive(message: PersistentMessage, generation: Generation): { joined: boolean; run: Promise<void> } {
      const joined = handlings.get(message.event.id);
      if (joined) {
        joined.copies.push({ message, generation });
        // The handling has taken its list of copies to acknowledge: this one is answered now, or the
        // group would hold it (and the checkpoint behind it) until its message timeout.
        if (joined.acknowledging) {
          message.ack().catch((err: unknown) => {
            logger?.warn(
              { err, event: message.event.id },
              'webhook fan-out: the acknowledgement failed; the group hands the event out again',
            );
          });
        }
        return { joined: true, run: joined.run };
      }
      const key = message.event.streamId;
      const h = { event: message.event, copies: [{ message, generation }], acknowledging: false } as Handling;
      handlings.set(message.event.id, h);
      h.run = (chains.get(key) ?? Promise.resolve()).then(() => handle(h));
      chains.set(key, h.run);
      void h.run.finally(() => {
        if (chains.get(key) === h.run) chains.delete(key);
      });
      return { joined: false, run: h.run };
    },
    /** The consumer whose copies count from now on (undefined while none is joined). */
    setLive(generation: Generation | undefined): void {
      live = generation;
    },
    pause: (key: string, ms: number) => pauses.pause(key, ms),
    retrying: (): RetryingView => retrying.view(),
    tick: () => pauses.tick(),
    /** Ends the pauses; handlings under way end unacknowledged. */
    async stop(): Promise<void> {
      stopped = true;
      pauses.wakeAll();
      await Promise.allSettled([...chains.values()]);
    },
  };
}
