import type {
  PersistentSubscriptionToAllInfo,
  PersistentSubscriptionToAllResolvedEvent,
  PersistentSubscriptionToAllSettings,
  Position,
} from '@eventstore/db-client';
import {
  END,
  StreamNotFoundError as EsdbStreamNotFoundError,
  type EventStoreDBClient,
  PINNED,
  persistentSubscriptionToAllSettingsFromDefaults,
  START,
  StreamDeletedError,
} from '@eventstore/db-client';
import { bindContext } from '../bind-context.ts';
import {
  EventStoreUnavailableError,
  type ParkedMessage,
  type PersistentConsumer,
  type PersistentConsumerOptions,
  type PersistentMessage,
  type PersistentSubscriptionInfo,
  PersistentSubscriptionNotFoundError,
  type PersistentSubscriptionSettings,
} from '../port.ts';
import {
  type AllRecord,
  CHECKPOINT_AFTER_MS,
  DEFAULT_BUFFER_SIZE,
  DEFAULT_MAX_RETRY,
  DEFAULT_MESSAGE_TIMEOUT_MS,
  type EsdbRecord,
  handlerScope,
  NACK_ACTIONS,
  NO_POSITION,
  type Running,
  settleable,
} from './client.ts';
import { mapError } from './errors.ts';
import {
  deliveredEvent,
  isAfterStart,
  originalOf,
  parkReason,
  positionOf,
  serverFilter,
  startOf,
  toRecorded,
} from './translate.ts';

interface PersistentContext {
  client: EventStoreDBClient;
  /** Consumers that `close()` stops. */
  running: Running;
}

/**
 * The settings this adapter creates groups with, beyond the port's (start, retries, timeout): the
 * client's defaults but for these. Pinned: a stream's events go to the same consumer while it is
 * connected, so consumers that handle one stream's events in order (the webhook fan-out, per cart)
 * keep that order. A group whose settings differ (made by an earlier version) reports them as
 * `outdated`, and an update sets them again.
 */
const {
  startFrom: _s,
  maxRetryCount: _r,
  messageTimeout: _t,
  ...OWN_SETTINGS
} = persistentSubscriptionToAllSettingsFromDefaults({
  resolveLinkTos: false,
  extraStatistics: false,
  checkPointAfter: CHECKPOINT_AFTER_MS,
  checkPointLowerBound: 1,
  consumerStrategyName: PINNED,
});
type OwnSetting = keyof typeof OWN_SETTINGS;

/** The adapter's own settings that differ on a group from those it creates groups with. */
export function outdatedSettings(settings: PersistentSubscriptionToAllSettings): string[] {
  return (Object.keys(OWN_SETTINGS) as OwnSetting[]).filter((name) => settings[name] !== OWN_SETTINGS[name]);
}

async function createPersistentSubscription(
  ctx: PersistentContext,
  group: string,
  settings: PersistentSubscriptionSettings = {},
): Promise<void> {
  const from = settings.from ?? 'start';
  try {
    await ctx.client.createPersistentSubscriptionToAll(
      group,
      {
        ...OWN_SETTINGS,
        // A position start is inclusive on the server; consumers skip the event at it (see below).
        startFrom: from === 'start' ? START : from === 'end' ? END : positionOf(from.after),
        maxRetryCount: settings.maxRetryCount ?? DEFAULT_MAX_RETRY,
        messageTimeout: settings.messageTimeoutMs ?? DEFAULT_MESSAGE_TIMEOUT_MS,
      },
      { filter: serverFilter(settings.filter) },
    );
  } catch (err) {
    throw mapError(err, { group });
  }
}

async function updatePersistentSubscription(
  ctx: PersistentContext,
  group: string,
  settings: Pick<PersistentSubscriptionSettings, 'maxRetryCount' | 'messageTimeoutMs'>,
): Promise<void> {
  try {
    // The server replaces all settings at once (and restarts the group, dropping its consumers; its
    // filter and checkpoint are kept): start from the current ones.
    const current = (await ctx.client.getPersistentSubscriptionToAllInfo(group)).settings;
    const next: PersistentSubscriptionToAllSettings = {
      ...current,
      ...OWN_SETTINGS,
      startFrom: current.startFrom ?? START,
      maxRetryCount: settings.maxRetryCount ?? current.maxRetryCount,
      messageTimeout: settings.messageTimeoutMs ?? current.messageTimeout,
    };
    await ctx.client.updatePersistentSubscriptionToAll(group, next);
  } catch (err) {
    throw mapError(err, { group });
  }
}

async function deletePersistentSubscription(ctx: PersistentContext, group: string): Promise<void> {
  try {
    await ctx.client.deletePersistentSubscriptionToAll(group);
  } catch (err) {
    throw mapError(err, { group });
  }
}

/** The port's view of a group as the server reports it. */
function infoOf(info: PersistentSubscriptionToAllInfo): PersistentSubscriptionInfo {
  const checkpoint = info.stats.lastCheckpointedEventPosition;
  return {
    group: info.groupName,
    // The server does not report a group's filter, so `filter` stays absent.
    settings: {
      from: startOf(info.settings.startFrom),
      maxRetryCount: info.settings.maxRetryCount,
      messageTimeoutMs: info.settings.messageTimeout,
    },
    outdated: outdatedSettings(info.settings),
    // A bound rather than an event: its commit half is what positions compare by.
    lastCheckpointedPosition:
      checkpoint && checkpoint.commit > 0n && checkpoint.commit < NO_POSITION
        ? Number(checkpoint.commit)
        : undefined,
    parkedCount: Number(info.stats.parkedMessageCount),
    connections: info.connections.length,
  };
}

async function getPersistentSubscriptionInfo(
  ctx: PersistentContext,
  group: string,
): Promise<PersistentSubscriptionInfo> {
  try {
    return infoOf(await ctx.client.getPersistentSubscriptionToAllInfo(group));
  } catch (err) {
    throw mapError(err, { group });
  }
}

async function listPersistentSubscriptions(ctx: PersistentContext): Promise<PersistentSubscriptionInfo[]> {
  try {
    const infos = await ctx.client.listPersistentSubscriptionsToAll();
    return infos.map(infoOf).sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
  } catch (err) {
    const mapped = mapError(err, { group: '$all' });
    // A server that never had a group on `$all` answers that there is none (its PersistentSubscriptionService).
    if (mapped instanceof PersistentSubscriptionNotFoundError) return [];
    throw mapped;
  }
}

/** Events at or before this position are not "after" the group's start and are acked unseen. */
async function startBoundOf(ctx: PersistentContext, group: string): Promise<Position | undefined> {
  try {
    const { startFrom } = (await ctx.client.getPersistentSubscriptionToAllInfo(group)).settings;
    return typeof startFrom === 'object' ? startFrom : undefined;
  } catch (err) {
    throw mapError(err, { group });
  }
}

/**
 * The event of a delivery, with its own position: a replayed parked message's is read from its stream
 * (see deliveredEvent). Undefined when there is nothing to hand over, or the event is gone.
 */
async function eventOf(
  ctx: PersistentContext,
  resolved: PersistentSubscriptionToAllResolvedEvent,
): Promise<AllRecord | undefined> {
  const delivered = deliveredEvent(resolved);
  if (delivered.kind === 'none') return undefined;
  if (delivered.kind === 'event') return delivered.event;
  const { streamId, revision } = delivered.event;
  const read: EsdbRecord[] = [];
  try {
    for await (const { event } of ctx.client.readStream(streamId, { fromRevision: revision, maxCount: 1 })) {
      if (event) read.push(event);
    }
  } catch (err) {
    if (err instanceof EsdbStreamNotFoundError || err instanceof StreamDeletedError) return undefined;
    throw mapError(err, { streamId });
  }
  return originalOf(delivered.event, read[0]);
}

function subscribeToPersistent(
  ctx: PersistentContext,
  group: string,
  handler: (message: PersistentMessage) => Promise<void> | void,
  options: PersistentConsumerOptions = {},
): PersistentConsumer {
  const bufferSize = Math.max(1, options.bufferSize ?? DEFAULT_BUFFER_SIZE);
  const done = settleable();
  const scope = {};
  const sub = ctx.client.subscribeToPersistentSubscriptionToAll(group, { bufferSize });
  const startBound = startBoundOf(ctx, group);
  const waiting: PersistentSubscriptionToAllResolvedEvent[] = [];
  const inFlight = new Set<Promise<void>>();
  let stopped = false;
  const entry = { stop };
  ctx.running.add(entry);

  startBound.catch((err: Error) => fail(err));
  sub.on('data', (resolved: PersistentSubscriptionToAllResolvedEvent) => {
    if (stopped) return;
    waiting.push(resolved);
    drain();
  });
  sub.on('error', (err) => fail(mapError(err, { group })));
  sub.on('close', () =>
    fail(new EventStoreUnavailableError(`persistent subscription ${group} was closed by the server`)),
  );

  /** Runs handlers concurrently, at most `bufferSize` at a time. */
  function drain(): void {
    while (!stopped && waiting.length > 0 && inFlight.size < bufferSize) {
      const task: Promise<void> = handle(waiting.shift()!).finally(() => {
        inFlight.delete(task);
        drain();
      });
      inFlight.add(task);
    }
    if (stopped) return;
    if (waiting.length > 0) sub.pause();
    else if (sub.isPaused()) sub.resume();
  }

  async function handle(resolved: PersistentSubscriptionToAllResolvedEvent): Promise<void> {
    let answered = false;
    /** The first ack or nack of a delivery wins; after stop() the server redelivers anyway. */
    const answer = async (send: () => Promise<void>): Promise<void> => {
      if (answered) return;
      answered = true;
      try {
        await send();
      } catch (err) {
        if (!stopped) throw mapError(err, { group });
      }
    };
    try {
      const bound = await startBound;
      const event = await eventOf(ctx, resolved);
      // Acked with `resolved` itself: for a replayed parked message the client acks the link's id, the
      // one the server tracks (its PersistentSubscriptionImpl.js).
      if (!event || !isAfterStart(event, bound)) {
        await answer(() => sub.ack(resolved));
        return;
      }
      const message: PersistentMessage = {
        event: toRecorded(event),
        retryCount: resolved.retryCount,
        ack: () => answer(() => sub.ack(resolved)),
        nack: (action, reason) => answer(() => sub.nack(NACK_ACTIONS[action], reason, resolved)),
      };
      try {
        await handlerScope.run(scope, () => handler(message));
      } catch (err) {
        await message.nack('retry', err instanceof Error ? err.message : String(err));
      }
    } catch (err) {
      fail(err instanceof Error ? err : new Error(String(err)));
    }
  }

  function end(err?: Error): void {
    stopped = true;
    ctx.running.delete(entry);
    // Messages not handed to the handler yet are redelivered once this consumer is gone.
    waiting.length = 0;
    if (err) {
      void sub.unsubscribe().catch(() => {});
      done.reject(err);
    }
  }

  function fail(err: Error): void {
    if (!stopped) end(err);
  }

  async function stop(): Promise<void> {
    if (stopped) return;
    end();
    // Let ctx.running handlers send their acks before the connection goes.
    if (handlerScope.getStore() !== scope) await Promise.allSettled([...inFlight]);
    await sub.unsubscribe().catch(() => {});
    done.resolve();
  }

  return { done: done.promise, stop };
}

async function listParkedMessages(
  ctx: PersistentContext,
  group: string,
  options: { maxCount?: number } = {},
): Promise<ParkedMessage[]> {
  const maxCount = options.maxCount ?? Number.MAX_SAFE_INTEGER;
  if (maxCount <= 0) return [];
  const out: ParkedMessage[] = [];
  try {
    // Parked messages are links to the original events, with the park reason in the link's metadata.
    const read = ctx.client.readStream(`$persistentsubscription-$all::${group}-parked`, {
      resolveLinkTos: true,
      maxCount,
    });
    for await (const { event, link } of read) {
      if (!event || !link) continue; // the original event is gone (scavenged)
      out.push({
        event: toRecorded(event),
        reason: parkReason(link.metadata),
        parkedAt: link.created.toISOString(),
      });
    }
  } catch (err) {
    if (err instanceof EsdbStreamNotFoundError || err instanceof StreamDeletedError) return [];
    throw mapError(err, { group });
  }
  return out;
}

async function replayParkedMessages(ctx: PersistentContext, group: string): Promise<void> {
  try {
    await ctx.client.replayParkedMessagesToAll(group);
  } catch (err) {
    throw mapError(err, { group });
  }
}

export function createPersistent(client: EventStoreDBClient, running: Running) {
  const ctx: PersistentContext = { client, running };
  return bindContext(ctx, {
    createPersistentSubscription,
    updatePersistentSubscription,
    deletePersistentSubscription,
    getPersistentSubscriptionInfo,
    listPersistentSubscriptions,
    subscribeToPersistent,
    listParkedMessages,
    replayParkedMessages,
  });
}
