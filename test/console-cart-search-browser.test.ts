/**
 * The console's Cart audit finds carts without their uuid (docs/operations.md, "Auditing carts"), in a
 * real browser (test/support/browser.ts): a search by store and status lists the carts with no
 * customer shown, each linking to its audit; an operator also finds a cart by its customer's email;
 * Back from a cart's audit shows the search again (kept in the fragment, the email in memory only);
 * the statuses offered are the domain's, and the time fields name the header's zone;
 * an auditor is offered no email or phone field. No errors or CSP violations; axe-core finds no
 * serious or critical violation at phone and desktop widths.
 */
import test from 'ava';
import { cartStatuses } from '../domain/cart.ts';
import { accessibilityProblems, browserMissing, screenshot, signedInConsole } from './support/browser.ts';
import { addItem, createCart, identify, must, seedCatalog } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService } from './support/service.ts';

const missing = browserMissing();
const titles = [
  'an operator finds carts by store, status and customer email, each linking to its audit',
  'an auditor finds carts by store and is offered no search by email or phone',
];
if (missing) {
  console.log(`console-cart-search-browser.test.ts: skipped: ${missing}`);
  for (const title of titles) test.skip(`${title} — skipped: ${missing}`, () => {});
} else {
  test(titles[0], async (t) => {
    t.timeout(90_000);
    const svc = await startService(t);
    await seedCatalog(svc, [1, 2]);
    const elsewhere = await createCart(svc, 1);
    const found = await createCart(svc, 2);
    await addItem(svc, found);
    await identify(svc, found);
    const other = await createCart(svc, 2);
    await until('the read model holds the carts', async () => {
      const page = await must(svc, 'GET', '/admin/v1/carts');
      return page.carts.length === 3;
    });

    const { page, problems } = await signedInConsole(t, svc.base, svc.token, 'cart-audit');
    // The statuses offered are the domain's (from the admin API's OpenAPI document), and the time
    // fields name the zone as the header does.
    const status = page.getByLabel('Status');
    const offered = () =>
      status.locator('option').evaluateAll((os) => os.map((o) => (o as unknown as { value: string }).value));
    await until('the statuses are offered', async () => (await offered()).length > 1);
    t.deepEqual(await offered(), ['', ...cartStatuses]);
    const zone = await page.locator('header .zone').innerText();
    t.regex(zone, /^Times in /);
    t.is(await page.locator('#search-zone').innerText(), zone);
    t.is(await page.getByLabel('Created after').getAttribute('aria-describedby'), 'search-zone');
    await page.getByLabel('Store id').fill('2');
    await page.getByRole('button', { name: 'Find carts' }).click();
    const rows = page.getByRole('table', { name: 'Carts found, newest first' }).locator('tbody tr');
    await rows.nth(1).waitFor();
    t.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-cart'))), [
      other.uuid,
      found.uuid,
    ]);
    t.false((await page.locator('main').innerText()).includes(elsewhere.uuid), 'no cart of store 1');
    t.regex(await rows.first().innerText(), /2 Store 2\s+pending/);
    t.false((await page.locator('main').innerText()).includes('ana@example.com'), 'no customer shown');

    await page.getByLabel('Status').selectOption('pending');
    await page.getByLabel('Store id').fill('');
    await page.getByLabel('Customer email').fill('ANA@example.com');
    await page.getByRole('button', { name: 'Find carts' }).click();
    await until('only the customer’s cart is listed', async () => (await rows.count()) === 1);
    t.is(await rows.first().getAttribute('data-cart'), found.uuid);
    t.deepEqual(await accessibilityProblems(page), [], 'no serious or critical violation at 1440 px');
    await page.setViewportSize({ width: 390, height: 844 });
    t.deepEqual(await accessibilityProblems(page), [], 'no serious or critical violation at 390 px');
    await page.setViewportSize({ width: 1440, height: 900 });
    await screenshot(page, 'console-cart-search');

    await page.getByRole('link', { name: found.uuid }).click();
    await page.locator('ol.timeline > li').nth(1).waitFor();
    t.true(page.url().endsWith(`#cart-audit/${found.uuid}`));
    const views = await must(svc, 'GET', `/admin/v1/carts/${found.uuid}/views`);
    t.is(views.views.length, 2, 'the search by email and the history read are both on record');

    // Back: the search as it was, its carts shown again without asking (no new view on record); the
    // fragment names the search but never the customer's email.
    await page.goBack();
    await rows.first().waitFor();
    t.true(page.url().endsWith('#cart-audit?status=pending'), page.url());
    t.is(await page.getByLabel('Customer email').inputValue(), 'ANA@example.com');
    t.is(await page.getByLabel('Status').inputValue(), 'pending');
    t.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-cart'))), [found.uuid]);
    const again = await must(svc, 'GET', `/admin/v1/carts/${found.uuid}/views`);
    t.is(again.views.length, 2, 'Back showed what was on screen: no search by email again');
    // Back once more: the search by store, from the fragment.
    await page.goBack();
    await until('the search by store is shown again', async () => (await rows.count()) === 2);
    t.is(await page.getByLabel('Store id').inputValue(), '2');
    t.is(await page.getByLabel('Customer email').inputValue(), '');
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[1], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    await seedCatalog(svc);
    const cart = await createCart(svc, 1);
    const auditor = await must(svc, 'POST', '/admin/v1/operators', {
      name: 'Avery Auditor',
      email: 'auditor@example.com',
      role: 'auditor',
    });
    await until('the read model holds the cart', async () => {
      const page = await must(svc, 'GET', '/admin/v1/carts');
      return page.carts.length === 1;
    });
    const { page, problems } = await signedInConsole(t, svc.base, auditor.operator_token, 'cart-audit');
    await page.getByLabel('Store id').fill('1');
    await page.getByRole('button', { name: 'Find carts' }).click();
    await page.getByRole('link', { name: cart.uuid }).waitFor();
    t.is(await page.getByLabel('Customer email').count(), 0);
    t.is(await page.getByLabel('Customer phone').count(), 0);
    t.deepEqual(await accessibilityProblems(page), []);
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
