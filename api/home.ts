/**
 * `GET /`: a small page for whoever opens the service's address in a browser, linking the API docs
 * (`/docs`, every API's reference) and the operator console (`/console`). Public, with the pages'
 * security headers (`pageHeaders`) under a Content-Security-Policy that allows nothing but its own
 * inline-free markup.
 */
import type Router from '@koa/router';
import type Koa from 'koa';
import { type AppContext, type AppState, createRouter } from './http.ts';
import { pageHeaders } from './static-assets.ts';

const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Partner Data Service</title>
    <link rel="icon" href="data:,">
  </head>
  <body>
    <main>
      <h1>Partner Data Service</h1>
      <ul>
        <li><a href="/docs">API docs</a>: the partner, platform and admin APIs, each with its OpenAPI document.</li>
        <li><a href="/console">Operator console</a>: partners, webhooks and their deliveries, projections, a cart's audit.</li>
      </ul>
    </main>
  </body>
</html>
`;

/** The `/` router: the page. */
export function createHomeRouter(): Router<AppState> {
  const router = createRouter();
  router.get('/', (ctx: AppContext) => {
    ctx.set(pageHeaders(CONTENT_SECURITY_POLICY));
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = PAGE;
  });
  return router;
}

/** The router's routes, tried only for `/` itself: every other request passes it with one comparison. */
export function homeRoutes(router: Router<AppState> = createHomeRouter()): Koa.Middleware<AppState> {
  const routes = router.routes() as Koa.Middleware<AppState>;
  const home: Koa.Middleware<AppState> = (ctx, next) => (ctx.path === '/' ? routes(ctx, next) : next());
  // Names its router as `routesOf` does, for what lists the app's routes (test/hostile/coverage.test.ts).
  return Object.assign(home, { router });
}
