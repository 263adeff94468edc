/**
 * `GET /carts?store_id=&status=&created_after=&created_before=&partner_id=&customer_email=&customer_phone=&limit=&cursor=`
 * (docs/operations.md, "Auditing carts"): auditors find carts without their uuid. The list names each
 * cart's store, status, source partner and times, never its customer, so any auditor may search by
 * those. A search by the customer's email or phone number looks a person up: it needs the `operator`
 * role (403 `insufficient_role` for an auditor), and each cart it lists is on record first as a view
 * of that cart (`CartHistoryViewed`, listed by `GET /carts/{uuid}/views` and `pds audit views`).
 */
import { z } from 'zod';
import { appendRetrying, toNewEvents } from '../application/command-handler.ts';
import type { CustomerData } from '../application/customer-data.ts';
import * as cart from '../domain/cart.ts';
import type { Clock } from '../domain/clock.ts';
import { eventRegistry } from '../domain/index.ts';
import { roleCovers } from '../domain/operator-account.ts';
import { cartHistoryViewed, cartViewsStreamId } from '../domain/operator-activity.ts';
import type { EventStore } from '../eventstore/port.ts';
import {
  type CartSearch,
  type CartSearchCursor,
  MAX_LINKED_CARTS,
  searchCarts,
} from '../projections/read-models/cart-search.ts';
import { CARTS, type CartDoc } from '../projections/read-models/carts.ts';
import type { Collection, ReadStore } from '../projections/read-store.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import { type AppContext, HttpProblem } from './http.ts';
import { requestActor } from './operator-auth.ts';
import { answerPage, decodeCursor, pageQuery, timeParam } from './partner/common.ts';
import { commandMetadata } from './write-support.ts';

export interface CartSearchDeps {
  store: EventStore;
  readStore: ReadStore;
  customerData: CustomerData;
  clock: Clock;
}

/** The role a search by the customer's email or phone number needs. */
export const PERSONAL_SEARCH_ROLE = 'operator';

const searchQuery = z.strictObject({
  store_id: z.coerce
    .number()
    .int()
    .positive()
    .max(Number.MAX_SAFE_INTEGER)
    .optional()
    .describe('only carts of this store'),
  status: cart.cartStatus.optional().describe('only carts in this status now'),
  created_after: timeParam('only carts created strictly after this time (ISO 8601)'),
  created_before: timeParam('only carts created strictly before this time (ISO 8601)'),
  partner_id: z.uuid().optional().describe("only carts created through this partner's channel"),
  customer_email: z
    .email()
    .max(254)
    .optional()
    .describe(
      `only carts whose customer now has this email address (case does not matter); role ${PERSONAL_SEARCH_ROLE}`,
    ),
  customer_phone: z
    .string()
    .max(40)
    .regex(/^[+\d\s().-]*\d[+\d\s().-]*$/, 'is not a phone number (digits, spaces, + - . ( ) only)')
    .optional()
    .describe(
      `only carts whose customer now has this phone number (its digits are compared); role ${PERSONAL_SEARCH_ROLE}`,
    ),
  ...pageQuery,
});

const cartSummary = z
  .object({
    cart_uuid: z.uuid(),
    id: z.int().describe("The cart record's id (the global position of its first event)."),
    store_id: z.int(),
    store_name: z.string(),
    status: cart.cartStatus,
    partner_id: z.string().nullable().describe('The partner whose channel created the cart, if any.'),
    created_at: z.string().describe('ISO 8601 UTC.'),
    updated_at: z.string().describe('ISO 8601 UTC.'),
    abandoned: z.boolean(),
    items: z.int().describe('Units on its lines.'),
  })
  .meta({ id: 'CartSummary' });
const cartSearchPage = z
  .object({
    carts: z.array(cartSummary),
    next_cursor: z.string().nullable(),
    linked_carts_capped: z
      .boolean()
      .optional()
      .describe(
        `A search by the customer: true when more than ${MAX_LINKED_CARTS} carts are linked to them, of which it read the last ${MAX_LINKED_CARTS} linked.`,
      ),
  })
  .meta({ id: 'CartSearchPage' });

type SearchQuery = z.output<typeof searchQuery>;

/** Cursor of a search: the last cart's `created_at`, `id` and uuid (newest first). */
const searchCursor = z.tuple([
  z.iso.datetime(),
  z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  z.uuid(),
]);

/** Where a search resumes (undefined for the first page); a foreign cursor is a 400. */
const searchAfter = (cursor: string | undefined) =>
  decodeCursor(cursor, searchCursor) as CartSearchCursor | undefined;

/** The customer a search names, or undefined for a search by store, status, time and partner only. */
const customerOf = (q: SearchQuery) =>
  q.customer_email === undefined && q.customer_phone === undefined
    ? undefined
    : {
        ...(q.customer_email === undefined ? {} : { email: q.customer_email }),
        ...(q.customer_phone === undefined ? {} : { phone: q.customer_phone }),
      };

export function cartSearchRoutes(deps: CartSearchDeps): AdminRoute[] {
  const { store, readStore, customerData, clock } = deps;
  let collection: Collection<CartDoc> | undefined;
  const carts = async () => {
    collection ??= await readStore.collection<CartDoc>(CARTS);
    return collection;
  };
  /**
   * Each cart a personal search lists, on record before the answer leaves, as a history read is: one
   * event on each cart's views stream, the appends requested together (the embedded store commits
   * them in one transaction, docs/operations.md, "Threads").
   */
  const recordViews = async (ctx: AppContext, uuids: readonly string[]) => {
    const metadata = commandMetadata(ctx, requestActor(ctx), clock);
    await Promise.all(
      uuids.map((uuid) =>
        appendRetrying(
          store,
          cartViewsStreamId(uuid),
          toNewEvents(eventRegistry, [cartHistoryViewed(uuid, metadata.at)], metadata),
          { expectedRevision: 'any' },
        ),
      ),
    );
  };
  return [
    adminRoute({
      method: 'get',
      path: '/carts',
      operationId: 'searchCarts',
      summary: 'Search carts',
      description:
        'Carts by store, status, creation time and source partner, newest first (by `created_at`); each ' +
        'without its customer (the history shows them). `customer_email` and `customer_phone` find the ' +
        `carts whose customer is that person now (never an erased one); they need the ${PERSONAL_SEARCH_ROLE} role, ` +
        'and each cart listed is recorded as viewed by the caller (`GET /carts/{uuid}/views`).',
      query: searchQuery,
      response: {
        status: 200,
        description: 'A page of carts; `Link: <…>; rel="next"` when there is another.',
        schema: cartSearchPage,
      },
      problems: [400],
      async handler(ctx, { query, operator }) {
        const customer = customerOf(query);
        if (customer && !roleCovers(operator.role, PERSONAL_SEARCH_ROLE)) {
          throw new HttpProblem(403, {
            code: 'insufficient_role',
            detail: `a search by customer_email or customer_phone needs the ${PERSONAL_SEARCH_ROLE} role; this token is an ${operator.role}'s`,
            extensions: { required_role: PERSONAL_SEARCH_ROLE, role: operator.role },
          });
        }
        const after = searchAfter(query.cursor);
        const search: CartSearch = {
          ...(query.store_id === undefined ? {} : { store_id: query.store_id }),
          ...(query.status === undefined ? {} : { status: query.status }),
          ...(query.partner_id === undefined ? {} : { partner_id: query.partner_id.toLowerCase() }),
          ...(query.created_after === undefined ? {} : { created_after: query.created_after }),
          ...(query.created_before === undefined ? {} : { created_before: query.created_before }),
          ...(customer
            ? // One more than a search reads: whether the key store left some out.
              {
                customer: {
                  ...customer,
                  carts: await customerData.cartsLinkedTo(customer, MAX_LINKED_CARTS + 1),
                },
              }
            : {}),
        };
        const found = await searchCarts(await carts(), search, {
          limit: query.limit,
          ...(after ? { after } : {}),
        });
        if (customer)
          await recordViews(
            ctx,
            found.carts.map((c) => c.cart_uuid),
          );
        answerPage(ctx, 'carts', found.carts, found.next);
        if (customer) ctx.body = { ...(ctx.body as object), linked_carts_capped: found.linkedCartsCapped };
      },
    }),
  ];
}
