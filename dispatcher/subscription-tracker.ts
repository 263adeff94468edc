/**
 * The dispatcher's own view of the webhook subscriptions, folded from the `webhooksub-` streams with
 * the subscription decider and kept with its history: `covering(store, kind, position)` answers which
 * subscriptions covered a store for an event kind at the global position of a cart event. The fan-out
 * asks that question, so a subscription created after a cart event never receives it, and one
 * disabled after it still owes it (the delivery then parks until an operator re-enables and recovers).
 *
 * Not the `webhook_subscriptions` read model: its checkpoint only moves on subscription events, so
 * "has it seen everything before position p" cannot be answered there, and in a split deployment it
 * lives in another process. Subscriptions are few and change rarely, so every version is kept.
 *
 * `ready(position)` makes the view complete up to `position`: when the follower has not read the log
 * that far yet, it settles (`follower.ts`): it reads the log's head, which, asked after the cart event
 * exists, lies at or past it, and waits until every subscription event up to that head is applied. The
 * follower is then at that head, so the cart events before it need nothing more; and it moves on with
 * the log's progress between subscription events, so a settle searches only a short stretch, never
 * the history (docs/read-side.md, "Progress past other streams' events").
 */
import { createFollower } from '../application/follower.ts';
import { domainEventOf } from '../application/read-state.ts';
import type { Supervisor } from '../application/supervisor.ts';
import type { EventRegistry } from '../domain/events.ts';
import { eventRegistry } from '../domain/index.ts';
import * as webhooks from '../domain/webhook-subscription.ts';
import type { EventFilter, EventStore } from '../eventstore/port.ts';

const PREFIX = 'webhooksub-';
const FILTER: EventFilter = { streamPrefixes: [PREFIX] };

interface Version {
  position: number;
  state: webhooks.WebhookSubscriptionState;
}

export interface SubscriptionTracker {
  start(): void;
  /** Resolves when every subscription event that existed at start is applied. */
  readonly caughtUp: Promise<void>;
  /** Resolves once every subscription event before `position` (a position that exists) is applied. */
  ready(position: number, timeoutMs?: number): Promise<void>;
  /** Enabled subscriptions that covered `storeId` for `kind` at `position`, in webhook id order. */
  covering(
    storeId: number,
    kind: webhooks.WebhookEventKind,
    position: number,
  ): webhooks.WebhookSubscription[];
  /** The subscription now: undefined when it never existed, `removed` state when removed. */
  current(webhookId: string): webhooks.WebhookSubscription | undefined;
  /** Whether any subscription (enabled or not) exists now. */
  any(): boolean;
  stop(): Promise<void>;
}

export function createSubscriptionTracker(options: {
  store: EventStore;
  registry?: EventRegistry;
  /** Paces resubscriptions after a drop and reports the tracker's health. */
  supervisor?: Supervisor;
}): SubscriptionTracker {
  const { store } = options;
  const registry = options.registry ?? eventRegistry;
  const versions = new Map<string, Version[]>();
  const follower = createFollower({
    name: 'webhook subscription tracker',
    store,
    filter: FILTER,
    supervisor: options.supervisor,
    apply(events) {
      for (const e of events) {
        const id = e.streamId.slice(PREFIX.length);
        const next = webhooks.decider.evolve(
          latest(id),
          domainEventOf<webhooks.WebhookSubscriptionEvent>(registry, e),
        );
        const list = versions.get(id) ?? [];
        list.push({ position: e.position, state: next });
        versions.set(id, list);
      }
    },
  });

  function latest(id: string): webhooks.WebhookSubscriptionState {
    const list = versions.get(id);
    return list ? list[list.length - 1].state : webhooks.decider.initialState;
  }

  function asOf(list: Version[], position: number): webhooks.WebhookSubscriptionState | undefined {
    for (let i = list.length - 1; i >= 0; i--) if (list[i].position <= position) return list[i].state;
    return undefined;
  }

  return {
    start: () => follower.start(),
    caughtUp: follower.caughtUp,
    async ready(position, timeoutMs = 10_000) {
      // The follower read the log through `position` already (its filter's progress): nothing to ask.
      if (position <= follower.position()) return;
      await follower.settle(timeoutMs);
    },
    covering(storeId, kind, position) {
      const out: webhooks.WebhookSubscription[] = [];
      for (const list of versions.values()) {
        const state = asOf(list, position);
        if (!state?.exists || state.removed || !state.enabled) continue;
        if (state.events.includes(kind) && state.store_ids.includes(storeId)) out.push(state);
      }
      return out.sort((a, b) => (a.webhook_id < b.webhook_id ? -1 : 1));
    },
    current(webhookId) {
      const state = latest(webhookId);
      return state.exists ? state : undefined;
    },
    any: () => versions.size > 0,
    stop: () => follower.stop(),
  };
}
