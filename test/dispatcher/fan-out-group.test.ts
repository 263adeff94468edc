/**
 * The fan-out's group at start (docs/operations.md, "The fan-out's group"): its name carries what cannot
 * change (start and filter); its settings are updated in place; a group of another definition is
 * migrated from, losing nothing and delivering nothing acknowledged again; what is parked is scheduled
 * before it is replayed. On the embedded store; these scenarios run on EventStoreDB too
 * (test/contract/eventstore-esdb.test.ts). A dispatcher meeting another definition's group:
 * fan-out-group-dispatcher.test.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { prepareFanOutGroup } from '../../dispatcher/fan-out-group.ts';
import type { EventStore } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import {
  FAN_OUT_DEFINITION,
  FAN_OUT_GROUP,
  groupNameOf,
  isGroupOf,
  resumeAfter,
} from '../../webhooks/fan-out-group.ts';
import { migrationScenario, parkedScenario } from '../support/fan-out-migration.ts';
import { rawEvent } from '../support/raw-events.ts';

async function openStore(t: ExecutionContext): Promise<EventStore> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-fan-out-group-'));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return store;
}

test('the group is named by its definition: the first keeps the bare name, another carries its hash', (t) => {
  t.is(groupNameOf(FAN_OUT_GROUP, FAN_OUT_DEFINITION), 'webhook-fan-out', 'the group the upgrade found');
  const reordered = {
    from: 'start' as const,
    filter: { eventTypes: ['CartAbandoned', 'CartStatusChanged'] },
  };
  t.is(groupNameOf(FAN_OUT_GROUP, reordered), 'webhook-fan-out', 'the order of the types does not count');
  const wider = {
    from: 'start' as const,
    filter: { eventTypes: ['CartStatusChanged', 'CartAbandoned', 'X'] },
  };
  const later = { ...FAN_OUT_DEFINITION, from: { after: 10 } };
  t.regex(groupNameOf(FAN_OUT_GROUP, wider), /^webhook-fan-out-[0-9a-f]{8}$/);
  t.regex(groupNameOf(FAN_OUT_GROUP, later), /^webhook-fan-out-[0-9a-f]{8}$/);
  t.not(groupNameOf(FAN_OUT_GROUP, wider), groupNameOf(FAN_OUT_GROUP, later));
  t.true(isGroupOf(FAN_OUT_GROUP, 'webhook-fan-out'));
  t.true(isGroupOf(FAN_OUT_GROUP, groupNameOf(FAN_OUT_GROUP, wider)));
  t.false(isGroupOf(FAN_OUT_GROUP, 'webhook-fan-out-again'));
  t.false(isGroupOf(FAN_OUT_GROUP, 'webhook-fan-outs'));
  t.is(resumeAfter({ lastCheckpointedPosition: 7, settings: later }), 7);
  t.is(resumeAfter({ lastCheckpointedPosition: undefined, settings: later }), 10);
  t.is(resumeAfter({ lastCheckpointedPosition: undefined, settings: FAN_OUT_DEFINITION }), 0);
});

test('a group with other settings is updated in place at start, keeping its checkpoint; one already right is left alone', async (t) => {
  const store = await openStore(t);
  // As the dispatcher before this check made it: the store's default retries.
  await store.createPersistentSubscription('webhook-fan-out', { ...FAN_OUT_DEFINITION, maxRetryCount: 10 });
  const { position } = await store.append('cart-1', [rawEvent('CartStatusChanged', {})]);
  const consumer = store.subscribeToPersistent('webhook-fan-out', (m) => m.ack());
  for (
    let i = 0;
    (await store.getPersistentSubscriptionInfo('webhook-fan-out')).lastCheckpointedPosition !== position;
    i++
  ) {
    if (i > 250) t.fail('never checkpointed');
    await new Promise((r) => setTimeout(r, 20));
  }
  await consumer.stop();
  const settings = { maxRetryCount: 1_000, messageTimeoutMs: 20_000 };
  const prepared = await prepareFanOutGroup({
    store,
    base: FAN_OUT_GROUP,
    definition: FAN_OUT_DEFINITION,
    settings,
  });
  t.deepEqual(prepared, { group: 'webhook-fan-out', parked: 0, retired: [] });
  t.like(await store.getPersistentSubscriptionInfo('webhook-fan-out'), {
    settings,
    lastCheckpointedPosition: position,
  });

  let updates = 0;
  const counting: EventStore = Object.create(store);
  counting.updatePersistentSubscription = async (group, s) => {
    updates += 1;
    await store.updatePersistentSubscription(group, s);
  };
  await prepareFanOutGroup({
    store: counting,
    base: FAN_OUT_GROUP,
    definition: FAN_OUT_DEFINITION,
    settings,
  });
  t.is(updates, 0, 'no update (which restarts an EventStoreDB group) when nothing differs');
});

test('a group of an earlier definition is migrated from at start: after its checkpoint, its parked message handled, then deleted', async (t) => {
  await migrationScenario(t, await openStore(t), 'p1');
});

test('a message parked in the group is handled with its own position before the replay that clears it; an update right after loses nothing', async (t) => {
  await parkedScenario(t, await openStore(t), 'p2');
});

test('two dispatchers migrating at once: one group remains, of this definition; nothing acknowledged comes again, nothing is lost', async (t) => {
  await migrationScenario(t, await openStore(t), 'p3', 2);
});
