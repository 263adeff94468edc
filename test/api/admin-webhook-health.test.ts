/**
 * A subscription's health (`GET /admin/v1/webhooks/{id}/health`, docs/webhooks.md "Health") and a
 * cart's deliveries (`GET /admin/v1/carts/{uuid}/webhooks`), on a real service with a local receiver
 * and an injected clock: minute by minute what was scheduled, attempted and parked, the queue depth
 * carried over quiet minutes, the oldest delivery still queued, the same figures after a rebuild, the
 * latency of answered attempts only, and the refusals as problem documents.
 */
import test from 'ava';
import { manualClock } from '../../domain/clock.ts';
import { LATENCY_BOUNDS_MS, latencyBucket } from '../../projections/read-models/webhook-health.ts';
import { type Json, ok, problem, whileTicking } from '../support/admin-answers.ts';
import { checkedOut, createWebhook, move, seedCatalog, type WorldCart } from '../support/cart-world.ts';
import { until } from '../support/probes.ts';
import { startService, type TestService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const ADMIN = '/admin/v1';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';
/** Three attempts a second apart, then parked. */
const FAST = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1s,1s' };

/** The cart's deliveries, once the first is in one of `statuses`. */
async function cartDeliveryWhen(s: TestService, cart: WorldCart, ...statuses: string[]): Promise<Json> {
  return whileTicking(s, async () => {
    const res = await s.call('GET', `${ADMIN}/carts/${cart.uuid}/webhooks`);
    const [first] = ((await res.json()) as Json).deliveries as Json[];
    return first && statuses.includes(first.status) ? first : undefined;
  });
}

const health = async (s: TestService, webhookId: string, query = '') =>
  (await (await s.call('GET', `${ADMIN}/webhooks/${webhookId}/health${query}`)).json()) as Json;

const quiet = { scheduled: 0, parked: 0, latency_ms: null };

test('health: minute by minute, scheduled, attempts by outcome, parked, latency and the queue; the same after a rebuild', async (t) => {
  const clock = manualClock('2026-11-27T10:00:30.000Z');
  const s = await startService(t, { clock, env: FAST });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  const hook = await createWebhook(s, receiver.url, [1]);

  // 10:00: cart A fails once, then is delivered.
  receiver.script({ status: 500, body: 'boom' });
  const a = await checkedOut(s);
  await cartDeliveryWhen(s, a, 'failed');
  clock.advance(1_200);
  await cartDeliveryWhen(s, a, 'delivered');
  // 10:02: cart B fails three times and is parked; cart C fails once and waits for its retry.
  clock.advance(120_000);
  receiver.script({ status: 500 }, { status: 500 }, { status: 500 });
  const b = await checkedOut(s);
  await cartDeliveryWhen(s, b, 'failed');
  for (const attempts of [4, 5]) {
    clock.advance(1_200);
    await whileTicking(s, async () => (receiver.received.length >= attempts ? true : undefined));
  }
  await cartDeliveryWhen(s, b, 'parked');
  receiver.script({ status: 500 });
  const c = await checkedOut(s);
  const queued = await cartDeliveryWhen(s, c, 'failed');
  clock.advance(10_000);

  const hour = await ok(t, await s.call('GET', `${ADMIN}/webhooks/${hook.id}/health`));
  const h = hour.health;
  t.like(h, {
    webhook_id: hook.id,
    window: '1h',
    from: '2026-11-27T09:03:00.000Z',
    to: '2026-11-27T10:03:00.000Z',
    interval_seconds: 60,
  });
  t.like(h.totals, {
    scheduled: 3,
    attempts: { delivered: 1, failed: 5, gone: 0, retry_after: 0, interrupted: 0 },
    parked: 1,
  });
  t.true(h.totals.latency_ms.p50 >= 0 && h.totals.latency_ms.p99 >= h.totals.latency_ms.p50);
  t.is(h.intervals.length, 60);
  t.is(h.intervals[57].from, '2026-11-27T10:00:00.000Z');
  t.like(h.intervals[57], { scheduled: 1, attempts: { delivered: 1, failed: 1 }, parked: 0, queue_depth: 0 });
  t.like(h.intervals[58], { ...quiet, attempts: { delivered: 0, failed: 0 }, queue_depth: 0 });
  t.like(h.intervals[59], { scheduled: 2, attempts: { delivered: 0, failed: 4 }, parked: 1, queue_depth: 1 });
  t.true(
    h.intervals
      .slice(0, 57)
      .every((i: Json) => i.scheduled === 0 && i.latency_ms === null && i.queue_depth === 0),
  );
  t.deepEqual(h.queue, {
    depth: 1,
    oldest: {
      delivery_id: queued.delivery_id,
      cart_uuid: c.uuid,
      status: 'failed',
      scheduled_at: queued.scheduled_at,
      queued_since: queued.scheduled_at,
      age_seconds: 10,
    },
  });

  // A day: 96 intervals of 15 minutes, the last holding all of it.
  const day = (await health(s, hook.id, '?window=24h')).health;
  t.like(day, {
    window: '24h',
    from: '2026-11-26T10:15:00.000Z',
    to: '2026-11-27T10:15:00.000Z',
    interval_seconds: 900,
  });
  t.is(day.intervals.length, 96);
  t.like(day.intervals[95], {
    scheduled: 3,
    attempts: { delivered: 1, failed: 5 },
    parked: 1,
    queue_depth: 1,
  });
  t.deepEqual(day.totals, h.totals);

  // Rebuilt from the events, the figures are the same: minutes come from the events' own times.
  // Waited for without moving the clock: a tick would run the queued retry, and the figures with it.
  await ok(t, await s.call('POST', `${ADMIN}/projections/webhook_deliveries/rebuild`), 202);
  await until('the rebuild of webhook_deliveries is live', async () => {
    const { projections } = (await (await s.call('GET', `${ADMIN}/projections`)).json()) as Json;
    const p = (projections as Json[]).find((x) => x.name === 'webhook_deliveries');
    return p?.state === 'live' && p.progress?.percent === 100;
  });
  t.deepEqual(await health(s, hook.id), hour);

  // Quiet minutes carry the queue's depth over, within the window and from before it.
  clock.advance(5 * 60_000);
  const later = (await health(s, hook.id)).health.intervals as Json[];
  t.is(later[54].from, '2026-11-27T10:02:00.000Z');
  t.deepEqual(
    later.slice(53).map((i) => i.queue_depth),
    [0, 1, 1, 1, 1, 1, 1],
  );
  clock.advance(2 * 3_600_000);
  const quietHour = (await health(s, hook.id)).health;
  t.true(quietHour.intervals.every((i: Json) => i.scheduled === 0 && i.queue_depth === 1));
  t.like(quietHour.queue, { depth: 1, oldest: { delivery_id: queued.delivery_id, age_seconds: 10 + 7_500 } });
});

test('health: latency is of the attempts that got an answer; a reset connection counts as a failed attempt, not in the latency', async (t) => {
  const clock = manualClock('2026-11-27T10:00:30.000Z');
  const s = await startService(t, { clock, env: FAST });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  const hook = await createWebhook(s, receiver.url, [1]);
  receiver.script({ reset: true });
  const cart = await checkedOut(s);
  await cartDeliveryWhen(s, cart, 'failed');
  const reset = (await health(s, hook.id)).health;
  t.like(reset.totals, { attempts: { failed: 1, delivered: 0 }, latency_ms: null });
  t.like(reset.intervals.at(-1), { attempts: { failed: 1 }, latency_ms: null });

  // The next attempt is answered: the latency is of that one alone.
  clock.advance(1_200);
  const delivered = await cartDeliveryWhen(s, cart, 'delivered');
  const answered = (await health(s, hook.id)).health;
  t.like(answered.totals, { attempts: { failed: 1, delivered: 1 } });
  const { duration_ms } = delivered.attempts[1];
  t.true(
    answered.totals.latency_ms.p50 > 0 && answered.totals.latency_ms.p99 >= answered.totals.latency_ms.p50,
  );
  // Read from the histogram: within the bucket of that one attempt's duration.
  const bound = LATENCY_BOUNDS_MS[latencyBucket(duration_ms)] ?? LATENCY_BOUNDS_MS.at(-1);
  t.true(answered.totals.latency_ms.p99 <= bound, `${duration_ms} ms answered`);
});

test('health: refusals are problem documents', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  const hook = await createWebhook(s, receiver.url, [1]);
  const empty = (await health(s, hook.id)).health;
  t.like(empty, { totals: { scheduled: 0, parked: 0, latency_ms: null }, queue: { depth: 0, oldest: null } });
  const url = (query: string) => `${ADMIN}/webhooks/${hook.id}/health${query}`;
  await problem(t, await s.call('GET', url('?window=2h')), 400);
  await problem(t, await s.call('GET', url('?windw=1h')), 400);
  await problem(t, await s.call('GET', url('?window=1h&window=24h')), 400);
  await problem(t, await s.call('GET', `${ADMIN}/webhooks/${UNKNOWN}/health`), 404, 'webhook_not_found');
  await problem(t, await s.call('GET', `${ADMIN}/webhooks/not-a-uuid/health`), 404);
  await problem(
    t,
    await s.call('GET', url(''), undefined, { authorization: 'Bearer wrong' }),
    401,
    'unauthorized',
  );
  await ok(t, await s.call('DELETE', `${ADMIN}/webhooks/${hook.id}`));
  await problem(t, await s.call('GET', url('')), 404, 'webhook_not_found');
});

test("a cart's webhooks: every delivery its events produced, oldest first, by source event, paged", async (t) => {
  const s = await startService(t, { env: FAST });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  const hook = await createWebhook(s, receiver.url, [1]);
  const cart = await checkedOut(s);
  await move(s, cart, 'preparing');
  await move(s, cart, 'ready_for_pickup');
  const url = `${ADMIN}/carts/${cart.uuid}/webhooks`;
  const all = await whileTicking(s, async () => {
    const { deliveries } = (await (await s.call('GET', url)).json()) as Json;
    return deliveries.length === 3 && deliveries.every((d: Json) => d.status === 'delivered')
      ? deliveries
      : undefined;
  });
  const { events } = (await (await s.call('GET', `${ADMIN}/carts/${cart.uuid}/history`)).json()) as Json;
  const moves = (events as Json[]).filter((e) => e.type === 'CartStatusChanged');
  t.deepEqual(
    (all as Json[]).map((d) => [d.source_event_id, d.webhook_id, d.event_kind, d.cart_uuid]),
    moves.map((e) => [e.event_id, hook.id, 'cart_status_updated', cart.uuid]),
  );
  t.true(all.every((d: Json) => d.attempts.length === 1 && d.attempts[0].status === 200));

  // Pages of one, oldest first, the next page named by the cursor and the Link header.
  const seen: string[] = [];
  let next: string | null = `${url}?limit=1`;
  while (next) {
    const res = await s.call('GET', next);
    const page = await ok(t, res);
    t.is(page.cart_uuid, cart.uuid);
    seen.push(...(page.deliveries as Json[]).map((d) => d.delivery_id));
    const link = res.headers.get('link');
    if (page.next_cursor) t.is(link, `<${url}?limit=1&cursor=${page.next_cursor}>; rel="next"`);
    next = page.next_cursor ? `${url}?limit=1&cursor=${page.next_cursor}` : null;
  }
  t.deepEqual(
    seen,
    all.map((d: Json) => d.delivery_id),
  );

  await problem(t, await s.call('GET', `${ADMIN}/carts/${UNKNOWN}/webhooks`), 404, 'cart_not_found');
  await problem(t, await s.call('GET', `${ADMIN}/carts/not-a-uuid/webhooks`), 404);
  await problem(t, await s.call('GET', `${url}?cursor=bm9wZQ`), 400, 'invalid_cursor');
  await problem(t, await s.call('GET', `${url}?limit=0`), 400);
  await problem(t, await s.call('GET', `${url}?status=delivered`), 400);
});
