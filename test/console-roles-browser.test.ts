/**
 * `/console` shows each person what their role can do (docs/operations.md, "Accounts and roles"), in
 * a real browser (test/support/browser.ts): an auditor signed in with their own token sees their name
 * and role, every read (projections, partners, webhooks and their deliveries, a cart's history with
 * the name of whoever caused each event, and who has read that history), and no control that writes;
 * an operator sees the writes. No errors or CSP violations; axe-core finds no serious or critical
 * accessibility violation.
 */
import test from 'ava';
import { accessibilityProblems, browserMissing, screenshot, signedInConsole } from './support/browser.ts';
import { addItem, type Caller, createCart, createWebhook, seedCatalog } from './support/cart-world.ts';
import { startService, type TestService } from './support/service.ts';

async function account(svc: TestService, name: string, role: string) {
  const res = await svc.call('POST', '/admin/v1/operators', {
    name,
    email: `${role}@example.com`,
    role,
  });
  if (res.status !== 201) throw new Error(await res.text());
  const out = (await res.json()) as { operator: { operator_id: string }; operator_token: string };
  return { id: out.operator.operator_id, token: out.operator_token };
}

/** Calls the service with this person's token. */
const as = (svc: TestService, token: string): Caller => ({
  call: (method, url, body, headers = {}) =>
    svc.call(method, url, body, { authorization: `Bearer ${token}`, ...headers }),
});

const missing = browserMissing();
const titles = [
  "an auditor sees their name and role, every read, each event's person and who read a cart, and nothing that writes",
  'an operator sees the controls that write',
];
if (missing) {
  console.log(`console-roles-browser.test.ts: skipped: ${missing}`);
  for (const title of titles) test.skip(`${title} — skipped: ${missing}`, () => {});
} else {
  test(titles[0], async (t) => {
    t.timeout(90_000);
    const svc = await startService(t);
    const operator = await account(svc, 'Olive Operator', 'operator');
    const auditor = await account(svc, 'Avery Auditor', 'auditor');
    const writer = as(svc, operator.token);
    await seedCatalog(writer);
    await createWebhook(writer, 'http://127.0.0.1:9/hooks', [1]);
    const cart = await createCart(writer);
    await addItem(writer, cart);
    await svc.call('POST', '/admin/v1/partners', {
      name: 'Seen Partner',
      kind: 'store_operator',
      store_ids: [1],
    });

    const { page, problems } = await signedInConsole(t, svc.base, auditor.token, 'overview');
    t.regex(await page.locator('header .who').innerText(), /Signed in as Avery Auditor\s+auditor$/);
    await page.locator('table.projections tbody tr').first().waitFor();
    t.is(await page.getByRole('button', { name: /^Rebuild / }).count(), 0, 'no rebuild for an auditor');

    await page.goto(`${svc.base}/console#partners`);
    await page.getByRole('rowheader', { name: 'Seen Partner' }).waitFor();
    t.is(await page.getByRole('heading', { name: 'Register a partner' }).count(), 0);
    t.is(await page.locator('summary', { hasText: 'Manage' }).count(), 0);

    await page.goto(`${svc.base}/console#webhooks`);
    await page.getByRole('button', { name: 'Deliveries to http://127.0.0.1:9/hooks' }).waitFor();
    t.is(await page.getByRole('heading', { name: 'Subscribe a receiver' }).count(), 0);
    t.is(await page.locator('summary', { hasText: 'Manage' }).count(), 0);

    await page.goto(`${svc.base}/console#cart-audit`);
    await page.getByLabel('Cart uuid').fill(cart.uuid);
    await page.getByRole('button', { name: 'Show history' }).click();
    await page.locator('ol.timeline > li').nth(1).waitFor();
    const by = (await page.locator('ol.timeline > li p.muted').allInnerTexts()).filter((l) =>
      l.startsWith('by '),
    );
    t.is(by.length, 2, 'each event says who caused it');
    t.true(
      by.every((line) => line.startsWith('by Olive Operator')),
      by.join('\n'),
    );
    await page.locator('ol.views li').first().waitFor();
    t.regex(await page.locator('ol.views').innerText(), /Avery Auditor/);
    t.deepEqual(await accessibilityProblems(page), [], 'no serious or critical violation');
    await screenshot(page, 'console-auditor-cart');
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test(titles[1], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    const operator = await account(svc, 'Olive Operator', 'operator');
    const { page, problems } = await signedInConsole(t, svc.base, operator.token, 'overview');
    t.regex(await page.locator('header .who').innerText(), /Signed in as Olive Operator\s+operator$/);
    await page.getByRole('button', { name: 'Rebuild catalog' }).waitFor();
    await page.goto(`${svc.base}/console#partners`);
    await page.getByRole('heading', { name: 'Register a partner' }).waitFor();
    await page.goto(`${svc.base}/console#webhooks`);
    await page.getByRole('heading', { name: 'Subscribe a receiver' }).waitFor();
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
