/**
 * Finished webhook deliveries' retention in the log (docs/operations.md, "Retention"): a delivery
 * queue (`webhookdelivery-<webhook_id>_<cart_uuid>`) whose every delivery is delivered or parked, and
 * whose last event happened `PDS_DELIVERY_LOG_RETENTION` ago, is deleted whole: its bodies, attempts
 * and excerpts. A queue with a delivery pending, failed or in flight is never touched, nor one an
 * operator asked to send again within the retention, nor any other stream (business events are kept
 * for good; the fan-out's position is its persistent subscription's, outside the streams).
 *
 * The job walks the queues' events in log order from a cursor kept in the dispatcher store, up to the
 * first that happened within the retention: each queue is read and judged once, at the oldest of its
 * events the walk meets; one that cannot go yet is met again at its later events, once those are old
 * enough. So a run reads what it deletes, and the queues still within their time are not read at all.
 * The cursor also moves past the other streams' events the walk read: to just before the first queue
 * event still within the retention, or to the log's head when no queue event is left, so a run (and
 * the first, at every start) does not read the log again from the last queue it deleted.
 * A run reads `QUEUES_PER_RUN` queues at most and saves the cursor after each page, so a backlog
 * drains over the hourly runs. Before each deletion the job appends a `WebhookDeliveryQueuePruned`
 * record (domain/webhook-delivery-retention.ts), so a projection that read the queue in part deletes
 * what it read. Each deletion expects the last event read (its revision and position): a queue written meanwhile
 * stays (its
 * deliveries, finished a retention ago, are gone from the read model: no route redelivers them). Times are the events' own
 * (when scheduled, attempted, parked), judged against the clock: the same rule the `webhook_deliveries`
 * projection prunes its documents by, against its events' times.
 */
import type { Clock } from '../domain/clock.ts';
import type { EventRegistry } from '../domain/events.ts';
import * as delivery from '../domain/webhook-delivery.ts';
import * as retention from '../domain/webhook-delivery-retention.ts';
import {
  type EventStore,
  newEventId,
  type RecordedEvent,
  WrongExpectedVersionError,
} from '../eventstore/port.ts';
import type { ReadStore } from '../projections/read-store.ts';
import { appendRetrying, toNewEvents } from './command-handler.ts';
import { domainEventOf, readState } from './read-state.ts';

/** The cursor's name in the dispatcher store: the position of the last queue event judged. */
export const DELIVERY_RETENTION_CURSOR = 'delivery-retention';

/** Queue events read at a time. */
const PAGE = 500;

/**
 * Queues one run reads at most: a backlog (the first run after an upgrade, a shorter retention) is
 * worked through over the hourly runs, never in one run that holds a set of every queue it met.
 */
export const QUEUES_PER_RUN = 20_000;

export interface DeliveryRetentionOptions {
  store: EventStore;
  /** Where the cursor is kept (the dispatcher store). */
  state: ReadStore;
  registry: EventRegistry;
  clock: Clock;
  /** `PDS_DELIVERY_LOG_RETENTION`, in ms. */
  retentionMs: number;
  /** Queues one run reads at most (`QUEUES_PER_RUN`). */
  queuesPerRun?: number;
}

/** What a run pruned from the log. */
export interface PrunedDeliveries {
  /** Delivery queues deleted. */
  queues: number;
  /** Deliveries they held. */
  deliveries: number;
  /** Their events. */
  events: number;
}

type Judged = { pruned: PrunedDeliveries } | 'kept' | 'later';

/** One run: deletes the queues finished before the retention, from the cursor on, `QUEUES_PER_RUN` at most. */
export async function pruneFinishedDeliveries(options: DeliveryRetentionOptions): Promise<PrunedDeliveries> {
  const { store, state, clock } = options;
  const cutoff = clock.now().getTime() - options.retentionMs;
  const pruned: PrunedDeliveries = { queues: 0, deliveries: 0, events: 0 };
  const stored = await state.getCheckpoint(DELIVERY_RETENTION_CURSOR);
  let cursor = stored?.position ?? 0;
  let read = 0;
  const save = () =>
    state.setCheckpoint(DELIVERY_RETENTION_CURSOR, {
      position: cursor,
      events: (stored?.events ?? 0) + pruned.events,
      updated_at: clock.now().toISOString(),
    });
  for (;;) {
    // Every queue event up to it is in the page when the page is short: the cursor may move there.
    const head = await store.headPosition();
    const page = await store.readAll({
      after: cursor,
      filter: { streamPrefixes: [delivery.STREAM_PREFIX] },
      maxCount: PAGE,
    });
    // Judged once per page: a queue met again on a later page is read again (found gone, or kept).
    const judged = new Set<string>();
    for (const event of page) {
      if (happenedAt(options.registry, event) > cutoff) {
        // None between the cursor and it: the next run reads from it, not the other streams before it.
        cursor = Math.max(cursor, event.position - 1);
        await save();
        return pruned;
      }
      if (!judged.has(event.streamId)) {
        // The run's share is read: the next run (an hour later) goes on from here.
        if (read === (options.queuesPerRun ?? QUEUES_PER_RUN)) {
          await save();
          return pruned;
        }
        judged.add(event.streamId);
        read += 1;
        const outcome = await judge(options, event.streamId, cutoff);
        // The store cannot delete it yet (the embedded store's last event): the next run starts here.
        if (outcome === 'later') {
          await save();
          return pruned;
        }
        if (outcome !== 'kept') {
          pruned.queues += outcome.pruned.queues;
          pruned.deliveries += outcome.pruned.deliveries;
          pruned.events += outcome.pruned.events;
        }
      }
      cursor = event.position;
    }
    if (page.length < PAGE) {
      cursor = Math.max(cursor, head);
      break;
    }
    // A run stopped half-way (a crash, a stop) goes on from its last page.
    await save();
  }
  await save();
  return pruned;
}

/** When a queue event happened (epoch ms), by its data. */
function happenedAt(registry: EventRegistry, event: RecordedEvent): number {
  return Date.parse(delivery.eventTime(domainEventOf<delivery.WebhookDeliveryEvent>(registry, event)));
}

/** Reads one queue and deletes it when every delivery is finished and its last event is past the cutoff. */
async function judge(options: DeliveryRetentionOptions, stream: string, cutoff: number): Promise<Judged> {
  const { store, registry } = options;
  const queue = await readState(store, registry, stream, delivery.decider);
  const last = queue.events.at(-1);
  if (!last || !queue.state.exists) return 'kept'; // deleted already (by another dispatcher)
  if (delivery.head(queue.state) || happenedAt(registry, last) > cutoff) return 'kept';
  const ids = queue.state.deliveries.map((d) => d.delivery_id);
  try {
    // First the record, then the deletion: a projection that read the queue in part meets the record
    // after it, whatever the order (domain/webhook-delivery-retention.ts).
    await recordPruned(options, stream, ids, queue.revision);
    if (!(await store.deleteStream(stream, { revision: queue.revision, position: last.position }))) {
      return 'later';
    }
  } catch (err) {
    // Written meanwhile (a redelivery, a new delivery): met again at those events.
    if (err instanceof WrongExpectedVersionError) return 'kept';
    throw err;
  }
  return { pruned: { queues: 1, deliveries: ids.length, events: queue.events.length } };
}

/** The actor the retention's records name. */
const RETENTION_ACTOR = { type: 'system', id: 'retention' } as const;

/** Appends the queue's `WebhookDeliveryQueuePruned`, kept as long as the deliveries were. */
async function recordPruned(
  options: DeliveryRetentionOptions,
  stream: string,
  deliveryIds: string[],
  revision: number,
): Promise<void> {
  const at = options.clock.now();
  const queue = delivery.parseStreamId(stream);
  if (!queue) throw new Error(`not a delivery queue: ${stream}`);
  const [record] = toNewEvents(
    options.registry,
    [
      {
        type: 'WebhookDeliveryQueuePruned',
        data: { queue: stream, ...queue, delivery_ids: deliveryIds, revision, pruned_at: at.toISOString() },
      },
    ],
    { correlationId: newEventId(), causationId: null, actor: RETENTION_ACTOR, at: at.toISOString() },
  );
  await appendRetrying(options.store, retention.streamId(at), [record], {
    expectedRevision: 'any',
    maxAgeMs: options.retentionMs,
  });
}
