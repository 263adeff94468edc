/**
 * Persistent subscriptions of the embedded event store, as EventStoreDB offers them: named groups with
 * a start position and settings, competing consumers (within one process: use EventStoreDB to spread a
 * group over processes), retries, parking, and the parked list an operator replays.
 */

import { bindContext } from '../bind-context.ts';
import {
  type ParkedMessage,
  type PersistentConsumer,
  type PersistentConsumerOptions,
  type PersistentMessage,
  PersistentSubscriptionExistsError,
  type PersistentSubscriptionInfo,
  PersistentSubscriptionNotFoundError,
  type PersistentSubscriptionSettings,
} from '../port.ts';
import { type Consumer, GroupRuntime, type GroupSettings } from './group-runtime.ts';
import type { Log } from './log.ts';
import type { Reads } from './reads.ts';
import { limitedRows, type Row, toRecorded } from './rows.ts';

const DEFAULT_MAX_RETRY = 10;
const DEFAULT_MESSAGE_TIMEOUT_MS = 30_000;

interface GroupRow {
  name: string;
  settings: string;
  checkpoint: number;
}

/** What the functions of this module share: the database, its reads, and the groups running here. */
interface GroupsContext {
  log: Log;
  reads: Reads;
  groups: Map<string, GroupRuntime>;
}

function loadGroup(ctx: GroupsContext, group: string): { settings: GroupSettings; checkpoint: number } {
  ctx.log.ensureOpen();
  const row = ctx.log.stmt('SELECT name, settings, checkpoint FROM psub_groups WHERE name = ?').get(group) as
    | GroupRow
    | undefined;
  if (!row) throw new PersistentSubscriptionNotFoundError(group);
  return { settings: JSON.parse(row.settings) as GroupSettings, checkpoint: row.checkpoint };
}

async function createPersistentSubscription(
  ctx: GroupsContext,
  group: string,
  settings: PersistentSubscriptionSettings = {},
): Promise<void> {
  ctx.log.ensureOpen();
  const full: GroupSettings = {
    from: settings.from ?? 'start',
    maxRetryCount: settings.maxRetryCount ?? DEFAULT_MAX_RETRY,
    messageTimeoutMs: settings.messageTimeoutMs ?? DEFAULT_MESSAGE_TIMEOUT_MS,
    ...(settings.filter ? { filter: settings.filter } : {}),
  };
  ctx.log.transaction(() => {
    if (ctx.log.stmt('SELECT 1 FROM psub_groups WHERE name = ?').get(group)) {
      throw new PersistentSubscriptionExistsError(group);
    }
    ctx.log
      .stmt('INSERT INTO psub_groups (name, settings, checkpoint, created_at) VALUES (?, ?, ?, ?)')
      .run(group, JSON.stringify(full), ctx.reads.startPosition(full.from), ctx.log.now().toISOString());
  });
}

async function updatePersistentSubscription(
  ctx: GroupsContext,
  group: string,
  settings: Pick<PersistentSubscriptionSettings, 'maxRetryCount' | 'messageTimeoutMs'>,
): Promise<void> {
  const current = loadGroup(ctx, group);
  const next = {
    ...current.settings,
    ...(settings.maxRetryCount === undefined ? {} : { maxRetryCount: settings.maxRetryCount }),
    ...(settings.messageTimeoutMs === undefined ? {} : { messageTimeoutMs: settings.messageTimeoutMs }),
  };
  ctx.log.stmt('UPDATE psub_groups SET settings = ? WHERE name = ?').run(JSON.stringify(next), group);
  const runtime = ctx.groups.get(group);
  if (runtime) runtime.settings = next;
}

async function deletePersistentSubscription(ctx: GroupsContext, group: string): Promise<void> {
  loadGroup(ctx, group);
  const runtime = ctx.groups.get(group);
  if (runtime) runtime.shutdown(new PersistentSubscriptionNotFoundError(group));
  ctx.log.transaction(() => {
    ctx.log.stmt('DELETE FROM psub_groups WHERE name = ?').run(group);
    ctx.log.stmt('DELETE FROM psub_retries WHERE grp = ?').run(group);
    ctx.log.stmt('DELETE FROM psub_parked WHERE grp = ?').run(group);
  });
}

async function getPersistentSubscriptionInfo(
  ctx: GroupsContext,
  group: string,
): Promise<PersistentSubscriptionInfo> {
  const g = loadGroup(ctx, group);
  const parked = ctx.log
    .stmt('SELECT count(*) AS n FROM psub_parked WHERE grp = ? AND replaying = 0')
    .get(group) as {
    n: number;
  };
  return {
    group,
    settings: g.settings,
    outdated: [],
    lastCheckpointedPosition: g.checkpoint > 0 ? g.checkpoint : undefined,
    parkedCount: parked.n,
    connections: ctx.groups.get(group)?.consumers.length ?? 0,
  };
}

async function listPersistentSubscriptions(ctx: GroupsContext): Promise<PersistentSubscriptionInfo[]> {
  ctx.log.ensureOpen();
  const names = ctx.log.stmt('SELECT name FROM psub_groups ORDER BY name').all() as Array<{ name: string }>;
  return Promise.all(names.map(({ name }) => getPersistentSubscriptionInfo(ctx, name)));
}

async function listParkedMessages(
  ctx: GroupsContext,
  group: string,
  opts: { maxCount?: number } = {},
): Promise<ParkedMessage[]> {
  loadGroup(ctx, group);
  const rows = limitedRows<[...Row, string, string]>(
    ctx.log,
    `SELECT e.position, e.stream_id, e.revision, e.event_id, e.type, e.data, e.metadata, e.recorded_at, p.reason, p.parked_at
       FROM psub_parked p JOIN events e ON e.position = p.position
      WHERE p.grp = ? AND p.replaying = 0 ORDER BY p.parked_at, p.position`,
    opts.maxCount,
    [group],
  );
  return rows.map((r) => ({
    event: toRecorded(r.slice(0, 8) as Row),
    reason: r[8],
    parkedAt: r[9],
  }));
}

async function replayParkedMessages(ctx: GroupsContext, group: string): Promise<void> {
  loadGroup(ctx, group);
  ctx.log.stmt('UPDATE psub_parked SET replaying = 1 WHERE grp = ? AND replaying = 0').run(group);
  ctx.groups.get(group)?.loadReplays();
}

function subscribeToPersistent(
  ctx: GroupsContext,
  group: string,
  handler: (message: PersistentMessage) => Promise<void> | void,
  opts: PersistentConsumerOptions = {},
): PersistentConsumer {
  let resolveDone!: () => void;
  let rejectDone!: (err: Error) => void;
  const done = new Promise<void>((resolve, reject) => {
    resolveDone = resolve;
    rejectDone = reject;
  });
  done.catch(() => {});
  const consumer: Consumer = {
    bufferSize: opts.bufferSize ?? 10,
    inFlight: 0,
    handler,
    stopped: false,
    fail: (err) => rejectDone(err),
  };
  let g: GroupRuntime | undefined;
  try {
    ctx.log.ensureOpen();
    g = ctx.groups.get(group);
    if (!g) {
      g = new GroupRuntime(ctx.log, ctx.reads, group, loadGroup(ctx, group), (closed) => {
        if (ctx.groups.get(group) === closed) ctx.groups.delete(group);
      });
      ctx.groups.set(group, g);
    }
    g.consumers.push(consumer);
    queueMicrotask(() => g?.pump());
  } catch (err) {
    rejectDone(err as Error);
  }
  return {
    done,
    async stop() {
      if (g && !consumer.stopped) g.removeConsumer(consumer);
      consumer.stopped = true;
      resolveDone();
    },
  };
}

/** Ends every group's consumers (the store is closing). */
function shutdownAll(ctx: GroupsContext): void {
  for (const g of [...ctx.groups.values()]) g.shutdown();
}

export function createPersistentSubscriptions(log: Log, reads: Reads) {
  const ctx: GroupsContext = { log, reads, groups: new Map() };
  return bindContext(ctx, {
    createPersistentSubscription,
    updatePersistentSubscription,
    deletePersistentSubscription,
    getPersistentSubscriptionInfo,
    listPersistentSubscriptions,
    listParkedMessages,
    replayParkedMessages,
    subscribeToPersistent,
    shutdownAll,
  });
}
