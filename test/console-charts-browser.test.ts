/**
 * The console's health charts with little data, in a real browser (test/support/browser.ts;
 * docs/operations.md, "The console"): what uPlot draws on each canvas is recorded (the text of its
 * axes, the rectangles and line segments of its series), so the test reads the chart as drawn. Counts
 * (attempts, the queue) are bars on an axis of whole numbers, even when the largest is 2 or 0; the time
 * axis is in the browser's zone and says so; the page names that one zone at the top, and every time in
 * it is shown in that zone (no ISO time in UTC beside it). The browser runs in Asia/Tehran (UTC+03:30),
 * so a time in UTC would not pass for it.
 */
import test from 'ava';
import type { Page } from 'playwright-core';
import { roleThread } from '../cli/role-thread.ts';
import type { Json } from './support/admin-answers.ts';
import { accessibilityProblems, browserMissing, launchBrowser, watchedPage } from './support/browser.ts';
import { addItem, checkOut, createCart, createWebhook, seedCatalog } from './support/cart-world.ts';
import { until } from './support/probes.ts';
import { startService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

const ZONE = 'Asia/Tehran';

interface Drawn {
  texts: string[];
  rects: number;
  lines: number;
}

/**
 * Runs in the page before its scripts: records, per canvas since its last full clear, the text drawn
 * (axis values and labels) and the rectangles and line segments of the paths filled or stroked (a
 * series: bars are rectangles, a line is segments; uPlot draws its grid and ticks on the context, not
 * in paths). Plain JavaScript: it runs in the browser.
 */
const RECORD_DRAWING = `(() => {
  const blank = () => ({ texts: [], rects: 0, lines: 0 });
  const drawn = new WeakMap();
  const inPath = new WeakMap();
  const on = (canvas) => {
    if (!drawn.has(canvas)) drawn.set(canvas, blank());
    return drawn.get(canvas);
  };
  for (const [method, key] of [['rect', 'rects'], ['lineTo', 'lines']]) {
    const original = Path2D.prototype[method];
    Path2D.prototype[method] = function (...args) {
      const counts = inPath.get(this) ?? { rects: 0, lines: 0 };
      counts[key] += 1;
      inPath.set(this, counts);
      return original.apply(this, args);
    };
  }
  const context = CanvasRenderingContext2D.prototype;
  for (const method of ['fill', 'stroke']) {
    const original = context[method];
    context[method] = function (...args) {
      const counts = args[0] instanceof Path2D ? inPath.get(args[0]) : undefined;
      if (counts) {
        const d = on(this.canvas);
        d.rects += counts.rects;
        d.lines += counts.lines;
      }
      return original.apply(this, args);
    };
  }
  const fillText = context.fillText;
  context.fillText = function (text, ...rest) {
    on(this.canvas).texts.push(String(text));
    return fillText.call(this, text, ...rest);
  };
  const clearRect = context.clearRect;
  context.clearRect = function (x, y, w, h) {
    if (x === 0 && y === 0 && w >= this.canvas.width && h >= this.canvas.height) drawn.set(this.canvas, blank());
    return clearRect.call(this, x, y, w, h);
  };
  globalThis.drawnOn = (canvas) => drawn.get(canvas) ?? null;
})();`;

/** What the chart captioned `caption` drew, once it drew. */
async function chartDrawn(page: Page, caption: string): Promise<Drawn> {
  const canvas = page
    .locator('figure.chart', { has: page.locator('figcaption', { hasText: caption }) })
    .locator('canvas');
  await canvas.first().waitFor();
  return canvas.first().evaluate((c) => {
    const d = (globalThis as unknown as { drawnOn(c: unknown): Drawn | null }).drawnOn(c);
    if (!d) throw new Error('nothing drawn');
    return d;
  });
}

/** The values drawn on a chart's value axis (its numbers). */
const axisNumbers = (d: Drawn) => d.texts.filter((s) => /^[\d,.]+$/.test(s));

/** uPlot's minute labels ("6:05pm") for every minute from `from` to `to` (ms) in `zone`. */
function minuteLabels(from: number, to: number, zone: string): Set<string> {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hour: 'numeric',
    minute: '2-digit',
    hour12: true,
  });
  const labels = new Set<string>();
  for (let t = from; t <= to; t += 60_000) labels.add(format.format(t).replace(/\s/g, '').toLowerCase());
  return labels;
}

const missing = browserMissing();
const title =
  'charts with little data: counts as bars on whole-number axes, the time axis and every time in the one zone the page names';
if (missing) {
  console.log(`console-charts-browser.test.ts: skipped: ${missing}`);
  test.skip(`${title} — skipped: ${missing}`, () => {});
} else {
  test(title, async (t) => {
    t.timeout(90_000);
    // One attempt, then parked: the first delivery fails and is parked, the next two are delivered.
    const svc = await startService(t, {
      threads: { dispatcher: roleThread('dispatcher') },
      env: { PDS_WEBHOOK_RETRY_SCHEDULE: '0s' },
    });
    const receiver = await startReceiver(t);
    receiver.script({ status: 500, body: 'receiver down' });
    await seedCatalog(svc);
    const webhook = await createWebhook(svc, receiver.url, [1]);
    for (let i = 0; i < 3; i++) {
      const cart = await createCart(svc);
      await addItem(svc, cart);
      await checkOut(svc, cart);
    }
    const health = async () =>
      (
        (await (await svc.call('GET', `/admin/v1/webhooks/${webhook.id}/health`)).json()) as {
          health: Json;
        }
      ).health;
    await until('two delivered, one parked', async () => {
      const { totals } = await health();
      return totals.attempts.delivered === 2 && totals.parked === 1;
    });
    const window = await health();
    const { deliveries } = (await (
      await svc.call('GET', `/admin/v1/webhooks/${webhook.id}/deliveries?status=parked`)
    ).json()) as { deliveries: Json[] };

    const browser = await launchBrowser(t, { timezoneId: ZONE, locale: 'en-US' });
    await browser.addInitScript({ content: RECORD_DRAWING });
    const { page, problems } = await watchedPage(browser, new URL(svc.base).origin);
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${svc.base}/console#overview`);
    await page.getByLabel('Operator token').fill(svc.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const card = page.locator(`article[data-webhook="${webhook.id}"]`);
    await card.locator('figure.chart canvas').nth(2).waitFor();

    // The one zone, named at the top.
    t.is(await page.locator('header [data-zone]').innerText(), `Times in ${ZONE} (UTC+03:30)`);

    // Counts: bars, whole numbers from 0, though the most in a minute is 2 (attempts) or 0 (queue).
    for (const caption of ['Attempts per minute', 'Deliveries queued']) {
      const drawn = await chartDrawn(page, caption);
      t.true(drawn.rects > 0, `${caption}: bars`);
      t.is(drawn.lines, 0, `${caption}: no line`);
      const values = axisNumbers(drawn);
      t.true(values.includes('0') && values.includes('1'), `${caption}: ${values}`);
      t.deepEqual(
        values.filter((v) => !/^\d[\d,]*$/.test(v)),
        [],
        `${caption}: whole numbers only (${values})`,
      );
    }
    // Latency is not a count: a line through its points, in ms.
    const latency = await chartDrawn(page, 'Latency of attempts answered');
    t.is(latency.rects, 0, 'latency: no bars');
    t.true(latency.texts.includes('ms'));

    // The time axis: in the page's zone, and labelled with it.
    const attempts = await chartDrawn(page, 'Attempts per minute');
    t.true(attempts.texts.includes(`Time (${ZONE})`), `${attempts.texts}`);
    const times = attempts.texts.filter((s) => /^\d{1,2}:\d{2}(am|pm)$/.test(s));
    t.true(times.length > 0, `${attempts.texts}`);
    const inZone = minuteLabels(Date.parse(window.from) - 60_000, Date.parse(window.to), ZONE);
    t.deepEqual(
      times.filter((s) => !inZone.has(s)),
      [],
      `every tick a minute of the window in ${ZONE}`,
    );

    // Every time shown is in that zone, with no ISO (UTC) time beside it, here and on a delivery.
    const shownTimes = async () =>
      page
        .locator('main time')
        .evaluateAll((all) => all.map((e) => [e.getAttribute('datetime'), e.textContent]));
    const inZoneText = (iso: string) => new Date(iso).toLocaleString('en-US', { timeZone: ZONE });
    const overviewTimes = await shownTimes();
    t.true(overviewTimes.length > 0);
    for (const [iso, text] of overviewTimes) t.is(text, inZoneText(iso as string));
    t.notRegex(await page.locator('main').innerText(), /\d{4}-\d\d-\d\dT\d\d:/);
    t.deepEqual(await accessibilityProblems(page), [], 'overview: axe');

    await page.goto(`${svc.base}/console#delivery/${deliveries[0].delivery_id}`);
    await page.locator('table.attempts td').first().waitFor();
    const deliveryTimes = await shownTimes();
    t.true(deliveryTimes.length >= 2, 'scheduled and the attempt');
    for (const [iso, text] of deliveryTimes) t.is(text, inZoneText(iso as string));
    t.notRegex(await page.locator('main').innerText(), /\d{4}-\d\d-\d\dT\d\d:/);
    t.is(await page.locator('header [data-zone]').innerText(), `Times in ${ZONE} (UTC+03:30)`);
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
