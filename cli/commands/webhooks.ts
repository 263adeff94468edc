/**
 * `pds webhooks …`: webhook subscriptions through the admin API.
 *
 *   pds webhooks create --url <url> (--auth-token <token> | --auth-token-file <file|->) --store <id...> [--events <kind...>]
 *   pds webhooks list [--store <id>] [--enabled | --disabled]
 *   pds webhooks show <id>
 *   pds webhooks update <id> [--url <url>] [--auth-token <token> | --auth-token-file <file|->] [--store <id...>] [--events <kind...>]
 *   pds webhooks disable <id> | enable <id>
 *   pds webhooks rotate-secret <id>
 *   pds webhooks delete <id>
 *   pds webhooks deliveries <id> [--status <status...>] [--limit <n>] [--cursor <cursor>]
 *   pds webhooks redeliver <delivery_id>
 *   pds webhooks recover <id> --since <iso date-time>
 *   pds webhooks test-send <id> [--event cart_status_updated|cart_abandoned]
 *
 * Each prints a table, or the API's answer with `--json`. `create` and `rotate-secret` print the
 * signing secret: it is shown this once. `--auth-token-file` keeps the token out of the shell history
 * and the process list (`-` reads it from standard input).
 *
 * `deliveries` lists newest first, `--limit` of them (default 50, fetched in pages of at most 500);
 * `--json` prints {deliveries, next_cursor}, and `--cursor` continues from a `next_cursor`.
 * `test-send` sends one signed sample request now and prints how the receiver answered; it exits with
 * 1 when the request was not delivered (the result is printed all the same).
 */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { type DeliveryStatus, deliveryStatuses } from '../../domain/webhook-delivery.ts';
import type { WebhookRecord } from '../../domain/webhook-subscription.ts';
import { webhookEventKinds } from '../../domain/webhook-subscription.ts';
import type { WebhookDeliveryRecord } from '../../projections/read-models/webhook-deliveries.ts';
import { type AdminClient, CliError, createAdminClient, EXIT, table } from '../client.ts';
import { runClientCommand } from './run.ts';

const BASE = '/admin/v1/webhooks';

interface Written {
  webhook: WebhookRecord;
  signing_secret?: string | null;
  revision: number;
  position: number;
}

interface TokenOptions {
  authToken?: string;
  authTokenFile?: string;
}

const path = (id: string) => `${BASE}/${encodeURIComponent(id)}`;
const print = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** `--store 1 2`, `--store 1,2` and `--store 1 --store 2` all name stores 1 and 2. */
function storeIds(values: string[] | undefined): number[] | undefined {
  if (values === undefined) return undefined;
  const ids = values.flatMap((v) => v.split(',')).filter((v) => v.trim() !== '');
  if (ids.length === 0) throw new CliError('--store needs at least one store id', EXIT.usage);
  return ids.map((v) => {
    if (!/^\d{1,15}$/.test(v.trim()) || Number(v) < 1) {
      throw new CliError(`--store: ${JSON.stringify(v)} is not a store id (a positive integer)`, EXIT.usage);
    }
    return Number(v);
  });
}

function eventKinds(values: string[] | undefined): string[] | undefined {
  if (values === undefined) return undefined;
  const kinds = values.flatMap((v) => v.split(',')).filter((v) => v.trim() !== '');
  const unknown = kinds.filter((k) => !(webhookEventKinds as readonly string[]).includes(k));
  if (kinds.length === 0 || unknown.length > 0) {
    throw new CliError(`--events: expected one or more of ${webhookEventKinds.join(', ')}`, EXIT.usage);
  }
  return kinds;
}

async function authToken(options: TokenOptions): Promise<string | undefined> {
  if (options.authToken !== undefined && options.authTokenFile !== undefined) {
    throw new CliError('give --auth-token or --auth-token-file, not both', EXIT.usage);
  }
  if (options.authTokenFile === undefined) return options.authToken;
  try {
    const text =
      options.authTokenFile === '-' ? await readStdin() : await readFile(options.authTokenFile, 'utf8');
    return text.replace(/\r?\n$/, '');
  } catch (err) {
    throw new CliError(`cannot read --auth-token-file: ${(err as Error).message}`, EXIT.usage);
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function listTable(webhooks: WebhookRecord[]): string {
  return `${table(
    ['webhook_id', 'url', 'stores', 'events', 'enabled', 'updated_at'],
    webhooks.map((w) => [
      w.webhook_id,
      w.url,
      w.store_ids.join(','),
      w.events.join(','),
      w.enabled ? 'yes' : `no (${w.disabled_reason ?? 'disabled'})`,
      w.updated_at,
    ]),
  )}\n`;
}

function recordTable(w: WebhookRecord): string {
  return `${table(
    ['field', 'value'],
    [
      ['webhook_id', w.webhook_id],
      ['url', w.url],
      ['store_ids', w.store_ids.join(', ')],
      ['events', w.events.join(', ')],
      ['enabled', String(w.enabled)],
      ['disabled_reason', w.disabled_reason],
      ['created_at', w.created_at],
      ['updated_at', w.updated_at],
    ],
  )}\n`;
}

/** The record, then the signing secret when the answer carries one (shown once). */
function writtenText(out: Written): string {
  let text = recordTable(out.webhook);
  if (out.signing_secret) {
    text += `\nsigning secret (shown once, store it now): ${out.signing_secret}\n`;
  }
  return text;
}

async function listAll(client: AdminClient, query: URLSearchParams): Promise<WebhookRecord[]> {
  const all: WebhookRecord[] = [];
  let cursor: string | null = null;
  do {
    const params = new URLSearchParams(query);
    params.set('limit', '500');
    if (cursor) params.set('cursor', cursor);
    const page: { webhooks: WebhookRecord[]; next_cursor: string | null } = await client.request(
      'GET',
      `${BASE}?${params}`,
    );
    all.push(...page.webhooks);
    cursor = page.next_cursor;
  } while (cursor);
  return all;
}

// ---- deliveries ---------------------------------------------------------------------------------

interface DeliveryPage {
  deliveries: WebhookDeliveryRecord[];
  next_cursor: string | null;
}

interface TestSendAnswer {
  webhook_id: string;
  result: {
    outcome: string;
    status: number | null;
    duration_ms: number;
    response_excerpt: string;
    error_code: string | null;
    error: string | null;
  };
  sample: { event: string; webhook_id: string; body: unknown };
}

interface RecoverAnswer {
  webhook_id: string;
  since: string;
  recovered: number;
  delivery_ids: string[];
  truncated: boolean;
  limit: number;
}

const deliveryPath = (id: string) => `${BASE}/deliveries/${encodeURIComponent(id)}`;
const ISO_DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:\d\d)$/;

function statuses(values: string[] | undefined): DeliveryStatus[] | undefined {
  if (values === undefined) return undefined;
  const list = values.flatMap((v) => v.split(',')).filter((v) => v.trim() !== '');
  const unknown = list.filter((v) => !(deliveryStatuses as readonly string[]).includes(v));
  if (list.length === 0 || unknown.length > 0) {
    throw new CliError(`--status: expected one or more of ${deliveryStatuses.join(', ')}`, EXIT.usage);
  }
  return list as DeliveryStatus[];
}

function positiveInt(value: string, option: string): number {
  if (!/^\d{1,9}$/.test(value.trim()) || Number(value) < 1) {
    throw new CliError(`${option}: ${JSON.stringify(value)} is not a positive integer`, EXIT.usage);
  }
  return Number(value);
}

/** What the last attempt came to: `500 HTTP 500`, `timeout: no complete response…`, `(in flight)`. */
function lastAttempt(d: WebhookDeliveryRecord): string {
  const a = d.attempts.at(-1);
  if (!a) return '';
  if (a.outcome === null) return '(in flight)';
  const parts = [
    a.status === null ? '' : String(a.status),
    a.error ?? (a.outcome === 'delivered' ? 'ok' : a.outcome),
  ];
  const text = parts.filter((p) => p !== '').join(' ');
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

function deliveriesTable(list: WebhookDeliveryRecord[]): string {
  return `${table(
    ['delivery_id', 'event', 'cart', 'status', 'attempts', 'last', 'next_attempt_at'],
    list.map((d) => [
      d.delivery_id,
      d.event_kind,
      d.cart_uuid,
      d.status === 'parked' ? `parked (${d.parked_reason})` : d.status,
      d.attempt_count,
      lastAttempt(d),
      d.next_attempt_at,
    ]),
  )}\n`;
}

function deliveryTable(d: WebhookDeliveryRecord): string {
  const fields = table(
    ['field', 'value'],
    [
      ['delivery_id', d.delivery_id],
      ['webhook_id', d.webhook_id],
      ['event_kind', d.event_kind],
      ['cart_uuid', d.cart_uuid],
      ['store_id', d.store_id],
      ['status', d.status],
      ['attempt_count', d.attempt_count],
      ['scheduled_at', d.scheduled_at],
      ['next_attempt_at', d.next_attempt_at],
      ['delivered_at', d.delivered_at],
      ['parked_reason', d.parked_reason],
      ['parked_at', d.parked_at],
    ],
  );
  if (d.attempts.length === 0) return `${fields}\n`;
  const attempts = table(
    ['attempt', 'started_at', 'outcome', 'status', 'duration_ms', 'error'],
    d.attempts.map((a) => [
      a.attempt,
      a.started_at,
      a.outcome ?? '(in flight)',
      a.status,
      a.duration_ms,
      a.error,
    ]),
  );
  return `${fields}\n\n${attempts}\n`;
}

function testSendText(out: TestSendAnswer): string {
  const r = out.result;
  return `${table(
    ['field', 'value'],
    [
      ['event', out.sample.event],
      ['x_service_webhook_id', out.sample.webhook_id],
      ['outcome', r.outcome],
      ['status', r.status],
      ['duration_ms', r.duration_ms],
      ['error_code', r.error_code],
      ['error', r.error],
      ['response_excerpt', r.response_excerpt.replace(/[\r\n\t]+/g, ' ').slice(0, 200)],
    ],
  )}\n`;
}

export function registerWebhooks(program: Command): void {
  const webhooks = program
    .command('webhooks')
    .description(
      'webhook subscriptions: create, list, show, update, enable, disable, rotate-secret, delete; deliveries, redeliver, recover, test-send',
    );

  webhooks
    .command('create')
    .description('subscribe a URL to the cart events of some stores; prints the signing secret once')
    .requiredOption('--url <url>', 'the receiving URL (https; http only where private URLs are allowed)')
    .option('--auth-token <token>', 'sent as `Authorization: Bearer <token>` with every request')
    .option('--auth-token-file <file>', 'read the auth token from a file (- for standard input)')
    .requiredOption('--store <id...>', 'the store ids the subscription covers')
    .option('--events <kind...>', `the event kinds (default: all of ${webhookEventKinds.join(', ')})`)
    .option('--json', 'print the answer as JSON')
    .action((options: TokenOptions & { url: string; store: string[]; events?: string[]; json?: boolean }) =>
      runClientCommand(async () => {
        const token = await authToken(options);
        if (token === undefined) throw new CliError('give --auth-token or --auth-token-file', EXIT.usage);
        const body = {
          url: options.url,
          auth_token: token,
          store_ids: storeIds(options.store),
          ...(options.events ? { events: eventKinds(options.events) } : {}),
        };
        const client = await createAdminClient();
        const out = await client.request<Written>('POST', BASE, body);
        return options.json ? print(out) : writtenText(out);
      }),
    );

  webhooks
    .command('list')
    .description('every subscription (all pages), in webhook id order')
    .option('--store <id>', 'only those covering this store')
    .option('--enabled', 'only enabled ones')
    .option('--disabled', 'only disabled ones')
    .option('--json', 'print {webhooks: [...]} as JSON')
    .action((options: { store?: string; enabled?: boolean; disabled?: boolean; json?: boolean }) =>
      runClientCommand(async () => {
        if (options.enabled && options.disabled) {
          throw new CliError('give --enabled or --disabled, not both', EXIT.usage);
        }
        const query = new URLSearchParams();
        if (options.store !== undefined) query.set('store_id', String(storeIds([options.store])?.[0]));
        if (options.enabled) query.set('enabled', 'true');
        if (options.disabled) query.set('enabled', 'false');
        const list = await listAll(await createAdminClient(), query);
        return options.json ? print({ webhooks: list }) : listTable(list);
      }),
    );

  webhooks
    .command('show')
    .description('one subscription (never its auth token or signing secret)')
    .argument('<id>', 'the webhook id')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<Written>('GET', path(id));
        return options.json ? print(out) : recordTable(out.webhook);
      }),
    );

  webhooks
    .command('update')
    .description('change the URL, auth token, stores or event kinds of a subscription')
    .argument('<id>', 'the webhook id')
    .option('--url <url>', 'the new receiving URL')
    .option('--auth-token <token>', 'the new auth token')
    .option('--auth-token-file <file>', 'read the new auth token from a file (- for standard input)')
    .option('--store <id...>', 'the new store ids (replace the old ones)')
    .option('--events <kind...>', `the new event kinds (of ${webhookEventKinds.join(', ')})`)
    .option('--json', 'print the answer as JSON')
    .action(
      (
        id: string,
        options: TokenOptions & { url?: string; store?: string[]; events?: string[]; json?: boolean },
      ) =>
        runClientCommand(async () => {
          const token = await authToken(options);
          const body = {
            ...(options.url !== undefined ? { url: options.url } : {}),
            ...(token !== undefined ? { auth_token: token } : {}),
            ...(options.store !== undefined ? { store_ids: storeIds(options.store) } : {}),
            ...(options.events !== undefined ? { events: eventKinds(options.events) } : {}),
          };
          if (Object.keys(body).length === 0) {
            throw new CliError(
              'nothing to change: give --url, --auth-token, --auth-token-file, --store or --events',
              EXIT.usage,
            );
          }
          const out = await (await createAdminClient()).request<Written>('PATCH', path(id), body);
          return options.json ? print(out) : writtenText(out);
        }),
    );

  for (const [name, enabled, description] of [
    ['disable', false, 'stop sending events to a subscription (kept, can be enabled again)'],
    ['enable', true, 'send events to a subscription again'],
  ] as const) {
    webhooks
      .command(name)
      .description(description)
      .argument('<id>', 'the webhook id')
      .option('--json', 'print the answer as JSON')
      .action((id: string, options: { json?: boolean }) =>
        runClientCommand(async () => {
          const out = await (await createAdminClient()).request<Written>('PATCH', path(id), { enabled });
          return options.json ? print(out) : writtenText(out);
        }),
      );
  }

  webhooks
    .command('rotate-secret')
    .description('replace the signing secret (the old one stops signing at once); prints the new one once')
    .argument('<id>', 'the webhook id')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<Written>('POST', `${path(id)}/rotate-secret`);
        return options.json ? print(out) : writtenText(out);
      }),
    );

  webhooks
    .command('delete')
    .description('remove a subscription for good')
    .argument('<id>', 'the webhook id')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<{ webhook_id: string; removed_at: string }>(
          'DELETE',
          path(id),
        );
        return options.json ? print(out) : `removed webhook ${out.webhook_id} at ${out.removed_at}\n`;
      }),
    );

  webhooks
    .command('deliveries')
    .description("a subscription's deliveries with their attempts, newest first")
    .argument('<id>', 'the webhook id')
    .option('--status <status...>', `only these statuses (of ${deliveryStatuses.join(', ')})`)
    .option('--limit <n>', 'how many to show (default 50)')
    .option('--cursor <cursor>', 'continue after a `next_cursor` of an earlier --json answer')
    .option('--json', 'print {deliveries: [...], next_cursor} as JSON')
    .action((id: string, options: { status?: string[]; limit?: string; cursor?: string; json?: boolean }) =>
      runClientCommand(async () => {
        const wanted = options.limit === undefined ? 50 : positiveInt(options.limit, '--limit');
        const only = statuses(options.status);
        const client = await createAdminClient();
        const all: WebhookDeliveryRecord[] = [];
        let cursor: string | null = options.cursor ?? null;
        do {
          const params = new URLSearchParams({ limit: String(Math.min(500, wanted - all.length)) });
          if (only) params.set('status', only.join(','));
          if (cursor) params.set('cursor', cursor);
          const page: DeliveryPage = await client.request('GET', `${path(id)}/deliveries?${params}`);
          all.push(...page.deliveries);
          cursor = page.next_cursor;
        } while (cursor && all.length < wanted);
        if (options.json) return print({ deliveries: all, next_cursor: cursor });
        const more = cursor ? `\n(more: --cursor ${cursor})\n` : '';
        return deliveriesTable(all) + more;
      }),
    );

  webhooks
    .command('redeliver')
    .description('send a failed, parked or delivered delivery again (same webhook id, next attempt number)')
    .argument('<delivery_id>', 'the delivery id (the X-Service-Webhook-Id)')
    .option('--json', 'print the answer as JSON')
    .action((deliveryId: string, options: { json?: boolean }) =>
      runClientCommand(async () => {
        const out = await (await createAdminClient()).request<{ delivery: WebhookDeliveryRecord }>(
          'POST',
          `${deliveryPath(deliveryId)}/redeliver`,
        );
        return options.json ? print(out) : deliveryTable(out.delivery);
      }),
    );

  webhooks
    .command('recover')
    .description('send every failed or parked delivery of a subscription scheduled since a time again')
    .argument('<id>', 'the webhook id')
    .requiredOption('--since <time>', 'ISO 8601 date-time with offset, e.g. 2026-03-01T00:00:00Z')
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { since: string; json?: boolean }) =>
      runClientCommand(async () => {
        if (!ISO_DATE_TIME.test(options.since) || Number.isNaN(Date.parse(options.since))) {
          throw new CliError(
            `--since: ${JSON.stringify(options.since)} is not an ISO 8601 date-time with offset (e.g. 2026-03-01T00:00:00Z)`,
            EXIT.usage,
          );
        }
        const out = await (await createAdminClient()).request<RecoverAnswer>('POST', `${path(id)}/recover`, {
          since: options.since,
        });
        if (options.json) return print(out);
        let text = `recovered ${out.recovered} deliveries of webhook ${out.webhook_id} scheduled since ${out.since}\n`;
        for (const d of out.delivery_ids) text += `${d}\n`;
        if (out.truncated) text += `(stopped at ${out.limit}: run it again for the rest)\n`;
        return text;
      }),
    );

  webhooks
    .command('test-send')
    .description("send one signed sample request to a subscription's URL now; exits 1 unless delivered")
    .argument('<id>', 'the webhook id')
    .option(
      '--event <kind>',
      `the sample's kind (${webhookEventKinds.join(' or ')}; default cart_status_updated)`,
    )
    .option('--json', 'print the answer as JSON')
    .action((id: string, options: { event?: string; json?: boolean }) =>
      runClientCommand(async () => {
        const kind = options.event === undefined ? undefined : eventKinds([options.event]);
        if (kind && kind.length !== 1) throw new CliError('--event: give one kind', EXIT.usage);
        const out = await (await createAdminClient()).request<TestSendAnswer>(
          'POST',
          `${path(id)}/test`,
          kind ? { event: kind[0] } : {},
        );
        process.stdout.write(options.json ? print(out) : testSendText(out));
        if (out.result.outcome !== 'delivered') {
          throw new CliError(
            `the test request was not delivered: ${out.result.outcome}${out.result.error ? ` (${out.result.error})` : ''}`,
            EXIT.failed,
          );
        }
        return '';
      }),
    );
}
