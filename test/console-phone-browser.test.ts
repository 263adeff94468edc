/**
 * `/console` at a phone's width and a desktop's (test/support/browser.ts;
 * docs/operations.md, "The console"): every view, with something in it and every `<details>` open,
 * fits the viewport's width at 390 and 1440 px: the document does not scroll sideways, and neither does
 * anything inside it (a table in a scrolling box counts as scrolling). At 390 px tables are cards, each
 * cell labelled with its column (a cart search's results too, after "More carts"); raw JSON wraps. axe finds no serious or critical violation at either
 * width. Screenshots at 390 px are left in `test-artifacts/screenshots/`.
 */
import test from 'ava';
import type { Page } from 'playwright-core';
import { roleThread } from '../cli/role-thread.ts';
import type { Json } from './support/admin-answers.ts';
import {
  accessibilityProblems,
  browserMissing,
  launchBrowser,
  screenshot,
  watchedPage,
} from './support/browser.ts';
import { checkedOut, createCart, createWebhook, move, must, seedCatalog } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const WIDTHS = [390, 1440];

/**
 * What overflows the viewport's width: the document, each element that scrolls sideways, and what
 * sticks out past the right edge (for the message). Plain JavaScript: it runs in the browser.
 */
const SIDEWAYS = `(() => {
  const root = document.documentElement;
  const found = [];
  if (root.scrollWidth > root.clientWidth) found.push('the document: ' + root.scrollWidth + ' px in ' + root.clientWidth);
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + [...e.classList].map((c) => '.' + c).join('');
  for (const e of document.querySelectorAll('body *')) {
    const { overflowX } = getComputedStyle(e);
    if ((overflowX === 'auto' || overflowX === 'scroll') && e.scrollWidth > e.clientWidth + 1)
      found.push(name(e) + ' scrolls: ' + e.scrollWidth + ' px in ' + e.clientWidth);
  }
  for (const e of document.querySelectorAll('main *, header *')) {
    const right = e.getBoundingClientRect().right;
    if (right > root.clientWidth + 1 && !e.closest('.visually-hidden')) found.push(name(e) + ' ends at ' + Math.round(right) + ' px');
  }
  return found.slice(0, 12);
})()`;

const sideways = (page: Page): Promise<string[]> => page.evaluate(SIDEWAYS);

/**
 * How the view's tables break the rule at `width`: every data cell names its column (`data-label`);
 * on a phone each row is a card (its cells blocks, each shown after its column's name), else a table.
 */
function tablesAt(page: Page, width: number): Promise<string[]> {
  return page.evaluate(`((phone) => {
    const wrong = [];
    for (const cell of document.querySelectorAll('main table tbody :is(td, th)')) {
      const label = cell.getAttribute('data-label');
      const text = (cell.textContent ?? '').trim().slice(0, 30);
      if (cell.tagName === 'TD' && !label) wrong.push("a cell without its column's name: " + text);
      const { display } = getComputedStyle(cell);
      if (display !== (phone ? 'block' : 'table-cell')) wrong.push(display + ': ' + text);
      const before = getComputedStyle(cell, '::before').content;
      if (phone && label && before !== '"' + label + '"') wrong.push(label + ' not shown beside ' + text);
    }
    return wrong.slice(0, 6);
  })(${width < 600})`);
}

/**
 * Waits for what makes a view ready (a chart's canvas comes after three reads in a row: the session,
 * the list, the health). A read that fails is tried again at the console's next 10 s poll, and a loaded
 * machine is slow: the wait allows for two polls beyond Playwright's 30 s default, and says what the
 * page shows in its alerts if it still times out, so a read that keeps failing is named, not hidden.
 */
async function shown(page: Page, selector: string, where: string): Promise<void> {
  try {
    await page.locator(selector).last().waitFor({ timeout: 50_000 });
  } catch (e) {
    const alerts = await page.getByRole('alert').allInnerTexts();
    throw new Error(`${where}: no ${selector}; the page's alerts: ${JSON.stringify(alerts)} (${e})`);
  }
}

const missing = browserMissing();
const title =
  'every view fits a phone (390 px) and a desktop (1440 px) without scrolling sideways; tables are cards on a phone; raw JSON wraps; axe at both widths';
if (missing) {
  console.log(`console-phone-browser.test.ts: skipped: ${missing}`);
  test.skip(`${title} — skipped: ${missing}`, () => {});
} else {
  test(title, async (t) => {
    t.timeout(180_000);
    // One attempt, then parked: a failed delivery with a long answer, then delivered ones.
    const svc = await startService(t, {
      threads: { dispatcher: roleThread('dispatcher') },
      env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s' },
    });
    const receiver = await startReceiver(t, '/hooks/a-receiver-whose-path-is-long-enough-to-wrap-on-a-phone');
    receiver.script({ status: 500, body: `receiver-down-${'x'.repeat(300)}` });
    await seedCatalog(svc);
    const webhook = await createWebhook(svc, receiver.url, [1]);
    await must(svc, 'POST', '/admin/v1/partners', {
      name: 'A Partner With A Name Long Enough To Wrap On A Phone Screen',
      kind: 'store_operator',
      store_ids: [1],
    });
    const cart = await checkedOut(svc);
    await move(svc, cart, 'preparing');
    const deliveries = async () =>
      (
        (await (await svc.call('GET', `/admin/v1/webhooks/${webhook.id}/deliveries`)).json()) as {
          deliveries: Json[];
        }
      ).deliveries;
    await until('one delivery parked, one delivered', async () => {
      const all = await deliveries();
      return all.some((d) => d.status === 'parked') && all.some((d) => d.status === 'delivered');
    });
    const parked = (await deliveries()).find((d) => d.status === 'parked') as Json;
    // More carts than a page of the console's search (50): its "More carts" has more to show.
    for (let i = 0; i < 55; i++) await createCart(svc, 1);
    await until('the read model holds the carts', async () => {
      const page = await must(svc, 'GET', '/admin/v1/carts?store_id=1&limit=100');
      return page.carts.length === 56;
    });

    const browser = await launchBrowser(t);
    const { page, problems } = await watchedPage(browser, new URL(svc.base).origin);
    await page.goto(`${svc.base}/console`);
    const views: Array<{ name: string; hash: string; ready: string[]; act?: () => Promise<void> }> = [
      { name: 'overview', hash: 'overview', ready: [`[data-webhook="${webhook.id}"] figure.chart canvas`] },
      { name: 'webhooks', hash: 'webhooks', ready: [`tr[data-webhook="${webhook.id}"] .mark`] },
      {
        name: 'a subscription',
        hash: `webhooks/${webhook.id}`,
        ready: [`[data-health="${webhook.id}"] figure.chart canvas`, 'li[data-delivery]'],
      },
      { name: 'a delivery', hash: `delivery/${parked.delivery_id}`, ready: ['table.attempts'] },
      { name: 'partners', hash: 'partners', ready: ['tr[data-partner]'] },
      { name: 'cart audit', hash: 'cart-audit', ready: ['#cart-uuid'] },
      {
        // A search the fragment names, run at once, and its next page.
        name: 'a cart search',
        hash: 'cart-audit?store_id=1',
        ready: ['tr[data-cart]'],
        act: async () => {
          await page.getByRole('button', { name: 'More carts' }).click();
          await until(
            'the next page is shown',
            async () => (await page.locator('tr[data-cart]').count()) === 56,
          );
        },
      },
      { name: "a cart's audit", hash: `cart-audit/${cart.uuid}`, ready: ['ol.views li'] },
    ];
    /** Per view and width, what overflows and what axe finds: all of them empty. */
    const found: Record<string, string[]> = {};
    for (const width of WIDTHS) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${svc.base}/console`);
      const signIn = page.getByLabel('Operator token');
      if (await signIn.isVisible()) {
        found[`sign-in at ${width} px`] = await sideways(page);
        found[`sign-in at ${width} px: axe`] = await accessibilityProblems(page);
        await signIn.fill(svc.token);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByRole('button', { name: 'Sign out' }).waitFor();
      }
      for (const view of views) {
        await page.goto(`${svc.base}/console#${view.hash}`);
        await page.reload();
        for (const ready of view.ready) await shown(page, ready, `${view.name} at ${width} px`);
        await view.act?.();
        await page.evaluate(`for (const d of document.querySelectorAll('details')) d.open = true`);
        // The charts follow their box's width on the next frame.
        await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))');
        found[`${view.name} at ${width} px`] = await sideways(page);
        found[`${view.name} at ${width} px: axe`] = await accessibilityProblems(page);
        found[`${view.name} at ${width} px: tables`] = await tablesAt(page, width);
        if (width === 390) await screenshot(page, `console-phone-${view.name.replaceAll(/\W+/g, '-')}`);
        if (view.hash.startsWith('cart-audit/')) {
          // Raw JSON (an event's data) wraps rather than scrolls.
          const pre: string[] = await page.evaluate(
            `(({ whiteSpace, overflowWrap }) => [whiteSpace, overflowWrap])(getComputedStyle(document.querySelector('pre')))`,
          );
          found[`raw JSON at ${width} px`] =
            pre.join() === 'pre-wrap,anywhere' ? [] : [`white-space: ${pre[0]}, overflow-wrap: ${pre[1]}`];
        }
      }
    }
    t.deepEqual(
      Object.entries(found).filter(([, list]) => list.length > 0),
      [],
      'nothing scrolls sideways, tables are cards on a phone, and axe finds nothing, in any view at either width',
    );
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
