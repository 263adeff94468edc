/**
 * Finished deliveries' retention bounds the data files (docs/operations.md, "Retention"): a real
 * service on an injected clock, 60 simulated days of steady cart traffic whose every status change is
 * delivered to a local receiver, the retention job run each hour. With `PDS_DELIVERY_LOG_RETENTION`
 * at 7 days, `events.db`, `read.db` and `dispatcher.db` grow after the seventh day by what the cart
 * traffic alone makes them grow (the same carts with no webhook subscription), within the factor the
 * pages shared with deleted records cost (docs/operations.md, "Retention"); with a retention longer
 * than the 60 days, they grow with every delivery.
 */
import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test, { type ExecutionContext } from 'ava';
import { manualClock } from '../domain/clock.ts';
import {
  addItem,
  checkOut,
  createCart,
  createWebhook,
  identify,
  move,
  seedCatalog,
} from './support/cart-world.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const HOUR = 3_600_000;
/** A cart every this many hours, checked out and moved on once: two deliveries each. */
const CART_EVERY_HOURS = 2;
const DAYS = Number(process.env.DAYS ?? 60);
const FILES = ['events.db', 'read.db', 'dispatcher.db'] as const;
type Sizes = Record<(typeof FILES)[number], number>;

const sizesOf = (dir: string): Sizes =>
  Object.fromEntries(FILES.map((f) => [f, statSync(path.join(dir, f)).size])) as Sizes;

/** Bytes of a file's pages on SQLite's free list: what a vacuum could give back. */
function freeBytes(file: string): number {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const { freelist_count } = db.prepare('PRAGMA freelist_count').get() as { freelist_count: number };
    const { page_size } = db.prepare('PRAGMA page_size').get() as { page_size: number };
    return freelist_count * page_size;
  } finally {
    db.close();
  }
}
const total = (s: Sizes) => FILES.reduce((sum, f) => sum + s[f], 0);
const mb = (bytes: number) => `${(bytes / 1_048_576).toFixed(2)} MB`;

/**
 * 60 days of carts on a service, with deliveries to a receiver (`webhooks`) or none; the files' sizes
 * after 7 days and after 60, each measured with the service stopped (the WALs copied into the files).
 */
async function simulate(
  t: ExecutionContext,
  options: { webhooks: boolean; retention: string },
): Promise<{ day7: Sizes; day60: Sizes; free: Sizes; delivered: number; pruned: number }> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-delivery-retention-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const clock = manualClock('2026-01-01T00:00:00.000Z');
  const env = { PDS_DELIVERY_LOG_RETENTION: options.retention, PDS_ABANDON_AFTER: '6h' };
  const start = () => startService(t, { clock, env, dataDir });
  let s: TestService = await start();
  await seedCatalog(s, [1]);
  const receiver = await startReceiver(t);
  if (options.webhooks) await createWebhook(s, receiver.url, [1], ['cart_status_updated']);
  let expected = 0;
  let day7: Sizes | undefined;
  for (let hour = 1; hour <= DAYS * 24; hour++) {
    if (hour % CART_EVERY_HOURS === 0) {
      const cart = await createCart(s, 1);
      await addItem(s, cart);
      await identify(s, cart);
      await checkOut(s, cart);
      await move(s, cart, 'preparing');
      if (options.webhooks) {
        expected += 2;
        await receiver.waitFor(expected, 10_000);
      }
    }
    clock.advance(HOUR);
    await s.tick();
    if (hour === Math.min(7, DAYS) * 24) {
      await s.service.stop();
      day7 = sizesOf(dataDir);
      s = await start();
    }
  }
  const metrics = await (await fetch(`${s.base}/metrics`)).text();
  const pruned = Number(/^pds_retention_pruned_deliveries_total (\d+)$/m.exec(metrics)?.[1] ?? Number.NaN);
  await s.service.stop();
  if (!day7) throw new Error('no sizes after 7 days');
  const free = Object.fromEntries(FILES.map((f) => [f, freeBytes(path.join(dataDir, f))])) as Sizes;
  return { day7, day60: sizesOf(dataDir), free, delivered: receiver.received.length, pruned };
}

test('60 days of deliveries with a 7-day retention grow the data files after day 7 by the carts alone', async (t) => {
  t.timeout(600_000);
  const [kept, pruned, carts] = await Promise.all([
    simulate(t, { webhooks: true, retention: '8760h' }),
    simulate(t, { webhooks: true, retention: '168h' }),
    simulate(t, { webhooks: false, retention: '168h' }),
  ]);
  const deliveries = ((DAYS * 24) / CART_EVERY_HOURS) * 2;
  t.is(pruned.delivered, deliveries, 'every delivery went out');
  // Those finished 7 days before the end are pruned from the log: all but the last week's.
  const lastWeek = ((7 * 24) / CART_EVERY_HOURS) * 2;
  t.true(
    pruned.pruned >= deliveries - lastWeek - 2 && pruned.pruned <= deliveries - lastWeek,
    `${pruned.pruned}`,
  );
  t.is(kept.pruned, 0);
  for (const [name, run] of [
    ['without retention (8760h)', kept],
    ['7-day retention', pruned],
    ['the carts alone', carts],
  ] as const) {
    t.log(
      `${name}: ${FILES.map((f) => `${f} ${mb(run.day7[f])} → ${mb(run.day60[f])}`).join(', ')}; ` +
        `all ${mb(total(run.day7))} → ${mb(total(run.day60))}; free pages at the end ` +
        FILES.map((f) => `${f} ${mb(run.free[f])}`).join(', '),
    );
  }
  const cartsGrew = total(carts.day60) - total(carts.day7);
  const grew = total(pruned.day60) - total(pruned.day7);
  t.log(`from day 7 to day 60: the files grew ${mb(grew)} with retention, the carts alone ${mb(cartsGrew)}`);
  t.true(cartsGrew > 0);
  // Pages shared with deleted records (docs/operations.md, "Retention") cost more than the carts
  // alone: 1.6 times as much in all (the log's pages keep the holes its pruned deliveries leave),
  // bounded at twice, with a few pages of slack per file.
  t.true(grew <= 2 * cartsGrew + 64 * 4_096, `${grew} > 2 × ${cartsGrew}`);
  for (const f of FILES) {
    const fileCarts = carts.day60[f] - carts.day7[f];
    const fileGrew = pruned.day60[f] - pruned.day7[f];
    t.true(fileGrew <= 2 * Math.max(fileCarts, 0) + 64 * 4_096, `${f}: ${fileGrew} > 2 × ${fileCarts}`);
  }
  t.true(total(kept.day60) - total(kept.day7) > 2 * grew, 'without retention, the deliveries stay');
});
