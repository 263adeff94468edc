/**
 * `GET /admin/v1/webhook-fan-out` (docs/operations.md, "The fan-out's group"): the webhook fan-out's
 * group as any process that reaches the event store sees it. The case of an event it keeps failing on
 * (`behind`, from an `api` process beside a dispatcher) is in test/webhooks/fan-out-never-parks.test.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { ok, problem } from '../support/admin-answers.ts';
import { checkedOut, createWebhook, seedCatalog } from '../support/cart-world.ts';
import { startService } from '../support/service.ts';
import { startReceiver } from '../support/webhook-receiver.ts';

const URL_ = '/admin/v1/webhook-fan-out';

test('before any dispatcher the group is absent; once the fan-out has handled every cart event it is current', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pds-fan-out-view-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const api = await startService(t, { role: 'api', dataDir, env: { PDS_READ_STORE: 'memory' } });
  t.deepEqual((await ok(t, await api.call('GET', URL_))).fan_out, {
    group: 'webhook-fan-out',
    state: 'absent',
    checkpoint: null,
    oldest_pending: null,
    parked: 0,
    consumers: 0,
    behind_after_seconds: 300,
  });
  await seedCatalog(api);
  const receiver = await startReceiver(t);
  await createWebhook(api, receiver.url, [1]);
  await checkedOut(api);
  await startService(t, { role: 'dispatcher', dataDir });
  await receiver.waitFor(1);
  const store = await api.openStore();
  const last = await store.headPosition({ eventTypes: ['CartStatusChanged', 'CartAbandoned'] });
  for (let i = 0; ; i++) {
    const { fan_out } = await ok(t, await api.call('GET', URL_));
    if (fan_out.checkpoint >= last) {
      t.like(fan_out, { state: 'current', oldest_pending: null, parked: 0 });
      break;
    }
    if (i > 250) t.fail(`the checkpoint never passed the checkout: ${JSON.stringify(fan_out)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
});

test('refusals are problem documents', async (t) => {
  const s = await startService(t);
  await problem(t, await s.call('GET', `${URL_}?window=1h`), 400);
  await problem(
    t,
    await s.call('GET', URL_, undefined, { authorization: 'Bearer wrong' }),
    401,
    'unauthorized',
  );
});
