/**
 * The webhook fan-out's persistent subscription group (docs/operations.md, "The fan-out's group"): what it
 * reads, and the name that stands for it. EventStoreDB cannot change a `$all` group's filter or start,
 * nor report its filter, so the name carries them: a group of another definition is another group,
 * which the dispatcher migrates from at start (`dispatcher/fan-out-group.ts`). The dispatcher and the
 * admin API both know the group by this module.
 */
import { createHash } from 'node:crypto';
import type { EventFilter, SubscriptionStart } from '../eventstore/port.ts';

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
