/**
 * SIGKILL durability of webhook delivery (docs/webhooks.md): the service runs as a real child process and is
 * killed mid-attempt and mid-fan-out, then restarted on the same data. Nothing owed is lost; what is
 * sent twice (at-least-once) carries the same `X-Service-Webhook-Id`; per-cart order holds.
 */
import { once } from 'node:events';
import path from 'node:path';
import test from 'ava';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import {
  addItem,
  checkOut,
  createCart,
  createWebhook,
  move,
  seedCatalog,
  type WorldCart,
} from '../support/cart-world.ts';
import { childDataDir, killChild, serveChild } from '../support/child-service.ts';
import { type ReceivedWebhook, startReceiver } from '../support/webhook-receiver.ts';

const byCart = (got: ReceivedWebhook[], c: WorldCart) => got.filter((r) => r.body.cart.uuid === c.uuid);

test('SIGKILL during an attempt: after a restart the attempt is recorded as interrupted and sent again with the same id, in order', async (t) => {
  const dir = await childDataDir(t);
  const receiver = await startReceiver(t);
  receiver.script({ hang: true });
  const first = await serveChild(t, dir);
  await seedCatalog(first.api);
  await createWebhook(first.api, receiver.url, [1]);
  const cart = await createCart(first.api, 1);
  await addItem(first.api, cart);
  await checkOut(first.api, cart);
  await move(first.api, cart, 'preparing');
  await receiver.waitFor(1); // the first attempt is in flight, the receiver holds it
  await killChild(first);

  const second = await serveChild(t, dir);
  const got = await receiver.waitFor(3, 15_000);
  t.deepEqual(
    got.map((r) => [r.body.cart.status, r.headers['x-service-delivery-attempt']]),
    [
      ['verification', '1'],
      ['verification', '2'],
      ['preparing', '1'],
    ],
  );
  t.is(got[0].headers['x-service-webhook-id'], got[1].headers['x-service-webhook-id']);
  // A graceful stop lets the attempt under way finish and be recorded.
  const exited = once(second.process, 'exit');
  second.process.kill('SIGTERM');
  t.deepEqual(await exited, [0, null]);

  const store = await openSqliteEventStore(path.join(dir, 'events.db'));
  t.teardown(() => store.close());
  const attempts = (await store.readAll({ filter: { streamPrefixes: ['webhookdelivery-'] } }))
    .filter((e) => e.type === 'WebhookDeliveryAttempted')
    .map((e) => e.data as { outcome: string; attempt: number });
  t.deepEqual(
    attempts.map((a) => [a.attempt, a.outcome]),
    [
      [1, 'interrupted'],
      [2, 'delivered'],
      [1, 'delivered'],
    ],
  );
});

test('SIGKILL right after a burst of status changes: every change is delivered after the restart, duplicates only with the same id', async (t) => {
  const dir = await childDataDir(t);
  const receiver = await startReceiver(t);
  const first = await serveChild(t, dir);
  await seedCatalog(first.api);
  await createWebhook(first.api, receiver.url, [1]);
  const carts: WorldCart[] = [];
  for (let i = 0; i < 15; i++) {
    const cart = await createCart(first.api, 1);
    await addItem(first.api, cart);
    carts.push(cart);
  }
  await Promise.all(
    carts.map(async (c) => {
      await checkOut(first.api, c);
      await move(first.api, c, 'preparing');
      await move(first.api, c, 'ready_for_pickup');
    }),
  );
  await killChild(first); // the fan-out and the deliveries are mid-way

  await serveChild(t, dir);
  const expected = ['verification', 'preparing', 'ready_for_pickup'];
  const deadline = Date.now() + 20_000;
  const complete = () =>
    carts.every((c) =>
      expected.every((st) => byCart(receiver.received, c).some((r) => r.body.cart.status === st)),
    );
  while (!complete() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.true(complete(), 'every status change arrived');
  const idsByEvent = new Map<string, Set<string>>();
  for (const c of carts) {
    const got = byCart(receiver.received, c);
    // In order per cart, duplicates (if any) adjacent to their original.
    const firstSeen = got.map((r) => r.body.cart.status).filter((st, i, all) => all.indexOf(st) === i);
    t.deepEqual(firstSeen, expected);
    for (const r of got) {
      const key = `${c.uuid}:${r.body.cart.status}`;
      const ids = idsByEvent.get(key) ?? new Set<string>();
      ids.add(r.headers['x-service-webhook-id'] as string);
      idsByEvent.set(key, ids);
    }
  }
  for (const [key, ids] of idsByEvent) t.is(ids.size, 1, `${key}: one webhook id`);
});
