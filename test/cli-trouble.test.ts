/**
 * Trouble and queue order as the admin API answers them and `pds` prints them (docs/operations.md,
 * "Health"; docs/webhooks.md, "Order, isolation, durability"): a delivery waiting behind a failed one
 * in its queue says so in every answer that shows it and in `pds webhooks deliveries`; a failing
 * subscription is FAILING, with why, in `pds webhooks list` and `pds webhooks health`; a lagging
 * projection is LAGGING in `pds projections status`. Real service, injected clock, a dead receiver,
 * a projection whose commits hang.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { MAX_SUBSCRIPTIONS } from '../api/admin-webhook-health.ts';
import { manualClock } from '../domain/clock.ts';
import { type Json, ok, whileTicking } from './support/admin-answers.ts';
import {
  addItem,
  checkedOut,
  checkOut,
  createCart,
  createWebhook,
  move,
  seedCatalog,
} from './support/cart-world.ts';
import { type HeldReadStore, heldReadStore } from './support/held-read-store.ts';
import { until } from './support/probes.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const exec = promisify(execFile);
const ADMIN = '/admin/v1';

async function pds(s: TestService, args: string[]) {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['cli/pds.ts', ...args], {
      env: { PATH: process.env.PATH ?? '', PDS_URL: s.base, PDS_OPERATOR_TOKEN: s.token },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test('a delivery behind a failed one in its queue says so; a failing subscription is FAILING in pds webhooks list and health', async (t) => {
  const clock = manualClock('2026-11-27T10:00:30.000Z');
  const s = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h,1h' } });
  await seedCatalog(s);
  const dead = await startReceiver(t);
  dead.setDefault({ status: 500, body: 'down' });
  const hook = await createWebhook(s, dead.url, [1]);
  const deliveries = async (query = '') =>
    (await ok(t, await s.call('GET', `${ADMIN}/webhooks/${hook.id}/deliveries${query}`)))
      .deliveries as Json[];

  // The cart's first status move fails; its second waits behind it, in the same queue.
  const cart = await createCart(s);
  await addItem(s, cart);
  await checkOut(s, cart);
  await whileTicking(s, async () => ((await deliveries())[0]?.status === 'failed' ? true : undefined));
  clock.advance(1_000);
  await move(s, cart, 'preparing');
  const [second, first] = await whileTicking(s, async () => {
    const found = await deliveries();
    return found.length === 2 ? found : undefined;
  });
  t.is(first.status, 'failed');
  t.is(first.waiting_behind, null, 'the head waits behind nothing');
  t.deepEqual(second.waiting_behind, {
    delivery_id: first.delivery_id,
    status: 'failed',
    next_attempt_at: first.next_attempt_at,
  });
  t.is(second.status, 'pending');
  const one = await ok(t, await s.call('GET', `${ADMIN}/webhooks/deliveries/${second.delivery_id}`));
  t.deepEqual(one.delivery.waiting_behind, second.waiting_behind);
  const ofCart = await ok(t, await s.call('GET', `${ADMIN}/carts/${cart.uuid}/webhooks`));
  t.deepEqual(
    ofCart.deliveries.map((d: Json) => d.waiting_behind),
    [null, second.waiting_behind],
  );

  const listed = await pds(s, ['webhooks', 'deliveries', hook.id]);
  t.is(listed.code, 0, listed.stderr);
  t.regex(
    listed.stdout,
    new RegExp(
      `^${second.delivery_id} .* waits behind ${first.delivery_id} \\(failed, next attempt ${first.next_attempt_at}\\)$`,
      'm',
    ),
  );

  // The cart's audit says the same of its deliveries, in its `next` column.
  const audited = await pds(s, ['audit', 'cart', cart.uuid]);
  t.is(audited.code, 0, audited.stderr);
  const [, webhooks] = audited.stdout.trimEnd().split('\n\n');
  t.regex(webhooks, /^rev\s+event\s+webhook_id\s+delivery_id\s+status\s+attempts\s+delivered_at\s+next$/m);
  t.regex(
    webhooks,
    new RegExp(`^.*${first.delivery_id} +failed +1 +${first.next_attempt_at}$`, 'm'),
    'the head: its next attempt',
  );
  t.regex(
    webhooks,
    new RegExp(
      `^.*${second.delivery_id} +pending +0 +waits behind ${first.delivery_id} \\(failed, next attempt ${first.next_attempt_at}\\)$`,
      'm',
    ),
  );

  // Two more carts fail: three of three attempts in the last 15 minutes.
  const list = async () => pds(s, ['webhooks', 'list']);
  t.regex((await list()).stdout, new RegExp(`^${hook.id} .*\\s+ok\\s+\\S+$`, 'm'));
  await checkedOut(s);
  await checkedOut(s);
  await whileTicking(s, async () => ((await deliveries('?status=failed')).length === 3 ? true : undefined));
  const failing = await list();
  t.is(failing.code, 0, failing.stderr);
  t.regex(failing.stdout, /^webhook_id\s+url\s+stores\s+events\s+enabled\s+health\s+updated_at$/m);
  t.regex(
    failing.stdout,
    new RegExp(
      `^${hook.id} .* FAILING: 3 of the 3 attempts of the last 15 minutes did not deliver\\s+\\S+$`,
      'm',
    ),
  );
  const asJson = await pds(s, ['webhooks', 'list', '--json']);
  t.is(asJson.code, 0, asJson.stderr);
  t.like(JSON.parse(asJson.stdout), {
    webhooks: [
      {
        webhook_id: hook.id,
        status: 'failing',
        trouble: [
          { reason: 'failed_attempts', detail: '3 of the 3 attempts of the last 15 minutes did not deliver' },
        ],
      },
    ],
    health_truncated: false,
  });
  const health = await pds(s, ['webhooks', 'health', hook.id]);
  t.is(health.code, 0, health.stderr);
  t.regex(health.stdout, /^status\s+FAILING$/m);
  t.regex(health.stdout, /^failed_attempts\s+3 of the 3 attempts of the last 15 minutes did not deliver$/m);
  clock.advance(16 * 60_000);
  const later = await pds(s, ['webhooks', 'health', hook.id]);
  t.regex(
    later.stdout,
    /^oldest_queued\s+delivery \S+ has been queued 961 s, more than 900 s \(PDS_ALERT_OLDEST_QUEUED\)$/m,
  );
  t.notRegex(later.stdout, /^failed_attempts/m);
});

test('past 500 subscriptions the overview says it is truncated, and pds webhooks list says which it did not judge', async (t) => {
  t.timeout(120_000);
  const s = await startService(t);
  await seedCatalog(s);
  const receiver = await startReceiver(t);
  const made: string[] = [];
  for (let i = 0; i < MAX_SUBSCRIPTIONS + 1; i += 25) {
    const batch = Math.min(25, MAX_SUBSCRIPTIONS + 1 - i);
    const hooks = await Promise.all(Array.from({ length: batch }, () => createWebhook(s, receiver.url, [1])));
    made.push(...hooks.map((h) => h.id));
  }
  const ids = made.sort();
  const overview = await ok(t, await s.call('GET', `${ADMIN}/webhook-health`));
  t.true(overview.truncated);
  t.is(overview.subscriptions.length, MAX_SUBSCRIPTIONS);
  t.deepEqual(
    overview.subscriptions.map((w: Json) => w.webhook_id),
    ids.slice(0, MAX_SUBSCRIPTIONS),
  );

  const listed = await pds(s, ['webhooks', 'list']);
  t.is(listed.code, 0, listed.stderr);
  t.regex(listed.stdout, new RegExp(`^${ids[0]} .*\\s+ok\\s+\\S+$`, 'm'));
  t.regex(
    listed.stdout,
    new RegExp(`^${ids[MAX_SUBSCRIPTIONS]} .*not judged \\(first 500 only\\)\\s+\\S+$`, 'm'),
  );
  t.regex(listed.stdout, /^health judged for the first 500 subscriptions in id order only$/m);
  const asJson = JSON.parse((await pds(s, ['webhooks', 'list', '--json'])).stdout) as Json;
  t.true(asJson.health_truncated);
  t.like(asJson.webhooks[0], { status: 'ok', trouble: [] });
  t.like(asJson.webhooks[MAX_SUBSCRIPTIONS], {
    webhook_id: ids[MAX_SUBSCRIPTIONS],
    status: null,
    trouble: null,
  });
});

test('a lagging projection is LAGGING in pds projections status, with why', async (t) => {
  const clock = manualClock(new Date());
  let held: HeldReadStore | undefined;
  const s = await startService(t, {
    clock,
    env: { PDS_ALERT_PROJECTION_LAG: '30s' },
    wrapReadStore: (store, url) => {
      if (!url.endsWith('read.db')) return store;
      held = heldReadStore(store);
      return held;
    },
  });
  t.teardown(() => held?.release());
  await seedCatalog(s);
  const quiet = await pds(s, ['projections', 'status']);
  t.is(quiet.code, 0, quiet.stderr);
  t.regex(
    quiet.stdout,
    /^name\s+state\s+status\s+checkpoint\s+events\s+lag_events\s+lag_seconds\s+rebuild$/m,
  );
  t.regex(quiet.stdout, /^carts\s+live\s+ok\s+/m);
  t.notRegex(quiet.stdout, /LAGGING/);

  held?.hold('carts');
  await createCart(s);
  await until('the carts projection waits on its commit', async () => (held?.waiting ?? 0) > 0);
  clock.advance(45_000);
  const lagging = await pds(s, ['projections', 'status']);
  t.regex(lagging.stdout, /^carts\s+live\s+LAGGING\s+\d+\s+\d+\s+1\s+4\d(\.\d+)?$/m);
  t.regex(lagging.stdout, /^catalog\s+live\s+ok\s+/m);
  t.regex(
    lagging.stdout,
    /^carts is LAGGING: its oldest event not applied is 4\d(\.\d+)? s old, more than 30 s \(PDS_ALERT_PROJECTION_LAG\)$/m,
  );
  const json = JSON.parse((await pds(s, ['projections', 'status', '--json'])).stdout);
  t.like(
    json.projections.find((p: Json) => p.name === 'carts'),
    { status: 'lagging', trouble: [{ reason: 'lag' }] },
  );
  held?.release();
});
