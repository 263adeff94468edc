/**
 * `/console`: the operators' and auditors' screen (docs/operations.md, "The console"). The page is a shell
 * that loads one ES module (`console-assets/console.js`), which renders with Preact and htm straight
 * from `node_modules`: no build step, no CDN. It holds no authority of its own: signing in exchanges
 * the person's token for a session (`/admin/v1/session`, an HttpOnly cookie no script of the page can
 * read; docs/operations.md, "The console"), every call goes to `/admin/v1` in it, and the page shows
 * what the person's role can do.
 *
 * Strict Content-Security-Policy: scripts from this origin only, plus the page's one inline script,
 * the import map that names Preact's modules (it must be inline, and is allowed by its hash).
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Router from '@koa/router';
import { type AppContext, type AppState, createRouter } from './http.ts';
import { CSS, JAVASCRIPT, pageHeaders, StaticAssets } from './static-assets.ts';

/** A package's ES module, as Node resolves it (the browser gets the same file). */
function moduleFile(specifier: string): { dir: string; file: string; type: string } {
  const file = fileURLToPath(import.meta.resolve(specifier));
  return { dir: path.dirname(file), file: path.basename(file), type: JAVASCRIPT };
}
const OWN_DIR = fileURLToPath(new URL('./console-assets/', import.meta.url));

const ASSETS = new StaticAssets('/console', {
  'preact.mjs': moduleFile('preact'),
  'hooks.mjs': moduleFile('preact/hooks'),
  'htm.mjs': moduleFile('htm'),
  // The ES module build (the package's "main" is CommonJS, which a browser cannot import).
  'uplot.mjs': moduleFile('uplot/dist/uPlot.esm.js'),
  'uplot.css': { ...moduleFile('uplot/dist/uPlot.min.css'), type: CSS },
  // The app: its shell, then one module per view (they import each other relatively, by these names).
  'console.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'admin.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'overview.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'projections.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'fan-out.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'health.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'charts.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'webhooks.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'deliveries.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'partners.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'cart-audit.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'cart-search.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'console.css': { dir: OWN_DIR, type: CSS },
});

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('base64');

function page(assets: Awaited<ReturnType<typeof ASSETS.load>>): { html: string; importMap: string } {
  const url = (name: string) => ASSETS.url(assets, name);
  const importMap = JSON.stringify({
    imports: {
      preact: url('preact.mjs'),
      'preact/hooks': url('hooks.mjs'),
      htm: url('htm.mjs'),
      uplot: url('uplot.mjs'),
    },
  });
  const html = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Partner Data Service · Console</title>
    <link rel="icon" href="data:,">
    <link rel="stylesheet" href="${url('uplot.css')}">
    <link rel="stylesheet" href="${url('console.css')}">
    <script type="importmap">${importMap}</script>
    <script type="module" src="${url('console.js')}"></script>
  </head>
  <body>
    <div id="console"></div>
    <noscript><p>The console needs JavaScript. Everything it shows is also in the admin API
      (<code>/admin/v1</code>) and the <code>pds</code> command.</p></noscript>
  </body>
</html>
`;
  return { html, importMap };
}

function contentSecurityPolicy(importMap: string): string {
  return [
    "default-src 'none'",
    `script-src 'self' 'sha256-${sha256(importMap)}'`,
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The `/console` router: the page and its assets; the data comes from `/admin/v1`. */
export function createConsoleRouter(): Router<AppState> {
  const router = createRouter({ prefix: '/console' });
  router.get('/', async (ctx: AppContext) => {
    const { html, importMap } = page(await ASSETS.load());
    ctx.set(pageHeaders(contentSecurityPolicy(importMap)));
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = html;
  });
  ASSETS.mount(router);
  return router;
}
