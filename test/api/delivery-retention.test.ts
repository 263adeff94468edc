/**
 * A delivery past `PDS_DELIVERY_LOG_RETENTION` on a running service (docs/operations.md, "Retention"):
 * the retention job deletes its queue from the log, the read model drops it, and the admin API says
 * so: a delivery not found may have been pruned, a cart's deliveries say from when they are whole,
 * while the cart's own history stays whole and a newer delivery is untouched.
 */
import test, { type ExecutionContext } from 'ava';
import { manualClock } from '../../domain/clock.ts';
import * as delivery from '../../domain/webhook-delivery.ts';
import { StreamNotFoundError } from '../../eventstore/port.ts';
import { ok, problem } from '../support/admin-answers.ts';
import { checkedOut, createWebhook, seedCatalog } from '../support/cart-world.ts';
import { until } from '../support/probes.ts';
import { startService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const ADMIN = '/admin/v1';
const HOUR = 3_600_000;

/**
 * A service keeping deliveries for 24h, with a webhook whose first delivery (of a cart checked out) is
 * delivered in the read model.
 */
async function deliveredCart(t: ExecutionContext) {
  const clock = manualClock('2026-03-01T12:00:00.000Z');
  const s = await startService(t, { clock, env: { PDS_DELIVERY_LOG_RETENTION: '24h' } });
  await seedCatalog(s, [1]);
  const receiver = await startReceiver(t);
  const hook = await createWebhook(s, receiver.url, [1], ['cart_status_updated']);
  const old = await checkedOut(s);
  const [sent] = await receiver.waitFor(1);
  const oldId = sent.headers['x-service-webhook-id'] as string;
  await until('the delivery is delivered in the read model', async () => {
    const res = await s.call('GET', `${ADMIN}/webhooks/deliveries/${oldId}`);
    return (
      res.status === 200 &&
      ((await res.json()) as { delivery: { status: string } }).delivery.status === 'delivered'
    );
  });
  return { clock, s, receiver, hook, old, oldId };
}

test('a delivery finished a retention ago is pruned from the log and the read model, and the admin API says so', async (t) => {
  const { clock, s, receiver, hook, old, oldId } = await deliveredCart(t);

  clock.advance(25 * HOUR);
  const recent = await checkedOut(s);
  const [, sentRecently] = await receiver.waitFor(2);
  const recentId = sentRecently.headers['x-service-webhook-id'] as string;
  await s.tick(); // the retention job's hourly run

  const store = await s.openStore();
  await t.throwsAsync(store.readStream(delivery.streamId(hook.id, old.uuid)), {
    instanceOf: StreamNotFoundError,
  });
  t.true(
    (await store.readStream(delivery.streamId(hook.id, recent.uuid))).length >= 2,
    'a newer queue stays',
  );
  const metrics = await (await fetch(`${s.base}/metrics`)).text();
  t.regex(metrics, /^pds_retention_pruned_deliveries_total 1$/m);
  t.regex(metrics, /^pds_retention_dropped_events_total 3$/m);

  const gone = await until('the read model dropped it', async () => {
    const res = await s.call('GET', `${ADMIN}/webhooks/deliveries/${oldId}`);
    return res.status === 404 ? res : undefined;
  });
  const body = await problem(t, gone, 404, 'delivery_not_found');
  const prunedBefore = new Date(clock.now().getTime() - 24 * HOUR).toISOString();
  t.is(body.pruned_before, prunedBefore);
  t.regex(String(body.detail), /pruned \(PDS_DELIVERY_LOG_RETENTION\)/);
  await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${oldId}/redeliver`, {}),
    404,
    'delivery_not_found',
  );

  t.deepEqual(await ok(t, await s.call('GET', `${ADMIN}/carts/${old.uuid}/webhooks`)), {
    cart_uuid: old.uuid,
    deliveries: [],
    next_cursor: null,
    pruned_before: prunedBefore,
  });
  const history = (await ok(t, await s.call('GET', `${ADMIN}/carts/${old.uuid}/history`))) as {
    events: Array<{ type: string }>;
  };
  t.true(
    history.events.some((e) => e.type === 'CartCheckedOut'),
    'the cart’s own history is whole',
  );
  const recentDelivery = (await ok(t, await s.call('GET', `${ADMIN}/webhooks/deliveries/${recentId}`))) as {
    delivery: { status: string };
  };
  t.is(recentDelivery.delivery.status, 'delivered');
});

test('a delivery finished before pruned_before is answered as pruned before the projection or the job has removed it', async (t) => {
  const { clock, s, hook, old, oldId } = await deliveredCart(t);
  // A retention and an hour later, with no delivery event since and no run of the job: still stored.
  clock.advance(25 * HOUR);
  const store = await s.openStore();
  t.true((await store.readStream(delivery.streamId(hook.id, old.uuid))).length >= 3, 'still in the log');
  const res = await s.call('GET', `${ADMIN}/webhooks/deliveries/${oldId}`);
  const body = await problem(t, res, 404, 'delivery_not_found');
  t.is(body.pruned_before, new Date(clock.now().getTime() - 24 * HOUR).toISOString());
  const list = (await ok(t, await s.call('GET', `${ADMIN}/webhooks/${hook.id}/deliveries`))) as {
    deliveries: unknown[];
  };
  t.deepEqual(list.deliveries, [], 'left out of the subscription’s deliveries');
  const ofCart = (await ok(t, await s.call('GET', `${ADMIN}/carts/${old.uuid}/webhooks`))) as {
    deliveries: unknown[];
  };
  t.deepEqual(ofCart.deliveries, [], 'and of the cart’s');
  await problem(
    t,
    await s.call('POST', `${ADMIN}/webhooks/deliveries/${oldId}/redeliver`, {}),
    404,
    'delivery_not_found',
  );
});
