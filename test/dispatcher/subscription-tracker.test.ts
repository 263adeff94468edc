/**
 * The dispatcher's view of webhook subscriptions answers "who covered this store for this kind at
 * this position": a subscription created, changed, disabled or removed after a cart event does not
 * change who is owed that event.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { createCommandHandler } from '../../application/command-handler.ts';
import { createSubscriptionTracker } from '../../dispatcher/subscription-tracker.ts';
import { eventRegistry } from '../../domain/index.ts';
import * as webhooks from '../../domain/webhook-subscription.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';

const A = '4f1c2a3b-6d7e-4f80-9a1b-2c3d4e5f6071';
const B = '5f1c2a3b-6d7e-4f80-9a1b-2c3d4e5f6071';
const at = '2026-03-01T10:00:00.000Z';
const meta = { correlationId: 'c', causationId: null, actor: { type: 'operator', id: 'op' }, at } as const;

test('covering(store, kind, position) answers as of the position; current() answers now', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-tracker-'));
  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const commands = createCommandHandler(store, eventRegistry);
  const run = (id: string, command: webhooks.WebhookSubscriptionCommand) =>
    commands.handle(webhooks.streamId(id), webhooks.decider, command, meta);
  const create = (id: string, storeIds: number[], events?: webhooks.WebhookEventKind[]) =>
    run(id, {
      type: 'CreateWebhookSubscription',
      webhook_id: id,
      url: 'https://hooks.example.com/x',
      auth_token_encrypted: 'v1.a',
      signing_secret_encrypted: 'v1.b',
      store_ids: storeIds,
      events,
      unknown_store_ids: [],
      at,
    });
  /** A stand-in cart event: positions between the subscription changes. */
  const mark = async () =>
    (
      await store.append('cart-x', [
        {
          type: 'Marker',
          data: {},
          metadata: {
            ...meta,
            correlation_id: 'c',
            causation_id: null,
            actor: meta.actor,
            occurred_at: at,
            schema_version: 1,
          },
        },
      ])
    ).position;

  const p0 = await mark();
  await create(A, [1, 2]);
  const p1 = await mark();
  await create(B, [2], ['cart_abandoned']);
  await run(A, { type: 'ChangeWebhookSubscription', store_ids: [2], unknown_store_ids: [], at });
  const p2 = await mark();
  await run(B, { type: 'DisableWebhookSubscription', reason: 'operator', at });
  const p3 = await mark();
  await run(A, { type: 'RemoveWebhookSubscription', at });
  const p4 = await mark();

  const tracker = createSubscriptionTracker({ store });
  t.teardown(() => tracker.stop());
  tracker.start();
  await tracker.ready(p4);
  const ids = (storeId: number, kind: webhooks.WebhookEventKind, p: number) =>
    tracker.covering(storeId, kind, p).map((s) => s.webhook_id);

  t.deepEqual(ids(1, 'cart_status_updated', p0), [], 'nobody subscribed yet');
  t.deepEqual(ids(1, 'cart_status_updated', p1), [A]);
  t.deepEqual(ids(2, 'cart_abandoned', p1), [A]);
  t.deepEqual(ids(1, 'cart_status_updated', p2), [], 'A no longer covers store 1');
  t.deepEqual(ids(2, 'cart_abandoned', p2), [A, B]);
  t.deepEqual(ids(2, 'cart_status_updated', p2), [A], 'B receives only cart_abandoned');
  t.deepEqual(ids(2, 'cart_abandoned', p3), [A], 'B disabled');
  t.deepEqual(ids(2, 'cart_abandoned', p4), [], 'A removed');
  t.true(tracker.current(A)?.removed);
  t.false(tracker.current(B)?.enabled);
  t.is(tracker.current('6f1c2a3b-6d7e-4f80-9a1b-2c3d4e5f6071'), undefined);

  // ready() waits for subscription events appended after the tracker caught up.
  await create('7f1c2a3b-6d7e-4f80-9a1b-2c3d4e5f6071', [9]);
  const p5 = await mark();
  await tracker.ready(p5);
  t.deepEqual(ids(9, 'cart_abandoned', p5), ['7f1c2a3b-6d7e-4f80-9a1b-2c3d4e5f6071']);
});
