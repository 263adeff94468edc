/**
 * The fan-out and finished deliveries' retention (docs/operations.md, "The fan-out's group"): a group
 * made again from the log's start after the retention job pruned a delivered webhook's queue does not
 * send that webhook again; it acknowledges the old cart event unsent and counts it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { beyondRetention, FAN_OUT_SKIP_MARGIN_MS } from '../../dispatcher/fan-out-retention.ts';
import { manualClock } from '../../domain/clock.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { FAN_OUT_DEFINITION, FAN_OUT_GROUP, isGroupOf } from '../../webhooks/fan-out-group.ts';
import { checkedOut, createWebhook, idle, seedCatalog } from '../support/cart-world.ts';
import { metrics, until } from '../support/probes.ts';
import { startService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const HOUR = 3_600_000;

test('a fan-out group made again from the start after the retention pruned a delivered webhook does not send it again', async (t) => {
  const clock = manualClock('2026-03-01T12:00:00.000Z');
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-refan-out-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const env = { PDS_DELIVERY_LOG_RETENTION: '24h' };
  let s = await startService(t, { clock, env, dataDir });
  await seedCatalog(s, [1]);
  const receiver = await startReceiver(t);
  await createWebhook(s, receiver.url, [1], ['cart_status_updated']);
  let store = await s.openStore();
  const attempted = async (n: number) =>
    (await store.readAll({ filter: { eventTypes: ['WebhookDeliveryAttempted'] } })).length >= n;
  await checkedOut(s);
  await receiver.waitFor(1);
  await until('the first webhook is recorded delivered', () => attempted(1));
  clock.advance(25 * HOUR);
  await checkedOut(s);
  await receiver.waitFor(2);
  await until('the second webhook is recorded delivered', () => attempted(2));
  const queues = async () =>
    new Set(
      (await store.readAll({ filter: { streamPrefixes: [delivery.STREAM_PREFIX] } })).map((e) => e.streamId),
    );
  // The retention job: the first cart's queue is a retention old.
  await until('the first queue is pruned', async () => {
    await s.tick();
    return (await queues()).size === 1;
  });
  await s.service.stop();

  // The group deleted by hand (or a migration taking a group from its start): made again from the start.
  const offline = await openSqliteEventStore(path.join(dataDir, 'events.db'));
  for (const g of await offline.listPersistentSubscriptions()) {
    if (isGroupOf(FAN_OUT_GROUP, g.group)) await offline.deletePersistentSubscription(g.group);
  }
  await offline.close();
  s = await startService(t, { clock, env, dataDir });
  store = await s.openStore();
  const head = await store.headPosition(FAN_OUT_DEFINITION.filter);
  await until('the new group handled every cart event', async () => {
    await s.tick();
    const groups = (await store.listPersistentSubscriptions()).filter((g) =>
      isGroupOf(FAN_OUT_GROUP, g.group),
    );
    return groups.length === 1 && (groups[0].lastCheckpointedPosition ?? -1) >= head;
  });
  await idle(s, 500);
  t.is(receiver.received.length, 2, 'each webhook sent once');
  t.is((await queues()).size, 1, 'the pruned queue not started again');
  t.regex(await metrics(s), /^pds_webhook_fan_out_skipped_total 1$/m);
  t.regex(s.logs(), /skipping cart events older than PDS_DELIVERY_LOG_RETENTION/);
});

test('beyondRetention: a cart event at the retention less the margin is skipped, a younger one is not', (t) => {
  const event = {
    recordedAt: '2026-03-01T00:00:05.000Z',
    metadata: { occurred_at: '2026-03-01T00:00:00.000Z' },
  } as RecordedEvent;
  const at = Date.parse(event.metadata.occurred_at);
  const retention = 24 * HOUR;
  t.true(beyondRetention(event, at + retention - FAN_OUT_SKIP_MARGIN_MS, retention));
  t.false(beyondRetention(event, at + retention - FAN_OUT_SKIP_MARGIN_MS - 1, retention));
  t.true(beyondRetention(event, at + 40 * HOUR, retention));
});
