/**
 * The fan-out and finished deliveries' retention (docs/operations.md, "The fan-out's group"): a cart
 * event older than `PDS_DELIVERY_LOG_RETENTION` less a margin is acknowledged without scheduling
 * anything. A delivery queue is pruned from the log only once its last event is a retention old, and
 * its deliveries were scheduled after their cart events, so every pruned delivery's cart event is
 * older than that: a group made again from its start (deleted by hand, or taken from its start by a
 * migration) never sends a pruned webhook a second time, under its old id and out of order.
 */
import type { Logger } from 'pino';
import type { Clock } from '../domain/clock.ts';
import type { RecordedEvent } from '../eventstore/port.ts';

/**
 * When a cart event happened: its command's time (`occurred_at`, on the service's clock, as the
 * deliveries' own times are), else when the store recorded it.
 */
function happenedAt(event: RecordedEvent): number {
  const occurred = Date.parse(event.metadata.occurred_at);
  return Number.isNaN(occurred) ? Date.parse(event.recordedAt) : occurred;
}

/**
 * How much younger than the retention a cart event may be and still be skipped: the retention job
 * runs hourly on the dispatcher's clock, and the cart event's time is the API process's, so an hour
 * covers the job's lag and the clocks' skew. The retention is at least 24 hours (cli/config.ts).
 */
export const FAN_OUT_SKIP_MARGIN_MS = 3_600_000;

/** Whether a cart event is past what the fan-out schedules, at `now` (epoch ms). */
export function beyondRetention(event: RecordedEvent, now: number, retentionMs: number): boolean {
  return now - happenedAt(event) >= retentionMs - FAN_OUT_SKIP_MARGIN_MS;
}

/**
 * `schedule` with the cart events past the retention acknowledged unsent (none without
 * `retentionMs`): counted, the first logged at info, the rest at debug.
 */
export function skippingOld(
  schedule: (event: RecordedEvent) => Promise<number>,
  options: {
    clock: Clock;
    retentionMs: number | undefined;
    logger?: Logger;
    onSkipped?(event: RecordedEvent): void;
  },
): { schedule(event: RecordedEvent): Promise<number>; skipped(): number } {
  const { clock, retentionMs, logger } = options;
  let skipped = 0;
  return {
    async schedule(event) {
      if (retentionMs === undefined || !beyondRetention(event, clock.now().getTime(), retentionMs)) {
        return schedule(event);
      }
      // Its deliveries may be pruned from the log: scheduling them again would send them twice.
      const where = { event: event.id, stream: event.streamId, occurred_at: event.metadata.occurred_at };
      if (skipped++ === 0) {
        logger?.info(where, 'webhook fan-out: skipping cart events older than PDS_DELIVERY_LOG_RETENTION');
      } else {
        logger?.debug(where, 'webhook fan-out: skipped an old cart event');
      }
      options.onSkipped?.(event);
      return 0;
    },
    skipped: () => skipped,
  };
}
