/**
 * The platform API's OpenAPI 3.1 document (`GET /platform/v1/openapi.json`; docs/write-side.md),
 * generated from its route tables (`platform-catalog.ts`, `platform-carts.ts`) as the admin API's is
 * (`operator-openapi.ts`): catalog upserts and the cart lifecycle, each with the role it needs.
 */
import type { AdminRoute } from './admin-route-table.ts';
import { operatorOpenApiDocument } from './operator-openapi.ts';
import { PLATFORM_BASE } from './platform-writes.ts';
import { MAX_BODY_BYTES } from './write-support.ts';

function documentDescription(): string {
  return [
    "The retail platform's own writes: its catalog (stores and their curbside pickup settings, brands, " +
      'products, menu products, reviews, specials) and the cart lifecycle (create, lines, customer, ' +
      'checkout, status). Partners read what these writes leave through the partner APIs, and webhooks ' +
      "carry the carts' status changes.",
    '## Authentication',
    'Send an operator token of the `operator` role (or `admin`) as `Authorization: Bearer <token>`; an ' +
      '`auditor` is refused every write with 403 `insufficient_role`.',
    '## Writes',
    'Bodies are JSON (at most ' +
      `${MAX_BODY_BYTES} bytes), validated field by field: unknown fields are refused, and a 422 names ` +
      "each offending field in `errors`. Every answer carries the resource, the stream's `revision` (also " +
      'the `ETag`) and the global `position`; `If-Match: "<revision>"` makes a write conditional (412 ' +
      'when the stream moved on). A `POST` takes an `Idempotency-Key`: a retry with the same key and ' +
      'body gets the first answer again. Upserts (`PUT`) are idempotent by themselves: one that changes ' +
      'nothing appends nothing.',
    '## Errors',
    'Refusals are RFC 9457 problem documents (`application/problem+json`) with a machine-readable ' +
      '`code`. Until a replica has built its lookups and store specials, every write answers 503 ' +
      '`write_side_starting` with `Retry-After`.',
  ].join('\n\n');
}

/** The OpenAPI 3.1 document of the platform's routes. */
export function platformOpenApiDocument(routes: readonly AdminRoute[]): Record<string, unknown> {
  return operatorOpenApiDocument(routes, {
    base: PLATFORM_BASE,
    title: 'Platform API',
    description: documentDescription(),
    session: false,
    unavailable:
      'The event store cannot be reached (`event_store_unavailable`), the write met contention ' +
      "(`contention`), this replica has not built its lookups yet (`write_side_starting`), or a special's " +
      "write stands but this replica's pricing has not caught up with it (`pricing_catching_up`).",
  });
}
