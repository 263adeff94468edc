/**
 * Trouble judged by the admin API (api/admin-trouble.ts; docs/operations.md, "Health"), on a real
 * service with an injected clock: a subscription whose recent attempts mostly fail, or whose oldest
 * queued delivery waited past `PDS_ALERT_OLDEST_QUEUED`, is `failing` with its reasons, in its health
 * and in `GET /admin/v1/webhook-health` with the count; it is `ok` again once the receiver takes its
 * deliveries, at once when its queue is empty and its last attempt delivered. A delivery sent again
 * is queued from when it was asked for, not when it was first scheduled. A projection whose commits hang (a read store that holds them) is `lagging` past
 * `PDS_ALERT_PROJECTION_LAG`, and `ok` once it catches up.
 */
import test from 'ava';
import { manualClock } from '../../domain/clock.ts';
import { type Json, ok, whileTicking } from '../support/admin-answers.ts';
import { checkedOut, createCart, createWebhook, seedCatalog } from '../support/cart-world.ts';
import { type HeldReadStore, heldReadStore } from '../support/held-read-store.ts';
import { until } from '../support/probes.ts';
import { startService, type TestService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const ADMIN = '/admin/v1';

const healthOf = async (t: Parameters<typeof ok>[0], s: TestService, id: string) =>
  (await ok(t, await s.call('GET', `${ADMIN}/webhooks/${id}/health`))).health as Json;

/** The subscription's queued deliveries, once `attempts` attempts have ended in all. */
async function attemptsEnded(s: TestService, id: string, attempts: number): Promise<Json[]> {
  return whileTicking(s, async () => {
    const res = await s.call('GET', `${ADMIN}/webhooks/${id}/deliveries`);
    const { deliveries } = (await res.json()) as { deliveries: Json[] };
    const ended = deliveries.flatMap((d) => d.attempts).filter((a: Json) => a.outcome !== null).length;
    return ended >= attempts ? deliveries : undefined;
  });
}

test('a subscription is failing while its recent attempts mostly fail or its oldest queued delivery waits too long, in its health and the overview of every subscription', async (t) => {
  const clock = manualClock('2026-11-27T10:00:30.000Z');
  // An attempt at once, the next an hour later: a dead receiver leaves its deliveries queued.
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h,1h' } });
  await seedCatalog(s, [1, 2]);
  const dead = await startReceiver(t);
  dead.setDefault({ status: 500, body: 'down' });
  const quiet = await startReceiver(t);
  const hook = await createWebhook(s, dead.url, [1]);
  const other = await createWebhook(s, quiet.url, [2]);

  // Two failed attempts are too few to judge by.
  await checkedOut(s);
  await checkedOut(s);
  await attemptsEnded(s, hook.id, 2);
  t.like(await healthOf(t, s, hook.id), { status: 'ok', trouble: [] });

  // Three of three failed in the last 15 minutes.
  await checkedOut(s);
  await attemptsEnded(s, hook.id, 3);
  const failing = await healthOf(t, s, hook.id);
  t.is(failing.status, 'failing');
  t.deepEqual(failing.trouble, [
    {
      reason: 'failed_attempts',
      detail: '3 of the 3 attempts of the last 15 minutes did not deliver',
    },
  ]);
  const overview = await ok(t, await s.call('GET', `${ADMIN}/webhook-health`));
  t.is(overview.failing, 1);
  t.deepEqual(overview.thresholds, { oldest_queued_seconds: 900 });
  t.deepEqual(
    overview.subscriptions.map((w: Json) => [w.webhook_id, w.status]),
    [
      [hook.id, 'failing'],
      [other.id, 'ok'],
    ].sort((a, b) => a[0].localeCompare(b[0])),
  );
  const judged = overview.subscriptions.find((w: Json) => w.webhook_id === hook.id);
  t.like(judged, {
    url: dead.url,
    enabled: true,
    queue: { depth: 3, oldest: { status: 'failed', age_seconds: 0 } },
  });
  t.deepEqual(judged.trouble, failing.trouble);
  t.deepEqual(judged.queue, failing.queue);
  const oldest = failing.queue.oldest.delivery_id;

  // 16 minutes on: the failures left the window, but the oldest delivery has waited 960 s.
  clock.advance(16 * 60_000);
  const waiting = await healthOf(t, s, hook.id);
  t.is(waiting.status, 'failing');
  t.deepEqual(waiting.trouble, [
    {
      reason: 'oldest_queued',
      detail: `delivery ${oldest} has been queued 960 s, more than 900 s (PDS_ALERT_OLDEST_QUEUED)`,
    },
  ]);
  t.is((await ok(t, await s.call('GET', `${ADMIN}/webhook-health`))).failing, 1);

  // The receiver answers again: its retries deliver, and nothing is queued.
  dead.setDefault({ status: 200, body: 'ok' });
  clock.advance(3_600_000 * 1.2);
  await whileTicking(s, async () => ((await healthOf(t, s, hook.id)).queue.depth === 0 ? true : undefined));
  t.like(await healthOf(t, s, hook.id), { status: 'ok', trouble: [] });
  t.is((await ok(t, await s.call('GET', `${ADMIN}/webhook-health`))).failing, 0);
});

test('PDS_ALERT_OLDEST_QUEUED sets how long a queued delivery may wait', async (t) => {
  const clock = manualClock('2026-11-27T10:00:30.000Z');
  const s = await startService(t, {
    clock,
    env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,2h', PDS_ALERT_OLDEST_QUEUED: '1h' },
  });
  await seedCatalog(s);
  const dead = await startReceiver(t);
  dead.setDefault({ status: 500 });
  const hook = await createWebhook(s, dead.url, [1]);
  await checkedOut(s);
  await attemptsEnded(s, hook.id, 1);
  clock.advance(59 * 60_000);
  t.like(await healthOf(t, s, hook.id), { status: 'ok', trouble: [] });
  clock.advance(2 * 60_000);
  const h = await healthOf(t, s, hook.id);
  t.is(h.status, 'failing');
  t.regex(h.trouble[0].detail, /queued 3,660 s, more than 3,600 s \(PDS_ALERT_OLDEST_QUEUED\)$/);
});

test('three failures then a delivery in the same 15 minutes: the queue is empty and the subscription is ok at once', async (t) => {
  const clock = manualClock('2026-11-27T10:00:30.000Z');
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1m,1m,1m' } });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 500, body: 'down' });
  const hook = await createWebhook(s, receiver.url, [1]);
  await checkedOut(s);
  await attemptsEnded(s, hook.id, 1);
  // Each retry a minute (±10 %) after the attempt before it.
  for (const ended of [2, 3]) {
    clock.advance(90_000);
    await attemptsEnded(s, hook.id, ended);
  }
  t.like(await healthOf(t, s, hook.id), { status: 'failing', trouble: [{ reason: 'failed_attempts' }] });
  receiver.setDefault({ status: 200, body: 'ok' });
  clock.advance(90_000);
  const [delivered] = await attemptsEnded(s, hook.id, 4);
  t.is(delivered.status, 'delivered');
  // 3 of the 4 attempts of the window failed, but the receiver took everything it was sent.
  const health = await healthOf(t, s, hook.id);
  t.like(health, { status: 'ok', trouble: [], queue: { depth: 0, oldest: null } });
  t.like(health.totals.attempts, { failed: 3, delivered: 1 });
  t.is((await ok(t, await s.call('GET', `${ADMIN}/webhook-health`))).failing, 0);
});

test('a delivery redelivered or recovered long after it was scheduled is queued from then: not failing for its age', async (t) => {
  const clock = manualClock('2026-11-27T10:00:30.000Z');
  // Two attempts an hour apart, then parked; a redelivery's schedule starts over.
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h' } });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 500, body: 'down' });
  const hook = await createWebhook(s, receiver.url, [1]);
  const deliveriesWhen = (ready: (ds: Json[]) => boolean) =>
    whileTicking(s, async () => {
      const { deliveries } = await ok(t, await s.call('GET', `${ADMIN}/webhooks/${hook.id}/deliveries`));
      return ready(deliveries) ? (deliveries as Json[]) : undefined;
    });
  await checkedOut(s);
  await deliveriesWhen((ds) => ds.length === 1);
  clock.advance(60_000);
  await checkedOut(s);
  await deliveriesWhen((ds) => ds.length === 2 && ds.every((d) => d.status === 'failed'));
  clock.advance(3_600_000 * 1.2);
  const [second, first] = await deliveriesWhen((ds) => ds.every((d) => d.status === 'parked'));
  t.like(await healthOf(t, s, hook.id), { queue: { depth: 0, oldest: null } });

  // A day later, the first is sent again: its attempt fails, and it waits for the next.
  clock.advance(86_400_000);
  const asked = clock.now().toISOString();
  const redelivered = await ok(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${first.delivery_id}/redeliver`),
    202,
  );
  t.is(redelivered.delivery.queued_since, asked);
  t.is(redelivered.delivery.scheduled_at, first.scheduled_at);
  await deliveriesWhen((ds) => ds.some((d) => d.delivery_id === first.delivery_id && d.status === 'failed'));
  t.like(await healthOf(t, s, hook.id), {
    status: 'ok',
    trouble: [],
    queue: {
      depth: 1,
      oldest: {
        delivery_id: first.delivery_id,
        scheduled_at: first.scheduled_at,
        queued_since: asked,
        age_seconds: 0,
      },
    },
  });

  // Ten minutes on, recover sends the second again: the first, queued ten minutes ago, is the oldest.
  clock.advance(10 * 60_000);
  await ok(
    t,
    await s.call('POST', `${ADMIN}/webhooks/${hook.id}/recover`, { since: second.scheduled_at }),
    202,
  );
  await deliveriesWhen((ds) => ds.every((d) => d.status === 'failed'));
  const overview = await ok(t, await s.call('GET', `${ADMIN}/webhook-health`));
  const judged = overview.subscriptions.find((w: Json) => w.webhook_id === hook.id);
  t.like(judged, {
    status: 'ok',
    queue: { depth: 2, oldest: { delivery_id: first.delivery_id, queued_since: asked, age_seconds: 600 } },
  });
  t.is(overview.failing, 0);
  t.false(overview.truncated);

  // Past the threshold from the redelivery, it is failing as any delivery would be.
  clock.advance(6 * 60_000);
  t.like(await healthOf(t, s, hook.id), {
    status: 'failing',
    trouble: [{ reason: 'oldest_queued' }],
    queue: { oldest: { delivery_id: first.delivery_id, age_seconds: 960 } },
  });
});

test('a projection whose commits hang is lagging past PDS_ALERT_PROJECTION_LAG, and ok once it catches up', async (t) => {
  // The clock starts at the real time: the embedded store records events on it.
  const clock = manualClock(new Date());
  let held: HeldReadStore | undefined;
  const s = await startService(t, {
    clock,
    env: { PDS_ALERT_PROJECTION_LAG: '2m' },
    wrapReadStore: (store, url) => {
      if (!url.endsWith('read.db')) return store;
      held = heldReadStore(store);
      return held;
    },
  });
  t.teardown(() => held?.release());
  await seedCatalog(s);
  const projections = async () => ok(t, await s.call('GET', `${ADMIN}/projections`));
  const carts = async () => (await projections()).projections.find((p: Json) => p.name === 'carts');
  t.like(await projections(), { lagging: 0, thresholds: { projection_lag_seconds: 120 } });

  held?.hold('carts');
  await createCart(s);
  await until('the carts projection waits on its commit', async () => (held?.waiting ?? 0) > 0);
  clock.advance(60_000);
  t.like(await carts(), { status: 'ok', trouble: [] });
  clock.advance(90_000);
  const lagging = await carts();
  t.is(lagging.status, 'lagging');
  t.is(lagging.lag_events, 1);
  t.is(lagging.trouble.length, 1);
  t.is(lagging.trouble[0].reason, 'lag');
  t.regex(
    lagging.trouble[0].detail,
    /^its oldest event not applied is 1[45]\d(\.\d+)? s old, more than 120 s \(PDS_ALERT_PROJECTION_LAG\)$/,
  );
  const all = await projections();
  t.is(all.lagging, 1);
  t.true(all.projections.every((p: Json) => p.name === 'carts' || p.status === 'ok'));

  held?.release();
  await until('the carts projection caught up', async () => (await carts()).lag_events === 0);
  t.like(await carts(), { status: 'ok', trouble: [], lag_seconds: 0 });
  t.is((await projections()).lagging, 0);
});
