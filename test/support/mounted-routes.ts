/**
 * The routes an app serves, as its routers register them: `METHOD /pattern` of every route layer of
 * every router mounted in the app (`routesOf` names its router), HEAD implied by GET.
 */
import type Router from '@koa/router';

export function mountedRoutes(app: unknown): string[] {
  const out = new Set<string>();
  for (const mw of (app as { middleware: unknown[] }).middleware) {
    const router = (mw as { router?: Router }).router;
    if (!router) continue;
    for (const layer of router.stack) {
      // `router.use()` middleware are layers without methods.
      for (const method of layer.methods) if (method !== 'HEAD') out.add(`${method} ${String(layer.path)}`);
    }
  }
  return [...out].sort();
}
