/**
 * Trouble judged by the admin API (api/admin-trouble.ts; docs/operations.md, "Health"), on a real
 * service with an injected clock: a subscription whose recent attempts mostly fail, or whose oldest
 * queued delivery waited past `PDS_ALERT_OLDEST_QUEUED`, is `failing` with its reasons, in its health
 * and in `GET /admin/v1/webhook-health` with the count; it is `ok` again once the receiver takes its
 * deliveries. A projection whose commits hang (a read store that holds them) is `lagging` past
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
