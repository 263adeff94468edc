/**
 * `/console` in a real browser (test/support/browser.ts): sign in with the operator token, see every
 * projection, rebuild one and watch it reach live again; a wrong token is refused and nothing is kept.
 * The page must run under its Content-Security-Policy without errors and fetch nothing from another
 * origin; axe-core finds no serious or critical accessibility violation in each view. Each test leaves
 * a screenshot in `test-artifacts/screenshots/`.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import test from 'ava';
import type { Page } from 'playwright-core';
import { browserMissing, launchBrowser, screenshot, watchedPage } from './support/browser.ts';
import { startService } from './support/service.ts';

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const PROJECTIONS = ['carts', 'catalog', 'partner_keys', 'webhook_deliveries', 'webhook_subscriptions'];

/** axe-core's serious and critical violations on the page as it is (run outside the page's CSP). */
async function accessibilityProblems(page: Page): Promise<string[]> {
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[] }> } }).axe;
    return (await axe.run()).violations;
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}
interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

const missing = browserMissing();
const titles = [
  'sign in, see every projection, rebuild one and watch it reach live; accessible at a laptop and a phone width',
  'a wrong token is refused, said so, and not kept',
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
    const rows = page.locator('tbody tr');
    await rows.nth(PROJECTIONS.length - 1).waitFor();
    t.deepEqual((await page.locator('tbody th[scope="row"]').allTextContents()).sort(), PROJECTIONS);
    t.false(page.url().includes(svc.token), 'the token is never in the URL');

    const catalog = page.locator('tr[data-projection="catalog"]');
    await page.getByRole('button', { name: 'Rebuild catalog' }).click();
    await page.getByRole('status').filter({ hasText: 'Rebuilding catalog' }).waitFor();
    // Live again, with the rebuild's progress at 100%: the table follows it without a reload.
    await catalog.locator('.state-live').waitFor({ timeout: 30_000 });
    await catalog.locator('.percent', { hasText: '100%' }).waitFor({ timeout: 30_000 });
    t.deepEqual(await accessibilityProblems(page), [], 'projections: no serious or critical violation');
    await screenshot(page, 'console-projections');

    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    t.deepEqual(await accessibilityProblems(page), [], 'at a phone width: no serious or critical violation');
    await screenshot(page, 'console-projections-phone');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Operator token').waitFor();
    t.is(await page.evaluate(() => sessionStorage.length), 0, 'signing out forgets the token');
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
}
