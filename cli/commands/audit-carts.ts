/**
 * `pds audit carts`: find carts without their uuid (docs/operations.md, "Auditing carts") by store,
 * status, creation time and source partner, and by the customer's email or phone number (role
 * `operator`; each cart listed is then on record as viewed by the caller). Newest first, as
 * `GET /admin/v1/carts` answers; `--limit` carts (default 50), and the cursor of the rest.
 */
import type { Command } from 'commander';
import { cartStatuses } from '../../domain/cart.ts';
import { type CartSummary, MAX_LINKED_CARTS } from '../../projections/read-models/cart-search.ts';
import { CliError, createAdminClient, EXIT, table } from '../client.ts';
import { parseDuration } from '../durations.ts';
import { positiveInteger, printJson } from '../options.ts';
import { runClientCommand } from './run.ts';

const ISO_DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:\d\d)$/;
const DEFAULT_LIMIT = 50;

interface CartsOptions {
  store?: string;
  status?: string;
  since?: string;
  until?: string;
  partner?: string;
  email?: string;
  phone?: string;
  limit?: string;
  cursor?: string;
  json?: boolean;
}

/** An ISO 8601 date-time with offset, or a duration back from now (`24h`: 24 hours ago). */
export function timeOption(option: string, raw: string, now: Date): string {
  if (ISO_DATE_TIME.test(raw) && !Number.isNaN(Date.parse(raw))) return new Date(raw).toISOString();
  try {
    return new Date(now.getTime() - parseDuration(raw)).toISOString();
  } catch {
    throw new CliError(
      `${option}: ${JSON.stringify(raw)} is neither an ISO 8601 date-time with offset (2026-03-01T00:00:00Z) nor a duration back from now (24h, 30m)`,
      EXIT.usage,
    );
  }
}

/** The search's query parameters, each option checked as the API would. */
export function searchParams(options: CartsOptions, now: Date): URLSearchParams {
  const params = new URLSearchParams();
  if (options.store !== undefined)
    params.set('store_id', String(positiveInteger('--store', options.store, Number.MAX_SAFE_INTEGER)));
  if (options.status !== undefined) {
    if (!(cartStatuses as readonly string[]).includes(options.status)) {
      throw new CliError(`--status: expected one of ${cartStatuses.join(', ')}`, EXIT.usage);
    }
    params.set('status', options.status);
  }
  if (options.since !== undefined) params.set('created_after', timeOption('--since', options.since, now));
  if (options.until !== undefined) params.set('created_before', timeOption('--until', options.until, now));
  if (options.partner !== undefined) params.set('partner_id', options.partner);
  if (options.email !== undefined) params.set('customer_email', options.email);
  if (options.phone !== undefined) params.set('customer_phone', options.phone);
  return params;
}

const cartsTable = (carts: CartSummary[]) =>
  table(
    ['cart_uuid', 'store', 'status', 'created_at', 'updated_at', 'partner_id', 'items'],
    carts.map((c) => [
      c.cart_uuid,
      `${c.store_id} ${c.store_name}`.trim(),
      c.abandoned ? `${c.status} (abandoned)` : c.status,
      c.created_at,
      c.updated_at,
      c.partner_id ?? '',
      c.items,
    ]),
  );

/** Adds `pds audit carts` to `pds audit`. */
export function registerAuditCarts(audit: Command): void {
  audit
    .command('carts')
    .description(
      'find carts by store, status, creation time, source partner, or (role operator) the customer’s email or phone, oldest first',
    )
    .option('--store <id>', 'only carts of this store')
    .option('--status <status>', `only carts in this status now (${cartStatuses.join(', ')})`)
    .option(
      '--since <time>',
      'only carts created after this time: ISO 8601, or a duration back from now (24h)',
    )
    .option('--until <time>', 'only carts created before this time: ISO 8601, or a duration back from now')
    .option('--partner <id>', 'only carts created through this partner’s channel')
    .option(
      '--email <email>',
      'only carts whose customer now has this email (role operator; recorded as a view)',
    )
    .option(
      '--phone <phone>',
      'only carts whose customer now has this phone number (role operator; recorded as a view)',
    )
    .option('--limit <n>', `how many to show (default ${DEFAULT_LIMIT})`)
    .option('--cursor <cursor>', 'continue after a `next_cursor` of an earlier --json answer')
    .option('--json', 'print {carts: [...], next_cursor} as JSON')
    .action((options: CartsOptions) =>
      runClientCommand(async () => {
        const wanted =
          options.limit === undefined ? DEFAULT_LIMIT : positiveInteger('--limit', options.limit, 100_000);
        const query = searchParams(options, new Date());
        const client = await createAdminClient();
        const all: CartSummary[] = [];
        let cursor: string | null = options.cursor ?? null;
        let capped: boolean | undefined;
        do {
          const params = new URLSearchParams(query);
          params.set('limit', String(Math.min(500, wanted - all.length)));
          if (cursor) params.set('cursor', cursor);
          const page: {
            carts: CartSummary[];
            next_cursor: string | null;
            linked_carts_capped?: boolean;
          } = await client.request('GET', `/admin/v1/carts?${params}`);
          all.push(...page.carts);
          cursor = page.next_cursor;
          capped = page.linked_carts_capped;
        } while (cursor && all.length < wanted);
        if (options.json)
          return printJson({
            carts: all,
            next_cursor: cursor,
            ...(capped === undefined ? {} : { linked_carts_capped: capped }),
          });
        // docs/operations.md, "Auditing carts": a search by the customer reads their last linked carts.
        const left = capped
          ? `this customer is linked to more than ${MAX_LINKED_CARTS} carts: only the ${MAX_LINKED_CARTS} most recently linked were searched\n`
          : '';
        if (all.length === 0) return `no carts found\n${left}`;
        const count = `${all.length} ${all.length === 1 ? 'cart' : 'carts'}${cursor ? ', more after these' : ''}\n`;
        const more = cursor ? `(more: --cursor ${cursor})\n` : '';
        return `${cartsTable(all)}\n${count}${more}${left}`;
      }),
    );
}
