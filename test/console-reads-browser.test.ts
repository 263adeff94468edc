/**
 * What the console's panels read, in a real browser (test/support/browser.ts; docs/operations.md,
 * "The console"): a panel shows the answer to its newest read only, so an older answer landing late
 * (the previous window's) never overwrites it; a failed read is said and blanks the marks it would
 * show (the Overview's counts read unknown); the subscription chosen in the Webhooks view follows its
 * changes; a rebuild that ends without progress says so with the projection's state, also one that
 * ended between two polls; thresholds read in the unit they were set in; a
 * truncated health list is said; and every field that takes a time names the zone as the header does.
 * The console's 10 s polls are stopped (test/support/console-polls.ts), so each read checked here
 * came from what the test did. Answers the admin API would give in a state hard to reach here (a read
 * store that fails, a list past 500 subscriptions, a projector that lost its lease) are the service's
 * own answers, changed by the browser's request routing.
 */
import test, { type ExecutionContext } from 'ava';
import type { Page, Route } from 'playwright-core';
import { browserMissing, launchBrowser, watchedPage } from './support/browser.ts';
import { createWebhook, seedCatalog } from './support/cart-world.ts';
import { SLOW_POLLS } from './support/console-polls.ts';
import { startService, type TestService } from './support/service.ts';
import { startReceiver } from './support/webhook-receiver.ts';

/** A rebuild a fifth done, with 240 s left at its rate. */
const BUILDING = {
  started_at: '2026-03-01T10:00:00.000Z',
  events_done: 2_000,
  target_position: 10_000,
  position: 2_000,
  percent: 20,
  rate_per_second: 33,
  eta_seconds: 240,
};

/** The answer the admin API gives while its read store fails. */
const UNAVAILABLE = {
  status: 503,
  contentType: 'application/problem+json',
  body: JSON.stringify({
    title: 'Service Unavailable',
    status: 503,
    detail: 'the read store is unavailable',
  }),
};

/** The browser's own report of the 503s routed on purpose: not a problem of the page. */
const routed503 = (problem: string) => /status of 503/.test(problem);

/** A page on the console with its slow polls stopped; `sign(hash)` signs in and opens that view. */
async function consolePage(t: ExecutionContext, svc: TestService, options: { timezoneId?: string } = {}) {
  const browser = await launchBrowser(t, options);
  await browser.addInitScript({ content: SLOW_POLLS });
  const { page, problems } = await watchedPage(browser, new URL(svc.base).origin);
  // Before the browser closes (teardowns run last first): a poll a test's route handler is still
  // answering then would read a disposed response and fail the file after its tests passed.
  t.teardown(() => page.unrouteAll({ behavior: 'ignoreErrors' }));
  const sign = async (hash: string) => {
    await page.goto(`${svc.base}/console#${hash}`);
    await page.getByLabel('Operator token').fill(svc.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
  };
  return { page, problems, sign };
}

/** Lets the page's pending work run: its microtasks, then two frames. */
const settled = (page: Page) =>
  page.evaluate(
    'new Promise((r) => setTimeout(() => requestAnimationFrame(() => requestAnimationFrame(r)), 0))',
  );

const missing = browserMissing();
const titles = [
  "a panel shows its newest read: the previous window's answer landing after it is dropped",
  'the Webhooks view says a failed health read and blanks the Health column; the chosen subscription shows its new URL after Save changes; the Recover field names the zone as the header does; a truncated health list is said',
  'the Overview gives the failing rule in words and a threshold under a minute in seconds, says when only the first subscriptions are judged, and while the health cannot be read says the count is unknown and marks no card',
  'a rebuild that ends without progress or failure says it ended, with the state, and a failed read shows beside it and blanks the state, the lag and the LAGGING marks',
  'a rebuild that ends between two polls, never seen rebuilding, says it ended, with the state',
  'a read slower than its poll interval still fills its panel: the next poll waits for it instead of overtaking it',
];
if (missing) {
  console.log(`console-reads-browser.test.ts: skipped: ${missing}`);
  for (const title of titles) test.skip(`${title} — skipped: ${missing}`, () => {});
} else {
  test.serial(titles[0], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    await seedCatalog(svc);
    const receiver = await startReceiver(t);
    const hook = await createWebhook(svc, receiver.url, [1]);
    const { page, problems, sign } = await consolePage(t, svc);
    // The hour's answer is held until the day's has been shown.
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let held: (() => void) | undefined;
    const heldArrived = new Promise<void>((resolve) => {
      held = resolve;
    });
    const hourOf = (url: URL) =>
      url.pathname.endsWith(`/webhooks/${hook.id}/health`) && url.searchParams.get('window') === '1h';
    await page.route(hourOf, async (route: Route) => {
      const response = await route.fetch();
      held?.();
      await released;
      await route.fulfill({ response });
    });
    await sign(`webhooks/${hook.id}`);
    await heldArrived;
    await page.getByLabel('Last day').check();
    const data = page.locator(`[data-health="${hook.id}"] .chart-data summary`);
    await data.filter({ hasText: 'of 96 intervals of a 15 minutes' }).waitFor();

    const late = page.waitForEvent('requestfinished', (r) => r.url().endsWith('window=1h'));
    release();
    await late;
    await settled(page);
    t.regex(await data.innerText(), /of 96 intervals of a 15 minutes/, "the hour's late answer is dropped");
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test.serial(titles[1], async (t) => {
    t.timeout(90_000);
    const svc = await startService(t);
    await seedCatalog(svc);
    const receiver = await startReceiver(t);
    const hook = await createWebhook(svc, receiver.url, [1]);
    const { page, problems, sign } = await consolePage(t, svc, { timezoneId: 'Asia/Tehran' });
    let health: 'real' | 'unavailable' | 'truncated' = 'real';
    await page.route('**/admin/v1/webhook-health', async (route: Route) => {
      if (health === 'unavailable') return route.fulfill(UNAVAILABLE);
      const response = await route.fetch();
      if (health === 'real') return route.fulfill({ response });
      return route.fulfill({ response, json: { ...(await response.json()), truncated: true } });
    });
    await sign('webhooks');
    const row = page.locator(`tr[data-webhook="${hook.id}"]`);
    await row.locator('.mark-ok').waitFor();
    t.is(await page.locator('[data-truncated]').count(), 0, 'no `truncated`: nothing said');

    // The Recover field names the zone as the header does.
    const zone = await page.locator('header .zone').innerText();
    t.regex(zone, /^Times in Asia\/Tehran \(UTC\+03:30\)$/);
    await row.locator('summary').click();
    t.is(
      await row.locator(`label[for="since-${hook.id}"]`).innerText(),
      `Recover failed and parked deliveries since (${zone})`,
    );

    // The health cannot be read: said, and the Health column is blank until it can.
    health = 'unavailable';
    const failed = page.waitForResponse((r) => r.url().endsWith('/webhook-health') && r.status() === 503);
    await row.getByRole('button', { name: 'Send a test event' }).click();
    await failed;
    await page
      .getByRole('alert')
      .filter({ hasText: "Could not read the subscriptions' health: the read store is unavailable" })
      .waitFor();
    t.is(await row.locator('td[data-label="Health"]').innerText(), '', 'no mark while it cannot be read');
    health = 'truncated';
    await row.getByRole('button', { name: 'Send a test event' }).click();
    await row.locator('.mark-ok').waitFor();
    t.is(await page.getByRole('alert').count(), 0);
    t.regex(
      await page.locator('[data-truncated]').innerText(),
      /^Health: showing the first 1 subscriptions? \(in id order\); the others are not judged\.$/,
    );
    health = 'real';

    // Chosen, then changed: the chosen panel shows the new URL.
    await row.getByRole('button', { name: `Deliveries to ${receiver.url}` }).click();
    const chosen = page.locator('#chosen-health-title');
    t.regex(await chosen.innerText(), new RegExp(`Health of ${receiver.url}`));
    const moved = `${receiver.url}/moved`;
    await row.getByLabel('URL', { exact: true }).fill(moved);
    await row.getByRole('button', { name: 'Save changes' }).click();
    await row.getByRole('status').filter({ hasText: 'Changed.' }).waitFor();
    await chosen.filter({ hasText: `Health of ${moved}` }).waitFor();
    t.regex(await page.locator('#deliveries-title').innerText(), new RegExp(`Deliveries to ${moved}`));
    t.deepEqual(
      problems.filter((p) => !routed503(p)),
      [],
      'no errors, CSP violations or requests to other origins',
    );
  });

  test.serial(titles[2], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t, { env: { PDS_ALERT_OLDEST_QUEUED: '30s' } });
    await seedCatalog(svc);
    const receiver = await startReceiver(t);
    await createWebhook(svc, receiver.url, [1]);
    await createWebhook(svc, `${receiver.url}/second`, [1]);
    const { page, problems, sign } = await consolePage(t, svc);
    let health: 'real' | 'truncated' | 'failing' | 'unavailable' = 'real';
    await page.route('**/admin/v1/webhook-health', async (route: Route) => {
      if (health === 'unavailable') return route.fulfill(UNAVAILABLE);
      const response = await route.fetch();
      if (health === 'real') return route.fulfill({ response });
      const answer = await response.json();
      if (health === 'truncated') return route.fulfill({ response, json: { ...answer, truncated: true } });
      // The first subscription judged failing, as a dead receiver would make it.
      Object.assign(answer.subscriptions[0], {
        status: 'failing',
        trouble: [{ reason: 'oldest_queued', detail: 'a delivery has been queued 31 s' }],
      });
      return route.fulfill({ response, json: { ...answer, failing: 1 } });
    });
    await sign('overview');
    const summary = page.getByRole('region', { name: 'Trouble' });
    await summary.getByText('No subscription failing').waitFor();
    const said = await summary.innerText();
    t.regex(said, /a delivery has been queued\s+more than 30 seconds/);
    t.notRegex(said, /0 minutes|most attempts/);
    t.regex(said, /too many of its recent attempts did not deliver/);
    t.is(await summary.locator('[data-truncated]').count(), 0);

    // Judged only in part: the note says so (a rebuild's change reads the counts again).
    health = 'truncated';
    await page.getByRole('button', { name: 'Rebuild partner_keys' }).click();
    await summary.locator('[data-truncated]').waitFor();
    t.regex(
      await summary.locator('[data-truncated]').innerText(),
      /^Health: showing the first 2 subscriptions \(in id order\); the others are not judged\.$/,
    );

    // A subscription failing: counted and its card marked.
    health = 'failing';
    await page.getByRole('button', { name: 'Rebuild catalog' }).click();
    await summary.getByText('1 of 2 subscriptions failing').waitFor();
    const marked = page.locator('article.card-failing');
    t.is(await marked.count(), 1);
    // The health cannot be read: the count is unknown, and no card keeps the last mark.
    health = 'unavailable';
    await page.getByRole('button', { name: 'Rebuild partner_keys' }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: "Could not read the subscriptions' health: the read store is unavailable" })
      .waitFor();
    t.regex(await summary.innerText(), /Subscriptions failing: unknown \(their health cannot be read\)/);
    t.notRegex(await summary.innerText(), /subscriptions? failing\b|No subscription failing/);
    t.is(await summary.locator('[data-failing] .mark').count(), 0, 'no mark on the count');
    t.is(await marked.count(), 0, 'no card marked failing');
    t.is(await page.locator('article[data-status]').count(), 0);
    t.is(await page.getByRole('article').count(), 2, 'the cards stay, unmarked');
    // Readable again: counted and marked again.
    health = 'failing';
    await page.getByRole('button', { name: 'Rebuild catalog' }).click();
    await summary.getByText('1 of 2 subscriptions failing').waitFor();
    t.is(await marked.count(), 1);
    health = 'real';
    await page.getByRole('button', { name: 'Rebuild partner_keys' }).click();
    await summary.getByText('No subscription failing').waitFor();
    t.is(await marked.count(), 0);
    t.deepEqual(
      problems.filter((p) => !routed503(p)),
      [],
      'no errors, CSP violations or requests to other origins',
    );
  });

  test.serial(titles[3], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    const { page, problems, sign } = await consolePage(t, svc);
    // After the request: the projection rebuilding, then standing by with no progress (its projector
    // lost the lease), then lagging as well, then the projections cannot be read, then they can.
    let phase: 'real' | 'rebuilding' | 'standby' | 'lagging' | 'unavailable' = 'real';
    await page.route('**/admin/v1/projections', async (route: Route) => {
      if (phase === 'unavailable') return route.fulfill(UNAVAILABLE);
      const response = await route.fetch();
      if (phase === 'real') return route.fulfill({ response });
      const answer = (await response.json()) as {
        projections: Array<Record<string, unknown>>;
        lagging: number;
      };
      const lagging = phase === 'lagging';
      for (const p of answer.projections) {
        if (p.name !== 'partner_keys') continue;
        Object.assign(p, {
          state: lagging ? 'standby' : phase,
          progress: phase === 'rebuilding' ? BUILDING : null,
        });
        if (lagging) {
          Object.assign(p, {
            status: 'lagging',
            lag_events: 7,
            lag_seconds: 45,
            trouble: [{ reason: 'lag', detail: 'its oldest event not applied is 45 s old' }],
          });
        }
      }
      return route.fulfill({ response, json: { ...answer, lagging: lagging ? 1 : answer.lagging } });
    });
    // From the request's answer on (a poll landing before it would disable the button).
    await page.route('**/admin/v1/projections/partner_keys/rebuild', async (route: Route) => {
      const response = await route.fetch();
      phase = 'rebuilding';
      return route.fulfill({ response });
    });
    await sign('overview');
    const status = page.locator('section[aria-labelledby="projections-title"] [role="status"]');
    await page.getByRole('button', { name: 'Rebuild partner_keys' }).click();
    await status.filter({ hasText: 'Rebuilding partner_keys' }).waitFor();
    await page.locator('tr[data-projection="partner_keys"] .state-rebuilding').waitFor();
    // Its progress, with the time left at the rate of the last 30 s.
    const building = page.locator('tr[data-projection="partner_keys"]');
    await building.locator('.percent', { hasText: '20%' }).waitFor();
    t.is(await building.locator('.left').innerText(), 'about 4 min left');
    phase = 'standby';
    await status
      .filter({ hasText: 'The rebuild of partner_keys ended without finishing: its state is standby.' })
      .waitFor();
    phase = 'lagging';
    const row = page.locator('tr[data-projection="partner_keys"]');
    const summary = page.getByRole('region', { name: 'Trouble' });
    await row.locator('.mark-lagging', { hasText: 'LAGGING' }).waitFor();
    await summary.getByText('1 projection lagging').waitFor();
    phase = 'unavailable';
    await page
      .getByRole('alert')
      .filter({ hasText: 'Could not read the projections: the read store is unavailable' })
      .waitFor();
    t.regex(await status.innerText(), /ended without finishing/, 'what it said of the rebuild stays');
    // Its state and lag may no longer hold: blank, and no LAGGING mark, here or counted at the top.
    for (const cell of ['State', 'Lag (events)', 'Lag (time)'])
      t.is(await row.locator(`td[data-label="${cell}"]`).innerText(), '', `${cell} is blank`);
    t.is(await page.locator('.projections .mark, tr.lagging, tr[data-status]').count(), 0, 'no mark');
    t.regex(await summary.innerText(), /Projections lagging: unknown \(the projections cannot be read\)/);
    t.notRegex(await summary.innerText(), /projections? lagging\b|No projection lagging/);
    // Readable again: marked again.
    phase = 'lagging';
    await row.locator('.mark-lagging', { hasText: 'LAGGING' }).waitFor();
    await summary.getByText('1 projection lagging').waitFor();
    t.is(await row.locator('td[data-label="Lag (events)"]').innerText(), '7');
    t.deepEqual(
      problems.filter((p) => !routed503(p)),
      [],
      'no errors, CSP violations or requests to other origins',
    );
  });

  test.serial(titles[4], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    const { page, problems, sign } = await consolePage(t, svc);
    // From the request's answer on, the projection is live with no progress: its rebuild started and
    // ended between two polls (its projector lost the lease and took it back), never seen rebuilding.
    let ended = false;
    await page.route('**/admin/v1/projections', async (route: Route) => {
      const response = await route.fetch();
      if (!ended) return route.fulfill({ response });
      const answer = (await response.json()) as { projections: Array<Record<string, unknown>> };
      for (const p of answer.projections)
        if (p.name === 'partner_keys') Object.assign(p, { state: 'live', progress: null });
      return route.fulfill({ response, json: answer });
    });
    await page.route('**/admin/v1/projections/partner_keys/rebuild', async (route: Route) => {
      const response = await route.fetch();
      ended = true;
      return route.fulfill({ response });
    });
    await sign('overview');
    const status = page.locator('section[aria-labelledby="projections-title"] [role="status"]');
    const next = page.waitForResponse((r) => r.url().endsWith('/admin/v1/projections') && ended);
    await page.getByRole('button', { name: 'Rebuild partner_keys' }).click();
    // The read at once after the request is too soon to tell: the projector says `rebuilding` only
    // once it has made the fresh copies.
    await next;
    await settled(page);
    t.is(await status.innerText(), 'Rebuilding partner_keys: its progress shows below.');
    await status
      .filter({ hasText: 'The rebuild of partner_keys ended without finishing: its state is live.' })
      .waitFor();
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });

  test.serial(titles[5], async (t) => {
    t.timeout(60_000);
    const svc = await startService(t);
    const { page, problems, sign } = await consolePage(t, svc);
    // Every answer of the projections, polled each second, takes 2.5 s: a loaded service's.
    let reads = 0;
    await page.route('**/admin/v1/projections', async (route: Route) => {
      reads += 1;
      const response = await route.fetch();
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      await route.fulfill({ response });
    });
    await sign('overview');
    await page.getByRole('rowheader', { name: 'partner_keys' }).waitFor({ timeout: 20_000 });
    t.true(reads >= 1);
    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
