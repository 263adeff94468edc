/**
 * The `dispatcher` role keeps its working state in the dispatcher store (`dispatcher.db` beside a
 * SQLite read store) and runs no projector; a restart of it resumes from the checkpoints it stored there.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { createCommandHandler } from '../../application/command-handler.ts';
import { ABANDONMENT_FOLLOWER } from '../../dispatcher/abandonment.ts';
import { DELIVERY_FOLLOWER } from '../../dispatcher/delivery-worker.ts';
import * as cart from '../../domain/cart.ts';
import { manualClock } from '../../domain/clock.ts';
import { eventRegistry } from '../../domain/index.ts';
import { allProjections } from '../../projections/all.ts';
import { openSqliteReadStore } from '../../projections/sqlite/read-store.ts';
import { startService, type TestService } from '../support/service.ts';

const T0 = '2026-03-01T10:00:00.000Z';

/** The log line with this message, parsed (the last one). */
function logLine(s: TestService, msg: string): Record<string, unknown> | undefined {
  return s
    .logs()
    .split('\n')
    .filter((l) => l.includes(`"msg":"${msg}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .at(-1);
}

test('the dispatcher role keeps its working state in the dispatcher store, runs no projector, and resumes from its checkpoints', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-dispatcher-role-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const clock = manualClock(T0);
  const first = await startService(t, { role: 'dispatcher', dataDir, clock });
  const ready = (await (await fetch(`${first.base}/readyz`)).json()) as { checks: Record<string, string> };
  t.like(ready.checks, { abandonment_timers_restored: 'ok', webhook_deliveries_restored: 'ok' });
  t.false('projections_caught_up' in ready.checks, 'no projector in this role');

  // A cart given an item (another process's write): the timer holds it.
  const store = await first.openStore();
  const commands = createCommandHandler(store, eventRegistry);
  const uuid = randomUUID();
  const meta = {
    correlationId: randomUUID(),
    causationId: null,
    actor: { type: 'platform' as const, id: 't' },
    at: T0,
  };
  await commands.handle(
    cart.streamId(uuid),
    cart.decider,
    {
      type: 'CreateCart',
      cart_uuid: uuid,
      store_id: 1,
      source: { channel: 'headless', partner_id: null },
      user_id: null,
      at: T0,
      context: { store_exists: true },
    },
    meta,
  );
  await commands.handle(
    cart.streamId(uuid),
    cart.decider,
    {
      type: 'AddCartItem',
      menu_product_id: 1,
      price_id: 'gram',
      count: 1,
      at: T0,
      context: {
        line: {
          product_id: 1,
          store_id: 1,
          name: 'Product 1',
          brand: 'Brand 1',
          brand_id: 1,
          kind: 'flower',
          kind_subtype: null,
          lineage: 'hybrid',
          image_urls: [],
          unit_price: '10.00',
          discounted_unit_price: '10.00',
          special_id: null,
          special_title: null,
        },
      },
    },
    meta,
  );
  for (let i = 0; ; i++) {
    const metrics = await (await fetch(`${first.base}/metrics`)).text();
    if (/^pds_abandonment_timers_pending 1$/m.test(metrics)) break;
    if (i > 250) t.fail('the timer never held the cart');
    await new Promise((r) => setTimeout(r, 20));
  }
  await first.service.stop();

  // Nothing of the dispatcher's in the read models' file: a projector's commit never holds it up.
  t.false(existsSync(path.join(dataDir, 'read.db')));
  const readStore = openSqliteReadStore(path.join(dataDir, 'dispatcher.db'));
  try {
    const head = await store.headPosition();
    t.like(await readStore.getCheckpoint(ABANDONMENT_FOLLOWER.name), { position: head });
    t.truthy(await readStore.getCheckpoint(DELIVERY_FOLLOWER.name));
    for (const p of allProjections()) t.is(await readStore.getCheckpoint(p.name), undefined, p.name);
    const pending = await readStore.collection(ABANDONMENT_FOLLOWER.collection);
    t.truthy(await pending.findOne({ _id: cart.streamId(uuid) }));
  } finally {
    await readStore.close();
  }

  const second = await startService(t, { role: 'dispatcher', dataDir, clock });
  t.like(logLine(second, 'abandonment timers restored'), {
    pending: 1,
    resumed_after: await store.headPosition(),
  });
  t.like(logLine(second, 'webhook deliveries restored'), { pending: 0 });
});
