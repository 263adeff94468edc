/**
 * Persistent subscriptions of the embedded event store, as EventStoreDB offers them: named groups with
 * a start position and settings, competing consumers (within one process: use EventStoreDB to spread a
 * group over processes), retries, parking, and the parked list an operator replays.
 */
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
import { type Row, toRecorded } from './rows.ts';

const DEFAULT_MAX_RETRY = 10;
const DEFAULT_MESSAGE_TIMEOUT_MS = 30_000;

interface GroupRow {
  name: string;
  settings: string;
  checkpoint: number;
}

export function createPersistentSubscriptions(log: Log, reads: Reads) {
  const groups = new Map<string, GroupRuntime>();

  function loadGroup(group: string): { settings: GroupSettings; checkpoint: number } {
    log.ensureOpen();
    const row = log.stmt('SELECT name, settings, checkpoint FROM psub_groups WHERE name = ?').get(group) as
      | GroupRow
      | undefined;
    if (!row) throw new PersistentSubscriptionNotFoundError(group);
    return { settings: JSON.parse(row.settings) as GroupSettings, checkpoint: row.checkpoint };
  }

  async function createPersistentSubscription(
    group: string,
    settings: PersistentSubscriptionSettings = {},
  ): Promise<void> {
    log.ensureOpen();
    const full: GroupSettings = {
      from: settings.from ?? 'start',
      maxRetryCount: settings.maxRetryCount ?? DEFAULT_MAX_RETRY,
      messageTimeoutMs: settings.messageTimeoutMs ?? DEFAULT_MESSAGE_TIMEOUT_MS,
      ...(settings.filter ? { filter: settings.filter } : {}),
    };
    log.transaction(() => {
      if (log.stmt('SELECT 1 FROM psub_groups WHERE name = ?').get(group)) {
        throw new PersistentSubscriptionExistsError(group);
      }
      log
        .stmt('INSERT INTO psub_groups (name, settings, checkpoint, created_at) VALUES (?, ?, ?, ?)')
        .run(group, JSON.stringify(full), reads.startPosition(full.from), log.now().toISOString());
    });
  }

  async function updatePersistentSubscription(
    group: string,
    settings: Pick<PersistentSubscriptionSettings, 'maxRetryCount' | 'messageTimeoutMs'>,
  ): Promise<void> {
    const current = loadGroup(group);
    const next = { ...current.settings, ...settings };
    log.stmt('UPDATE psub_groups SET settings = ? WHERE name = ?').run(JSON.stringify(next), group);
    const runtime = groups.get(group);
    if (runtime) runtime.settings = next;
  }

  async function deletePersistentSubscription(group: string): Promise<void> {
    loadGroup(group);
    const runtime = groups.get(group);
    if (runtime) runtime.shutdown(new PersistentSubscriptionNotFoundError(group));
    log.transaction(() => {
      log.stmt('DELETE FROM psub_groups WHERE name = ?').run(group);
      log.stmt('DELETE FROM psub_retries WHERE grp = ?').run(group);
      log.stmt('DELETE FROM psub_parked WHERE grp = ?').run(group);
    });
  }

  async function getPersistentSubscriptionInfo(group: string): Promise<PersistentSubscriptionInfo> {
    const g = loadGroup(group);
    const parked = log
      .stmt('SELECT count(*) AS n FROM psub_parked WHERE grp = ? AND replaying = 0')
      .get(group) as {
      n: number;
    };
    return {
      group,
      settings: g.settings,
      lastCheckpointedPosition: g.checkpoint > 0 ? g.checkpoint : undefined,
      parkedCount: parked.n,
      connections: groups.get(group)?.consumers.length ?? 0,
    };
  }

  async function listParkedMessages(
    group: string,
    opts: { maxCount?: number } = {},
  ): Promise<ParkedMessage[]> {
    loadGroup(group);
    const rows = log
      .stmt(
        `SELECT e.position, e.stream_id, e.revision, e.event_id, e.type, e.data, e.metadata, e.recorded_at, p.reason, p.parked_at
         FROM psub_parked p JOIN events e ON e.position = p.position
        WHERE p.grp = ? AND p.replaying = 0 ORDER BY p.parked_at, p.position LIMIT ?`,
        true,
      )
      .all(group, opts.maxCount ?? -1) as unknown as Array<[...Row, string, string]>;
    return rows.map((r) => ({
      event: toRecorded(r.slice(0, 8) as Row),
      reason: r[8],
      parkedAt: r[9],
    }));
  }

  async function replayParkedMessages(group: string): Promise<void> {
    loadGroup(group);
    log.stmt('UPDATE psub_parked SET replaying = 1 WHERE grp = ? AND replaying = 0').run(group);
    groups.get(group)?.loadReplays();
  }

  function subscribeToPersistent(
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
      log.ensureOpen();
      g = groups.get(group);
      if (!g) {
        g = new GroupRuntime(log, reads, group, loadGroup(group), (closed) => {
          if (groups.get(group) === closed) groups.delete(group);
        });
        groups.set(group, g);
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
  function shutdownAll(): void {
    for (const g of [...groups.values()]) g.shutdown();
  }

  return {
    createPersistentSubscription,
    updatePersistentSubscription,
    deletePersistentSubscription,
    getPersistentSubscriptionInfo,
    listParkedMessages,
    replayParkedMessages,
    subscribeToPersistent,
    shutdownAll,
  };
}
