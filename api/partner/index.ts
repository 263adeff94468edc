/** The four partner APIs (docs/partner-api.md), each under its own base path with its own OpenAPI document. */
import type Router from '@koa/router';
import type { AppState } from '../http.ts';
import { brandApi } from './brand.ts';
import { brandFeedApi } from './brand-feed.ts';
import { openApiDocument } from './openapi.ts';
import { createPartnerRouter, type PartnerApi, type PartnerDeps } from './routes.ts';
import { storeMenuFeedApi, storeOperatorApi } from './store.ts';

export const partnerApis: readonly PartnerApi[] = [
  brandApi,
  brandFeedApi,
  storeOperatorApi,
  storeMenuFeedApi,
];

export function createPartnerRouters(deps: PartnerDeps): Router<AppState>[] {
  return partnerApis.map((api) => {
    // Built at the first request for it, not at every start (25 ms: docs/read-side.md, "Start-up and restart").
    let document: unknown;
    return createPartnerRouter(api, deps, () => {
      document ??= openApiDocument(api);
      return document;
    });
  });
}
