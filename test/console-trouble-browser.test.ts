/**
 * `/console` pointing at trouble, in a real browser (test/support/browser.ts; docs/operations.md,
 * "The console" and "Health"): a subscription whose receiver is dead is FAILING, with why, counted at
 * the top of the Overview and marked in the Webhooks list with its id; its oldest queued delivery
 * links to that delivery, which links to its cart's audit, which links back to the deliveries each
 * event produced; a delivery behind a failed one says so; after a redelivery or a recovery the health,
 * the deliveries and the trouble counts are read again at once, not at their next 10 s poll. A projection whose commits hang is LAGGING, counted at the top, and
 * clears once it catches up. axe finds no serious or critical violation; screenshots are left in
 * `test-artifacts/screenshots/`.
 */
import test from 'ava';
import { manualClock } from '../domain/clock.ts';
import { type Json, whileTicking } from './support/admin-answers.ts';
import { accessibilityProblems, browserMissing, screenshot, signedInConsole } from './support/browser.ts';
import {
  addItem,
  checkedOut,
  checkOut,
  createCart,
  createWebhook,
  move,
  seedCatalog,
} from './support/cart-world.ts';
import { SLOW_POLLS } from './support/console-polls.ts';
import { type HeldReadStore, heldReadStore } from './support/held-read-store.ts';
import { until } from './support/probes.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

/**
 * How long a read the action caused may take. The 10 s polls are stopped (test/support/console-polls.ts),
 * so a read after the action came from the action itself, however long it took.
 */
const AT_ONCE = { timeout: 15_000 };

const missing = browserMissing();
const titles = [
  'a subscription with a dead receiver is FAILING on the Overview and in the Webhooks list, and its deliveries, cart audit and subscription link to each other',
  'a projection whose commits hang is LAGGING on the Overview, counted at the top, and clears once it catches up',
];
if (missing) {
  console.log(`console-trouble-browser.test.ts: skipped: ${missing}`);
  for (const title of titles) test.skip(`${title} — skipped: ${missing}`, () => {});
} else {
  test(titles[0], async (t) => {
    t.timeout(120_000);
    // The clock at the real time, so the browser's local times read right; an attempt at once, the
    // next an hour later.
    const clock = manualClock(new Date());
    const svc = await startService(t, { clock, env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s,1h,1h' } });
    await seedCatalog(svc, [1, 2]);
    const dead = await startReceiver(t);
    dead.setDefault({ status: 500, body: 'receiver down' });
    const alive = await startReceiver(t);
    const hook = await createWebhook(svc, dead.url, [1]);
    const other = await createWebhook(svc, alive.url, [2]);
    const deliveries = async (query = '') =>
      (
        (await (await svc.call('GET', `/admin/v1/webhooks/${hook.id}/deliveries${query}`)).json()) as {
          deliveries: Json[];
        }
      ).deliveries;
    // A cart whose first status move failed and whose second waits behind it; two more that failed.
    const cart = await createCart(svc);
    await addItem(svc, cart);
    await checkOut(svc, cart);
    await whileTicking(svc, async () => ((await deliveries())[0]?.status === 'failed' ? true : undefined));
    clock.advance(1_000);
    await move(svc, cart, 'preparing');
    await checkedOut(svc);
    await checkedOut(svc);
    await whileTicking(svc, async () =>
      (await deliveries('?status=failed')).length === 3 ? true : undefined,
    );
    const all = await deliveries();
    const behind = all.find((d) => d.status === 'pending') as Json;
    const head = all.find((d) => d.delivery_id === behind.waiting_behind.delivery_id) as Json;

    const { page, problems } = await signedInConsole(t, svc.base, svc.token, 'overview');
    await page.setViewportSize({ width: 1280, height: 900 });
    const summary = page.getByRole('region', { name: 'Trouble' });
    await summary.getByRole('link', { name: '1 of 2 subscriptions failing' }).waitFor();
    t.regex(await summary.innerText(), /No projection lagging/);
    const card = page.getByRole('article', { name: `Health of ${dead.url}` });
    t.is(await card.getAttribute('data-status'), 'failing');
    await card.locator('.trouble .mark-failing', { hasText: 'FAILING' }).waitFor();
    t.regex(
      await card.locator('.trouble .reasons').innerText(),
      /^3 of the 3 attempts of the last 15 minutes did not deliver$/,
    );
    t.regex(await card.innerText(), new RegExp(`Subscription ${hook.id}`));
    const healthy = page.getByRole('article', { name: `Health of ${alive.url}` });
    t.is(await healthy.getAttribute('data-status'), 'ok');
    t.is(await healthy.locator('.mark-failing').count(), 0);
    await card.locator('figure.chart canvas').nth(2).waitFor();
    t.deepEqual(await accessibilityProblems(page), [], 'overview with a failing subscription: axe');
    await screenshot(page, 'console-trouble-failing-overview');

    // The Webhooks list marks it too, with its id; the healthy one is ok.
    await page.getByRole('link', { name: 'Webhooks', exact: true }).click();
    const row = page.locator(`tr[data-webhook="${hook.id}"]`);
    await row.locator('.mark-failing', { hasText: 'FAILING' }).waitFor();
    t.regex(await row.innerText(), new RegExp(`id ${hook.id}`));
    t.regex(await row.innerText(), /3 of the 3 attempts of the last 15 minutes did not deliver/);
    t.is(await page.locator(`tr[data-webhook="${other.id}"] .mark-ok`).innerText(), 'ok');
    t.deepEqual(await accessibilityProblems(page), [], 'webhooks list with a failing subscription: axe');
    await screenshot(page, 'console-trouble-failing-webhooks');

    // Its deliveries: the one behind the failed head says so, with the head's next attempt.
    await row.getByRole('button', { name: `Deliveries to ${dead.url}` }).click();
    const waiting = page.locator(`li[data-delivery="${behind.delivery_id}"]`);
    await waiting.waitFor();
    t.regex(
      await waiting.locator('summary').innerText(),
      new RegExp(`waits behind ${head.delivery_id} \\(failed, next attempt`),
    );

    // The oldest queued delivery links to that delivery, which links to its cart's audit.
    const chosen = page.locator(`[data-health="${hook.id}"]`);
    await chosen.getByRole('link', { name: head.delivery_id }).click();
    const view = page.locator(`[data-delivery-view="${head.delivery_id}"]`);
    await view.locator('table.attempts').waitFor();
    t.regex(await view.innerText(), /failed/);
    t.regex(await view.innerText(), new RegExp(`Subscription\\s+${hook.id}`));
    t.deepEqual(await accessibilityProblems(page), [], 'a delivery: axe');
    await screenshot(page, 'console-trouble-delivery');
    await view.getByRole('link', { name: cart.uuid }).click();
    const produced = page.locator(`li[data-event-delivery="${behind.delivery_id}"]`);
    await produced.waitFor();
    t.regex(await produced.innerText(), new RegExp(`waits behind ${head.delivery_id}`));
    t.deepEqual(await accessibilityProblems(page), [], 'cart audit reached by a link: axe');
    // …and the audit links back to each delivery an event produced.
    await produced.getByRole('link', { name: 'cart_status_updated' }).click();
    await page.locator(`[data-delivery-view="${behind.delivery_id}"]`).getByText('pending').first().waitFor();

    // Redelivered from the Webhooks view: the health and the deliveries are read again at once, not
    // at their next 10 s poll (stopped from here on, so only the action can cause a read), and show
    // what the action changed.
    await page.addInitScript({ content: SLOW_POLLS });
    await page.goto(`${svc.base}/console#webhooks/${hook.id}`);
    await page.reload();
    const headItem = page.locator(`li[data-delivery="${head.delivery_id}"]`);
    await headItem.locator('summary').click();
    await page.locator(`[data-health="${hook.id}"] dl.totals`).waitFor();
    /** Resolves when the health, the deliveries and the trouble counts are read after `route` answered. */
    const readAgainAfter = (route: string) => {
      let answered = 0;
      const watch = (r: { url(): string }) => {
        if (r.url().endsWith(route)) answered = Date.now();
      };
      page.on('response', watch);
      const readAgain = (path: string) =>
        page.waitForRequest((r) => answered > 0 && r.method() === 'GET' && r.url().includes(path), AT_ONCE);
      return Promise.all([
        readAgain(`/webhooks/${hook.id}/health`),
        readAgain(`/webhooks/${hook.id}/deliveries`),
        readAgain('/webhook-health'),
      ]).finally(() => page.off('response', watch));
    };
    /** Resolves when what `locator` shows differs from `before`. */
    const changed = (locator: typeof headItem, before: string) =>
      until('the panel shows what the action changed', async () => (await locator.innerText()) !== before);
    const headBefore = await headItem.locator('summary').innerText();
    const redelivered = readAgainAfter(`/deliveries/${head.delivery_id}/redeliver`);
    await headItem.getByRole('button', { name: 'Redeliver' }).click();
    await redelivered;
    await changed(headItem.locator('summary'), headBefore);
    await page.getByRole('status').filter({ hasText: 'was queued again' }).waitFor();

    // Recovered from the subscription's row: the same.
    const row2 = page.locator(`tr[data-webhook="${hook.id}"]`);
    await row2.locator('summary').click();
    const hourAgo = new Date(clock.now().getTime() - 3_600_000);
    const local = new Date(hourAgo.getTime() - hourAgo.getTimezoneOffset() * 60_000)
      .toISOString()
      .slice(0, 16);
    await row2.getByLabel(/Recover failed and parked deliveries since/).fill(local);
    const list = page.locator('ul.deliveries');
    const listBefore = await list.innerText();
    const recovered = readAgainAfter(`/webhooks/${hook.id}/recover`);
    await row2.getByRole('button', { name: 'Recover' }).click();
    await recovered;
    await changed(list, listBefore);
    await row2
      .getByRole('status')
      .filter({ hasText: /queued again/ })
      .waitFor();
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[1], async (t) => {
    t.timeout(90_000);
    const clock = manualClock(new Date());
    let held: HeldReadStore | undefined;
    const svc = await startService(t, {
      clock,
      env: { PDS_ALERT_PROJECTION_LAG: '30s' },
      wrapReadStore: (store, url) => {
        if (!url.endsWith('read.db')) return store;
        held = heldReadStore(store);
        return held;
      },
    });
    t.teardown(() => held?.release());
    await seedCatalog(svc);
    held?.hold('carts');
    await createCart(svc);
    await until('the carts projection waits on its commit', async () => (held?.waiting ?? 0) > 0);
    clock.advance(45_000);

    const { page, problems } = await signedInConsole(t, svc.base, svc.token, 'overview');
    await page.setViewportSize({ width: 1280, height: 900 });
    const summary = page.getByRole('region', { name: 'Trouble' });
    await summary.getByRole('link', { name: '1 projection lagging' }).waitFor();
    t.regex(await summary.innerText(), /No subscription failing/);
    const carts = page.locator('tr[data-projection="carts"]');
    await carts.locator('.mark-lagging', { hasText: 'LAGGING' }).waitFor();
    t.regex(
      await carts.locator('.reasons').innerText(),
      /^its oldest event not applied is 4\d(\.\d+)? s old, more than 30 s \(PDS_ALERT_PROJECTION_LAG\)$/,
    );
    t.is(await page.locator('tr[data-projection="catalog"]').getAttribute('data-status'), 'ok');
    t.deepEqual(await accessibilityProblems(page), [], 'overview with a lagging projection: axe');
    await screenshot(page, 'console-trouble-lagging-projection');
    await page.setViewportSize({ width: 390, height: 844 });
    t.deepEqual(await accessibilityProblems(page), [], 'at a phone width: axe');
    await page.setViewportSize({ width: 1280, height: 900 });

    held?.release();
    await carts.locator('.mark-lagging').waitFor({ state: 'detached' });
    await summary.getByText('No projection lagging').waitFor();
    t.is(await carts.getAttribute('data-status'), 'ok');
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
