/**
 * The fan-out's group at start (docs/operations.md, "The fan-out's group"): found among the groups on `$all`,
 * its settings brought up to date in place, or made anew. A group's filter and start cannot change, so
 * they are in its name (`webhooks/fan-out-group.ts`); a group of another definition of the fan-out
 * (an earlier version's, or a later one's after a rollback) is migrated from:
 *
 * 1. the new group is created after the lowest point the others have handled everything up to (their
 *    checkpoint), so nothing they acknowledged comes again in bulk and nothing they had not is lost
 *    (scheduling is idempotent: the few handled after the checkpoint was written are found scheduled).
 *    One that reports no checkpoint while events of this definition follow its start may be loading
 *    it (EventStoreDB, just after a restart): the migration waits (`waiting`) rather than take it
 *    from its start and fan out the whole log again, until the caller decides it has none;
 * 2. the messages parked in the others are handled through the fan-out (`retireGroups`), each read
 *    again from its stream for its own position;
 * 3. then the others are deleted. Their consumers (another dispatcher still running the other version)
 *    lose the group and keep asking for it, and `/readyz` says so, until that dispatcher is replaced.
 *
 * Two dispatchers doing this at once find each other's group made or deleted, which is what they
 * wanted. Anything the other group parks between steps 1 and 3 was not yet handled at the checkpoint
 * the new group starts after, so the new group delivers it too.
 *
 * What is parked in the fan-out's own group is handled through the fan-out as well, and only then
 * replayed, to clear it (`settleParkedMessages`).
 */
import type { Logger } from 'pino';
import type { Clock } from '../domain/clock.ts';
import {
  type EventStore,
  PersistentSubscriptionExistsError,
  type PersistentSubscriptionInfo,
  PersistentSubscriptionNotFoundError,
  type RecordedEvent,
  StreamNotFoundError,
} from '../eventstore/port.ts';
import { type GroupDefinition, groupNameOf, isGroupOf, resumeAfter } from '../webhooks/fan-out-group.ts';
import { type RetryPacing, retryPause } from './fan-out-retry.ts';

/** What the fan-out asks of its group's settings. */
export interface FanOutGroupSettings {
  maxRetryCount: number;
  messageTimeoutMs: number;
}

export interface FanOutGroupOptions {
  store: EventStore;
  /** The base of the group's name (`webhook-fan-out`). */
  base: string;
  definition: GroupDefinition;
  settings: FanOutGroupSettings;
  logger?: Logger;
  /**
   * Take a group of another definition that reports no checkpoint from its start: the caller waited
   * long enough for a group still loading to show it. Otherwise such a group makes the migration wait.
   */
  noCheckpointMeansNone?: boolean;
}

/** The migration waits: these groups of another definition report no checkpoint yet. */
export interface WaitingGroup {
  group: string;
  waiting: PersistentSubscriptionInfo[];
}

export interface PreparedGroup {
  /** The group of this definition, ready to be joined. */
  group: string;
  /** Messages parked in it (before it was set never to park, or by hand) as its info counts them. */
  parked: number;
  /** Groups of other definitions: their parked messages are to be handled, then they are deleted. */
  retired: PersistentSubscriptionInfo[];
}

/** Settings of `info` that differ from what the fan-out asks, as `name: [was, now]`. */
function changedSettings(info: PersistentSubscriptionInfo, wanted: FanOutGroupSettings) {
  const changed: Record<string, [unknown, unknown]> = {};
  for (const name of ['maxRetryCount', 'messageTimeoutMs'] as const) {
    if (info.settings[name] !== wanted[name]) changed[name] = [info.settings[name], wanted[name]];
  }
  for (const name of info.outdated) changed[name] = ['outdated', 'as the adapter makes groups now'];
  return changed;
}

/**
 * Groups of `retired` that report no checkpoint while events of `definition` follow their start: taken
 * from their start, the new group would hand those out again. One that has none has processed
 * nothing this definition reads, and its start is as good as a checkpoint.
 */
async function unknownCheckpoints(
  store: EventStore,
  retired: readonly PersistentSubscriptionInfo[],
  definition: GroupDefinition,
): Promise<PersistentSubscriptionInfo[]> {
  const unknown: PersistentSubscriptionInfo[] = [];
  for (const g of retired) {
    if (g.lastCheckpointedPosition !== undefined) continue;
    const [next] = await store.readAll({ after: resumeAfter(g), maxCount: 1, filter: definition.filter });
    if (next) unknown.push(g);
  }
  return unknown;
}

/**
 * Finds, updates or makes the fan-out's group; says what else is to be retired, or that the migration
 * waits for the checkpoint of a group of another definition.
 */
export async function prepareFanOutGroup(options: FanOutGroupOptions): Promise<PreparedGroup | WaitingGroup> {
  const { store, base, definition, settings, logger } = options;
  const group = groupNameOf(base, definition);
  const ours = (await store.listPersistentSubscriptions()).filter((g) => isGroupOf(base, g.group));
  const current = ours.find((g) => g.group === group);
  const retired = ours.filter((g) => g.group !== group);
  const retiring = retired.map((g) => ({ group: g.group, parked: g.parkedCount }));
  if (current) {
    if (retired.length > 0) {
      logger?.warn(
        { group, retiring },
        'webhook fan-out group of another definition found beside this one: it is deleted once its parked messages are handled',
      );
    }
    const changed = changedSettings(current, settings);
    if (Object.keys(changed).length > 0) {
      // EventStoreDB restarts the group: other dispatchers' consumers drop and join again.
      await store.updatePersistentSubscription(group, settings);
      logger?.info({ group, changed }, 'webhook fan-out group settings updated');
    }
    return { group, parked: current.parkedCount, retired };
  }
  const unknown = await unknownCheckpoints(store, retired, definition);
  if (unknown.length > 0 && !options.noCheckpointMeansNone) return { group, waiting: unknown };
  if (unknown.length > 0) {
    logger?.warn(
      { group, from_start: unknown.map((g) => ({ group: g.group, from: g.settings.from })) },
      'webhook fan-out group of another definition still reports no checkpoint: taken from its start (what it handled is found scheduled)',
    );
  }
  if (retired.length > 0) {
    logger?.warn(
      { group, retiring },
      'webhook fan-out group of another definition found: a group of this one is made after its checkpoint, and the other is deleted once its parked messages are handled',
    );
  }
  const from =
    retired.length === 0 ? definition.from : { after: Math.min(...retired.map((g) => resumeAfter(g))) };
  try {
    await store.createPersistentSubscription(group, { from, filter: definition.filter, ...settings });
    logger?.info({ group, from }, 'webhook fan-out group created');
  } catch (err) {
    // Another dispatcher made it meanwhile.
    if (!(err instanceof PersistentSubscriptionExistsError)) throw err;
  }
  return { group, parked: 0, retired };
}

/**
 * How long, on the clock, a migration waits for a group of another definition to report its
 * checkpoint before it takes that group as having none: EventStoreDB reports none while it loads a
 * group after a restart, which takes seconds.
 */
export const CHECKPOINT_WAIT_MS = 60_000;

export interface CheckpointWait {
  clock: Clock;
  /** When the first look was, on the clock (ms). */
  since: number;
  pacing?: RetryPacing;
  /** Resolves after `ms` on the clock, or at once when the fan-out stops. */
  pause(ms: number): Promise<void>;
  stopped(): boolean;
}

/**
 * The migration waits for a group of another definition to report its checkpoint: looks again after
 * pauses that double (`retryPause`) and, once `CHECKPOINT_WAIT_MS` have passed on the clock since the
 * first look, takes a group that still reports none from its start. Undefined when stopped first.
 */
export async function prepareWhenCheckpointed(
  first: WaitingGroup,
  options: FanOutGroupOptions & CheckpointWait,
): Promise<PreparedGroup | undefined> {
  const { clock, since, logger } = options;
  let prepared: PreparedGroup | WaitingGroup = first;
  for (let looks = 0; 'waiting' in prepared; looks++) {
    const pauseMs = retryPause(looks, options.pacing);
    logger?.warn(
      {
        group: prepared.group,
        waiting: prepared.waiting.map((g) => g.group),
        waited_ms: clock.now().getTime() - since,
        pause_ms: pauseMs,
      },
      'webhook fan-out group of another definition reports no checkpoint (loading it after an EventStoreDB restart?): the migration waits',
    );
    await options.pause(pauseMs);
    if (options.stopped()) return undefined;
    const noCheckpointMeansNone = clock.now().getTime() - since >= CHECKPOINT_WAIT_MS;
    prepared = await prepareFanOutGroup({ ...options, noCheckpointMeansNone });
  }
  return prepared;
}

/** The event a parked message stands for, read from its own stream (undefined when it is gone). */
async function parkedEvent(store: EventStore, parked: RecordedEvent): Promise<RecordedEvent | undefined> {
  try {
    const [read] = await store.readStream(parked.streamId, { fromRevision: parked.revision, maxCount: 1 });
    return read?.id === parked.id ? read : undefined;
  } catch (err) {
    if (err instanceof StreamNotFoundError) return undefined;
    throw err;
  }
}

/**
 * Hands every message parked in `group` to `handle`, each read again from its stream for its own
 * position. Answers how many were parked (those gone from their streams included), or undefined when
 * `handle` answered that one was not handled (the fan-out is stopping). A group that is gone has none.
 */
async function handleParkedMessages(
  store: EventStore,
  group: string,
  handle: (event: RecordedEvent) => Promise<boolean>,
  logger?: Logger,
): Promise<number | undefined> {
  let parked: RecordedEvent[] = [];
  try {
    parked = (await store.listParkedMessages(group)).map((m) => m.event);
  } catch (err) {
    if (!(err instanceof PersistentSubscriptionNotFoundError)) throw err;
  }
  for (const message of parked) {
    const event = await parkedEvent(store, message);
    if (!event) {
      logger?.warn(
        { group, event: message.id },
        'a parked cart event is gone from its stream: nothing to send',
      );
      continue;
    }
    if (!(await handle(event))) return undefined;
  }
  return parked.length;
}

/**
 * The messages parked in the fan-out's own group (before a dispatcher set it never to park, or by
 * hand): each is handed to `handle` (the fan-out schedules its deliveries), and only once all are,
 * the group replays them, to clear its parked list. Not the replay alone: EventStoreDB puts the
 * replayed messages in the group's memory and truncates the parked list at once, while the group's
 * checkpoint is past them, so a group rebuilt before they are acknowledged (a restart, a leader
 * change, another dispatcher's settings update) would drop them for good. The replayed copies find
 * their deliveries scheduled. Answers false when `handle` did not handle one (the fan-out is stopping).
 */
export async function settleParkedMessages(
  store: EventStore,
  group: string,
  handle: (event: RecordedEvent) => Promise<boolean>,
  logger?: Logger,
): Promise<boolean> {
  const parked = await handleParkedMessages(store, group, handle, logger);
  if (parked === undefined) return false;
  if (parked === 0) return true;
  await store.replayParkedMessages(group).catch((err: unknown) => {
    // Another dispatcher migrated away from this group meanwhile: its messages are handled.
    if (!(err instanceof PersistentSubscriptionNotFoundError)) throw err;
  });
  logger?.info(
    { group, parked },
    'webhook fan-out group: the deliveries of its parked messages are scheduled, and the messages replayed to clear them',
  );
  return true;
}

/**
 * Hands every message parked in the retired groups to `handle`, then deletes those groups. `handle`
 * answers whether the event was handled; when it was not (the fan-out is stopping), the groups are
 * kept, for the next start to finish. Answers whether they are gone.
 */
export async function retireGroups(
  store: EventStore,
  retired: readonly PersistentSubscriptionInfo[],
  handle: (event: RecordedEvent) => Promise<boolean>,
  logger?: Logger,
): Promise<boolean> {
  for (const { group } of retired) {
    const parked = await handleParkedMessages(store, group, handle, logger);
    if (parked === undefined) return false;
    try {
      await store.deletePersistentSubscription(group);
      logger?.info({ group, parked }, 'webhook fan-out group of another definition deleted');
    } catch (err) {
      // Another dispatcher deleted it meanwhile.
      if (!(err instanceof PersistentSubscriptionNotFoundError)) throw err;
    }
  }
  return true;
}
