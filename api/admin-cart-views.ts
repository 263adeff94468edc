/**
 * `GET /carts/{uuid}/views?limit=&cursor=` (docs/operations.md, "Accounts and roles"): who read a
 * cart's history, newest first, from the `cartviews-<uuid>` stream that every answered read of it
 * appends to (`admin-audit.ts`). Each view names the person (id and name) and the time; nothing of
 * what they saw. 404 `cart_not_found` for a cart that does not exist.
 */
import { z } from 'zod';
import * as cart from '../domain/cart.ts';
import { cartViewsStreamId } from '../domain/operator-activity.ts';
import { type EventStore, type RecordedEvent, StreamNotFoundError } from '../eventstore/port.ts';
import type { ReadStore } from '../projections/read-store.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import { ADMIN_BASE } from './admin-support.ts';
import { HttpProblem } from './http.ts';
import { actorNamer } from './operator-names.ts';
import { pathUuid } from './validation.ts';

export const namedActor = z
  .object({
    type: z.enum(['platform', 'operator', 'partner', 'system']),
    id: z.string(),
    name: z.string().nullable().describe("The account's name (null when it is no person's account)."),
  })
  .meta({ id: 'Actor' });
const cartView = z
  .object({
    viewed_at: z.string(),
    by: namedActor,
    position: z.int().describe("The view's record in the event store (its global position)."),
  })
  .meta({ id: 'CartView' });
const viewsPage = z
  .object({ cart_uuid: z.uuid(), views: z.array(cartView), next_cursor: z.string().nullable() })
  .meta({ id: 'CartViewPage' });

/** A cursor is the revision of the last view of a page, in decimal, base64url-encoded. */
const cursorRevision = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,14})$/)
  .transform(Number);

/** Newest first, `limit` at most, from before the revision a cursor names. */
async function viewsOf(store: EventStore, uuid: string, limit: number, before?: number) {
  if (before === 0) return [];
  try {
    return await store.readStream(cartViewsStreamId(uuid), {
      direction: 'backwards',
      maxCount: limit,
      ...(before === undefined ? {} : { fromRevision: before - 1 }),
    });
  } catch (err) {
    if (err instanceof StreamNotFoundError) return [] as RecordedEvent[];
    throw err;
  }
}

export function cartViewRoutes(deps: { store: EventStore; readStore: ReadStore }): AdminRoute[] {
  const { store } = deps;
  const named = actorNamer(deps.readStore);
  return [
    adminRoute({
      method: 'get',
      path: '/carts/{uuid}/views',
      operationId: 'listCartViews',
      summary: "Who read a cart's history",
      description:
        "Every answered read of the cart's history (`GET /carts/{uuid}/history`, `pds audit cart`), " +
        'newest first: who and when.',
      params: z.object({ uuid: pathUuid }),
      query: z.strictObject({
        limit: z.coerce.number().int().min(1).max(500).default(100),
        cursor: z.string().max(40).optional(),
      }),
      response: { status: 200, description: 'A page of views.', schema: viewsPage },
      problems: [404],
      async handler(ctx, { params, query }) {
        const { uuid } = params;
        let before: number | undefined;
        if (query.cursor !== undefined) {
          const parsed = cursorRevision.safeParse(Buffer.from(query.cursor, 'base64url').toString('utf8'));
          if (!parsed.success) {
            throw new HttpProblem(400, {
              code: 'invalid_cursor',
              detail: 'the cursor is not one this API gave out',
            });
          }
          before = parsed.data;
        }
        try {
          await store.readStream(cart.streamId(uuid), { direction: 'backwards', maxCount: 1 });
        } catch (err) {
          if (err instanceof StreamNotFoundError) {
            throw new HttpProblem(404, { code: 'cart_not_found', detail: `no cart ${uuid}` });
          }
          throw err;
        }
        const found = await viewsOf(store, uuid, query.limit + 1, before);
        const page = found.slice(0, query.limit);
        const last = page[page.length - 1];
        const next =
          found.length > query.limit && last
            ? Buffer.from(String(last.revision)).toString('base64url')
            : null;
        if (next) {
          const link = new URLSearchParams({ limit: String(query.limit), cursor: next });
          ctx.set('Link', `<${ADMIN_BASE}/carts/${uuid}/views?${link}>; rel="next"`);
        }
        const name = await named(page.map((e) => e.metadata.actor));
        ctx.body = {
          cart_uuid: uuid,
          views: page.map((e) => ({
            viewed_at: (e.data as { viewed_at: string }).viewed_at,
            by: name(e.metadata.actor),
            position: e.position,
          })),
          next_cursor: next,
        };
      },
    }),
  ];
}
