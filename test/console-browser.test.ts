/**
 * `/console` in a real browser (test/support/browser.ts): sign in with the operator token, see every
 * projection, rebuild one and watch it reach live again; a wrong token is refused and nothing is kept;
 * open a parked delivery and redeliver it to a receiver that now answers 200; open a cart and see its
 * events in order; register a partner and see its key once.
 * The page must run under its Content-Security-Policy without errors and fetch nothing from another
 * origin; axe-core finds no serious or critical accessibility violation in each view. Each test leaves
 * a screenshot in `test-artifacts/screenshots/`.
 */
import test, { type ExecutionContext } from 'ava';
import { roleThread } from '../cli/role-thread.ts';
import {
  accessibilityProblems,
  browserMissing,
  launchBrowser,
  screenshot,
  signedInConsole,
  watchedPage,
} from './support/browser.ts';
import { addItem, checkOut, createCart, createWebhook, move, seedCatalog } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const PROJECTIONS = [
  'carts',
  'catalog',
  'operators',
  'partner_keys',
  'webhook_deliveries',
  'webhook_subscriptions',
];

/** The console of `svc` in a fresh browser, signed in with the operator token, on the view `hash` names. */
const signedIn = (t: ExecutionContext, svc: TestService, hash: string) =>
  signedInConsole(t, svc.base, svc.token, hash);

/**
 * A service whose deliveries get one attempt, then are parked (the dispatcher on its thread, as
 * `npm start` runs it), a catalog, and a receiver subscribed to store 1 that refuses its first request.
 */
async function firstAttemptRefused(t: ExecutionContext) {
  const svc = await startService(t, {
    threads: { dispatcher: roleThread('dispatcher') },
    env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s' },
  });
  const receiver = await startReceiver(t);
  receiver.script({ status: 500, body: 'receiver down' });
  await seedCatalog(svc);
  const webhook = await createWebhook(svc, receiver.url, [1]);
  return { svc, receiver, webhook };
}

const missing = browserMissing();
const titles = [
  'sign in, see every projection, rebuild one and watch it reach live; accessible at a laptop and a phone width',
  'a wrong token is refused, said so, and not kept',
  'a parked delivery is opened with its attempts and redelivered to the receiver, which now answers 200',
  'a cart is found by uuid and its events are shown in order, each with what it changed and the webhooks it produced, with its status path',
  'a partner is registered and its key shown once, with a copy button',
  "a partner's key is rotated (the new one shown once, the old one refused), revoked and issued again; its rate limit changed",
  'a receiver is subscribed (its signing secret shown once), sent a test event, its parked delivery recovered, its secret rotated, its stores and events changed, disabled and enabled',
  "a subscription's health over the last hour and day is drawn as charts, with its totals and oldest queued delivery, in the overview (beside the webhook fan-out's progress) and the webhooks view",
];
if (missing) {
  console.log(`console-browser.test.ts: skipped: ${missing}`);
  for (const title of titles) test.skip(`${title} — skipped: ${missing}`, () => {});
} else {
  test(titles[0], async (t) => {
    t.timeout(90_000);
    const svc = await startService(t);
    const browser = await launchBrowser(t);
    const { page, problems } = await watchedPage(browser, new URL(svc.base).origin);
    await page.setViewportSize({ width: 1280, height: 800 });

    const home = await page.goto(`${svc.base}/console`);
    t.is(home?.status(), 200);
    t.regex(home?.headers()['content-security-policy'] ?? '', /script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
    await page.getByLabel('Operator token').waitFor();
    t.deepEqual(await accessibilityProblems(page), [], 'sign-in: no serious or critical violation');
    await screenshot(page, 'console-sign-in');

    await page.getByLabel('Operator token').fill(svc.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const rows = page.locator('table.projections tbody tr');
    await rows.nth(PROJECTIONS.length - 1).waitFor();
    t.deepEqual(
      (await page.locator('table.projections tbody th[scope="row"]').allTextContents()).sort(),
      PROJECTIONS,
    );
    t.false(page.url().includes(svc.token), 'the token is never in the URL');

    const catalog = page.locator('tr[data-projection="catalog"]');
    await page.getByRole('button', { name: 'Rebuild catalog' }).click();
    // Live again, with the rebuild's progress at 100%: the table follows it without a reload.
    await catalog.locator('.state-live').waitFor({ timeout: 30_000 });
    await catalog.locator('.percent', { hasText: '100%' }).waitFor({ timeout: 30_000 });
    // What was said of the rebuild follows it: "Rebuilding …" does not outlive it.
    await page
      .getByRole('status')
      .filter({ hasText: 'catalog is rebuilt: the rebuilt copies are live' })
      .waitFor();
    t.is(await page.getByRole('status').filter({ hasText: 'Rebuilding' }).count(), 0);
    t.deepEqual(await accessibilityProblems(page), [], 'projections: no serious or critical violation');
    await screenshot(page, 'console-projections');

    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    t.deepEqual(await accessibilityProblems(page), [], 'at a phone width: no serious or critical violation');
    await screenshot(page, 'console-projections-phone');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Operator token').waitFor();
    t.deepEqual(
      await page.evaluate(() => [sessionStorage.length, localStorage.length]),
      [0, 0],
      'the tab keeps nothing',
    );
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[1], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    const browser = await launchBrowser(t);
    const { page, problems } = await watchedPage(browser, new URL(svc.base).origin);
    await page.goto(`${svc.base}/console`);
    await page.getByLabel('Operator token').fill('not-the-operator-token-at-all');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'That token was refused' }).waitFor();
    t.is(await page.evaluate(() => sessionStorage.length), 0);
    t.deepEqual(await accessibilityProblems(page), [], 'the refusal: no serious or critical violation');
    await screenshot(page, 'console-refused');
    // The refused call's 401 is the one console message the browser itself logs.
    t.deepEqual(
      problems.filter((p) => !/status of 401/.test(p)),
      [],
      'no other errors, CSP violations or requests to other origins',
    );
  });

  test(titles[2], async (t) => {
    t.timeout(90_000);
    const { svc, receiver, webhook } = await firstAttemptRefused(t);
    const cart = await createCart(svc);
    await addItem(svc, cart);
    await checkOut(svc, cart);
    await receiver.waitFor(1);
    await until('the delivery is parked', async () => {
      const res = await svc.call('GET', `/admin/v1/webhooks/${webhook.id}/deliveries?status=parked`);
      return ((await res.json()) as { deliveries: unknown[] }).deliveries.length === 1;
    });

    const { page, problems } = await signedIn(t, svc, 'webhooks');
    await page.getByRole('button', { name: `Deliveries to ${receiver.url}` }).click();
    await page.getByLabel('Status', { exact: true }).selectOption('parked');
    const parked = page.locator('li[data-delivery]');
    await parked.first().waitFor();
    t.is(await parked.count(), 1);
    await parked.locator('summary').click();
    await parked.locator('table.attempts tbody tr').first().waitFor();
    t.regex(await parked.locator('table.attempts').innerText(), /500/);
    t.deepEqual(await accessibilityProblems(page), [], 'deliveries: no serious or critical violation');
    await screenshot(page, 'console-delivery-parked');

    await parked.getByRole('button', { name: 'Redeliver' }).click();
    await page.getByRole('status').filter({ hasText: 'was queued again' }).waitFor();
    const [, again] = await receiver.waitFor(2);
    t.is(
      again.headers['x-service-webhook-id'],
      (await receiver.waitFor(1))[0].headers['x-service-webhook-id'],
    );
    await page.getByLabel('Status', { exact: true }).selectOption('delivered');
    await until('the delivery shows delivered', async () => {
      await page.getByRole('button', { name: 'Refresh' }).click();
      return (await page.locator('li[data-delivery]').count()) === 1;
    });
    await screenshot(page, 'console-delivery-delivered');
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[3], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t, { threads: { dispatcher: roleThread('dispatcher') } });
    const receiver = await startReceiver(t);
    await seedCatalog(svc);
    await createWebhook(svc, receiver.url, [1]);
    const cart = await createCart(svc);
    await addItem(svc, cart);
    await checkOut(svc, cart);
    await move(svc, cart, 'preparing');
    const history = (await (await svc.call('GET', `/admin/v1/carts/${cart.uuid}/history`)).json()) as {
      events: { type: string; revision: number; event_id: string }[];
    };
    // Both status moves delivered to the receiver.
    await until('both webhooks delivered', async () => {
      const res = await svc.call('GET', `/admin/v1/carts/${cart.uuid}/webhooks`);
      const { deliveries } = (await res.json()) as { deliveries: { status: string }[] };
      return deliveries.length === 2 && deliveries.every((d) => d.status === 'delivered');
    });

    const { page, problems } = await signedIn(t, svc, 'cart-audit');
    await page.getByLabel('Cart uuid').fill(cart.uuid);
    await page.getByRole('button', { name: 'Show history' }).click();
    const events = page.locator('ol.timeline > li');
    await events.nth(history.events.length - 1).waitFor();
    t.deepEqual(
      await page.locator('ol.timeline > li .event-head strong').allTextContents(),
      history.events.map((e) => e.type),
      'every event, oldest first',
    );
    t.deepEqual(
      await events.evaluateAll((items) => items.map((li) => Number(li.getAttribute('data-revision')))),
      history.events.map((e) => e.revision),
    );
    t.deepEqual(await page.locator('ol.status-path li').allTextContents(), [
      'pending',
      'verification',
      'preparing',
    ]);
    // What each event changed, and the webhook each status move produced, delivered.
    const changes = (i: number) => events.nth(i).locator('ul.changes li').allTextContents();
    const moves = history.events.flatMap((e, i) => (e.type === 'CartStatusChanged' ? [i] : []));
    t.deepEqual(await changes(moves[0]), ['status: pending → verification']);
    t.deepEqual(await changes(moves[1]), ['status: verification → preparing']);
    t.true(
      (await changes(1)).some((c) => c.startsWith('amount: 0 → ')),
      'the item addition moves the total',
    );
    for (const [i, event] of history.events.entries()) {
      const produced = events.nth(i).locator('ul.event-webhooks li');
      t.is(await produced.count(), moves.includes(i) ? 1 : 0, `webhooks of ${event.type}`);
      if (moves.includes(i)) t.regex(await produced.innerText(), /cart_status_updated .*delivered/);
    }
    t.is(await page.locator('[data-pruned-before]').count(), 0, 'a cart of today has lost no delivery');
    t.deepEqual(await accessibilityProblems(page), [], 'cart audit: no serious or critical violation');
    await screenshot(page, 'console-cart-audit');
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[4], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    await seedCatalog(svc);
    const { page, problems } = await signedIn(t, svc, 'partners');
    await page.getByLabel('Name').fill('Console Brand Co');
    await page.getByLabel('Kind').selectOption('brand');
    await page.getByLabel(/Brand ids/).fill('1');
    await page.getByRole('button', { name: 'Register' }).click();
    const shown = page.locator('[data-secret]');
    await shown.waitFor();
    const key = (await shown.textContent()) ?? '';
    t.regex(key, /^pds_key_/);
    t.deepEqual(await accessibilityProblems(page), [], 'partners: no serious or critical violation');
    await screenshot(page, 'console-partner-key');
    // The key works: it reads the brand's data.
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: svc.base });
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('status').filter({ hasText: 'Copied' }).waitFor();
    const clipboard = () =>
      (
        globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }
      ).navigator.clipboard.readText();
    t.is(await page.evaluate(clipboard), key, 'the copy button copies the key');
    const res = await fetch(`${svc.base}/partner/brand/v1/stores`, {
      headers: { authorization: `Bearer ${key}` },
    });
    t.is(res.status, 200);
    await res.body?.cancel();

    await page.getByRole('button', { name: 'Done' }).click();
    await page.locator('tr', { hasText: 'Console Brand Co' }).waitFor();
    t.false((await page.content()).includes(key), 'once dismissed, the key is nowhere on the page');
    t.regex(
      await page.locator('tr', { hasText: 'Console Brand Co' }).innerText(),
      new RegExp(`${key.slice(0, 12)}…`),
    );
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[5], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    await seedCatalog(svc);
    const created = await svc.call('POST', '/admin/v1/partners', {
      name: 'Keys Co',
      kind: 'brand',
      brand_ids: [1],
    });
    const first = ((await created.json()) as { api_key: string }).api_key;
    const works = async (key: string) => {
      const res = await fetch(`${svc.base}/partner/brand/v1/stores`, {
        headers: { authorization: `Bearer ${key}` },
      });
      await res.body?.cancel();
      return res.status;
    };
    t.is(await works(first), 200);

    const { page, problems } = await signedIn(t, svc, 'partners');
    const row = page.locator('tr', { hasText: 'Keys Co' });
    await row.locator('summary').click();
    await row.getByRole('button', { name: `Rotate key ${first.slice(0, 12)}` }).click();
    const rotated = (await page.locator('[data-secret]').textContent()) ?? '';
    t.regex(rotated, /^pds_key_/);
    t.not(rotated, first);
    t.is(await works(rotated), 200);
    t.is(await works(first), 401, 'the rotated key is refused');
    await page.getByRole('button', { name: 'Done' }).click();
    await screenshot(page, 'console-partner-keys');

    await row.getByRole('button', { name: `Revoke key ${rotated.slice(0, 12)}` }).click();
    await row.getByRole('status').filter({ hasText: 'is revoked' }).waitFor();
    t.is(await works(rotated), 401, 'the revoked key is refused');
    await row.getByRole('button', { name: 'Issue a key' }).click();
    const issued = (await page.locator('[data-secret]').textContent()) ?? '';
    t.is(await works(issued), 200);
    await page.getByRole('button', { name: 'Done' }).click();

    await row.getByLabel('Rate limit per minute').fill('1234');
    await row.getByRole('button', { name: 'Change' }).click();
    await row.getByRole('status').filter({ hasText: '1234/min' }).waitFor();
    await until('the list shows the new limit', async () => (await row.innerText()).includes('1234/min'));
    const stored = (await (await svc.call('GET', '/admin/v1/partners?limit=10')).json()) as {
      partners: { name: string; rate_limit_per_minute: number }[];
    };
    t.is(stored.partners.find((p) => p.name === 'Keys Co')?.rate_limit_per_minute, 1234);
    t.deepEqual(
      await accessibilityProblems(page),
      [],
      'managing a partner: no serious or critical violation',
    );
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[6], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t, {
      threads: { dispatcher: roleThread('dispatcher') },
      env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s' },
    });
    await seedCatalog(svc, [1, 2]);
    const receiver = await startReceiver(t);
    const { page, problems } = await signedIn(t, svc, 'webhooks');
    await page.getByLabel('URL').fill(receiver.url);
    await page.getByLabel(/Auth token/).fill('receiver-token-from-console');
    await page.getByLabel(/Store ids/).fill('1');
    await page.getByRole('button', { name: 'Subscribe' }).click();
    const secret = (await page.locator('[data-secret]').textContent()) ?? '';
    t.regex(secret, /\S{20,}/);
    t.deepEqual(await accessibilityProblems(page), [], 'subscribing: no serious or critical violation');
    await screenshot(page, 'console-webhook-secret');
    await page.getByRole('button', { name: 'Done' }).click();
    t.false((await page.content()).includes(secret), 'once dismissed, the secret is nowhere on the page');

    const row = page.locator('tr', { hasText: receiver.url });
    await row.locator('summary').click();
    await row.getByRole('button', { name: 'Send a test event' }).click();
    await row.getByRole('status').filter({ hasText: 'Test event sent: delivered, HTTP 200' }).waitFor();
    const [sample] = await receiver.waitFor(1);
    t.is(sample.headers['x-service-test'], 'true');
    t.is(sample.headers.authorization, 'Bearer receiver-token-from-console');

    await row.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = (await page.locator('[data-secret]').textContent()) ?? '';
    t.not(rotated, secret);
    await page.getByRole('button', { name: 'Done' }).click();

    // A delivery the receiver refused (one attempt, then parked), recovered since an hour ago.
    receiver.script({ status: 503 });
    const cart = await createCart(svc);
    await addItem(svc, cart);
    await checkOut(svc, cart);
    await receiver.waitFor(2);
    const webhookId = (
      (await (await svc.call('GET', '/admin/v1/webhooks')).json()) as { webhooks: { webhook_id: string }[] }
    ).webhooks[0].webhook_id;
    await until('the delivery is parked', async () => {
      const res = await svc.call('GET', `/admin/v1/webhooks/${webhookId}/deliveries?status=parked`);
      return ((await res.json()) as { deliveries: unknown[] }).deliveries.length === 1;
    });
    const hourAgo = new Date(Date.now() - 3_600_000);
    const local = new Date(hourAgo.getTime() - hourAgo.getTimezoneOffset() * 60_000)
      .toISOString()
      .slice(0, 16);
    await row.getByLabel(/Recover failed and parked deliveries since/).fill(local);
    await row.getByRole('button', { name: 'Recover' }).click();
    await row
      .getByRole('status')
      .filter({ hasText: '1 failed or parked delivery was queued again' })
      .waitFor();
    const received = await receiver.waitFor(3);
    t.is(received[2].headers['x-service-webhook-id'], received[1].headers['x-service-webhook-id']);

    // Its stores and events changed through the form: only what changed is sent.
    await row.getByLabel('Store ids', { exact: true }).fill('1, 2');
    await row.getByRole('checkbox', { name: 'cart_abandoned' }).last().uncheck();
    await row.getByRole('button', { name: 'Save changes' }).click();
    await row.getByRole('status').filter({ hasText: 'Changed.' }).waitFor();
    const changed = (await (await svc.call('GET', `/admin/v1/webhooks/${webhookId}`)).json()) as {
      webhook: { store_ids: number[]; events: string[]; url: string };
    };
    t.deepEqual(changed.webhook.store_ids, [1, 2]);
    t.deepEqual(changed.webhook.events, ['cart_status_updated']);
    t.is(changed.webhook.url, receiver.url);

    await row.getByRole('button', { name: 'Disable' }).click();
    await until('the row says disabled', async () => (await row.innerText()).includes('disabled'));
    await row.getByRole('button', { name: 'Enable' }).click();
    await until('the row says enabled', async () => (await row.innerText()).includes('enabled'));
    const stored = (await (await svc.call('GET', '/admin/v1/webhooks')).json()) as {
      webhooks: { enabled: boolean }[];
    };
    t.true(stored.webhooks[0].enabled);
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[7], async (t) => {
    t.timeout(90_000);
    const { svc, receiver, webhook } = await firstAttemptRefused(t);
    for (let i = 0; i < 3; i++) {
      const cart = await createCart(svc);
      await addItem(svc, cart);
      await checkOut(svc, cart);
    }
    const api = async (window: string) =>
      (
        (await (
          await svc.call('GET', `/admin/v1/webhooks/${webhook.id}/health?window=${window}`)
        ).json()) as {
          health: { totals: { scheduled: number; parked: number; attempts: { delivered: number } } };
        }
      ).health;
    await until('three deliveries settled', async () => {
      const { totals } = await api('1h');
      return totals.attempts.delivered === 2 && totals.parked === 1;
    });

    const { page, problems } = await signedIn(t, svc, 'overview');
    const card = page.getByRole('article', { name: `Health of ${receiver.url}` });
    const totals = card.locator('dl.totals');
    await totals.waitFor();
    const figure = async (name: string) =>
      totals
        .locator('div', { has: page.locator('dt', { hasText: new RegExp(`^${name}$`) }) })
        .locator('dd')
        .innerText();
    t.is(await figure('Scheduled'), '3');
    t.is(await figure('Delivered'), '2');
    t.is(await figure('Failed attempts'), '1');
    t.is(await figure('Parked'), '1');
    t.is(await figure('Queued now'), '0');
    t.regex(await figure('Latency p50 / p99'), /^\d[\d,.]* ms \/ \d[\d,.]* ms$/);
    // Three charts, drawn (uPlot's canvas), each saying what it shows in words.
    await card.locator('figure.chart canvas').nth(2).waitFor();
    t.is(await card.locator('figure.chart').count(), 3);
    t.regex(
      (await card.locator('.plot').first().getAttribute('aria-label')) ?? '',
      /Last hour: 2 delivered, 1 failed attempts, 1 parked/,
    );
    // The fan-out's progress (GET /admin/v1/webhook-fan-out): every cart event handled, nothing parked.
    const fanOut = page.locator('dl[data-fan-out="current"]');
    await fanOut.waitFor();
    const fanOutText = await fanOut.innerText();
    t.regex(fanOutText, /Group\s+webhook-fan-out/);
    t.regex(fanOutText, /State\s+current/);
    t.regex(fanOutText, /Parked\s+0/);
    t.deepEqual(
      await accessibilityProblems(page),
      [],
      'overview with health: no serious or critical violation',
    );
    await screenshot(page, 'console-overview-health');

    // The last day: 15-minute intervals, the same totals.
    await page.getByLabel('Last day').check();
    await card.locator('.plot[aria-label^="Last day"]').first().waitFor();
    t.is(await figure('Scheduled'), '3');
    t.is((await api('24h')).totals.scheduled, 3);
    await page.setViewportSize({ width: 390, height: 844 });
    t.deepEqual(await accessibilityProblems(page), [], 'at a phone width: no serious or critical violation');
    await screenshot(page, 'console-overview-health-phone');
    await page.setViewportSize({ width: 1280, height: 800 });

    // The webhooks view shows the same health above the subscription's deliveries.
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('button', { name: `Deliveries to ${receiver.url}` }).click();
    const chosen = page.locator(`[data-health="${webhook.id}"]`);
    await chosen.locator('figure.chart canvas').nth(2).waitFor();
    t.regex(await chosen.locator('dl.totals').innerText(), /Parked\s+1/);
    t.deepEqual(
      await accessibilityProblems(page),
      [],
      'webhooks with health: no serious or critical violation',
    );
    await screenshot(page, 'console-webhook-health');
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
