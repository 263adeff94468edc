/**
 * The console's cart audit of a cart older than the deliveries kept (docs/operations.md, "Retention"):
 * its whole history, no webhook under its events once their deliveries are pruned, and a note saying
 * before when finished deliveries are pruned.
 */
import test from 'ava';
import { manualClock } from '../domain/clock.ts';
import { accessibilityProblems, browserMissing, signedInConsole } from './support/browser.ts';
import { checkedOut, createWebhook, seedCatalog } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const title =
  'a cart older than the deliveries kept shows its history, no pruned webhook, and says they are pruned';
const missing = browserMissing();
if (missing) {
  console.log(`console-retention-browser.test.ts: skipped: ${missing}`);
  test.skip(`${title} — skipped: ${missing}`, () => {});
} else {
  test(title, async (t) => {
    t.timeout(60_000);
    const clock = manualClock(new Date());
    const svc = await startService(t, { clock, env: { PDS_DELIVERY_LOG_RETENTION: '24h' } });
    const receiver = await startReceiver(t);
    await seedCatalog(svc);
    await createWebhook(svc, receiver.url, [1], ['cart_status_updated']);
    const old = await checkedOut(svc);
    await receiver.waitFor(1);
    await until('the delivery is recorded delivered', async () => {
      const res = await svc.call('GET', `/admin/v1/carts/${old.uuid}/webhooks`);
      const { deliveries } = (await res.json()) as { deliveries: Array<{ status: string }> };
      return deliveries[0]?.status === 'delivered';
    });
    clock.advance(25 * 3_600_000);
    await checkedOut(svc); // a later delivery: the projection prunes as its events come
    await receiver.waitFor(2);
    await svc.tick();
    await until('the old delivery is pruned', async () => {
      const res = await svc.call('GET', `/admin/v1/carts/${old.uuid}/webhooks`);
      return ((await res.json()) as { deliveries: unknown[] }).deliveries.length === 0;
    });

    const { page, problems } = await signedInConsole(t, svc.base, svc.token, 'cart-audit');
    await page.getByLabel('Cart uuid').fill(old.uuid);
    await page.getByRole('button', { name: 'Show history' }).click();
    const note = page.locator('[data-pruned-before]');
    await note.waitFor();
    t.regex(await note.innerText(), /^Webhook deliveries finished before \d.+ are pruned: /);
    t.is(await note.locator('time').getAttribute('datetime'), await note.getAttribute('data-pruned-before'));
    t.true((await page.locator('ol.timeline > li').count()) >= 4, 'the whole history');
    t.is(await page.locator('ul.event-webhooks li').count(), 0);
    t.deepEqual(await accessibilityProblems(page), []);
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
