/**
 * The webhook fan-out's persistent subscription group (docs/operations.md, "The fan-out's group"): what it
 * reads, and the name that stands for it. EventStoreDB cannot change a `$all` group's filter or start,
 * nor report its filter, so the name carries them: a group of another definition is another group,
 * which the dispatcher migrates from at start (`dispatcher/fan-out-group.ts`). The dispatcher and the
 * admin API both know the group by this module.
 */
import { createHash } from 'node:crypto';
import {
  type EventFilter,
  type EventStore,
  PersistentSubscriptionNotFoundError,
  type SubscriptionStart,
} from '../eventstore/port.ts';

/** The base of the group's name. */
export const FAN_OUT_GROUP = 'webhook-fan-out';

/** What cannot change in a group once it is made. */
export interface GroupDefinition {
  /** Where a new group starts (a migrated one starts after its predecessor's checkpoint instead). */
  from: SubscriptionStart;
  filter: EventFilter;
}

/** The events the fan-out turns into webhooks (docs/webhooks.md, "Events and bodies"). */
export const FAN_OUT_DEFINITION: GroupDefinition = {
  from: 'start',
  filter: { eventTypes: ['CartStatusChanged', 'CartAbandoned'] },
};

/**
 * The hash of the definition the group had before its name carried one (the definition above, as it
 * still is): that group keeps the bare base name, so the upgrade that brought names found it as it was.
 */
const FIRST_DEFINITION_HASH = '1aebc3a0';

/** A short hash of a definition; the order of its types or prefixes does not count. */
export function definitionHash(definition: GroupDefinition): string {
  const { filter } = definition;
  const canonical = JSON.stringify({
    from: definition.from,
    filter:
      'eventTypes' in filter
        ? { eventTypes: [...filter.eventTypes].sort() }
        : { streamPrefixes: [...filter.streamPrefixes].sort() },
  });
  return createHash('sha256').update(canonical).digest('hex').slice(0, 8);
}

/** The group's name for a definition: `<base>-<hash>`, or the bare base for the first definition. */
export function groupNameOf(base: string, definition: GroupDefinition): string {
  const hash = definitionHash(definition);
  return hash === FIRST_DEFINITION_HASH ? base : `${base}-${hash}`;
}

/** Whether a group is one of `base`'s, of any definition. */
export function isGroupOf(base: string, group: string): boolean {
  return (
    group === base || (group.startsWith(`${base}-`) && /^[0-9a-f]{8}$/.test(group.slice(base.length + 1)))
  );
}

/**
 * The position after which a group has not handled everything: its checkpoint, else where it started.
 * A group from the end that never checkpointed is taken from the start: the safe side (more, never
 * less; the fan-out's groups always start from the start or after a position).
 */
export function resumeAfter(info: {
  lastCheckpointedPosition: number | undefined;
  settings: { from: SubscriptionStart };
}): number {
  if (info.lastCheckpointedPosition !== undefined) return info.lastCheckpointedPosition;
  const { from } = info.settings;
  return typeof from === 'object' ? from.after : 0;
}

/**
 * Past this age of its oldest pending cart event, the fan-out is behind: that event's webhooks are
 * late by as much (docs/operations.md, "The fan-out's group").
 */
export const FAN_OUT_BEHIND_AFTER_SECONDS = 300;

/** How far the fan-out's group has got, as the admin API answers it. */
export interface FanOutProgress {
  group: string;
  /** `absent` before a dispatcher made the group; `behind` past `behind_after_seconds`. */
  state: 'current' | 'behind' | 'absent';
  /** The group's checkpoint: every cart event at or before it is handled. */
  checkpoint: number | null;
  /** The first cart event after the checkpoint: being handled, tried again, or not handed out yet. */
  oldest_pending: {
    event_id: string;
    stream_id: string;
    type: string;
    position: number;
    recorded_at: string;
    age_seconds: number;
  } | null;
  /** Messages parked in the group (a dispatcher's start schedules their webhooks, then clears them). */
  parked: number;
  /** Consumers joined now: on EventStoreDB across every dispatcher; the embedded store knows its own process's. */
  consumers: number;
  behind_after_seconds: number;
}

/**
 * The fan-out's progress from wherever the event store is reachable (an `api` process too): the
 * group's info, and one filtered read of the first cart event after its checkpoint.
 */
export async function fanOutProgress(
  store: EventStore,
  now: Date,
  base = FAN_OUT_GROUP,
): Promise<FanOutProgress> {
  const group = groupNameOf(base, FAN_OUT_DEFINITION);
  const progress = {
    group,
    checkpoint: null,
    oldest_pending: null,
    parked: 0,
    consumers: 0,
    behind_after_seconds: FAN_OUT_BEHIND_AFTER_SECONDS,
  };
  let info: Awaited<ReturnType<EventStore['getPersistentSubscriptionInfo']>>;
  try {
    info = await store.getPersistentSubscriptionInfo(group);
  } catch (err) {
    if (err instanceof PersistentSubscriptionNotFoundError) return { ...progress, state: 'absent' };
    throw err;
  }
  const [first] = await store.readAll({
    after: resumeAfter(info),
    maxCount: 1,
    filter: FAN_OUT_DEFINITION.filter,
  });
  const ageSeconds = first
    ? Math.max(0, Math.round((now.getTime() - Date.parse(first.recordedAt)) / 1000))
    : 0;
  return {
    ...progress,
    state: ageSeconds > FAN_OUT_BEHIND_AFTER_SECONDS ? 'behind' : 'current',
    checkpoint: info.lastCheckpointedPosition ?? null,
    oldest_pending: first
      ? {
          event_id: first.id,
          stream_id: first.streamId,
          type: first.type,
          position: first.position,
          recorded_at: first.recordedAt,
          age_seconds: ageSeconds,
        }
      : null,
    parked: info.parkedCount,
    consumers: info.connections,
  };
}
