/**
 * Fault injection (issue 8): receivers that time out, reset the connection, answer 5xx or are down;
 * an event store locked by another writer; SIGKILL of the service while it projects, abandons carts
 * and rebuilds a read model. Nothing is lost; what is repeated is allowed by at-least-once.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import path from 'node:path';
import test from 'ava';
import { manualClock } from '../domain/clock.ts';
import type { RecordedEvent } from '../eventstore/port.ts';
import { openSqliteEventStore } from '../eventstore/sqlite.ts';
import {
  addItem,
  type Caller,
  checkOut,
  createCart,
  createWebhook,
  seedCatalog,
  ticking,
} from './support/cart-world.ts';
import { childDataDir, killChild, serveChild } from './support/child-service.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

async function deliveryAttempts(s: TestService): Promise<Array<Record<string, unknown>>> {
  const store = await s.openStore();
  return (await store.readAll({ filter: { streamPrefixes: ['webhookdelivery-'] } }))
    .filter((e) => e.type === 'WebhookDeliveryAttempted')
    .map((e) => e.data as Record<string, unknown>);
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Another process holding the store's write lock for `ms` (SQLite's busy wait blocks the waiting
 * thread, so the holder must not be this process). Resolves when the lock is taken; `released` when
 * the holder has committed and exited.
 */
async function holdWriteLock(file: string, ms: number): Promise<{ released: Promise<unknown> }> {
  // The service may be writing as the holder starts: it waits its turn for the lock, as a writer does.
  const script = `const { DatabaseSync } = require('node:sqlite');
    const db = new DatabaseSync(${JSON.stringify(file)});
    db.exec('PRAGMA busy_timeout = 10000');
    db.exec('BEGIN IMMEDIATE');
    process.stdout.write('locked');
    setTimeout(() => { db.exec('COMMIT'); db.close(); }, ${ms});`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const released = once(child, 'exit');
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once('data', () => resolve());
    // A holder that never took the lock fails the test instead of leaving it waiting.
    child.once('exit', (code) => reject(new Error(`the lock holder exited (${code}) without the lock`)));
  });
  return { released };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

test('a receiver that times out, resets, answers 500, then recovers: every failure recorded, then delivered once', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, {
    clock,
    env: { PDS_WEBHOOK_TIMEOUT: '500ms', PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1s,1s,1s,1s' },
  });
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  receiver.script({ hang: true }, { reset: true }, { status: 500, body: 'oops' });
  await createWebhook(s, receiver.url, [1]);
  const cart = await createCart(s, 1);
  await addItem(s, cart);
  await checkOut(s, cart);
  for (let n = 1; n <= 3; n++) {
    await until(`attempt ${n}`, async () => ((await deliveryAttempts(s)).length >= n ? true : undefined));
    clock.advance(1_500);
  }
  await ticking(s, () => receiver.waitFor(4));
  const attempts = await until('4 attempts', async () => {
    const a = await deliveryAttempts(s);
    return a.length >= 4 ? a : undefined;
  });
  t.deepEqual(
    attempts.map((a) => [a.attempt, a.outcome, a.error_code]),
    [
      [1, 'failed', 'timeout'],
      [2, 'failed', 'connection_reset'],
      [3, 'failed', 'http_status'],
      [4, 'delivered', null],
    ],
  );
  t.is(receiver.received.length, 4);
});

test('a receiver that is down (connection refused) is retried and parked after the last attempt', async (t) => {
  const clock = manualClock(new Date());
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1s' } });
  await seedCatalog(s);
  await createWebhook(s, `http://127.0.0.1:${await closedPort()}/hooks`, [1]);
  const cart = await createCart(s, 1);
  await addItem(s, cart);
  await checkOut(s, cart);
  await until('attempt 1', async () => ((await deliveryAttempts(s)).length >= 1 ? true : undefined));
  clock.advance(1_500);
  const attempts = await ticking(s, () =>
    until('attempt 2', async () => {
      const a = await deliveryAttempts(s);
      return a.length >= 2 ? a : undefined;
    }),
  );
  t.deepEqual(
    attempts.map((a) => [a.outcome, a.error_code, a.status]),
    [
      ['failed', 'connection_refused', null],
      ['failed', 'connection_refused', null],
    ],
  );
  const store = await s.openStore();
  const parked = (await store.readAll({ filter: { eventTypes: ['WebhookDeliveryParked'] } }))[0];
  t.like(parked?.data, { reason: 'attempts_exhausted' });
});

// SQLite's busy wait blocks the waiting thread, and with it every timer of this process for up to 5 s:
// the two lock tests run serially (AVA runs them before the concurrent ones), so a webhook timeout of
// another test never fires during their wait.
test.serial(
  'an event store locked by another writer: a short lock is waited out, a long one is a 503 that loses nothing',
  async (t) => {
    const s = await startService(t);
    const store = await s.openStore();
    const file = path.join(s.dataDir, 'events.db');

    // Shorter than the busy timeout (5 s): the write waits for the lock and succeeds.
    const short = await holdWriteLock(file, 1_000);
    const waited = await s.call('PUT', '/platform/v1/brands/1', { name: 'Waited' });
    t.is(waited.status, 201);
    await short.released;

    // Longer: a 503 with Retry-After, nothing appended; the retry succeeds once the lock is gone.
    const before = await store.headPosition();
    const long = await holdWriteLock(file, 6_500);
    const refused = await s.call('PUT', '/platform/v1/brands/2', { name: 'Later' });
    t.is(refused.status, 503);
    t.is(refused.headers.get('content-type'), 'application/problem+json');
    t.is(refused.headers.get('retry-after'), '1');
    t.like(await refused.json(), { code: 'event_store_unavailable' });
    await long.released;
    t.is(await store.headPosition(), before, 'nothing appended by the refused write');
    const retried = await s.call('PUT', '/platform/v1/brands/2', { name: 'Later' });
    t.is(retried.status, 201);
  },
);

test.serial(
  'the dispatcher retries through a locked event store: the webhook still leaves, once',
  async (t) => {
    const s = await startService(t);
    await seedCatalog(s);
    const receiver = await startReceiver(t);
    await createWebhook(s, receiver.url, [1]);
    const cart = await createCart(s, 1);
    await addItem(s, cart);
    await checkOut(s, cart);
    // Locked right after the checkout (by another process): the fan-out's and the worker's appends meet it.
    const lock = await holdWriteLock(path.join(s.dataDir, 'events.db'), 6_000);
    await lock.released;
    await receiver.waitFor(1, 20_000);
    await new Promise((r) => setTimeout(r, 300));
    t.is(receiver.received.length, 1);
    t.is(receiver.received[0].body.cart.status, 'verification');
  },
);

async function cartEvents(dataDir: string, type: string): Promise<RecordedEvent[]> {
  const store = await openSqliteEventStore(path.join(dataDir, 'events.db'));
  try {
    return await store.readAll({ filter: { eventTypes: [type] } });
  } finally {
    await store.close();
  }
}

async function fillCarts(api: Caller, count: number): Promise<string[]> {
  const uuids: string[] = [];
  for (let i = 0; i < count; i++) {
    const cart = await createCart(api, 1);
    await addItem(api, cart);
    uuids.push(cart.uuid);
  }
  return uuids;
}

test('SIGKILL while carts are being abandoned: after a restart every idle cart has exactly one CartAbandoned', async (t) => {
  const dir = await childDataDir(t);
  const env = { PDS_ABANDON_AFTER: '3s' };
  const first = await serveChild(t, dir, env);
  await seedCatalog(first.api);
  const uuids = await fillCarts(first.api, 60);
  // The first deadlines fall due about now; kill as soon as some carts are abandoned.
  await until('some abandonments', async () =>
    (await cartEvents(dir, 'CartAbandoned')).length > 0 ? true : undefined,
  );
  await killChild(first);
  const partial = (await cartEvents(dir, 'CartAbandoned')).length;

  const second = await serveChild(t, dir, env);
  const abandoned = await until('all abandoned', async () => {
    const events = await cartEvents(dir, 'CartAbandoned');
    return events.length >= uuids.length ? events : undefined;
  });
  await new Promise((r) => setTimeout(r, 500));
  const again = await cartEvents(dir, 'CartAbandoned');
  t.is(again.length, uuids.length, `exactly one per cart (${partial} before the kill)`);
  t.deepEqual(new Set(abandoned.map((e) => e.streamId)), new Set(uuids.map((u) => `cart-${u}`)));
  await killChild(second);
});

test('SIGKILL during projection and during a rebuild: after a restart the read models hold every record', async (t) => {
  const dir = await childDataDir(t);
  const first = await serveChild(t, dir);
  await first.api.call('PUT', '/platform/v1/brands/1', { name: 'Brand One' });
  await first.api.call('PUT', '/platform/v1/products/1', {
    name: 'Blue Dream',
    brand_id: 1,
    kind: 'flower',
    lineage: 'hybrid',
  });
  await seedCatalog(first.api, [1]);
  const menu = 300;
  await Promise.all(
    Array.from({ length: 6 }, async (_, w) => {
      for (let i = w; i < menu; i += 6) {
        const res = await first.api.call('PUT', `/platform/v1/stores/1/menu_products/${1_000 + i}`, {
          product_id: 1,
          prices: { gram: '10.00' },
        });
        if (res.status >= 300) throw new Error(await res.text());
      }
    }),
  );
  await killChild(first); // the projector was following the writes

  const second = await serveChild(t, dir);
  const partner = (await (
    await second.api.call('POST', '/admin/v1/partners', {
      name: 'Menu feed',
      kind: 'store_menu_feed',
      store_ids: [1],
    })
  ).json()) as { api_key: string };
  const count = async (base: string) => {
    let total = 0;
    let cursor: string | null = null;
    do {
      const url: string = `${base}/partner/store-menu-feed/v1/menu_products?limit=500${cursor ? `&cursor=${cursor}` : ''}`;
      const res = await fetch(url, { headers: { authorization: `Bearer ${partner.api_key}` } });
      if (res.status !== 200) return -1;
      const body = (await res.json()) as { menu_products: unknown[]; next_cursor: string | null };
      total += body.menu_products.length;
      cursor = body.next_cursor;
    } while (cursor);
    return total;
  };
  t.is(
    await until('the key', async () => ((await count(second.base)) >= 0 ? count(second.base) : undefined)),
    menu + 1,
  );

  // A rebuild killed half way: the restart serves complete read models (the shadow is discarded).
  const rebuild = await second.api.call('POST', '/admin/v1/projections/catalog/rebuild');
  t.true(rebuild.status < 300, await rebuild.text());
  await new Promise((r) => setTimeout(r, 30));
  await killChild(second);
  const third = await serveChild(t, dir);
  t.is(await count(third.base), menu + 1);
  await killChild(third);
});
