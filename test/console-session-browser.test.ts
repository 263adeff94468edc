/**
 * The console's session in a real browser (test/support/browser.ts;
 * docs/operations.md, "The console"): signing in leaves nothing in `sessionStorage` or `localStorage` and no cookie a script can
 * read; the console's writes go with the session's CSRF token; a reload keeps the session; sign-out
 * ends it on the server; a session that ends meanwhile brings back the sign-in form; and an auditor
 * sees every view without a button or form that writes. No errors, CSP violations or requests to
 * another origin; each test leaves a screenshot in `test-artifacts/screenshots/`.
 */
import test from 'ava';
import {
  BOOTSTRAP_OPERATOR,
  type OperatorAuthenticator,
  type OperatorPrincipal,
} from '../application/operator-principal.ts';
import {
  accessibilityProblems,
  browserMissing,
  launchBrowser,
  screenshot,
  watchedPage,
} from './support/browser.ts';
import { addItem, checkOut, createCart, createWebhook, seedCatalog, ticking } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const BOOTSTRAP_TOKEN = 'bootstrap-token-of-the-console-session-test';
const AUDITOR_TOKEN = 'auditor-token-of-the-console-session-test';
const AUDITOR: OperatorPrincipal = {
  operator_id: 'ada',
  name: 'Ada Auditor',
  role: 'auditor',
  token_id: 'tok-ada',
};

/** The bootstrap admin and one auditor, as accounts would stand for them. */
const people: OperatorAuthenticator = {
  async authenticate(token) {
    return token === BOOTSTRAP_TOKEN ? BOOTSTRAP_OPERATOR : token === AUDITOR_TOKEN ? AUDITOR : undefined;
  },
  async current(principal) {
    return [BOOTSTRAP_OPERATOR, AUDITOR].find((p) => p.operator_id === principal.operator_id);
  },
};

const missing = browserMissing();
const titles = [
  "sign in and work with nothing in the tab's storage and no cookie a script can read; writes carry the CSRF token; a reload keeps the session; sign-out ends it on the server",
  'a session that ends meanwhile brings back the sign-in form',
  'an auditor sees the projections, webhooks, deliveries and partners with no button or form that writes',
];
if (missing) {
  console.log(`console-session-browser.test.ts: skipped: ${missing}`);
  for (const title of titles) test.skip(`${title} — skipped: ${missing}`, () => {});
} else {
  test(titles[0], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    const browser = await launchBrowser(t);
    const { page, problems } = await watchedPage(browser, new URL(svc.base).origin);
    await page.goto(`${svc.base}/console`);
    await page.getByLabel('Operator token').fill(svc.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('table.projections tbody tr').first().waitFor();
    t.regex(await page.locator('header .who').innerText(), /Signed in as bootstrap token\s+admin/);

    const kept = await page.evaluate(() => ({
      session: sessionStorage.length,
      local: localStorage.length,
      cookie: (globalThis as unknown as { document: { cookie: string } }).document.cookie,
    }));
    t.deepEqual(kept, { session: 0, local: 0, cookie: '' }, 'nothing a script can read');
    t.false((await page.content()).includes(svc.token), 'the token is nowhere in the page');
    const [cookie, ...others] = await browser.cookies(`${svc.base}/admin/v1`);
    t.deepEqual(others, []);
    t.like(cookie, { name: 'pds_console_session', path: '/admin', httpOnly: true, sameSite: 'Strict' });
    t.true(cookie.expires > Date.now() / 1000 + 7.9 * 3600, 'it expires with the session, in eight hours');

    // A write through the console: the rebuild goes with the session's CSRF token.
    await page.getByRole('button', { name: 'Rebuild partner_keys' }).click();
    // Said while it runs, then once it ended (a small read model's rebuild may end at once).
    await page
      .getByRole('status')
      .filter({ hasText: /Rebuilding partner_keys|partner_keys is rebuilt/ })
      .waitFor();

    await page.reload();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    t.is(await page.getByLabel('Operator token').count(), 0, 'still signed in after a reload');
    await screenshot(page, 'console-session');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Operator token').waitFor();
    t.deepEqual(await browser.cookies(`${svc.base}/admin/v1`), [], 'the cookie is cleared');
    const replayed = await fetch(`${svc.base}/admin/v1/partners`, {
      headers: { cookie: `${cookie.name}=${cookie.value}` },
    });
    t.is(replayed.status, 401, 'the session ended on the server: a copy of the cookie is refused');
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[1], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    const browser = await launchBrowser(t);
    const { page, problems } = await watchedPage(browser, new URL(svc.base).origin);
    await page.goto(`${svc.base}/console#partners`);
    await page.getByLabel('Operator token').fill(svc.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Partners', level: 2 }).waitFor();
    // The session ends elsewhere (another tab signs out); the console's next call finds it ended.
    const [cookie] = await browser.cookies(`${svc.base}/admin/v1`);
    const jar = `${cookie.name}=${cookie.value}`;
    const { csrf_token } = (await (
      await fetch(`${svc.base}/admin/v1/session`, { headers: { cookie: jar } })
    ).json()) as { csrf_token: string };
    const out = await fetch(`${svc.base}/admin/v1/session`, {
      method: 'DELETE',
      headers: { cookie: jar, 'x-csrf-token': csrf_token },
    });
    t.is(out.status, 204);
    // A write finds the session ended; so may the console's own next read, before the form is sent:
    // either way the sign-in form comes back (the form, gone with the view, is then not sent).
    const register = async () => {
      await page.getByLabel('Name').fill('After The End', { timeout: 5_000 });
      await page.getByLabel(/Brand ids/).fill('1', { timeout: 5_000 });
      await page.getByRole('button', { name: 'Register' }).click({ timeout: 5_000 });
    };
    await Promise.all([register().catch(() => undefined), page.getByLabel('Operator token').waitFor()]);
    t.is(await page.getByRole('button', { name: 'Sign out' }).count(), 0);
    // The refused call's 401 is the one console message the browser itself logs.
    t.deepEqual(
      problems.filter((p) => !/status of 401/.test(p)),
      [],
      'no other errors, CSP violations or requests to other origins',
    );
  });

  test(titles[2], async (t) => {
    t.timeout(90_000);
    const svc = await startService(t, { operators: people, env: { PDS_OPERATOR_TOKEN: BOOTSTRAP_TOKEN } });
    const receiver = await startReceiver(t);
    await seedCatalog(svc);
    await createWebhook(svc, receiver.url, [1]);
    const partner = await svc.call('POST', '/admin/v1/partners', {
      name: 'Read Only Co',
      kind: 'brand',
      brand_ids: [1],
    });
    t.is(partner.status, 201);
    const cart = await createCart(svc);
    await addItem(svc, cart);
    await checkOut(svc, cart);
    await ticking(svc, () => receiver.waitFor(1));
    await until('the delivery is delivered', async () => {
      const res = await svc.call('GET', `/admin/v1/carts/${cart.uuid}/webhooks`);
      const { deliveries } = (await res.json()) as { deliveries: { status: string }[] };
      return deliveries.length === 1 && deliveries[0].status === 'delivered';
    });

    const browser = await launchBrowser(t);
    const { page, problems } = await watchedPage(browser, new URL(svc.base).origin);
    await page.goto(`${svc.base}/console`);
    await page.getByLabel('Operator token').fill(AUDITOR_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    t.regex(await page.locator('header .who').innerText(), /Signed in as Ada Auditor\s+auditor/);
    const rows = page.locator('table.projections tbody tr');
    await rows.nth(4).waitFor();
    t.is(await page.getByRole('button', { name: /^Rebuild / }).count(), 0, 'no Rebuild button');
    t.deepEqual(await accessibilityProblems(page), [], 'overview: no serious or critical violation');

    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('button', { name: `Deliveries to ${receiver.url}` }).click();
    const delivery = page.locator('li[data-delivery]');
    await delivery.first().waitFor();
    await delivery.locator('summary').click();
    await delivery.locator('table.attempts tbody tr').first().waitFor();
    t.regex(await delivery.innerText(), /delivered/);
    t.is(await page.getByRole('button', { name: 'Redeliver' }).count(), 0, 'no Redeliver button');
    t.is(await page.getByRole('heading', { name: 'Subscribe a receiver' }).count(), 0, 'no subscribe form');
    t.is(await page.locator('summary', { hasText: 'Manage' }).count(), 0, 'no Manage panel');
    t.deepEqual(await accessibilityProblems(page), [], 'webhooks: no serious or critical violation');
    await screenshot(page, 'console-auditor-webhooks');

    await page.getByRole('link', { name: 'Partners' }).click();
    await page.locator('tr', { hasText: 'Read Only Co' }).waitFor();
    t.is(await page.getByRole('heading', { name: 'Register a partner' }).count(), 0, 'no register form');
    t.is(await page.locator('summary', { hasText: 'Manage' }).count(), 0, 'no Manage panel');
    t.is(
      await page
        .getByRole('button')
        .filter({ hasText: /Issue|Rotate|Revoke|Change/ })
        .count(),
      0,
    );
    t.deepEqual(await accessibilityProblems(page), [], 'partners: no serious or critical violation');
    await screenshot(page, 'console-auditor-partners');
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
