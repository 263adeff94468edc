/**
 * Recovery from what a real event store does (docs/operations.md, "Recovery"): subscriptions dropped
 * mid-stream, appends refused as unavailable (before writing, or after with the answer lost), slow
 * acknowledgements. Injected around the embedded store (`support/faulty-store.ts`); after each fault
 * the service recovers by itself, loses no event, and sends no webhook twice except with the same
 * `X-Service-Webhook-Id`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { appendRetrying, createCommandHandler } from '../application/command-handler.ts';
import { createFollower } from '../application/follower.ts';
import { Supervisor } from '../application/supervisor.ts';
import { eventRegistry } from '../domain/index.ts';
import { EventStoreUnavailableError, type RecordedEvent } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import { addItem, checkOut, createCart, createWebhook, move, seedCatalog } from './support/cart-world.ts';
import { standaloneFanOut } from './support/delivery-worker.ts';
import { type FaultyStore, faultyStore } from './support/faulty-store.ts';
import { META, rawEvent } from './support/raw-events.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const event = (n: number) => rawEvent('Noted', { n });

async function openFaulty(t: import('ava').ExecutionContext): Promise<FaultyStore> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pds-recovery-'));
  const inner = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(async () => {
    await inner.close();
    await rm(dir, { recursive: true, force: true });
  });
  return faultyStore(inner);
}

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('the supervisor: pauses grow with failures in a row, within bounds, and start small again once up', (t) => {
  const top = new Supervisor({ minDelayMs: 100, maxDelayMs: 1_000, random: () => 0.999 });
  const low = new Supervisor({ minDelayMs: 100, maxDelayMs: 1_000, random: () => 0 });
  t.deepEqual(
    [0, 1, 2, 3, 4, 10].map((n) => top.delay(n)),
    [100, 200, 400, 799, 999, 999],
  );
  t.deepEqual(
    [0, 3, 10].map((n) => low.delay(n)),
    [50, 50, 50],
  );
  const s = top.watch('a');
  t.deepEqual(top.down(), []);
  t.is(s.dropped(new Error('gone')), 100);
  t.is(s.dropped(new Error('gone again')), 200);
  t.deepEqual(top.down(), ['a']);
  s.resubscribed();
  s.up();
  t.is(s.dropped(new Error('later')), 100);
  t.like(top.health()[0], { name: 'a', state: 'down', drops: 3, resubscriptions: 1, last_error: 'later' });
  s.stopped();
  t.deepEqual(top.health(), []);
});

test('a follower whose subscription drops mid-stream subscribes again and applies every event once, in order', async (t) => {
  const store = await openFaulty(t);
  for (let i = 0; i < 50; i++) await store.append(`note-${i % 5}`, [event(i)]);
  const supervisor = new Supervisor({ minDelayMs: 10, maxDelayMs: 50 });
  const applied: number[] = [];
  // Holds the follower inside the batch that reaches 14 events until the test has dropped its
  // subscription: the drop comes mid-stream, whatever the machine's speed.
  let held: PromiseWithResolvers<void> | undefined = Promise.withResolvers<void>();
  const follower = createFollower({
    name: 'notes',
    store,
    supervisor,
    filter: { streamPrefixes: ['note-'] },
    maxBatchSize: 7,
    async apply(batch: RecordedEvent[]) {
      for (const e of batch) applied.push((e.data as { n: number }).n);
      if (held && applied.length >= 14) await held.promise;
    },
  });
  const subscribedAgain = (times: number) =>
    until(`subscribed again ${times} times`, () => {
      const [health] = supervisor.health();
      return health.resubscriptions >= times && health.state === 'up';
    });
  follower.start();
  await until('some applied', () => applied.length >= 14);
  t.is(store.dropSubscriptions(), 1);
  held.resolve();
  held = undefined;
  await follower.caughtUp;
  await subscribedAgain(1);
  for (let i = 50; i < 80; i++) {
    await store.append(`note-${i % 5}`, [event(i)]);
    if (i === 60) t.is(store.dropSubscriptions(), 1, 'live again, and dropped again mid-stream');
  }
  await until('all applied', () => applied.length >= 80);
  await follower.settle();
  t.deepEqual(
    applied,
    Array.from({ length: 80 }, (_, i) => i),
  );
  // Up again once the new subscription has caught up (which may come a moment after the last event).
  await subscribedAgain(2);
  await follower.stop();
  await follower.done;
});

test('a follower whose apply fails is handed the same batch again after a pause, and goes on', async (t) => {
  const store = await openFaulty(t);
  for (let i = 0; i < 10; i++) await store.append('note-1', [event(i)]);
  const supervisor = new Supervisor({ minDelayMs: 10, maxDelayMs: 20 });
  let failures = 2;
  const applied: number[] = [];
  const follower = createFollower({
    name: 'flaky',
    store,
    supervisor,
    filter: { streamPrefixes: ['note-'] },
    maxBatchSize: 4,
    apply(batch) {
      if (applied.length === 4 && failures-- > 0) throw new Error('read store busy');
      for (const e of batch) applied.push((e.data as { n: number }).n);
    },
  });
  follower.start();
  await follower.caughtUp;
  t.deepEqual(applied, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  t.like(supervisor.health()[0], { drops: 2, resubscriptions: 2, state: 'up' });
  await follower.stop();
});

test('an append refused as unavailable is tried again, once written even when the first answer was lost', async (t) => {
  const store = await openFaulty(t);
  store.failAppends(2, 'before');
  await appendRetrying(store, 'note-a', [event(1)], { expectedRevision: 'no_stream' });
  store.failAppends(1, 'after');
  const second = await appendRetrying(store, 'note-a', [event(2)], { expectedRevision: 0 });
  t.is(second.nextExpectedRevision, 1);
  t.deepEqual(
    (await store.readStream('note-a')).map((e) => (e.data as { n: number }).n),
    [1, 2],
  );
  store.failAppends(10, 'before');
  await t.throwsAsync(appendRetrying(store, 'note-a', [event(3)], { expectedRevision: 1 }), {
    instanceOf: EventStoreUnavailableError,
  });
  t.is((await store.readStream('note-a')).length, 2);
  t.is(store.injected.failedAppends, 7);
});

test('a command whose append is answered unavailable after it was written is not written twice', async (t) => {
  const store = await openFaulty(t);
  const commands = createCommandHandler(store, eventRegistry);
  const { decider } = await import('../domain/brand.ts');
  const meta = {
    correlationId: 'c',
    causationId: null,
    actor: { type: 'platform', id: 'p' },
    at: META.occurred_at,
  } as const;
  store.failAppends(1, 'after');
  await commands.handle(
    'brand-1',
    decider,
    { type: 'UpsertBrand', brand_id: 1, fields: { name: 'A' }, at: META.occurred_at },
    meta,
  );
  t.is((await store.readStream('brand-1')).length, 1);
});

test('the service recovers from dropped subscriptions by itself: /readyz names what is down, nothing is lost or sent twice', async (t) => {
  let store: FaultyStore | undefined;
  const s = await startService(t, {
    env: { PDS_WEBHOOK_TIMEOUT: '2s' },
    wrapStore: (inner) => {
      store = faultyStore(inner);
      return store;
    },
  });
  const faulty = store as FaultyStore;
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  await createWebhook(s, receiver.url, [1]);
  const carts = [];
  for (let i = 0; i < 3; i++) {
    const cart = await createCart(s, 1);
    await addItem(s, cart);
    carts.push(cart);
  }
  // Drop everything while cart events are being written and delivered, with slow acks.
  faulty.delayAcks(30);
  await checkOut(s, carts[0]);
  t.true(faulty.dropSubscriptions() >= 6);
  const down = (await (await s.call('GET', '/readyz')).json()) as { status: string; failing: string[] };
  t.is(down.status, 'not_ready');
  t.true(
    down.failing.some((name: string) => name.startsWith('subscription:')),
    JSON.stringify(down.failing),
  );
  await checkOut(s, carts[1]);
  await move(s, carts[0], 'preparing');
  faulty.dropSubscriptions();
  await checkOut(s, carts[2]);
  await until('ready again', async () => (await s.call('GET', '/readyz')).status === 200, 15_000);

  // Every status change was delivered; a repeat only with the same webhook id.
  await receiver.waitFor(4, 15_000);
  const ids = new Map<string, string>();
  for (const r of receiver.received) {
    const key = `${r.body.cart.uuid}:${r.body.cart.status}`;
    const id = String(r.headers['x-service-webhook-id']);
    t.true(!ids.has(key) || ids.get(key) === id, `${key} sent with two ids`);
    ids.set(key, id);
  }
  t.deepEqual(
    [...ids.keys()].sort(),
    [
      `${carts[0].uuid}:preparing`,
      `${carts[0].uuid}:verification`,
      `${carts[1].uuid}:verification`,
      `${carts[2].uuid}:verification`,
    ].sort(),
  );
  // The read models went on too: every cart is in the partner-facing carts model.
  const metrics = await (await s.call('GET', '/metrics')).text();
  t.regex(metrics, /pds_subscription_drops_total\{subscription="projection_carts"\} [1-9]/);
  t.regex(metrics, /pds_subscription_up\{subscription="webhook_fan_out"\} 1/);
  const projections = (await (await s.call('GET', '/admin/v1/projections')).json()) as {
    projections: Array<{ state: string }>;
  };
  t.true(projections.projections.every((p: { state: string }) => p.state === 'live'));
  t.regex(s.logs(), /subscription dropped: subscribing again/);
});

test('a cart event fanned out again, after the store forgot its event ids, schedules no second delivery', async (t) => {
  let store: FaultyStore | undefined;
  const s = await startService(t, {
    wrapStore: (inner) => {
      store = faultyStore(inner);
      return store;
    },
  });
  const faulty = store as FaultyStore;
  faulty.forgetEventIds();
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  await createWebhook(s, receiver.url, [1]);
  const cart = await createCart(s, 1);
  await addItem(s, cart);
  await checkOut(s, cart);
  await receiver.waitFor(1);
  // A second dispatcher's consumer of the same cart events (a new group reads them from the start),
  // as a message handed out again after an EventStoreDB restart would be.
  const { fanOut: again, stop } = await standaloneFanOut(t, faulty, s.dataDir, { group: 'fan-out-again' });
  await until('the event handled again', () => again.stats().events >= 1);
  await stop();
  const scheduled = (await faulty.readAll({ filter: { streamPrefixes: ['webhookdelivery-'] } })).filter(
    (e) => e.type === 'WebhookDeliveryScheduled',
  );
  t.is(scheduled.length, 1);
  t.is(again.stats().scheduled, 0);
});
