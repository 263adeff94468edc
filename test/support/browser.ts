/**
 * Debian's Chromium driven by playwright-core (which never downloads a browser), for the tests of the
 * service's pages (`/docs`, `/console`). Without /usr/bin/chromium they are skipped, saying why (CI
 * installs it: see `.ci/run`). A page records its problems: console errors and warnings, page errors
 * (a Content-Security-Policy violation is a console error) and requests to another origin (no CDN).
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ExecutionContext } from 'ava';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Why browser tests cannot run here, or undefined when they can. */
export function browserMissing(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  return `${CHROMIUM} is absent (install Debian's chromium: apt-get install -y --no-install-recommends chromium)`;
}

/**
 * A fresh browser profile for this test, closed and removed at its end; `timezoneId` (an IANA zone)
 * and `locale` are the zone and locale its pages live in, else the machine's.
 */
export async function launchBrowser(
  t: ExecutionContext,
  options: { timezoneId?: string; locale?: string } = {},
): Promise<BrowserContext> {
  const userDataDir = await mkdtemp(path.join(tmpdir(), 'pds-chromium-'));
  const browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    ...options,
  });
  t.teardown(async () => {
    await browser.close();
    await rm(userDataDir, { recursive: true, force: true });
  });
  return browser;
}

/** A new page that records its problems into the array returned with it. */
export async function watchedPage(
  browser: BrowserContext,
  origin: string,
): Promise<{ page: Page; problems: string[] }> {
  const problems: string[] = [];
  const page = await browser.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => {
    const url = new URL(r.url());
    if (url.protocol !== 'data:' && url.origin !== origin)
      problems.push(`request to another origin: ${r.url()}`);
  });
  return { page, problems };
}

/**
 * The console at `base` in a fresh browser, signed in with `token` through its form, on the view
 * `hash` names.
 */
export async function signedInConsole(t: ExecutionContext, base: string, token: string, hash: string) {
  const browser = await launchBrowser(t);
  const { page, problems } = await watchedPage(browser, new URL(base).origin);
  await page.goto(`${base}/console#${hash}`);
  await page.getByLabel('Operator token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  return { page, problems };
}

/** Where browser tests leave their screenshots (`test-artifacts/`, not committed). */
export async function screenshot(page: Page, name: string): Promise<string> {
  const dir = path.join(process.cwd(), 'test-artifacts', 'screenshots');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's serious and critical violations on the page as it is (run outside the page's CSP). */
export async function accessibilityProblems(page: Page): Promise<string[]> {
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[] }> } }).axe;
    return (await axe.run()).violations;
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}
