/**
 * Every router of the service, for its request state. Koa's router is loaded from its CommonJS build:
 * its ES module build imports `http` as an ES module, which makes Node load undici for `http.WebSocket`,
 * 15 ms of every start (docs/read-side.md, "Start-up and restart").
 */
import { createRequire } from 'node:module';
import type Router from '@koa/router';
import type { RouterOptions } from '@koa/router';
import type { AppState } from './http.ts';

const KoaRouter: typeof Router = createRequire(import.meta.url)('@koa/router');

export function createRouter(options?: RouterOptions): Router<AppState> {
  return new KoaRouter<AppState>(options);
}
