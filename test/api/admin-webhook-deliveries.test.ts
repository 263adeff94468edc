/**
 * Webhook deliveries in the admin API (`/admin/v1/webhooks/...`, operator token) on a real service with
 * real local receivers and an injected clock: every attempt listed, filters and paging, parking,
 * redeliver (same webhook id, next attempt number), recover since a time, the synchronous test request
 * (signed, shaped as docs/webhooks.md says, not recorded, URL guard applied), and the refusals as problem documents.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { SAMPLE_CART_UUID } from '../../api/admin-webhook-deliveries.ts';
import { manualClock } from '../../domain/clock.ts';
import { ok, problem, whileTicking } from '../support/admin-answers.ts';
import { checkedOut, createWebhook, move, seedCatalog } from '../support/cart-world.ts';
import { startService, type TestService } from '../support/service.ts';
import { type Receiver, startReceiver } from '../support/webhook-receiver.ts';
import { verifyWebhook } from '../webhooks/verify-signature.ts';

const ADMIN = '/admin/v1';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const UNKNOWN = '00000000-0000-4000-8000-000000000000';
const FAST = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1s,1s' };

type Clock = ReturnType<typeof manualClock>;
// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
type Json = Record<string, any>;

async function deliveries(s: TestService, webhookId: string, query = ''): Promise<Json[]> {
  const res = await s.call('GET', `${ADMIN}/webhooks/${webhookId}/deliveries${query}`);
  if (res.status !== 200) throw new Error(`deliveries answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as Json).deliveries as Json[];
}

/** Waits until the subscription has `count` deliveries that all pass `settled`. */
function deliveriesWhen(s: TestService, webhookId: string, count: number, settled: (d: Json) => boolean) {
  return whileTicking(s, async () => {
    const list = await deliveries(s, webhookId, '?limit=500');
    return list.length === count && list.every(settled) ? list : undefined;
  });
}

/** Moves the clock past the next retry (1 s ± 10 %) and waits for the receiver's next request. */
async function nextAttempt(s: TestService, clock: Clock, receiver: Receiver, count: number) {
  clock.advance(1_200);
  await whileTicking(s, async () => (receiver.received.length >= count ? true : undefined));
}

test('deliveries are listed with every attempt, newest first, filtered by status and paged', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: FAST });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.script({ status: 500, body: 'boom' });
  const hook = await createWebhook(s, receiver.url, [1]);
  const cart = await checkedOut(s);

  // The first attempt fails: the delivery is `failed`, its next attempt scheduled.
  await receiver.waitFor(1);
  const [failed] = await deliveriesWhen(s, hook.id, 1, (d) => d.status === 'failed');
  t.regex(failed.delivery_id, UUID);
  t.is(failed.delivery_id, receiver.received[0].headers['x-service-webhook-id']);
  t.like(failed, {
    webhook_id: hook.id,
    event_kind: 'cart_status_updated',
    cart_uuid: cart.uuid,
    store_id: 1,
    attempt_count: 1,
    delivered_at: null,
    parked_reason: null,
  });
  t.like(failed.attempts[0], {
    attempt: 1,
    outcome: 'failed',
    status: 500,
    response_excerpt: 'boom',
    error_code: 'http_status',
    error: 'HTTP 500',
  });
  t.true(Date.parse(failed.next_attempt_at) > clock.now().getTime());
  t.false('body' in failed, 'the body (customer data) is not shown');

  // The retry succeeds.
  await nextAttempt(s, clock, receiver, 2);
  const [delivered] = await deliveriesWhen(s, hook.id, 1, (d) => d.status === 'delivered');
  t.is(delivered.attempt_count, 2);
  t.deepEqual(
    delivered.attempts.map((a: Json) => [a.attempt, a.outcome, a.status]),
    [
      [1, 'failed', 500],
      [2, 'delivered', 200],
    ],
  );
  for (const a of delivered.attempts) {
    t.true(Date.parse(a.attempted_at) >= Date.parse(a.started_at));
    t.true(Number.isInteger(a.duration_ms));
  }
  t.is(delivered.delivered_at, delivered.attempts[1].attempted_at);
  t.is(delivered.next_attempt_at, null);

  // One delivery alone.
  const one = await ok(t, await s.call('GET', `${ADMIN}/webhooks/deliveries/${delivered.delivery_id}`));
  t.deepEqual(one, { delivery: delivered });

  // Four more status moves, a second apart, each delivered before the next (so each is scheduled
  // at its own time, however late the fan-out runs): five deliveries, newest first.
  let received = 2;
  for (const status of ['preparing', 'ready_for_pickup', 'finished']) {
    clock.advance(1_000);
    await move(s, cart, status);
    await receiver.waitFor(++received);
  }
  clock.advance(1_000);
  await move(s, cart, 'with_review', { rating: 5 });
  const all = await deliveriesWhen(s, hook.id, 5, (d) => d.status === 'delivered');
  const times = all.map((d) => d.scheduled_at);
  t.deepEqual(times, [...times].sort().reverse(), 'newest first');
  t.is(all[4].delivery_id, delivered.delivery_id);
  t.deepEqual(
    receiver.received.slice(2).map((r) => r.headers['x-service-webhook-id']),
    all
      .slice(0, 4)
      .reverse()
      .map((d) => d.delivery_id),
  );

  // Pages of two, the filter kept in the link.
  const seen: string[] = [];
  let url = `${ADMIN}/webhooks/${hook.id}/deliveries?limit=2&status=delivered`;
  for (let page = 0; page < 3; page++) {
    const res = await s.call('GET', url);
    const body = await ok(t, res);
    seen.push(...body.deliveries.map((d: Json) => d.delivery_id));
    if (page < 2) {
      t.is(typeof body.next_cursor, 'string');
      const link = /^<([^>]+)>; rel="next"$/.exec(res.headers.get('link') ?? '')?.[1] as string;
      t.regex(link, /status=delivered/);
      url = link;
    } else {
      t.is(body.next_cursor, null);
      t.is(res.headers.get('link'), null);
    }
  }
  t.deepEqual(
    seen,
    all.map((d) => d.delivery_id),
  );

  // Filters.
  t.is((await deliveries(s, hook.id, '?status=delivered')).length, 5);
  t.deepEqual(await deliveries(s, hook.id, '?status=failed'), []);
  t.deepEqual(await deliveries(s, hook.id, '?status=failed,parked,pending,in_flight'), []);
});

test('a delivery is parked after its last attempt; redeliver makes it pending again, refused while it is pending', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: FAST });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.script({ status: 500 }, { status: 502 }, { status: 503 });
  const hook = await createWebhook(s, receiver.url, [1]);
  const cart = await checkedOut(s);
  await receiver.waitFor(1);
  const [first] = await deliveriesWhen(s, hook.id, 1, (d) => d.status === 'failed');

  // A second delivery of the same cart waits behind the first: pending, so not redeliverable.
  clock.advance(100);
  await move(s, cart, 'preparing');
  const [second] = await whileTicking(s, async () => {
    const list = await deliveries(s, hook.id);
    return list.length === 2 ? list : undefined;
  });
  t.is(second.status, 'pending');
  t.is(second.attempt_count, 0);
  const inProgress = await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${second.delivery_id}/redeliver`),
    409,
    'delivery_in_progress',
  );
  t.regex(inProgress.detail, /pending/);

  // Attempts 2 and 3 fail too: parked, and the second delivery goes out (and is delivered).
  await nextAttempt(s, clock, receiver, 2);
  await nextAttempt(s, clock, receiver, 4);
  const settled = await deliveriesWhen(
    s,
    hook.id,
    2,
    (d) => d.status === 'parked' || d.status === 'delivered',
  );
  const parked = settled.find((d) => d.delivery_id === first.delivery_id) as Json;
  t.like(parked, {
    status: 'parked',
    parked_reason: 'attempts_exhausted',
    attempt_count: 3,
    next_attempt_at: null,
  });
  t.truthy(parked.parked_at);
  t.deepEqual(
    parked.attempts.map((a: Json) => a.status),
    [500, 502, 503],
  );
  t.deepEqual(
    (await deliveries(s, hook.id, '?status=parked')).map((d) => d.delivery_id),
    [first.delivery_id],
  );

  // Redeliver: 202 with the delivery pending again (or already on its way), and so in the read model.
  clock.advance(60_000);
  const requestedAt = clock.now().toISOString();
  const answer = await ok(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${first.delivery_id}/redeliver`),
    202,
  );
  const onItsWay = ['pending', 'in_flight', 'delivered'];
  t.is(answer.delivery.delivery_id, first.delivery_id);
  t.true(onItsWay.includes(answer.delivery.status), answer.delivery.status);
  t.deepEqual(answer.delivery.redeliveries, [
    {
      reason: 'redeliver',
      requested_at: requestedAt,
      requested_by: { type: 'operator', id: 'bootstrap', name: 'bootstrap token' },
    },
  ]);
  t.like(answer.delivery, { parked_reason: null, parked_at: null });
  // 3, or 4 when the dispatcher has already started the redelivery.
  t.true([3, 4].includes(answer.delivery.attempt_count), String(answer.delivery.attempt_count));
  t.true(Number.isInteger(answer.revision) && Number.isInteger(answer.position));
  const shown = await ok(t, await s.call('GET', `${ADMIN}/webhooks/deliveries/${first.delivery_id}`));
  t.true(onItsWay.includes(shown.delivery.status), shown.delivery.status);
  t.is(shown.delivery.redeliveries.length, 1);

  // Appended to the delivery's own stream, by the operator.
  const inspect = await s.openStore();
  const stream = await inspect.readStream(`webhookdelivery-${hook.id}_${cart.uuid}`);
  const requested = stream.filter((e) => e.type === 'WebhookRedeliveryRequested');
  t.is(requested.length, 1);
  t.deepEqual(requested[0].data, {
    delivery_id: first.delivery_id,
    reason: 'redeliver',
    requested_at: requestedAt,
  });
  t.deepEqual(requested[0].metadata.actor, { type: 'operator', id: 'bootstrap' });
  t.is(requested[0].position, answer.position);

  // A delivered one may be sent again too; unknown ones are 404.
  const twice = await ok(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${second.delivery_id}/redeliver`),
    202,
  );
  t.is(twice.delivery.redeliveries.length, 1);
  await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${UNKNOWN}/redeliver`),
    404,
    'delivery_not_found',
  );
  await problem(t, await s.call('POST', `${ADMIN}/webhooks/deliveries/nope/redeliver`), 404);
  await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${first.delivery_id}/redeliver`, { force: true }),
    422,
    'validation_failed',
  );
});

test('recover redelivers the failed and parked deliveries of one subscription scheduled since a time', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s' } });
  await seedCatalog(s, [1, 2]);
  const receiver = await startReceiver(t);
  const other = await startReceiver(t);
  receiver.setDefault({ status: 500 });
  other.setDefault({ status: 500 });
  const hook = await createWebhook(s, receiver.url, [1]);
  const otherHook = await createWebhook(s, other.url, [2]);

  const early = clock.now().toISOString();
  await checkedOut(s, 1);
  await checkedOut(s, 2);
  const [old] = await deliveriesWhen(s, hook.id, 1, (d) => d.status === 'parked');
  const [otherParked] = await deliveriesWhen(s, otherHook.id, 1, (d) => d.status === 'parked');
  clock.advance(60_000);
  const middle = clock.now().toISOString();
  clock.advance(60_000);
  await checkedOut(s, 1);
  const list = await deliveriesWhen(s, hook.id, 2, (d) => d.status === 'parked');
  const recent = list[0];
  t.not(recent.delivery_id, old.delivery_id);

  // Since the middle: only the recent one, of this subscription only.
  receiver.setDefault({ status: 200 });
  const out = await ok(
    t,
    await s.call('POST', `${ADMIN}/webhooks/${hook.id}/recover`, { since: middle }),
    202,
  );
  t.deepEqual(out, {
    webhook_id: hook.id,
    since: middle,
    recovered: 1,
    delivery_ids: [recent.delivery_id],
    truncated: false,
    limit: 10_000,
  });
  const after = await deliveries(s, hook.id);
  const recentNow = after.find((x) => x.delivery_id === recent.delivery_id) as Json;
  t.not(recentNow.status, 'parked');
  t.deepEqual(
    recentNow.redeliveries.map((r: Json) => r.reason),
    ['recover'],
  );
  t.like(
    after.find((x) => x.delivery_id === old.delivery_id),
    { status: 'parked' },
  );
  t.like((await deliveries(s, otherHook.id))[0], { status: 'parked', attempt_count: 1, redeliveries: [] });

  // An offset names the same instant; from an hour before: the old one, the recent one is not
  // failed or parked any more.
  const anHourBefore = new Date(Date.parse(early) - 3_600_000).toISOString().replace('Z', '+00:00');
  const rest = await ok(
    t,
    await s.call('POST', `${ADMIN}/webhooks/${hook.id}/recover`, { since: anHourBefore }),
    202,
  );
  t.like(rest, {
    since: new Date(Date.parse(early) - 3_600_000).toISOString(),
    recovered: 1,
    delivery_ids: [old.delivery_id],
    truncated: false,
  });
  t.like(await ok(t, await s.call('POST', `${ADMIN}/webhooks/${hook.id}/recover`, { since: early }), 202), {
    recovered: 0,
    delivery_ids: [],
  });

  // Refusals.
  for (const body of [{}, { since: 'yesterday' }, { since: '2026-03-01' }, { since: early, extra: 1 }]) {
    const p = await problem(
      t,
      await s.call('POST', `${ADMIN}/webhooks/${hook.id}/recover`, body),
      422,
      'validation_failed',
    );
    t.true(p.errors.length > 0);
  }
  await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/${UNKNOWN}/recover`, { since: early }),
    404,
    'webhook_not_found',
  );
  // A disabled subscription would only park them again: refused until it is enabled.
  t.is((await s.call('PATCH', `${ADMIN}/webhooks/${otherHook.id}`, { enabled: false })).status, 200);
  await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/${otherHook.id}/recover`, { since: early }),
    409,
    'webhook_disabled',
  );
  await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${otherParked.delivery_id}/redeliver`),
    409,
    'webhook_disabled',
  );
  // Removed: its deliveries stay readable, but cannot be sent again.
  t.is((await s.call('DELETE', `${ADMIN}/webhooks/${otherHook.id}`)).status, 200);
  await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${otherParked.delivery_id}/redeliver`),
    409,
    'webhook_removed',
  );
  await ok(t, await s.call('GET', `${ADMIN}/webhooks/deliveries/${otherParked.delivery_id}`));
  t.is(other.received.length, 1, 'the other subscription got nothing more');
});

// Known failure: dispatcher/delivery-worker.ts reloads a queue event by event and prunes settled
// deliveries after each, so the `WebhookRedeliveryRequested` that follows a park finds no delivery
// to revive and nothing is sent. Make this a plain `test` once the worker prunes after the reload.
test('a redelivered or recovered delivery reaches the receiver again: same webhook id, next attempt number', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s' } });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.script({ status: 500 });
  const hook = await createWebhook(s, receiver.url, [1]);
  const early = clock.now().toISOString();
  await checkedOut(s);
  const [parked] = await deliveriesWhen(s, hook.id, 1, (d) => d.status === 'parked');

  clock.advance(60_000);
  await ok(t, await s.call('POST', `${ADMIN}/webhooks/deliveries/${parked.delivery_id}/redeliver`), 202);
  const got = await whileTicking(
    s,
    async () => (receiver.received.length >= 2 ? receiver.received : undefined),
    3_000,
  );
  t.is(got[1].headers['x-service-webhook-id'], parked.delivery_id);
  t.is(got[1].headers['x-service-delivery-attempt'], '2');
  t.is(got[1].raw.toString(), got[0].raw.toString(), 'the same body');
  const now = () => Math.floor(clock.now().getTime() / 1000);
  t.deepEqual(verifyWebhook(got[1].headers, got[1].raw, hook.secret, now()), { valid: true });
  const delivered = await whileTicking(
    s,
    async () => {
      const [d] = await deliveries(s, hook.id);
      return d.status === 'delivered' ? d : undefined;
    },
    3_000,
  );
  t.deepEqual(
    delivered.attempts.map((a: Json) => [a.attempt, a.outcome]),
    [
      [1, 'failed'],
      [2, 'delivered'],
    ],
  );

  // Recover: a second cart's parked delivery goes out again the same way.
  receiver.script({ status: 500 });
  await checkedOut(s);
  const list = await deliveriesWhen(s, hook.id, 2, (d) => d.status === 'parked' || d.status === 'delivered');
  const second = list.find((d) => d.status === 'parked') as Json;
  t.like(await ok(t, await s.call('POST', `${ADMIN}/webhooks/${hook.id}/recover`, { since: early }), 202), {
    recovered: 1,
    delivery_ids: [second.delivery_id],
  });
  const all = await whileTicking(
    s,
    async () => (receiver.received.length >= 4 ? receiver.received : undefined),
    3_000,
  );
  t.is(all[3].headers['x-service-webhook-id'], second.delivery_id);
  t.is(all[3].headers['x-service-delivery-attempt'], '2');
  t.deepEqual(verifyWebhook(all[3].headers, all[3].raw, hook.secret, now()), { valid: true });
});

test('test sends one signed sample request of either kind, in the documented shape, and records nothing', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  const hook = await createWebhook(s, receiver.url, [1]);
  const inspect = await s.openStore();

  // A real delivery, to compare the sample's shape with.
  await checkedOut(s);
  const [real] = await receiver.waitFor(1);
  await deliveriesWhen(s, hook.id, 1, (d) => d.status === 'delivered');
  const before = await inspect.headPosition();

  const res = await s.call('POST', `${ADMIN}/webhooks/${hook.id}/test`, {});
  const out = await ok(t, res);
  t.like(out.result, {
    outcome: 'delivered',
    status: 200,
    response_excerpt: 'ok',
    error_code: null,
    error: null,
  });
  t.true(Number.isInteger(out.result.duration_ms));
  const [, sent] = await receiver.waitFor(2);
  t.is(sent.headers['x-service-test'], 'true');
  t.is(sent.headers['x-service-delivery-attempt'], '1');
  t.is(sent.headers['x-service-webhook-id'], out.sample.webhook_id);
  t.regex(out.sample.webhook_id, UUID);
  t.not(out.sample.webhook_id, real.headers['x-service-webhook-id']);
  t.is(sent.headers.authorization, 'Bearer receiver-token-1');
  t.is(sent.headers['content-type'], 'application/json');
  t.deepEqual(verifyWebhook(sent.headers, sent.raw, hook.secret, Math.floor(Date.now() / 1000)), {
    valid: true,
  });
  t.is(out.sample.event, 'cart_status_updated');
  t.deepEqual(sent.body, out.sample.body);
  t.deepEqual(Object.keys(sent.body).sort(), Object.keys(real.body).sort());
  t.deepEqual(Object.keys(sent.body.cart).sort(), Object.keys(real.body.cart).sort());
  t.deepEqual(Object.keys(sent.body.cart.products[0]).sort(), Object.keys(real.body.cart.products[0]).sort());
  t.like(sent.body.cart, {
    uuid: SAMPLE_CART_UUID,
    store_id: 1,
    store_name: 'Store 1',
    status: 'verification',
  });
  t.regex(sent.body.cart.created_at, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);

  const abandoned = await ok(
    t,
    await s.call('POST', `${ADMIN}/webhooks/${hook.id}/test`, { event: 'cart_abandoned' }),
  );
  t.is(abandoned.result.outcome, 'delivered');
  const [, , third] = await receiver.waitFor(3);
  t.deepEqual(verifyWebhook(third.headers, third.raw, hook.secret, Math.floor(Date.now() / 1000)), {
    valid: true,
  });
  t.deepEqual(Object.keys(third.body).sort(), ['cart', 'customer', 'store', 'webhook_event']);
  t.is(third.body.webhook_event, 'cart_abandoned');
  t.deepEqual(third.body.store, {
    id: 1,
    name: 'Store 1',
    display_name: 'Store 1 Downtown',
    store_url: 'https://store1.example.com',
  });
  t.deepEqual(Object.keys(third.body.customer).sort(), [
    'DOB',
    'email',
    'first_name',
    'last_name',
    'phone_number',
  ]);
  t.deepEqual(Object.keys(third.body.cart).sort(), ['created_at', 'products', 'uuid']);
  t.is(third.body.cart.uuid, SAMPLE_CART_UUID);
  t.deepEqual(Object.keys(third.body.cart.products[0]).sort(), [
    'category',
    'lineage',
    'product_brand_name',
    'product_id',
    'product_image',
    'product_name',
    'product_price',
    'quantity',
    'subcategory',
    'weight_variant',
  ]);

  // The receiver's answer is reported as it came; nothing is recorded, nothing disabled.
  receiver.script({ status: 500, body: 'nope' }, { status: 410 });
  const failed = await ok(t, await s.call('POST', `${ADMIN}/webhooks/${hook.id}/test`, {}));
  t.like(failed.result, {
    outcome: 'failed',
    status: 500,
    response_excerpt: 'nope',
    error_code: 'http_status',
    error: 'HTTP 500',
  });
  const gone = await ok(t, await s.call('POST', `${ADMIN}/webhooks/${hook.id}/test`, {}));
  t.like(gone.result, { outcome: 'gone', status: 410 });
  t.is(await inspect.headPosition(), before, 'a test request appends no event');
  t.is((await deliveries(s, hook.id)).length, 1, 'only the real delivery is listed');
  t.true(((await (await s.call('GET', `${ADMIN}/webhooks/${hook.id}`)).json()) as Json).webhook.enabled);

  // Refusals.
  await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/${hook.id}/test`, { event: 'cart_created' }),
    422,
    'validation_failed',
  );
  await problem(t, await s.call('POST', `${ADMIN}/webhooks/${hook.id}/test`, { url: 'http://x' }), 422);
  await problem(t, await s.call('POST', `${ADMIN}/webhooks/${UNKNOWN}/test`, {}), 404, 'webhook_not_found');
});

test('test requests go through the URL guard: a private address refused by configuration is not contacted', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-deliveries-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const receiver = await startReceiver(t);
  const first = await startService(t, { dataDir: dir });
  await seedCatalog(first);
  const plain = await createWebhook(first, receiver.url, [1]);
  const loopback = await createWebhook(first, receiver.url.replace('http:', 'https:'), [1]);
  await first.service.stop();

  const s = await startService(t, { dataDir: dir, env: { PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'false' } });
  for (const [hook, reason] of [
    [plain, /^https_required: /],
    [loopback, /^loopback: /],
  ] as const) {
    const out = await ok(t, await s.call('POST', `${ADMIN}/webhooks/${hook.id}/test`, {}));
    t.like(out.result, { outcome: 'failed', status: null, error_code: 'url_refused' });
    t.regex(out.result.error, reason);
  }
  t.is(receiver.received.length, 0);
});

test('404 for unknown or removed subscriptions, 401 without the token, problems for bad parameters', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const hook = await createWebhook(s, 'http://127.0.0.1:9/hooks', [1]);
  const removed = await createWebhook(s, 'http://127.0.0.1:9/gone', [1]);
  t.is((await s.call('DELETE', `${ADMIN}/webhooks/${removed.id}`)).status, 200);

  for (const id of [UNKNOWN, removed.id]) {
    await problem(t, await s.call('GET', `${ADMIN}/webhooks/${id}/deliveries`), 404, 'webhook_not_found');
    await problem(t, await s.call('POST', `${ADMIN}/webhooks/${id}/test`, {}), 404, 'webhook_not_found');
    await problem(
      t,
      await s.call('POST', `${ADMIN}/webhooks/${id}/recover`, { since: '2026-01-01T00:00:00Z' }),
      404,
      'webhook_not_found',
    );
  }
  await problem(t, await s.call('GET', `${ADMIN}/webhooks/not-a-uuid/deliveries`), 404, 'not_found');
  await problem(t, await s.call('GET', `${ADMIN}/webhooks/deliveries/not-a-uuid`), 404, 'not_found');
  await problem(t, await s.call('GET', `${ADMIN}/webhooks/deliveries/${UNKNOWN}`), 404, 'delivery_not_found');
  t.deepEqual(await ok(t, await s.call('GET', `${ADMIN}/webhooks/${hook.id}/deliveries`)), {
    deliveries: [],
    next_cursor: null,
  });

  for (const query of ['status=bogus', 'status=', 'status=failed,nope', 'limit=0', 'limit=501', 'limit=x']) {
    const p = await problem(
      t,
      await s.call('GET', `${ADMIN}/webhooks/${hook.id}/deliveries?${query}`),
      400,
      'invalid_parameter',
    );
    t.true(p.errors.length > 0, query);
  }
  for (const cursor of [
    'garbage',
    Buffer.from('["x","y"]').toString('base64url'),
    Buffer.from('{}').toString('base64url'),
  ]) {
    await problem(
      t,
      await s.call('GET', `${ADMIN}/webhooks/${hook.id}/deliveries?cursor=${cursor}`),
      400,
      'invalid_cursor',
    );
  }

  const routes: Array<[string, string, unknown]> = [
    ['GET', `${ADMIN}/webhooks/${hook.id}/deliveries`, undefined],
    ['GET', `${ADMIN}/webhooks/deliveries/${UNKNOWN}`, undefined],
    ['POST', `${ADMIN}/webhooks/deliveries/${UNKNOWN}/redeliver`, undefined],
    ['POST', `${ADMIN}/webhooks/${hook.id}/recover`, { since: '2026-01-01T00:00:00Z' }],
    ['POST', `${ADMIN}/webhooks/${hook.id}/test`, {}],
  ];
  for (const [method, url, body] of routes) {
    await problem(t, await s.call(method, url, body, { authorization: '' }), 401);
    await problem(
      t,
      await s.call(method, url, body, { authorization: 'Bearer wrong-token-0123456789' }),
      401,
    );
  }
});
