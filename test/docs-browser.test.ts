/**
 * `/docs` in a real browser: Debian's Chromium driven by playwright-core (which never downloads a
 * browser) opens the page of a running service, picks each API from the page's list (the four partner
 * APIs, the platform API, the admin API), and finds every endpoint (method and path) of that API's
 * OpenAPI document rendered. The page must render under
 * its Content-Security-Policy without errors, and fetch nothing from another origin (no CDN).
 *
 * Without /usr/bin/chromium the test is skipped, saying why (CI installs it: see `.ci/run`).
 */
import test from 'ava';
import { OPERATOR_APIS } from '../api/docs.ts';
import { partnerApis } from '../api/partner/index.ts';
import { browserMissing, launchBrowser, watchedPage } from './support/browser.ts';
import { startService } from './support/service.ts';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const title = '/docs lists the partner, platform and admin APIs and renders every endpoint of each document';
const apis = [...partnerApis, ...OPERATOR_APIS];

const missing = browserMissing();
if (missing) {
  const reason = missing;
  console.log(`docs-browser.test.ts: skipped: ${reason}`);
  test.skip(`${title} — skipped: ${reason}`, () => {});
} else {
  test(title, async (t) => {
    t.timeout(90_000);
    const svc = await startService(t);
    const browser = await launchBrowser(t);
    const { page, problems } = await watchedPage(browser, new URL(svc.base).origin);

    const home = await page.goto(`${svc.base}/docs`);
    t.is(home?.status(), 200);
    t.regex(home?.headers()['content-security-policy'] ?? '', /script-src 'self'/);
    const listed = await page.locator('nav a.pds-api').allTextContents();
    t.deepEqual(
      listed,
      apis.map((a) => a.title),
      'the page lists the six APIs',
    );
    t.deepEqual(listed.slice(4), ['Platform API', 'Admin API']);

    for (const api of apis) {
      const document = (await (await fetch(`${svc.base}${api.base}/openapi.json`)).json()) as {
        paths: Record<string, Record<string, unknown>>;
      };
      const expected = Object.entries(document.paths)
        .flatMap(([p, item]) => METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${p}`))
        .sort();

      await Promise.all([
        page.waitForURL((u) => u.searchParams.has('api')),
        page.locator('nav a.pds-api', { hasText: api.title }).first().click(),
      ]);
      t.is(await page.locator('nav a[aria-current="page"]').textContent(), api.title);
      await page.locator('.swagger-ui .info .title', { hasText: api.title }).waitFor({ timeout: 30_000 });
      // Swagger UI renders the operations after fetching the document: wait for the last one.
      await page
        .locator('.swagger-ui .opblock')
        .nth(expected.length - 1)
        .waitFor({ timeout: 30_000 });
      const rendered = await page.$$eval('.swagger-ui .opblock', (blocks) =>
        blocks.map((b) => {
          const method = b.querySelector('.opblock-summary-method')?.textContent?.trim().toUpperCase();
          const p = b.querySelector('.opblock-summary-path')?.getAttribute('data-path');
          return `${method} ${p}`;
        }),
      );
      t.deepEqual([...new Set(rendered)].sort(), expected, `${api.base}: every endpoint is listed`);
    }

    t.deepEqual(problems, [], 'no errors, CSP violations or requests to other origins');
  });
}
