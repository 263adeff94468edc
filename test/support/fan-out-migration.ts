/**
 * The fan-out's groups at start (dispatcher/fan-out-group.ts), on any event store: the embedded one
 * here, EventStoreDB in its contract run. A group of an earlier definition met at start
 * (`migrationScenario`), and messages parked in the fan-out's own group (`parkedScenario`). Each has
 * its own stream and event-type names (`p`), so a shared engine's other tests do not meet it.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext } from 'ava';
import {
  type PreparedGroup,
  prepareFanOutGroup,
  retireGroups,
  settleParkedMessages,
  type WaitingGroup,
} from '../../dispatcher/fan-out-group.ts';
import {
  type EventStore,
  MAX_RETRY_COUNT,
  type NewEvent,
  type PersistentMessage,
  type PersistentSubscriptionInfo,
  type RecordedEvent,
} from '../../eventstore/port.ts';
import { type GroupDefinition, groupNameOf, isGroupOf } from '../../webhooks/fan-out-group.ts';

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

function event(type: string, n: number): NewEvent {
  return {
    id: randomUUID(),
    type,
    data: { n },
    metadata: {
      correlation_id: randomUUID(),
      causation_id: null,
      actor: { type: 'platform', id: 'fan-out-migration' },
      occurred_at: '2026-01-02T03:04:05.000Z',
      schema_version: 1,
    },
  };
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(20);
  }
}

/** A prepared group: the migration did not wait (the other group's checkpoint was there). */
export function ready(prepared: PreparedGroup | WaitingGroup): PreparedGroup {
  if ('waiting' in prepared) {
    throw new Error(`the migration waits for ${prepared.waiting.map((g) => g.group).join(', ')}`);
  }
  return prepared;
}

const numbers = (events: RecordedEvent[]) =>
  events.map((e) => (e.data as { n: number }).n).sort((a, b) => a - b);

/** The fan-out group's two definitions of a scenario, earlier and later, and their groups' names. */
function definitions(p: string) {
  const base = `${p}-fan-out`;
  const earlier: GroupDefinition = { from: 'start', filter: { eventTypes: [`${p}Moved`] } };
  const later: GroupDefinition = { from: 'start', filter: { eventTypes: [`${p}Moved`, `${p}Dropped`] } };
  return { base, earlier, later, oldGroup: groupNameOf(base, earlier), newGroup: groupNameOf(base, later) };
}

/**
 * The earlier definition's group acknowledged events 1 and 2, parked 3, and held 4 when its dispatcher
 * stopped; 5 and 6 (of a type only the new definition reads) came after. At start the new group is made
 * after the old one's checkpoint: it delivers 4, 5 and 6 (and 3 only if the old group's checkpoint had
 * not passed it), never 1 or 2; the parked 3 is handled through the fan-out with its own position,
 * and then the old group is gone. With `dispatchers` above 1, as many start at once, each preparing and
 * then retiring: one group remains, of the new definition, and the same holds.
 */
export async function migrationScenario(
  t: ExecutionContext,
  store: EventStore,
  p: string,
  dispatchers = 1,
): Promise<void> {
  const { base, earlier, later, oldGroup, newGroup } = definitions(p);
  t.not(oldGroup, newGroup);

  for (let n = 1; n <= 4; n++) await store.append(`${p}-cart-${n}`, [event(`${p}Moved`, n)]);
  await store.createPersistentSubscription(oldGroup, { ...earlier, maxRetryCount: 10 });
  const held: PersistentMessage[] = [];
  const consumer = store.subscribeToPersistent(oldGroup, async (m) => {
    const n = (m.event.data as { n: number }).n;
    if (n <= 2) await m.ack();
    else if (n === 3) await m.nack('park', 'poison');
    else held.push(m); // 4: neither acked nor nacked
  });
  await until('the old group parked 3 and holds 4', async () => {
    return held.length === 1 && (await store.listParkedMessages(oldGroup)).length === 1;
  });
  const acked = (await store.readAll({ filter: { eventTypes: [`${p}Moved`] } }))[1].position;
  await until('the old group checkpointed past 2', async () => {
    return ((await store.getPersistentSubscriptionInfo(oldGroup)).lastCheckpointedPosition ?? 0) >= acked;
  });
  await consumer.stop();
  await store.append(`${p}-cart-5`, [event(`${p}Moved`, 5)]);
  await store.append(`${p}-cart-6`, [event(`${p}Dropped`, 6)]);

  const starts = await Promise.all(
    Array.from({ length: dispatchers }, () =>
      prepareFanOutGroup({
        store,
        base,
        definition: later,
        settings: { maxRetryCount: 100, messageTimeoutMs: 30_000 },
      }).then(ready),
    ),
  );
  for (const prepared of starts) {
    t.is(prepared.group, newGroup);
    t.deepEqual(
      prepared.retired.map((g) => g.group),
      [oldGroup],
      'each found the old group (none is deleted before its parked messages are handled)',
    );
  }
  t.deepEqual(
    (await store.listPersistentSubscriptions()).filter((g) => isGroupOf(base, g.group)).map((g) => g.group),
    [newGroup, oldGroup].sort(),
    'one new group, however many made it',
  );
  const info = await store.getPersistentSubscriptionInfo(newGroup);
  t.like(info.settings, { maxRetryCount: 100, messageTimeoutMs: 30_000 });

  const delivered: RecordedEvent[] = [];
  const joined = store.subscribeToPersistent(newGroup, async (m) => {
    delivered.push(m.event);
    await m.ack();
  });
  await until(
    'the new group delivered 4, 5 and 6',
    () => numbers(delivered).filter((n) => n >= 4).length === 3,
  );
  await delay(200);
  const again = numbers(delivered);
  t.deepEqual(
    again.filter((n) => n >= 4),
    [4, 5, 6],
    'nothing unacknowledged is lost, and the new definition reads its new type',
  );
  t.deepEqual(
    again.filter((n) => n <= 2),
    [],
    'nothing acknowledged comes again',
  );
  await joined.stop();

  const handled: RecordedEvent[] = [];
  const retired = await Promise.all(
    starts.map((prepared) =>
      retireGroups(store, prepared.retired, async (e) => {
        handled.push(e);
        return true;
      }),
    ),
  );
  t.true(retired.every(Boolean));
  const original = (await store.readStream(`${p}-cart-3`))[0];
  t.true(handled.length >= 1 && handled.length <= dispatchers, `handled ${handled.length} times`);
  t.deepEqual(
    [...new Set(handled.map((e) => `${e.id}@${e.position}`))],
    [`${original.id}@${original.position}`],
    'the parked message, and only it, is handled with its own position (again by a second dispatcher: scheduling is idempotent)',
  );
  t.deepEqual(
    (await store.listPersistentSubscriptions()).filter((g) => isGroupOf(base, g.group)).map((g) => g.group),
    [newGroup],
  );
  await store.deletePersistentSubscription(newGroup);
}

/**
 * A message parked in the fan-out's own group (event 2 of 3) is handed to the fan-out, with its own
 * position, before the group replays it; the replay only clears the parked list. So the group's
 * settings update right after (which rebuilds an EventStoreDB group, dropping replayed copies not yet
 * acknowledged) loses nothing, and the next start, which finds the list cleared or not, neither.
 */
export async function parkedScenario(t: ExecutionContext, store: EventStore, p: string): Promise<void> {
  const group = `${p}-fan-out`;
  await store.createPersistentSubscription(group, {
    from: 'start',
    filter: { eventTypes: [`${p}Moved`] },
    maxRetryCount: 10,
  });
  for (let n = 1; n <= 3; n++) await store.append(`${p}-cart-${n}`, [event(`${p}Moved`, n)]);
  const answered: number[] = [];
  const consumer = store.subscribeToPersistent(group, async (m) => {
    const n = (m.event.data as { n: number }).n;
    await (n === 2 ? m.nack('park', 'poison') : m.ack());
    answered.push(n);
  });
  await until('2 parked, 1 and 3 acknowledged', async () => {
    return answered.length === 3 && (await store.listParkedMessages(group)).length === 1;
  });
  await consumer.stop();

  const steps: string[] = [];
  const handled: RecordedEvent[] = [];
  const watched: EventStore = Object.create(store);
  watched.replayParkedMessages = async (g) => {
    steps.push('replay');
    await store.replayParkedMessages(g);
  };
  const handle = async (e: RecordedEvent) => {
    steps.push(`handled ${(e.data as { n: number }).n}`);
    handled.push(e);
    return true;
  };
  t.true(await settleParkedMessages(watched, group, handle));
  t.deepEqual(steps, ['handled 2', 'replay'], 'scheduled before the replay');
  const original = (await store.readStream(`${p}-cart-2`))[0];
  t.deepEqual(
    handled.map((e) => [e.id, e.position]),
    [[original.id, original.position]],
    'the parked message is handled with its own position',
  );
  // Another dispatcher's start updates the settings at once: the group is rebuilt.
  await store.updatePersistentSubscription(group, {
    maxRetryCount: MAX_RETRY_COUNT,
    messageTimeoutMs: 30_000,
  });

  // The next starts find the list cleared, or (the server had not replayed yet) handle it again.
  await until('the parked list cleared', async () => {
    t.true(await settleParkedMessages(store, group, handle));
    return (await store.listParkedMessages(group)).length === 0;
  });
  t.deepEqual([...new Set(handled.map((e) => e.id))], [original.id], 'only the parked message');
  await store.deletePersistentSubscription(group);
}

/** Whether a group starts at the log's start: EventStoreDB reports a start after position 0 as `start`. */
const fromLogStart = (info: PersistentSubscriptionInfo) =>
  info.settings.from === 'start' ||
  (typeof info.settings.from === 'object' && info.settings.from.after === 0);

/**
 * A group of an earlier definition that reports no checkpoint (no consumer ever joined it). With
 * nothing of the new definition after its start it has handled nothing: the new group is made at once,
 * from that start. Once such an event follows its start, the same group makes the migration wait (it
 * may be one EventStoreDB is still loading), until the caller takes it as having none.
 */
export async function uncheckpointedScenario(
  t: ExecutionContext,
  store: EventStore,
  p: string,
): Promise<void> {
  const { base, earlier, later, oldGroup, newGroup } = definitions(p);
  await store.createPersistentSubscription(oldGroup, earlier);
  t.is((await store.getPersistentSubscriptionInfo(oldGroup)).lastCheckpointedPosition, undefined);
  const options = {
    store,
    base,
    definition: later,
    settings: { maxRetryCount: 10, messageTimeoutMs: 30_000 },
  };

  const prepared = ready(await prepareFanOutGroup(options));
  t.is(prepared.group, newGroup);
  t.deepEqual(
    prepared.retired.map((g) => g.group),
    [oldGroup],
  );
  t.true(fromLogStart(await store.getPersistentSubscriptionInfo(newGroup)), 'from the old group’s start');

  await store.deletePersistentSubscription(newGroup);
  await store.append(`${p}-cart-1`, [event(`${p}Dropped`, 1)]);
  const waiting = await prepareFanOutGroup(options);
  t.deepEqual(
    ('waiting' in waiting ? waiting.waiting : []).map((g) => g.group),
    [oldGroup],
    'the migration waits for it',
  );
  t.deepEqual(
    (await store.listPersistentSubscriptions()).filter((g) => isGroupOf(base, g.group)).map((g) => g.group),
    [oldGroup],
    'no group made while it waits',
  );
  ready(await prepareFanOutGroup({ ...options, noCheckpointMeansNone: true }));
  t.true(fromLogStart(await store.getPersistentSubscriptionInfo(newGroup)), 'taken from its start');
  await store.deletePersistentSubscription(newGroup);
  await store.deletePersistentSubscription(oldGroup);
}
