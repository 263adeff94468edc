/**
 * Delivery behaviour on a real service, real receivers and an injected clock (docs/webhooks.md): retries on
 * the schedule with fresh signatures and the same webhook id, parking after the last attempt, per-cart
 * order under failures, isolation of a dead receiver, 410, `Retry-After`, the dispatcher's own URL
 * check, and restart durability.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { manualClock } from '../../domain/clock.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import {
  addItem,
  checkOut,
  createCart,
  createWebhook,
  idle,
  move,
  seedCatalog,
  ticking,
  type WorldCart,
} from '../support/cart-world.ts';
import { startService, type TestService } from '../support/service.ts';
import { type Receiver, startReceiver } from '../support/webhook-receiver.ts';
import { verifyWebhook } from './verify-signature.ts';

type Clock = ReturnType<typeof manualClock>;
const seconds = (clock: Clock) => Math.floor(clock.now().getTime() / 1000);

async function checkedOutCart(s: TestService, storeId = 1): Promise<WorldCart> {
  const cart = await createCart(s, storeId);
  await addItem(s, cart);
  await checkOut(s, cart);
  return cart;
}

async function deliveryEvents(s: TestService): Promise<RecordedEvent[]> {
  const store = await s.openStore();
  return store.readAll({ filter: { streamPrefixes: ['webhookdelivery-'] } });
}

/** Waits until `count` attempts are recorded (a receiver sees the request before its result is written). */
async function attempted(s: TestService, count: number): Promise<RecordedEvent[]> {
  for (let i = 0; ; i++) {
    const events = (await deliveryEvents(s)).filter((e) => e.type === 'WebhookDeliveryAttempted');
    if (events.length >= count) return events;
    if (i > 250) throw new Error(`${events.length} of ${count} attempts recorded`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const statuses = (r: Receiver) => r.received.map((x) => x.body.cart?.status);

async function dataDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-webhooks-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('failed attempts are retried on the schedule with a fresh signature and the same webhook id, then delivered', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,5s,5m' } });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.script({ status: 500, body: 'boom' }, { status: 502 });
  const hook = await createWebhook(s, receiver.url, [1]);
  await checkedOutCart(s);

  await attempted(s, 1);
  clock.advance(4_000);
  await idle(s, 200);
  t.is(receiver.received.length, 1, 'no retry before the 5 s wait (±10 %) is over');
  clock.advance(2_000);
  await ticking(s, () => receiver.waitFor(2));
  await attempted(s, 2);
  clock.advance(5 * 60_000 + 31_000);
  const got = await ticking(s, () => receiver.waitFor(3));

  t.deepEqual(
    got.map((r) => r.headers['x-service-delivery-attempt']),
    ['1', '2', '3'],
  );
  t.is(new Set(got.map((r) => r.headers['x-service-webhook-id'])).size, 1, 'one webhook id for all attempts');
  t.is(new Set(got.map((r) => r.headers['x-service-request-timestamp'])).size, 3, 'signed afresh each time');
  for (const r of got) {
    t.is(r.raw.toString(), got[0].raw.toString(), 'the same bytes every time');
    const at = Number(r.headers['x-service-request-timestamp']);
    t.deepEqual(verifyWebhook(r.headers, r.raw, hook.secret, at), { valid: true });
  }
  t.deepEqual(verifyWebhook(got[2].headers, got[2].raw, hook.secret, seconds(clock)), { valid: true });

  const events = await deliveryEvents(s);
  const attempts = events.filter((e) => e.type === 'WebhookDeliveryAttempted').map((e) => e.data);
  t.like(attempts[0], {
    attempt: 1,
    outcome: 'failed',
    status: 500,
    response_excerpt: 'boom',
    error_code: 'http_status',
  });
  t.like(attempts[1], { attempt: 2, outcome: 'failed', status: 502 });
  t.like(attempts[2], { attempt: 3, outcome: 'delivered', status: 200, next_attempt_at: null });
  for (const a of attempts as Array<{ duration_ms: number; attempted_at: string }>) {
    t.true(Number.isInteger(a.duration_ms) && a.duration_ms >= 0);
    t.regex(a.attempted_at, /Z$/);
  }
});

test('after the last attempt the delivery is parked, and the next one of the same cart leaves only then, in order', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,10s' } });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.script({ status: 500 }, { status: 500 });
  await createWebhook(s, receiver.url, [1]);
  const cart = await checkedOutCart(s);
  await attempted(s, 1);
  await move(s, cart, 'preparing');
  await move(s, cart, 'ready_for_pickup');
  await idle(s, 300);
  t.deepEqual(statuses(receiver), ['verification'], 'later moves wait for the first delivery');

  clock.advance(11_000);
  await ticking(s, () => receiver.waitFor(4));
  t.deepEqual(statuses(receiver), ['verification', 'verification', 'preparing', 'ready_for_pickup']);
  const events = await deliveryEvents(s);
  const parked = events.filter((e) => e.type === 'WebhookDeliveryParked');
  t.is(parked.length, 1);
  t.like(parked[0].data, { reason: 'attempts_exhausted' });
});

test('a dead receiver does not delay a healthy one', async (t) => {
  const clock = manualClock(new Date());
  // The dead receiver's requests hang for the whole test: a healthy delivery that waited for one of
  // them would wait out this timeout, far past the wait for the healthy receiver below.
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_TIMEOUT: '120s' } });
  await seedCatalog(s);
  const dead = await startReceiver(t);
  dead.setDefault({ hang: true });
  const healthy = await startReceiver(t);
  await createWebhook(s, dead.url, [1]);
  await createWebhook(s, healthy.url, [1]);
  const carts = [await checkedOutCart(s), await checkedOutCart(s), await checkedOutCart(s)];
  for (const c of carts) await move(s, c, 'preparing');
  await healthy.waitFor(6, 30_000);
  t.is(dead.received.length, 3, 'one request per cart is hanging at the dead receiver');
  for (const c of carts) {
    t.deepEqual(
      healthy.received.filter((r) => r.body.cart.uuid === c.uuid).map((r) => r.body.cart.status),
      ['verification', 'preparing'],
    );
  }
});

test('410 Gone parks the delivery and disables the subscription; later events are not sent to it', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const gone = await startReceiver(t);
  gone.script({ status: 410 });
  const hook = await createWebhook(s, gone.url, [1]);
  const cart = await checkedOutCart(s);
  await gone.waitFor(1);
  let subscription: { webhook: { enabled: boolean; disabled_reason: string | null } } | undefined;
  for (let i = 0; i < 100; i++) {
    subscription = (await (
      await s.call('GET', `/admin/v1/webhooks/${hook.id}`)
    ).json()) as typeof subscription;
    if (subscription?.webhook.enabled === false) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  t.like(subscription?.webhook, { enabled: false, disabled_reason: 'receiver_gone' });
  await move(s, cart, 'preparing');
  await idle(s, 300);
  t.is(gone.received.length, 1);
  const events = await deliveryEvents(s);
  t.like(events.find((e) => e.type === 'WebhookDeliveryParked')?.data, { reason: 'receiver_gone' });
  t.is(
    events.filter((e) => e.type === 'WebhookDeliveryScheduled').length,
    1,
    'nothing owed after the disable',
  );
});

test('410 Gone while the cart’s next delivery waits behind it: that one is parked, not sent', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const gone = await startReceiver(t);
  gone.script({ status: 410, delayMs: 300 });
  await createWebhook(s, gone.url, [1]);
  const cart = await checkedOutCart(s);
  await gone.waitFor(1); // answered 410 in 300 ms
  await move(s, cart, 'preparing');
  let parked: RecordedEvent[] = [];
  for (let i = 0; i < 250 && parked.length < 2; i++) {
    parked = (await deliveryEvents(s)).filter((e) => e.type === 'WebhookDeliveryParked');
    await new Promise((r) => setTimeout(r, 20));
  }
  t.deepEqual(
    parked.map((e) => (e.data as { reason: string }).reason),
    ['receiver_gone', 'subscription_disabled'],
  );
  await idle(s, 300);
  t.is(gone.received.length, 1, 'nothing more to a receiver that answered 410');
});

test('429 and 503 with Retry-After wait as long as the receiver asks, not the schedule', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,5s,5s,5s' } });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  const at = new Date(clock.now().getTime() + 300_000).toUTCString();
  receiver.script(
    { status: 429, headers: { 'retry-after': '120' } },
    { status: 503, headers: { 'retry-after': at } },
  );
  await createWebhook(s, receiver.url, [1]);
  await checkedOutCart(s);
  await attempted(s, 1);
  clock.advance(60_000);
  await idle(s, 200);
  t.is(receiver.received.length, 1, 'the schedule’s 5 s does not apply');
  clock.advance(61_000);
  await ticking(s, () => receiver.waitFor(2));
  await attempted(s, 2);
  clock.advance(150_000);
  await idle(s, 200);
  t.is(receiver.received.length, 2, 'the HTTP-date Retry-After is honoured');
  clock.advance(30_000);
  await ticking(s, () => receiver.waitFor(3));
  t.is(receiver.received[2].headers['x-service-delivery-attempt'], '3');
});

test('the dispatcher checks the URL again before sending: a private address refused by configuration gets nothing', async (t) => {
  const dir = await dataDir(t);
  const receiver = await startReceiver(t);
  const first = await startService(t, { dataDir: dir });
  await seedCatalog(first);
  await createWebhook(first, receiver.url, [1]);
  await first.service.stop();
  const clock = manualClock(new Date());
  const s = await startService(t, {
    dataDir: dir,
    clock,
    env: { PDS_ALLOW_PRIVATE_WEBHOOK_URLS: 'false', PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1s' },
  });
  await checkedOutCart(s);
  await attempted(s, 1);
  clock.advance(2_000);
  await idle(s, 300);
  const events = await deliveryEvents(s);
  const attempts = events.filter((e) => e.type === 'WebhookDeliveryAttempted').map((e) => e.data);
  t.is(attempts.length, 2);
  for (const a of attempts) t.like(a, { outcome: 'failed', error_code: 'url_refused', status: null });
  t.like(events.at(-1)?.data, { reason: 'attempts_exhausted' });
  t.is(receiver.received.length, 0);
});

test('a pending retry survives a restart: the restarted service sends it when it falls due', async (t) => {
  const dir = await dataDir(t);
  const clock = manualClock(new Date());
  const env = { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1m,1m' };
  const receiver = await startReceiver(t);
  receiver.script({ status: 500 });
  const first = await startService(t, { dataDir: dir, clock, env });
  await seedCatalog(first);
  const hook = await createWebhook(first, receiver.url, [1]);
  await checkedOutCart(first);
  await attempted(first, 1);
  await first.service.stop();

  clock.advance(70_000);
  const second = await startService(t, { dataDir: dir, clock, env });
  const got = await ticking(second, () => receiver.waitFor(2));
  t.is(got[1].headers['x-service-delivery-attempt'], '2');
  t.is(got[1].headers['x-service-webhook-id'], got[0].headers['x-service-webhook-id']);
  t.deepEqual(verifyWebhook(got[1].headers, got[1].raw, hook.secret, seconds(clock)), { valid: true });
});

test('events scheduled while an attempt of the same cart is in flight: each result recorded, each webhook sent once', async (t) => {
  const s = await startService(t);
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.setDefault({ status: 200, delayMs: 60 });
  await createWebhook(s, receiver.url, [1]);
  const cart = await checkedOutCart(s);
  // Each move lands while the previous webhook is still at the slow receiver.
  for (const status of ['preparing', 'ready_for_pickup', 'finished']) await move(s, cart, status);
  await receiver.waitFor(4);
  const events = await attempted(s, 4);
  t.deepEqual(
    events.map((e) => (e.data as { outcome: string }).outcome),
    ['delivered', 'delivered', 'delivered', 'delivered'],
  );
  await idle(s, 200);
  t.deepEqual(statuses(receiver), ['verification', 'preparing', 'ready_for_pickup', 'finished']);
});
