/**
 * `/docs`: the human page of the service's APIs (docs/partner-api.md), the four partner APIs, the
 * platform API and the admin API. It lists them and renders the OpenAPI document of the one chosen
 * (`/docs?api=<slug>`, the first by default) with Swagger UI, whose bundle is served from the
 * `swagger-ui-dist` package under `/docs/assets/…`: no CDN, works offline.
 *
 * The page runs under a strict Content-Security-Policy (scripts, styles and fetches from this origin
 * only, no inline script): the renderer is configured by `docs-assets/docs.js`, which reads the
 * document URL from a `data-` attribute. Asset URLs carry a content hash (`?v=`), so they are cached
 * for good and change when the bundle does.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Router from '@koa/router';
import { ADMIN_BASE } from './admin-support.ts';
import { type AppContext, type AppState, createRouter, HttpProblem } from './http.ts';
import { PLATFORM_BASE } from './platform-writes.ts';
import { type Asset, CSS, JAVASCRIPT, pageHeaders, StaticAssets } from './static-assets.ts';

/** What the page needs of an API. */
export interface DocumentedApi {
  base: string;
  title: string;
  description?: string;
}

/** The APIs operators call with their token, listed after the partner APIs. */
export const OPERATOR_APIS: readonly DocumentedApi[] = [
  { base: PLATFORM_BASE, title: 'Platform API' },
  { base: ADMIN_BASE, title: 'Admin API' },
];

const SWAGGER_DIR = path.dirname(fileURLToPath(import.meta.resolve('swagger-ui-dist/package.json')));
const OWN_DIR = fileURLToPath(new URL('./docs-assets/', import.meta.url));

/** The files served under `/docs/assets/`. */
const ASSETS = new StaticAssets('/docs', {
  'swagger-ui-bundle.js': { dir: SWAGGER_DIR, type: JAVASCRIPT },
  'swagger-ui.css': { dir: SWAGGER_DIR, type: CSS },
  'favicon-32x32.png': { dir: SWAGGER_DIR, type: 'image/png' },
  'docs.js': { dir: OWN_DIR, type: JAVASCRIPT },
  'docs.css': { dir: OWN_DIR, type: CSS },
});

const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** `/partner/brand-feed/v1` → `brand-feed`, `/admin/v1` → `admin`: the API's name in `/docs?api=`. */
export function docsSlug(base: string): string {
  const parts = base.split('/').filter((s) => s !== '' && s !== 'partner' && !/^v\d+$/.test(s));
  return parts.join('-') || base.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '');
}

function page(apis: readonly DocumentedApi[], chosen: DocumentedApi, assets: Map<string, Asset>): string {
  const asset = (name: string) => ASSETS.url(assets, name);
  const items = apis
    .map((api) => {
      const current = api === chosen ? ' aria-current="page"' : '';
      return (
        `<li><a class="pds-api" href="/docs?api=${encodeURIComponent(docsSlug(api.base))}"${current}>` +
        `${escapeHtml(api.title)}</a> <code>${escapeHtml(api.base)}</code> ` +
        `<a class="pds-spec" href="${escapeHtml(api.base)}/openapi.json">openapi.json</a></li>`
      );
    })
    .join('\n        ');
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>${escapeHtml(chosen.title)} · API docs</title>
    <link rel="icon" type="image/png" href="${asset('favicon-32x32.png')}">
    <link rel="stylesheet" href="${asset('swagger-ui.css')}">
    <link rel="stylesheet" href="${asset('docs.css')}">
  </head>
  <body>
    <header class="pds-docs">
      <h1>APIs</h1>
      <p>Each API has its own base path and OpenAPI 3.1 document. The partner APIs take a partner's API
        key; the platform and admin APIs an operator token. Choose one:</p>
      <nav aria-label="APIs">
        <ul>
        ${items}
        </ul>
      </nav>
    </header>
    <main id="swagger-ui" data-openapi-url="${escapeHtml(chosen.base)}/openapi.json"></main>
    <noscript><p class="pds-docs">The interactive reference needs JavaScript; the documents themselves are the
      <code>openapi.json</code> links above.</p></noscript>
    <script src="${asset('swagger-ui-bundle.js')}"></script>
    <script src="${asset('docs.js')}"></script>
  </body>
</html>
`;
}

/** The `/docs` router: the page and its assets. */
export function createDocsRouter(apis: readonly DocumentedApi[]): Router<AppState> {
  if (apis.length === 0) throw new Error('the docs page needs at least one API');
  const bySlug = new Map(apis.map((api) => [docsSlug(api.base), api]));

  const router = createRouter({ prefix: '/docs' });
  router.get('/', async (ctx: AppContext) => {
    const requested = ctx.query.api;
    let chosen = apis[0];
    if (requested !== undefined) {
      const found = typeof requested === 'string' ? bySlug.get(requested) : undefined;
      if (!found) {
        throw new HttpProblem(404, {
          code: 'api_not_found',
          detail: `no API named ${JSON.stringify(requested)}; known: ${[...bySlug.keys()].join(', ')}`,
        });
      }
      chosen = found;
    }
    const html = page(apis, chosen, await ASSETS.load());
    ctx.set(pageHeaders(CONTENT_SECURITY_POLICY));
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = html;
  });
  ASSETS.mount(router);
  return router;
}
